// Ibverbs and Rdmacm: the entry points of libibverbs and librdmacm that the verbs provider calls,
// found with dlopen/dlsym when the provider is first opened instead of linked into every program.
//
// Why: linked, the two libraries (and libnl-3 and libnl-route-3 beneath them) were mapped into
// every process that uses sanlib, RDMA or not, and every fork() of such a process copied their
// mappings (docs/verbs.md "Building and availability"). Loaded on demand, a host without RDMA
// never maps them, and a host with RDMA maps them in the processes that open the provider.
//
// The headers are still libibverbs-dev's and librdmacm-dev's: every type, constant and inline
// function (ibv_post_send, ibv_poll_cq, ibv_req_notify_cq go through the device's ops table, not
// through a symbol) is theirs; only the exported functions go through these tables. Members are
// named as the C function without its prefix (`ibv().alloc_pd(...)`, `rdma().create_id(...)`):
// ibv_reg_mr is a function-like macro in <infiniband/verbs.h>, and ibv_query_gid_table an inline
// function over _ibv_query_gid_table, which query_gid_table is (its last argument is
// sizeof(ibv_gid_entry)).
//
// Thread-safety: LoadVerbsLibraries() may be called from any thread, loads once and returns the
// same answer ever after; the tables are read-only after it. ibv() and rdma() may be called only
// after LoadVerbsLibraries() succeeded (the provider's objects exist only then).
// Ownership: the libraries stay loaded for the life of the process, as if linked.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <string>

namespace san::fabric::verbs {

struct Ibverbs {
  decltype(&::ibv_is_fork_initialized) is_fork_initialized = nullptr;
  decltype(&::ibv_fork_init) fork_init = nullptr;
  decltype(&::ibv_get_device_name) get_device_name = nullptr;
  decltype(&::ibv_alloc_pd) alloc_pd = nullptr;
  decltype(&::_ibv_query_gid_table) query_gid_table = nullptr;
  decltype(&::ibv_reg_mr) reg_mr = nullptr;
  decltype(&::ibv_dereg_mr) dereg_mr = nullptr;
  decltype(&::ibv_create_comp_channel) create_comp_channel = nullptr;
  decltype(&::ibv_destroy_comp_channel) destroy_comp_channel = nullptr;
  decltype(&::ibv_create_cq) create_cq = nullptr;
  decltype(&::ibv_destroy_cq) destroy_cq = nullptr;
  decltype(&::ibv_get_cq_event) get_cq_event = nullptr;
  decltype(&::ibv_ack_cq_events) ack_cq_events = nullptr;
  decltype(&::ibv_wc_status_str) wc_status_str = nullptr;
};

struct Rdmacm {
  decltype(&::rdma_create_event_channel) create_event_channel = nullptr;
  decltype(&::rdma_destroy_event_channel) destroy_event_channel = nullptr;
  decltype(&::rdma_get_devices) get_devices = nullptr;
  decltype(&::rdma_free_devices) free_devices = nullptr;
  decltype(&::rdma_create_id) create_id = nullptr;
  decltype(&::rdma_destroy_id) destroy_id = nullptr;
  decltype(&::rdma_migrate_id) migrate_id = nullptr;
  decltype(&::rdma_bind_addr) bind_addr = nullptr;
  decltype(&::rdma_listen) listen = nullptr;
  decltype(&::rdma_resolve_addr) resolve_addr = nullptr;
  decltype(&::rdma_resolve_route) resolve_route = nullptr;
  decltype(&::rdma_create_qp) create_qp = nullptr;
  decltype(&::rdma_destroy_qp) destroy_qp = nullptr;
  decltype(&::rdma_connect) connect = nullptr;
  decltype(&::rdma_accept) accept = nullptr;
  decltype(&::rdma_reject) reject = nullptr;
  decltype(&::rdma_disconnect) disconnect = nullptr;
  decltype(&::rdma_get_cm_event) get_cm_event = nullptr;
  decltype(&::rdma_ack_cm_event) ack_cm_event = nullptr;
  decltype(&::rdma_event_str) event_str = nullptr;
};

// Loads libibverbs.so.1 and librdmacm.so.1 (their sonames: what the runtime packages install) and
// binds every entry point above. false, with *why_not ("verbs: cannot load librdmacm.so.1: ..."),
// when a library or a symbol is missing; then nothing of them is used.
bool LoadVerbsLibraries(std::string* why_not);

const Ibverbs& ibv();
const Rdmacm& rdma();

}  // namespace san::fabric::verbs
