// ftp_client: an FTP client over SAN sockets. Batch mode with a URL, interactive otherwise.
// See docs/ftp.md and --help.
#include <signal.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "ftp/net/socket.h"
#include "ftp_client/interrupt.h"
#include "ftp_client/modes.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  using namespace san::ftp;
  BatchRequest req;
  ClientOptions options;
  bool active = false, no_upgrade = false;
  std::vector<std::string> positional;
  po::options_description opts(
      "usage: ftp_client [options] ftp://[user[:pass]@]host[:port]/path   (batch)\n"
      "       ftp_client [options] [host [port]]                         (interactive)\n"
      "exit codes: 0 ok, 1 usage, 2 connect, 3 login, 4 server refused, 5 transfer broke off,\n"
      "            6 local file error, 130 interrupted (Ctrl-C; a running transfer is aborted)\n"
      "options");
  opts.add_options()("help,h", "show this help")("output,o", po::value(&req.output),
                                                 "batch: write the download here ('-' = stdout)")(
      "put", po::value(&req.put), "batch: upload this local file to the URL's path")(
      "list", po::bool_switch(&req.list), "batch: print the LIST of the URL's path")(
      "resume", po::bool_switch(&req.resume),
      "batch: continue a partial download or upload (REST)")(
      "ascii", po::bool_switch(&req.ascii),
      "batch: TYPE A, text lines converted (LF locally, CRLF on the wire)")(
      "active", po::bool_switch(&active), "active mode (EPRT/PORT) instead of passive")(
      "no-upgrade", po::bool_switch(&no_upgrade),
      "do not upgrade the control connection (AUTH SAN)")(
      "timeout", po::value(&options.timeout_ms)->default_value(options.timeout_ms),
      "milliseconds per network wait")("verbose,v", po::bool_switch(&options.verbose),
                                       "show the protocol dialogue and data paths");
  po::options_description hidden;
  hidden.add_options()("args", po::value(&positional));
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("args", -1);
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
    po::notify(vm);
    if (vm.count("help")) {
      std::cout << opts << "\n";
      return kExitOk;
    }
  } catch (const std::exception& e) {
    fprintf(stderr, "ftp_client: %s (try --help)\n", e.what());
    return kExitUsage;
  }
  options.passive = !active;
  options.san_upgrade = !no_upgrade;
  IgnoreSigpipe();
  signal(SIGXFSZ, SIG_IGN);  // a download past RLIMIT_FSIZE: EFBIG, exit code 6, not a core
  options.interrupted = interrupt::Pending;
  const bool batch = !positional.empty() && positional[0].find("://") != std::string::npos;
  interrupt::Install(batch ? interrupt::Outside::kExit : interrupt::Outside::kFlag);
  options.interrupt_fd = interrupt::WakeFd();
  if (batch) {
    if (positional.size() != 1) {
      fprintf(stderr, "ftp_client: one URL at a time\n");
      return kExitUsage;
    }
    req.url = positional[0];
    if (req.ascii && req.resume) {
      // A REST offset counts the server's bytes, which in TYPE A are not the local file's.
      fprintf(stderr, "ftp_client: --resume needs binary transfers (not with --ascii)\n");
      return kExitUsage;
    }
    return RunBatch(req, options);
  }
  if (positional.size() > 2) {
    fprintf(stderr, "ftp_client: too many arguments (try --help)\n");
    return kExitUsage;
  }
  const std::string host = positional.empty() ? "" : positional[0];
  const int port = positional.size() == 2 ? atoi(positional[1].c_str()) : 21;
  if (port <= 0 || port > 65535) {
    fprintf(stderr, "ftp_client: bad port\n");
    return kExitUsage;
  }
  return RunInteractive(host, static_cast<uint16_t>(port), options);
}
