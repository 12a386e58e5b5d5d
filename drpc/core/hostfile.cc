#include "drpc/core/hostfile.h"

#include "sanlib/common/text_lines.h"

namespace san::drpc {

Status CheckUnique(const std::vector<Target>& targets) {
  for (size_t i = 0; i < targets.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (targets[i].san == targets[j].san && targets[i].host == targets[j].host &&
          targets[i].port == targets[j].port) {
        return Status(EINVAL, "hosts: a node is named twice");
      }
    }
  }
  return Status::Ok();
}

Result<std::vector<Target>> ParseHostFile(std::string_view text, int* error_line) {
  *error_line = 0;
  std::vector<Target> out;
  TextLines lines(text);
  for (std::string_view line; lines.Next(&line);) {
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
      size_t j = i;
      while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
      if (j > i) {
        Result<Target> t = ParseTarget(line.substr(i, j - i));
        if (!t.ok()) {
          *error_line = lines.number();
          return t.status();
        }
        out.push_back(std::move(t).value());
      }
      i = j;
    }
  }
  if (out.empty()) return Status(EINVAL, "hostfile: no hosts");
  if (Status s = CheckUnique(out); !s.ok()) return s;
  return out;
}

Result<std::vector<Target>> ParseHostList(std::string_view list) {
  std::vector<Target> out;
  if (list.empty()) return Status(EINVAL, "hosts: empty list");
  while (true) {
    const size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    if (item.empty()) return Status(EINVAL, "hosts: empty item in the list");
    Result<Target> t = ParseTarget(item);
    if (!t.ok()) return t.status();
    out.push_back(std::move(t).value());
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  if (Status s = CheckUnique(out); !s.ok()) return s;
  return out;
}

}  // namespace san::drpc
