#include "rpcgen_via/driver.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vector>

#include "rpcgen_via/c_types.h"
#include "rpcgen_via/checker.h"
#include "rpcgen_via/emit_client.h"
#include "rpcgen_via/emit_header.h"
#include "rpcgen_via/emit_sample.h"
#include "rpcgen_via/emit_server.h"
#include "rpcgen_via/emit_xdr.h"
#include "rpcgen_via/parser.h"
#include "rpcgen_via/preprocess.h"

namespace san::rpcgen {
namespace {

struct Output {
  OutputKind kind;
  std::string path;            // "" = standard output
  bool keep_existing = false;  // a sample the user may have edited: never overwrite
  std::string text;
};

const char* Symbol(OutputKind k) {
  switch (k) {
    case OutputKind::kHeader:
      return "RPC_HDR";
    case OutputKind::kXdr:
      return "RPC_XDR";
    case OutputKind::kClient:
      return "RPC_CLNT";
    case OutputKind::kServer:
    case OutputKind::kServerNoMain:
      return "RPC_SVC";
    default:
      return "RPC_SAMPLE";
  }
}

std::string Basename(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string StripSuffix(std::string s, const std::string& suffix) {
  if (s.size() >= suffix.size() &&
      s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0) {
    s.resize(s.size() - suffix.size());
  }
  return s;
}

// Standard input is copied to a temporary file: cpp runs once per output.
class StdinCopy {
 public:
  ~StdinCopy() {
    if (!path_.empty()) unlink(path_.c_str());
  }
  bool Make(std::string* error) {
    char tmpl[] = "/tmp/rpcgen_via_stdin_XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd < 0) {
      *error = Cat("mkstemp: ", strerror(errno));
      return false;
    }
    path_ = tmpl;
    char buf[65536];
    ssize_t n;
    while ((n = read(STDIN_FILENO, buf, sizeof buf)) != 0) {
      if (n < 0) {
        if (errno == EINTR) continue;
        *error = Cat("reading standard input: ", strerror(errno));
        close(fd);
        return false;
      }
      if (write(fd, buf, static_cast<size_t>(n)) != n) {
        *error = Cat("writing ", path_, ": ", strerror(errno));
        close(fd);
        return false;
      }
    }
    close(fd);
    return true;
  }
  const std::string& path() const { return path_; }
  // Once every output is generated the copy is not needed: remove it before writing, the step a
  // closed pipe (SIGPIPE) may interrupt.
  void Remove() {
    if (!path_.empty()) unlink(path_.c_str());
    path_.clear();
  }

 private:
  std::string path_;
};

bool WriteFile(const std::string& path, const std::string& text, std::string* error) {
  const std::string tmp = Cat(path, ".rpcgen_via.tmp");
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = Cat("cannot create '", tmp, "': ", strerror(errno));
    return false;
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = Cat("writing '", tmp, "': ", strerror(errno));
      close(fd);
      unlink(tmp.c_str());
      return false;
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    *error = Cat("cannot write '", path, "': ", strerror(errno));
    unlink(tmp.c_str());
    return false;
  }
  return true;
}

std::string Emit(OutputKind kind, const EmitContext& c) {
  switch (kind) {
    case OutputKind::kHeader:
      return EmitHeader(c);
    case OutputKind::kXdr:
      return EmitXdr(c);
    case OutputKind::kClient:
      return EmitClient(c);
    case OutputKind::kServer:
      return EmitServer(c, /*with_main=*/true);
    case OutputKind::kServerNoMain:
      return EmitServer(c, /*with_main=*/false);
    case OutputKind::kSampleClient:
      return EmitSampleClient(c);
    case OutputKind::kSampleServer:
      return EmitSampleServer(c);
    case OutputKind::kMakefile:
      return EmitMakefile(c);
  }
  return "";
}

}  // namespace

bool CompileText(const std::string& text, const std::string& file, bool newstyle,
                 Specification* spec, Diagnostic* error) {
  if (!Parse(text, file, spec, error)) return false;
  CheckOptions check;
  check.newstyle = newstyle;
  return Check(*spec, check, error);
}

int RunCompiler(const Options& options, FILE* err) {
  std::string error;
  StdinCopy stdin_copy;
  std::string input = options.infile;
  if (input.empty()) {
    if (!stdin_copy.Make(&error)) {
      fprintf(err, "rpcgen_via: %s\n", error.c_str());
      return 1;
    }
    input = stdin_copy.path();
  } else if (access(input.c_str(), R_OK) != 0) {
    fprintf(err, "rpcgen_via: cannot open '%s': %s\n", input.c_str(), strerror(errno));
    return 1;
  }

  // Names: "dir/foo.x" -> outputs "dir/foo.h", "dir/foo_xdr.c"...; generated code includes "foo.h".
  std::string base_path, base;
  if (!options.infile.empty()) {
    base_path = StripSuffix(options.infile, ".x");
    base = Basename(base_path);
  } else if (!options.outfile.empty()) {
    base = Basename(options.outfile);
    for (const char* s : {".c", ".h"}) base = StripSuffix(base, s);
    for (const char* s : {"_xdr", "_clnt", "_svc", "_client", "_server"})
      base = StripSuffix(base, s);
  } else {
    base = "stdin";
  }

  std::vector<Output> outputs;
  if (options.single) {
    outputs.push_back(Output{options.kind, options.outfile, false, ""});
  } else {
    outputs.push_back(Output{OutputKind::kHeader, Cat(base_path, ".h"), false, ""});
    outputs.push_back(Output{OutputKind::kXdr, Cat(base_path, "_xdr.c"), false, ""});
    outputs.push_back(Output{OutputKind::kClient, Cat(base_path, "_clnt.c"), false, ""});
    outputs.push_back(Output{OutputKind::kServer, Cat(base_path, "_svc.c"), false, ""});
    if (options.samples) {
      outputs.push_back(Output{OutputKind::kSampleClient, Cat(base_path, "_client.c"), true, ""});
      outputs.push_back(Output{OutputKind::kSampleServer, Cat(base_path, "_server.c"), true, ""});
      const size_t slash = base_path.rfind('/');
      const std::string dir =
          slash == std::string::npos ? std::string() : base_path.substr(0, slash + 1);
      outputs.push_back(Output{OutputKind::kMakefile, Cat(dir, "Makefile.", base), true, ""});
    }
  }

  EmitOptions emit;
  emit.base = base;
  emit.header_name = Cat(base, ".h");
  emit.mt_safe = options.mt_safe;
  emit.newstyle = options.newstyle;
  emit.inetd = options.inetd;
  emit.closedown_seconds =
      options.closedown_seconds == -2 ? (options.inetd ? 120 : -1) : options.closedown_seconds;
  emit.syslog_errors = options.syslog_errors;
  emit.nettypes = options.nettypes;

  for (Output& out : outputs) {
    PreprocessRequest req;
    req.cpp_dir = options.cpp_dir;
    req.defines = options.defines;
    req.defines.push_back(Symbol(out.kind));
    req.input = input;
    std::string text;
    if (!Preprocess(req, &text, &error)) {
      fprintf(err, "rpcgen_via: %s\n", error.c_str());
      return 1;
    }
    Specification spec;
    Diagnostic diag;
    if (!CompileText(text, options.infile.empty() ? std::string("<stdin>") : options.infile,
                     options.newstyle, &spec, &diag)) {
      if (diag.pos.file == input && options.infile.empty()) diag.pos.file = "<stdin>";
      fprintf(err, "%s\n", diag.ToString().c_str());
      return 1;
    }
    CTypes types(spec);
    EmitContext context{spec, types, emit};
    out.text = Emit(out.kind, context);
  }

  stdin_copy.Remove();
  for (const Output& out : outputs) {
    if (out.path.empty()) {
      if (fwrite(out.text.data(), 1, out.text.size(), stdout) != out.text.size() ||
          fflush(stdout) != 0) {
        fprintf(err, "rpcgen_via: writing standard output: %s\n", strerror(errno));
        return 1;
      }
      continue;
    }
    if (out.keep_existing && access(out.path.c_str(), F_OK) == 0) {
      fprintf(err, "rpcgen_via: '%s' already exists; not overwritten\n", out.path.c_str());
      continue;
    }
    if (!WriteFile(out.path, out.text, &error)) {
      fprintf(err, "rpcgen_via: %s\n", error.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace san::rpcgen
