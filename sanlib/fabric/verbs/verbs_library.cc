#include "sanlib/fabric/verbs/verbs_library.h"

#include <dlfcn.h>

#include <string>

namespace san::fabric::verbs {
namespace {

Ibverbs ibverbs_table;
Rdmacm rdmacm_table;

// One library's symbols: dlsym each name into its slot; the first missing one is the answer.
class Binder {
 public:
  explicit Binder(const char* soname)
      : soname_(soname), handle_(dlopen(soname, RTLD_NOW | RTLD_LOCAL)) {
    if (handle_ == nullptr) Fail("cannot load ");
  }

  template <typename F>
  void Bind(F& slot, const char* name) {
    if (!error_.empty()) return;
    void* p = dlsym(handle_, name);
    if (p == nullptr) {
      Fail(std::string(name) + " missing from ");
      return;
    }
    slot = reinterpret_cast<F>(p);
  }

  // "" when every Bind found its symbol.
  const std::string& error() const { return error_; }

 private:
  void Fail(const std::string& what) {
    const char* detail = dlerror();
    error_ = "verbs: " + what + soname_;
    if (detail != nullptr) error_.append(" (").append(detail).append(")");
  }

  const char* soname_;
  void* handle_;  // never dlclose'd: the provider's objects live as long as the process
  std::string error_;
};

std::string Load() {
  Binder v("libibverbs.so.1");
  Ibverbs& i = ibverbs_table;
  v.Bind(i.is_fork_initialized, "ibv_is_fork_initialized");
  v.Bind(i.fork_init, "ibv_fork_init");
  v.Bind(i.get_device_name, "ibv_get_device_name");
  v.Bind(i.alloc_pd, "ibv_alloc_pd");
  v.Bind(i.query_gid_table, "_ibv_query_gid_table");
  v.Bind(i.reg_mr, "ibv_reg_mr");
  v.Bind(i.dereg_mr, "ibv_dereg_mr");
  v.Bind(i.create_comp_channel, "ibv_create_comp_channel");
  v.Bind(i.destroy_comp_channel, "ibv_destroy_comp_channel");
  v.Bind(i.create_cq, "ibv_create_cq");
  v.Bind(i.destroy_cq, "ibv_destroy_cq");
  v.Bind(i.get_cq_event, "ibv_get_cq_event");
  v.Bind(i.ack_cq_events, "ibv_ack_cq_events");
  v.Bind(i.wc_status_str, "ibv_wc_status_str");
  if (!v.error().empty()) return v.error();

  Binder cm("librdmacm.so.1");
  Rdmacm& r = rdmacm_table;
  cm.Bind(r.create_event_channel, "rdma_create_event_channel");
  cm.Bind(r.destroy_event_channel, "rdma_destroy_event_channel");
  cm.Bind(r.get_devices, "rdma_get_devices");
  cm.Bind(r.free_devices, "rdma_free_devices");
  cm.Bind(r.create_id, "rdma_create_id");
  cm.Bind(r.destroy_id, "rdma_destroy_id");
  cm.Bind(r.migrate_id, "rdma_migrate_id");
  cm.Bind(r.bind_addr, "rdma_bind_addr");
  cm.Bind(r.listen, "rdma_listen");
  cm.Bind(r.resolve_addr, "rdma_resolve_addr");
  cm.Bind(r.resolve_route, "rdma_resolve_route");
  cm.Bind(r.create_qp, "rdma_create_qp");
  cm.Bind(r.destroy_qp, "rdma_destroy_qp");
  cm.Bind(r.connect, "rdma_connect");
  cm.Bind(r.accept, "rdma_accept");
  cm.Bind(r.reject, "rdma_reject");
  cm.Bind(r.disconnect, "rdma_disconnect");
  cm.Bind(r.get_cm_event, "rdma_get_cm_event");
  cm.Bind(r.ack_cm_event, "rdma_ack_cm_event");
  cm.Bind(r.event_str, "rdma_event_str");
  return cm.error();
}

}  // namespace

bool LoadVerbsLibraries(std::string* why_not) {
  static const std::string* const error = new std::string(Load());  // never destroyed
  if (!error->empty() && why_not != nullptr) *why_not = *error;
  return error->empty();
}

const Ibverbs& ibv() { return ibverbs_table; }
const Rdmacm& rdma() { return rdmacm_table; }

}  // namespace san::fabric::verbs
