// Session: one FTP control connection from greeting to QUIT, in its own process.
//
// The state machine: kAwaitUser -> (USER) kAwaitPass -> (PASS ok) kLoggedIn; failed PASS goes back
// to kAwaitUser after a delay, and the connection closes after max-login-failures. RNFR arms a
// rename that only the next command (RNTO) may use; REST arms an offset for the next transfer;
// PASV/EPSV/PORT/EPRT arm the data connection for the next transfer or listing. Every file-system
// access goes through the session's Jail. Data connections are SAN sockets (ftp/net/socket.h); a
// transfer's 226 reply names its data path ("shm" when accelerated, "tcp (...)" otherwise).
// While a transfer runs the control connection is watched for ABOR and STAT; other commands sent
// meanwhile are queued and answered afterwards, in order.
// Thread-safety: single-threaded; a Session owns its sockets and is not shared.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>

#include "files/jail.h"
#include "ftp/net/line_reader.h"
#include "ftp/net/socket.h"
#include "ftp/protocol/address.h"
#include "ftp/protocol/command.h"
#include "ftpd/auth/users.h"
#include "ftpd/server/config.h"
#include "ftpd/server/xferlog.h"

namespace san::ftp {

class Session {
 public:
  Session(const Config& config, const Users* users, const XferLog* log, Socket control);
  // Serves the connection until QUIT, EOF, a timeout or too many failed logins.
  void Run();

 private:
  enum class State { kAwaitUser, kAwaitPass, kLoggedIn };
  enum class DataMode { kNone, kPassive, kActive };
  enum class TransferEnd { kOk, kAborted, kDataError, kFileError, kTimeout };

  // Replies and dispatch (session.cc).
  void Reply(int code, std::string_view text);
  void Dispatch(const Command& cmd);
  bool HandlePreLogin(const Command& cmd);
  void DoUser(const Command& cmd);
  void DoPass(const Command& cmd);
  bool DropPrivileges();
  // chroot(2) into root when config and privileges say so (before DropPrivileges). False: the
  // session must not go on (chroot = yes and it failed).
  bool EnterChroot(const std::string& root);
  void DoAuth(const Command& cmd);
  void DoFeat();
  void DoOpts(const Command& cmd);
  void DoHelp(const Command& cmd);
  void DoSite(const Command& cmd);
  void DoStat(const Command& cmd);
  void DoType(const Command& cmd);
  void DoRest(const Command& cmd);

  // Names and the file system (session_fs.cc).
  std::optional<std::string> Resolve(const std::string& arg);
  bool RequireWrite();
  // RequireWrite, then Resolve: the path a write command may change, or nullopt (replied).
  std::optional<std::string> ResolveForWrite(const std::string& arg);
  void ReplyFsError(const Status& s, const std::string& what);
  // The success reply if `s` is ok, else ReplyFsError(s, what).
  void ReplyFsResult(const Status& s, const std::string& what, int code, std::string_view text);
  void DoPwd();
  void DoCwd(const std::string& arg);
  void DoMkd(const Command& cmd);
  void DoRmd(const Command& cmd);
  void DoDele(const Command& cmd);
  void DoRnfr(const Command& cmd);
  void DoRnto(const Command& cmd);
  void DoSize(const Command& cmd);
  void DoMdtm(const Command& cmd);
  void DoMlst(const Command& cmd);
  void DoList(const Command& cmd, char kind);  // 'L' LIST, 'N' NLST, 'M' MLSD
  Result<std::string> BuildListing(const std::string& arg, char kind, bool* is_dir);

  // Data connections and transfers (session_data.cc).
  void DoPort(const Command& cmd, bool extended);
  void DoPasv(bool extended, const Command& cmd);
  Result<Socket> OpenData();
  void ResetData();
  void DoRetr(const Command& cmd);
  void DoStore(const Command& cmd, char kind);  // 'S' STOR, 'U' STOU, 'A' APPE
  // A binary file from offset with san_sendfile, to its end.
  TransferEnd SendFileBytes(int file_fd, uint64_t offset, const Socket& data, uint64_t* bytes);
  // A listing (memory) or a file in TYPE A (read from its position and converted) through a
  // buffer.
  TransferEnd SendFrom(int file_fd, const std::string* memory, const Socket& data, uint64_t* bytes);
  TransferEnd ReceiveInto(int file_fd, const Socket& data, uint64_t* bytes);
  // Waits for the data socket (events) or the control connection; kOk: go on and try again.
  TransferEnd WaitForData(const Socket& data, short events, int timeout_ms);
  bool ControlInterrupted();  // ABOR seen (or control gone) during a transfer
  void FinishTransfer(TransferEnd end, Socket& data, uint64_t bytes, double seconds);
  void LogTransfer(const std::string& vpath, uint64_t bytes, double seconds, bool incoming,
                   bool complete);

  const Config& config_;
  const Users* users_;
  const XferLog* log_;
  Socket control_;
  LineReader reader_;
  HostPort peer_;
  HostPort local_;

  State state_ = State::kAwaitUser;
  std::string user_;
  bool anonymous_ = false;
  bool writable_ = false;
  int failed_logins_ = 0;
  std::optional<files::Jail> jail_;
  bool chrooted_ = false;  // the process root is the session root (EnterChroot)
  std::optional<std::pair<uid_t, gid_t>> run_as_ids_;  // the session user, looked up before chroot
  std::string cwd_ = "/";

  bool binary_ = false;  // TYPE A until TYPE I (RFC 959 default)
  std::optional<uint64_t> rest_;
  std::optional<std::string> rename_from_;
  bool epsv_all_ = false;
  DataMode data_mode_ = DataMode::kNone;
  Socket pasv_listener_;
  HostPort active_addr_;

  bool quit_ = false;
  bool in_transfer_ = false;
  uint64_t transfer_bytes_ = 0;      // for STAT during a transfer
  std::deque<std::string> pending_;  // commands received during a transfer
};

}  // namespace san::ftp
