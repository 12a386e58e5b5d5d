// Directory listings, produced natively (no fork+exec of ls): LIST ("ls -l" lines), NLST (names),
// MLSD/MLST (RFC 3659 facts).
//
// Why native: a session's root need not contain /bin/ls (jail or chroot), there is no option
// string for a client to smuggle into ls, and no fork while SAN connections are open. Entries are
// read with the jail's directory fd, so the listing is confined like every other operation.
// Thread-safety: stateless functions.
#pragma once

#include <sys/stat.h>

#include <ctime>
#include <string>
#include <vector>

#include "files/jail.h"
#include "sanlib/common/status.h"

namespace san::ftp {

struct DirEntry {
  std::string name;
  struct stat st {};
  std::string link_target;  // for symlinks ("" otherwise)
};

// The entries of the directory vpath (not "." or ".."), sorted by name; hidden (dot) names only
// when all is set.
Result<std::vector<DirEntry>> ReadDirectory(const files::Jail& jail, const std::string& vpath,
                                            bool all);

// "-rw-r--r--   1 1000     1000         1234 Nov 23 01:14 name" (recent files show the time,
// older than six months the year, as ls does). now: the reference time.
std::string FormatListLine(const DirEntry& e, time_t now);
// "type=file;size=1234;modify=20261123011400;perm=rwadf; name" (name after one space).
std::string FormatFacts(const DirEntry& e, bool writable, const std::string& type_override = "");
// "YYYYMMDDHHMMSS" in UTC (MDTM, modify fact).
std::string FormatTimeval(time_t t);

}  // namespace san::ftp
