// The system-wide settings file, as rsockets and libvma have one: <sysconfdir>/sanlib/sanlib.conf
// (/etc/sanlib/sanlib.conf for the prefix /usr), or the file SAN_CONFIG_FILE names ("none": no
// file). Documented in san(7).
//
//   # comment                     blank lines and '#' comments are ignored
//   SAN_WINDOW = 64               any SAN_* setting of Settings(); '=' with or without spaces
//   allow prog=redis-* port=6379  rules (compat/rules.h), one per line, after SAN_RULES and the
//   deny                          SAN_RULES_FILE's
//
// The environment wins: a variable set there overrides the file's value. A line that cannot be
// used (no '=', an unknown or misplaced name, a value Config::Parse rejects) is reported as
// "file:line:column: what; line ignored" and the rest of the file still applies. A missing file
// is not an error (most hosts have none).
//
// Pure parsing apart from ReadConfigFile; thread-safety: the functions keep no state of their own
// beyond ParseWithFile's per-thread lookup (not reentrant through getenv_fn).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sanlib/common/config.h"

namespace san {

struct ConfigFileLine {
  int line = 0;
  int column = 0;     // of the value (settings) or of the rule
  std::string name;   // SAN_*; empty for a rule
  std::string value;  // the setting's value, or the whole rule
};

struct ConfigFile {
  std::string path;  // "" when no file was read
  std::vector<ConfigFileLine> settings;
  std::vector<ConfigFileLine> rules;
};

// The compiled-in path: <sysconfdir>/sanlib/sanlib.conf of the configured install prefix.
const char* SystemConfigFile();

// The file to read: SAN_CONFIG_FILE when set ("" or "none": none), else the compiled-in path.
std::string ConfigFilePath(const char* (*getenv_fn)(const char*));

// Parses `text` read from `path`; each unusable line adds one message to *errors.
ConfigFile ParseConfigFile(std::string_view text, const std::string& path,
                           std::vector<std::string>* errors);

// Reads and parses `path` ("" reads nothing).
ConfigFile ReadConfigFile(const std::string& path, std::vector<std::string>* errors);

// Config::Parse over the environment, then the file for the variables the environment leaves
// unset. A file value Config::Parse rejects is reported with its file:line:column and ignored.
// The file's rules and path are carried in Config::file_rules / Config::config_file.
Config ParseWithFile(const char* (*getenv_fn)(const char*), const ConfigFile& file,
                     std::vector<std::string>* errors);

}  // namespace san
