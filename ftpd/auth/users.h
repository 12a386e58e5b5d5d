// The users file: local FTP accounts with crypt(3) password hashes.
//
// Format, one account a line ('#' comments and blank lines ignored):
//   name:hash:root[:rw|ro[:system-user]]
// hash is a crypt(3) string (yescrypt "$y$...", SHA-512 "$6$..."; ftpd --hash-password makes one);
// root is the account's jail (absolute); rw (default) allows uploads and changes, ro only reads;
// system-user (optional) is the local account whose uid/gid the session takes after login (ftpd
// running as root), in place of --run-as: a uid per FTP account.
// Parse is pure (unit-tested); Verify runs crypt_r and compares in constant time.
// Thread-safety: an immutable value after Parse.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sanlib/common/status.h"

namespace san::ftp {

struct Account {
  std::string name;
  std::string hash;
  std::string root;
  bool writable = true;
  std::string system_user;  // "" = ftpd's --run-as (or no switch)
};

class Users {
 public:
  // Errors name the line: "users file line 3: ...".
  static Result<Users> Parse(std::string_view text, std::string* error);
  static Result<Users> Load(const std::string& path, std::string* error);

  const Account* Find(std::string_view name) const;
  // The account if name exists and password matches its hash. Does the same crypt work for an
  // unknown name, so timing does not tell which names exist.
  const Account* Verify(std::string_view name, std::string_view password) const;
  size_t size() const { return accounts_.size(); }

 private:
  std::vector<Account> accounts_;
};

// A fresh crypt(3) hash of password: prefix "$y$" (yescrypt, default) or "$6$" (SHA-512).
Result<std::string> HashPassword(std::string_view password, const char* prefix = "$y$");
// Does password match hash (crypt_r, constant-time compare)?
bool CheckPassword(std::string_view password, const std::string& hash);

}  // namespace san::ftp
