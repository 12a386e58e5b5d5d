#include "compat/spawn_actions.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "sanlib/common/fork_held_mutex.h"

namespace san::compat {
namespace {

struct Record {
  const posix_spawn_file_actions_t* key;
  std::vector<SpawnAction> actions;
};

// More objects alive at once than any program builds; past it the oldest record goes (its object
// is then answered as unknown: every connection settles).
constexpr size_t kMaxRecords = 1024;

struct Records {
  ForkHeldMutex mu;
  std::vector<Record> records;
};

Records& TheRecords() {
  static Records* r = [] {
    auto* made = new Records;  // never freed: fork handlers hold its mutex
    made->mu.HoldAcrossForks();
    return made;
  }();
  return *r;
}

std::vector<Record>::iterator Find(std::vector<Record>& records,
                                   const posix_spawn_file_actions_t* key) {
  return std::find_if(records.begin(), records.end(),
                      [key](const Record& r) { return r.key == key; });
}

}  // namespace

std::vector<int> HeldAfter(const std::vector<PassableFd>& parent,
                           const std::vector<SpawnAction>& actions) {
  struct Entry {
    int origin;  // the parent's number of the connection this child fd names
    bool cloexec;
  };
  std::map<int, Entry> fds;  // the child's fds that name one of `parent`'s connections
  for (const PassableFd& p : parent) fds[p.fd] = {p.fd, p.cloexec};
  for (const SpawnAction& a : actions) {
    switch (a.kind) {
      case SpawnAction::kClose:
      case SpawnAction::kOpen:
        fds.erase(a.fd);
        break;
      case SpawnAction::kDup2: {
        auto from = fds.find(a.fd);
        if (a.fd == a.newfd) {
          if (from != fds.end()) from->second.cloexec = false;
        } else if (from != fds.end()) {
          fds[a.newfd] = {from->second.origin, false};
        } else {
          fds.erase(a.newfd);
        }
        break;
      }
      case SpawnAction::kCloseFrom:
        fds.erase(fds.lower_bound(a.fd), fds.end());
        break;
      case SpawnAction::kOther:
        break;
    }
  }
  std::vector<int> held;
  for (const auto& [fd, e] : fds) {
    if (!e.cloexec) held.push_back(e.origin);
  }
  std::sort(held.begin(), held.end());
  held.erase(std::unique(held.begin(), held.end()), held.end());
  return held;
}

void ForgetActions(const posix_spawn_file_actions_t* actions) {
  Records& r = TheRecords();
  std::lock_guard<ForkHeldMutex> lock(r.mu);
  auto it = Find(r.records, actions);
  if (it != r.records.end()) r.records.erase(it);
}

void RecordAction(const posix_spawn_file_actions_t* actions, const SpawnAction& action) {
  Records& r = TheRecords();
  std::lock_guard<ForkHeldMutex> lock(r.mu);
  auto it = Find(r.records, actions);
  if (it == r.records.end()) {
    if (r.records.size() >= kMaxRecords) r.records.erase(r.records.begin());
    r.records.push_back({actions, {}});
    it = r.records.end() - 1;
  }
  it->actions.push_back(action);
}

bool RecordedActions(const posix_spawn_file_actions_t* actions, std::vector<SpawnAction>* out) {
  out->clear();
  if (!actions) return true;
  Records& r = TheRecords();
  std::lock_guard<ForkHeldMutex> lock(r.mu);
  auto it = Find(r.records, actions);
  if (it == r.records.end()) return actions->__used == 0;
  // glibc counts the actions it holds: a record that missed some (evicted, then added to) is no
  // record.
  if (it->actions.size() != static_cast<size_t>(actions->__used)) return false;
  *out = it->actions;
  return true;
}

}  // namespace san::compat
