#include "sanlib/common/config_file.h"

#include <cerrno>
#include <cstring>
#include <map>

#include "sanlib/common/small_file.h"
#include "sanlib/common/text_lines.h"

#ifndef SAN_SYSTEM_CONFIG_FILE
#define SAN_SYSTEM_CONFIG_FILE "/etc/sanlib/sanlib.conf"
#endif

namespace san {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

bool KnownSetting(const std::string& name) {
  for (const SettingInfo& s : Settings()) {
    if (name == s.variable) return true;
  }
  return false;
}

std::string Where(const std::string& path, int line, int column) {
  return path + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
}

// Config::Parse reads through a plain function pointer; these hand it one thread's lookup.
thread_local const char* (*t_getenv)(const char*) = nullptr;
thread_local const std::map<std::string, std::string>* t_file_values = nullptr;
thread_local const ConfigFileLine* t_only = nullptr;

const char* EnvironmentThenFile(const char* name) {
  if (const char* v = t_getenv(name)) return v;
  const auto it = t_file_values->find(name);
  return it == t_file_values->end() ? nullptr : it->second.c_str();
}

const char* OnlyThisLine(const char* name) {
  return t_only->name == name ? t_only->value.c_str() : nullptr;
}

// Whether Config::Parse accepts this setting's value on its own ("VAR=value is not valid").
bool ValueAccepted(const ConfigFileLine& setting) {
  t_only = &setting;
  std::vector<std::string> errors;
  Config::Parse(OnlyThisLine, &errors);
  t_only = nullptr;
  for (const std::string& e : errors) {
    if (e.compare(0, setting.name.size() + 1, setting.name + "=") == 0) return false;
  }
  return true;
}

}  // namespace

const char* SystemConfigFile() { return SAN_SYSTEM_CONFIG_FILE; }

std::string ConfigFilePath(const char* (*getenv_fn)(const char*)) {
  const char* chosen = getenv_fn("SAN_CONFIG_FILE");
  if (chosen == nullptr) return SystemConfigFile();
  return std::strcmp(chosen, "none") == 0 ? "" : chosen;
}

ConfigFile ParseConfigFile(std::string_view text, const std::string& path,
                           std::vector<std::string>* errors) {
  ConfigFile file;
  file.path = path;
  auto report = [&](int line, int column, const std::string& what) {
    if (errors) errors->push_back(Where(path, line, column) + what + "; line ignored");
  };
  TextLines lines(text);
  for (std::string_view line; lines.Next(&line);) {
    const int number = lines.number();
    size_t first = 0;
    while (first < line.size() && IsSpace(line[first])) ++first;
    size_t last = line.size();
    while (last > first && IsSpace(line[last - 1])) --last;
    if (first == last) continue;
    const std::string_view body = line.substr(first, last - first);
    const int column = static_cast<int>(first) + 1;
    if (body.substr(0, 5) == "allow" || body.substr(0, 4) == "deny") {
      file.rules.push_back({number, column, "", std::string(body)});
      continue;
    }
    const size_t eq = body.find('=');
    if (eq == std::string_view::npos) {
      report(number, column, "expected SAN_NAME = value or a rule (allow|deny ...)");
      continue;
    }
    size_t name_end = eq;
    while (name_end > 0 && IsSpace(body[name_end - 1])) --name_end;
    const std::string name(body.substr(0, name_end));
    size_t value_start = eq + 1;
    while (value_start < body.size() && IsSpace(body[value_start])) ++value_start;
    ConfigFileLine setting{number, column + static_cast<int>(value_start), name,
                           std::string(body.substr(value_start))};
    if (name == "SAN_CONFIG_FILE") {
      report(number, column, "SAN_CONFIG_FILE can only be set in the environment");
    } else if (!KnownSetting(name)) {
      report(number, column, "unknown setting '" + name + "' (sanrun --help lists them)");
    } else {
      file.settings.push_back(std::move(setting));
    }
  }
  return file;
}

ConfigFile ReadConfigFile(const std::string& path, std::vector<std::string>* errors) {
  if (path.empty()) return {};
  std::string text;
  if (!ReadSmallFile(path, &text)) {
    if (errno != ENOENT && errors) errors->push_back(path + ": cannot be read; not used");
    return {};
  }
  return ParseConfigFile(text, path, errors);
}

Config ParseWithFile(const char* (*getenv_fn)(const char*), const ConfigFile& file,
                     std::vector<std::string>* errors) {
  std::map<std::string, std::string> values;
  for (const ConfigFileLine& setting : file.settings) {
    if (ValueAccepted(setting)) {
      values[setting.name] = setting.value;  // a later line overrides an earlier one
    } else if (errors) {
      errors->push_back(Where(file.path, setting.line, setting.column) + setting.name + "=" +
                        setting.value + " is not valid; line ignored");
    }
  }
  t_getenv = getenv_fn;
  t_file_values = &values;
  Config config = Config::Parse(EnvironmentThenFile, errors);
  t_getenv = nullptr;
  t_file_values = nullptr;
  config.config_file = file.path;
  for (const ConfigFileLine& rule : file.rules) {
    config.file_rules.push_back({rule.line, rule.column, rule.value});
  }
  return config;
}

}  // namespace san
