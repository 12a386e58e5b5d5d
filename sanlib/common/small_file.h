// ReadSmallFile: the whole of a small file (a settings or rules file, a /proc or /sys entry) as a
// string, with open, read and close -- no iostreams. libsan_preload.so is loaded into every
// program started under sanrun and links the C++ runtime in: std::ifstream alone brought in the
// runtime's stream and locale code, 40 % of the library, whose relocations every exec paid.
// Thread-safety: thread-safe.
#pragma once

#include <cstddef>
#include <string>

namespace san {

// The file's bytes (at most `max`), or false with errno set (the open's or read's; EFBIG past
// `max`). Reads go to the kernel directly: the compatibility layer interposes read().
bool ReadSmallFile(const std::string& path, std::string* out, size_t max = size_t{1} << 20);

// The first line of a small file (without its '\n'), or "" if it cannot be read.
std::string FirstLineOf(const std::string& path);

}  // namespace san
