#include "ftpd/server/session.h"

#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ctime>
#include <thread>

#include "ftp/protocol/reply.h"
#include "san/san.h"

namespace san::ftp {
namespace {

constexpr const char* kFeatures[] = {
    "EPRT", "EPSV", "MDTM", "MLST type*;size*;modify*;perm*;UNIX.mode*;", "PASV", "REST STREAM",
    "SIZE", "TVFS", "UTF8"};

bool IsOneOf(const std::string& verb, std::initializer_list<const char*> verbs) {
  for (const char* v : verbs) {
    if (verb == v) return true;
  }
  return false;
}

}  // namespace

Session::Session(const Config& config, const Users* users, const XferLog* log, Socket control)
    : config_(config),
      users_(users),
      log_(log),
      control_(std::move(control)),
      reader_(control_, static_cast<size_t>(config.max_line)) {
  peer_ = control_.PeerAddress();
  local_ = control_.LocalAddress();
  // Telnet "synch" (urgent data before ABOR) arrives inline and is stripped by the parser.
  const int one = 1;
  san_setsockopt(control_.fd(), SOL_SOCKET, SO_OOBINLINE, &one, sizeof one);
  control_.SetNoDelay();
}

void Session::Reply(int code, std::string_view text) {
  // A failed reply means the client is gone; the next read will see it and end the session.
  (void)control_.SendAll(FormatReply(code, text), config_.data_timeout_s * 1000);
}

void Session::Run() {
  Reply(220, config_.banner);
  std::string line;
  while (!quit_) {
    if (!pending_.empty()) {
      line = std::move(pending_.front());
      pending_.pop_front();
    } else {
      const LineReader::Outcome got = reader_.Next(config_.idle_timeout_s * 1000, &line);
      if (got == LineReader::Outcome::kTimeout) {
        Reply(421, "Timeout: closing control connection.");
        break;
      }
      if (got == LineReader::Outcome::kTooLong) {
        Reply(500, "Command line too long.");
        continue;
      }
      if (got != LineReader::Outcome::kLine) break;  // EOF or error
    }
    const ParseOutcome parsed = ParseCommand(line);
    if (!parsed.ok) {
      Reply(parsed.reply_code, parsed.reply_text);
      continue;
    }
    Dispatch(parsed.command);
  }
  ResetData();
}

void Session::Dispatch(const Command& cmd) {
  const std::string& v = cmd.verb;
  // RNFR arms RNTO for exactly the next command.
  std::optional<std::string> rename_from = std::move(rename_from_);
  rename_from_.reset();
  if (HandlePreLogin(cmd)) return;
  if (state_ != State::kLoggedIn) {
    Reply(530, "Please login with USER and PASS.");
    return;
  }
  static constexpr std::initializer_list<const char*> kNeedArg = {
      "CWD",  "XCWD", "MKD",  "XMKD", "RMD",  "XRMD", "DELE", "RNFR", "RNTO", "RETR", "STOR",
      "APPE", "SIZE", "MDTM", "PORT", "EPRT", "REST", "TYPE", "MODE", "STRU", "SITE"};
  if (!cmd.has_arg && IsOneOf(v, kNeedArg)) {
    Reply(501, "Syntax error in parameters or arguments.");
    return;
  }
  if (v == "PWD" || v == "XPWD") {
    DoPwd();
  } else if (v == "CWD" || v == "XCWD") {
    DoCwd(cmd.arg);
  } else if (v == "CDUP" || v == "XCUP") {
    DoCwd("..");
  } else if (v == "TYPE") {
    DoType(cmd);
  } else if (v == "MODE") {
    if (cmd.arg == "S" || cmd.arg == "s") {
      Reply(200, "Mode set to S.");
    } else {
      Reply(504, "Only stream mode is supported.");
    }
  } else if (v == "STRU") {
    if (cmd.arg == "F" || cmd.arg == "f") {
      Reply(200, "Structure set to F.");
    } else {
      Reply(504, "Only file structure is supported.");
    }
  } else if (v == "PORT") {
    DoPort(cmd, false);
  } else if (v == "EPRT") {
    DoPort(cmd, true);
  } else if (v == "PASV") {
    DoPasv(false, cmd);
  } else if (v == "EPSV") {
    DoPasv(true, cmd);
  } else if (v == "REST") {
    DoRest(cmd);
  } else if (v == "RETR") {
    DoRetr(cmd);
  } else if (v == "STOR") {
    DoStore(cmd, 'S');
  } else if (v == "STOU") {
    DoStore(cmd, 'U');
  } else if (v == "APPE") {
    DoStore(cmd, 'A');
  } else if (v == "ABOR") {
    ResetData();
    Reply(225, "No transfer to abort.");
  } else if (v == "DELE") {
    DoDele(cmd);
  } else if (v == "MKD" || v == "XMKD") {
    DoMkd(cmd);
  } else if (v == "RMD" || v == "XRMD") {
    DoRmd(cmd);
  } else if (v == "RNFR") {
    DoRnfr(cmd);
  } else if (v == "RNTO") {
    if (!rename_from) {
      Reply(503, "RNFR required first.");
    } else {
      rename_from_ = std::move(rename_from);
      DoRnto(cmd);
      rename_from_.reset();
    }
  } else if (v == "LIST") {
    DoList(cmd, 'L');
  } else if (v == "NLST") {
    DoList(cmd, 'N');
  } else if (v == "MLSD") {
    DoList(cmd, 'M');
  } else if (v == "MLST") {
    DoMlst(cmd);
  } else if (v == "SIZE") {
    DoSize(cmd);
  } else if (v == "MDTM") {
    DoMdtm(cmd);
  } else if (v == "STAT") {
    DoStat(cmd);
  } else if (v == "SITE") {
    DoSite(cmd);
  } else if (v == "ALLO") {
    Reply(202, "ALLO not needed.");
  } else if (v == "ACCT") {
    Reply(202, "ACCT not needed.");
  } else {
    Reply(502, "Command not implemented.");
  }
}

// Commands valid in any state. True if cmd was handled here.
bool Session::HandlePreLogin(const Command& cmd) {
  const std::string& v = cmd.verb;
  if (v == "USER") {
    DoUser(cmd);
  } else if (v == "PASS") {
    DoPass(cmd);
  } else if (v == "QUIT") {
    Reply(221, "Goodbye.");
    quit_ = true;
  } else if (v == "NOOP") {
    Reply(200, "NOOP ok.");
  } else if (v == "SYST") {
    Reply(215, "UNIX Type: L8");
  } else if (v == "FEAT") {
    DoFeat();
  } else if (v == "OPTS") {
    DoOpts(cmd);
  } else if (v == "HELP") {
    DoHelp(cmd);
  } else if (v == "AUTH") {
    DoAuth(cmd);
  } else if (v == "PBSZ" || v == "PROT") {
    Reply(503, "No security mechanism in use.");
  } else if (v == "STAT" && state_ != State::kLoggedIn) {
    Reply(530, "Please login with USER and PASS.");
  } else {
    return false;
  }
  return true;
}

void Session::DoUser(const Command& cmd) {
  if (state_ == State::kLoggedIn) {
    Reply(530, "Already logged in; cannot change user.");
    return;
  }
  if (!cmd.has_arg || cmd.arg.empty()) {
    Reply(501, "USER needs a name.");
    return;
  }
  user_ = cmd.arg;
  anonymous_ = user_ == "anonymous" || user_ == "ftp";
  state_ = State::kAwaitPass;
  Reply(331, anonymous_ ? "Anonymous login: send your e-mail address as password."
                        : "Password required.");
}

void Session::DoPass(const Command& cmd) {
  if (state_ == State::kLoggedIn) {
    Reply(230, "Already logged in.");
    return;
  }
  if (state_ != State::kAwaitPass) {
    Reply(503, "Login with USER first.");
    return;
  }
  std::string root;
  std::string system_user = config_.run_as;  // whose uid the session takes ("" = keep ours)
  bool ok = false;
  if (anonymous_) {
    if (config_.anonymous) {
      ok = true;
      root = config_.anon_root;
      writable_ = false;
    }
  } else if (users_) {
    if (const Account* a = users_->Verify(user_, cmd.arg)) {
      ok = true;
      root = a->root;
      writable_ = a->writable;
      if (!a->system_user.empty()) system_user = a->system_user;
    }
  }
  if (ok) {
    Result<files::Jail> jail = files::Jail::Open(root);
    if (!jail.ok()) {
      Reply(421, "Home directory unavailable; closing.");
      quit_ = true;
      return;
    }
    jail_.emplace(std::move(jail.value()));
    if (!system_user.empty()) {
      // Looked up now: after the chroot there is no /etc/passwd to read.
      const passwd* pw = getpwnam(system_user.c_str());
      if (!pw) {
        Reply(421, "Cannot switch to the session user; closing.");
        quit_ = true;
        return;
      }
      run_as_ids_ = {pw->pw_uid, pw->pw_gid};
    }
    if (!EnterChroot(root)) {
      Reply(421, "Cannot confine the session to its root; closing.");
      quit_ = true;
      return;
    }
    if (!DropPrivileges()) {
      Reply(421, "Cannot switch to the session user; closing.");
      quit_ = true;
      return;
    }
    cwd_.assign(1, '/');  // not = "/": GCC 12 -Wrestrict false positive in release builds
    state_ = State::kLoggedIn;
    Reply(230, anonymous_ ? "Anonymous login ok, read-only access." : "Login successful.");
    return;
  }
  ++failed_logins_;
  state_ = State::kAwaitUser;
  // The delay makes guessing slow; the limit ends the connection (the client must reconnect).
  std::this_thread::sleep_for(std::chrono::milliseconds(config_.login_fail_delay_ms));
  if (failed_logins_ >= config_.max_login_failures) {
    Reply(421, "Too many failed logins; closing.");
    quit_ = true;
    return;
  }
  Reply(530, "Login incorrect.");
}

// The second wall around a session run by root: the kernel's own root directory. The jail (an
// O_PATH fd of the same directory, opened before) keeps working unchanged, since openat2 resolves
// relative to it; chroot adds that even a bug in our path handling, or a library that opens a
// path by name, cannot reach outside. Everything that needs the outside world by name is done
// before: the session user's passwd entry (DoPass), the time zone (xferlog's local times); the
// users file and xferlog are open already. Listings are native, so no /bin/ls is needed inside.
bool Session::EnterChroot(const std::string& root) {
  if (config_.chroot == "no" || (config_.chroot == "auto" && geteuid() != 0)) return true;
  tzset();
  if (chroot(root.c_str()) != 0 || chdir("/") != 0) {
    // auto: an unprivileged container (no CAP_SYS_CHROOT) still has the openat2 jail.
    return config_.chroot != "yes";
  }
  chrooted_ = true;
  return true;
}

// After login: give up root for the session user (the account's system user, else --run-as;
// groups first, then gid, then uid; each checked), once the jail's root fd is open. Files the
// session creates then belong to that user.
bool Session::DropPrivileges() {
  if (!run_as_ids_) return true;
  const uid_t uid = run_as_ids_->first;
  const gid_t gid = run_as_ids_->second;
  if (geteuid() != 0) return geteuid() == uid;  // nothing to switch: only already being it is ok
  if (setgroups(1, &gid) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0) {
    return false;
  }
  return geteuid() == uid && (uid == 0 || setuid(0) != 0);  // root must be gone for good
}

void Session::DoAuth(const Command& cmd) {
  std::string mech = cmd.arg;
  for (char& c : mech) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
  if (mech != "SAN" || !config_.san_upgrade) {
    Reply(504, "Security mechanism not supported.");
    return;
  }
  if (control_.Accelerated()) {
    Reply(200, "Control connection already on the SAN path.");
    return;
  }
  if (reader_.buffered() != 0) {
    // san_upgrade needs a quiet connection: pipelined bytes would be lost to the negotiation.
    Reply(503, "Commands pipelined after AUTH SAN; not upgrading.");
    return;
  }
  Reply(234, "AUTH SAN: upgrading the control connection.");
  const Status up = control_.Upgrade();
  // ENOTSUP: the client declined, and exactly the negotiation bytes were consumed: carry on over
  // TCP. Anything else (the client did not speak the upgrade protocol) leaves the byte stream in
  // an unknown state, so the session ends rather than misread what follows.
  if (!up.ok() && up.code() != ENOTSUP) {
    Reply(421, "AUTH SAN negotiation failed; closing.");
    quit_ = true;
  }
}

void Session::DoFeat() {
  std::string text = "Features:";
  for (const char* f : kFeatures) text.append("\n").append(f);
  if (config_.san_upgrade) text.append("\nAUTH SAN");
  text.append("\nEnd");
  Reply(211, text);
}

void Session::DoOpts(const Command& cmd) {
  std::string arg = cmd.arg;
  for (char& c : arg) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
  if (arg == "UTF8 ON" || arg == "UTF8") {
    Reply(200, "UTF8 mode is always on.");
  } else if (arg == "UTF8 OFF") {
    Reply(504, "UTF8 cannot be turned off.");
  } else if (arg.rfind("MLST", 0) == 0) {
    Reply(200, "MLST OPTS type;size;modify;perm;UNIX.mode;");
  } else {
    Reply(501, "Option not understood.");
  }
}

void Session::DoHelp(const Command& cmd) {
  if (cmd.has_arg) {
    Reply(214, "No specific help; the command set is RFC 959, 2389, 2428 and 3659.");
    return;
  }
  Reply(214,
        "The following commands are recognized:\n"
        "ABOR ACCT ALLO APPE AUTH CDUP CWD  DELE EPRT EPSV FEAT HELP LIST MDTM MKD\n"
        "MLSD MLST MODE NLST NOOP OPTS PASS PASV PORT PWD  QUIT REST RETR RMD  RNFR\n"
        "RNTO SITE SIZE STAT STOR STOU STRU SYST TYPE USER XCUP XCWD XMKD XPWD XRMD\n"
        "Help OK.");
}

void Session::DoSite(const Command& cmd) {
  const std::string& arg = cmd.arg;
  std::string sub = arg.substr(0, arg.find(' '));
  for (char& c : sub) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
  if (sub == "HELP") {
    Reply(214, "SITE commands: CHMOD <octal-mode> <path>, HELP.");
    return;
  }
  if (sub != "CHMOD") {
    Reply(504, "SITE subcommand not supported.");
    return;
  }
  // CHMOD mode path
  const size_t s1 = arg.find(' ');
  const size_t s2 = s1 == std::string::npos ? std::string::npos : arg.find(' ', s1 + 1);
  if (s2 == std::string::npos) {
    Reply(501, "SITE CHMOD needs a mode and a path.");
    return;
  }
  const std::string mode_text = arg.substr(s1 + 1, s2 - s1 - 1);
  if (mode_text.empty() || mode_text.size() > 4 ||
      mode_text.find_first_not_of("01234567") != std::string::npos) {
    Reply(501, "SITE CHMOD mode must be octal.");
    return;
  }
  std::optional<std::string> path = ResolveForWrite(arg.substr(s2 + 1));
  if (!path) return;
  ReplyFsResult(jail_->Chmod(*path, static_cast<mode_t>(std::stoul(mode_text, nullptr, 8))),
                "SITE CHMOD", 200, "SITE CHMOD command ok.");
}

void Session::DoStat(const Command& cmd) {
  if (cmd.has_arg) {
    DoList(cmd, 'S');
    return;
  }
  std::string text = "FTP server status:\n";
  text.append("Connected from ").append(peer_.host()).append("\n");
  text.append("Logged in as ").append(user_).append("\n");
  text.append(binary_ ? "TYPE: BINARY" : "TYPE: ASCII").append("\n");
  text.append("Control connection: ").append(control_.Mode()).append("\n");
  if (state_ == State::kLoggedIn) {
    text.append(chrooted_ ? "Confinement: chroot + openat2\n" : "Confinement: openat2\n");
  }
  text.append("End of status");
  Reply(211, text);
}

void Session::DoType(const Command& cmd) {
  std::string t = cmd.arg;
  for (char& c : t) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
  if (t == "I" || t == "L 8" || t == "L8") {
    binary_ = true;
    Reply(200, "Switching to Binary mode.");
  } else if (t == "A" || t == "A N") {
    binary_ = false;
    Reply(200, "Switching to ASCII mode.");
  } else {
    Reply(504, "TYPE not supported (A or I).");
  }
}

void Session::DoRest(const Command& cmd) {
  std::optional<uint64_t> offset = ParseOffset(cmd.arg);
  if (!offset) {
    Reply(501, "REST needs a non-negative decimal offset.");
    return;
  }
  rest_ = *offset;
  Reply(350, "Restarting at " + std::to_string(*offset) + ". Send STOR or RETR.");
}

}  // namespace san::ftp
