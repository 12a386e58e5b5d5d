// One fuzz iteration over every parser of outside input in ftpd and ftp_client, with the
// invariants each must keep. Shared by the libFuzzer target (command_fuzz.cc, clang) and the
// seeded-random replay test (fuzz_replay_test.cc, any compiler). A broken invariant traps.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "files/virtual_path.h"
#include "ftp/protocol/address.h"
#include "ftp/protocol/ascii.h"
#include "ftp/protocol/command.h"
#include "ftp/protocol/reply.h"
#include "ftp_client/owed_replies.h"
#include "ftp_client/url.h"
#include "ftpd/auth/users.h"

namespace san::ftp::fuzz {

inline void Require(bool ok) {
  if (!ok) __builtin_trap();
}

inline void OneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);

  const ParseOutcome p = ParseCommand(in);
  if (p.ok) {
    Require(p.command.verb.size() >= 3 && p.command.verb.size() <= 4);
    for (char c : p.command.verb) Require(c >= 'A' && c <= 'Z');
    for (char c : p.command.arg) Require(c != '\0' && c != '\r' && c != '\n');
    std::string again = p.command.verb;
    if (p.command.has_arg) again.append(" ").append(p.command.arg);
    if (again.find('\xff') == std::string::npos) {
      const ParseOutcome q = ParseCommand(again);
      Require(q.ok && q.command.verb == p.command.verb && q.command.arg == p.command.arg);
    }
  } else {
    Require(p.reply_code == 500 || p.reply_code == 501);
  }

  if (auto hp = ParsePortArg(in)) {
    auto back = ParsePortArg(FormatPortArg(*hp));
    Require(back && back->host() == hp->host() && back->port() == hp->port());
  }
  if (auto hp = ParseEprtArg(in)) {
    auto back = ParseEprtArg(FormatEprtArg(*hp));
    Require(back && back->host() == hp->host() && back->port() == hp->port());
  }
  if (auto port = ParseEpsvReply(in)) Require(*port != 0);
  (void)ParsePasvReply(in);
  if (auto off = ParseOffset(in)) Require(std::to_string(*off).size() <= in.size());

  if (auto v = files::ResolveVirtual("/a/b", in)) {
    Require(!v->empty() && (*v)[0] == '/');
    Require(v->find("//") == std::string::npos);
    Require(v->find("/../") == std::string::npos && v->find("/./") == std::string::npos);
    const std::string base = files::BaseName(*v);
    Require(*v == "/" || (v->back() != '/' && base != ".." && base != "."));
    Require(files::ResolveVirtual("/", *v) == v);  // canonical: resolving again changes nothing
  } else {
    Require(in.find('\0') != std::string_view::npos);
  }

  // The same lines through a ReplyAssembler and through the client's ledger of owed replies
  // (three commands' worth owed): it settles at most one per final reply and never goes below 0.
  ReplyAssembler a;
  OwedReplies owed;
  for (int i = 0; i < 3; ++i) owed.CommandSent();
  bool ledger_lost = false;  // after kBad the client closes the connection: stop feeding
  size_t pos = 0;
  while (pos <= in.size()) {
    size_t nl = in.find('\n', pos);
    if (nl == std::string_view::npos) nl = in.size();
    const std::string_view line = in.substr(pos, nl - pos);
    if (a.Feed(line) == ReplyAssembler::Result::kDone) {
      Require(a.reply().code >= 100 && a.reply().code <= 599);
    }
    if (!ledger_lost) {
      const int before = owed.owed();
      switch (owed.Feed(line)) {
        case OwedReplies::Fed::kReply:
          Require(owed.reply().code >= 100 && owed.reply().code <= 599);
          Require(owed.owed() == (owed.reply().code < 200 || before == 0 ? before : before - 1));
          break;
        case OwedReplies::Fed::kNeedMore:
          Require(owed.owed() == before);
          break;
        case OwedReplies::Fed::kBad:
          Require(owed.owed() == before);
          ledger_lost = true;
          break;
      }
      Require(owed.owed() >= 0);
    }
    pos = nl + 1;
  }

  if (auto u = ParseFtpUrl(in)) {
    Require(!u->host.empty());
    for (char c : u->path) Require(c != '\0' && c != '\r' && c != '\n');
    Require(u->user.find('/') == std::string::npos);
  }

  std::string err;
  auto users = Users::Parse(in, &err);
  if (!users.ok()) Require(!err.empty());

  // TYPE A: decoding what was encoded gives the input back, however the wire bytes are cut into
  // chunks (the cut here depends on the input); decoding drops exactly the CRs of CRLFs, so a
  // decoded stream has a CRLF only where the input had CR CR LF.
  std::string wire;
  AsciiEncode(in.data(), in.size(), &wire);
  Require(wire.size() == in.size() + static_cast<size_t>(std::count(in.begin(), in.end(), '\n')));
  const size_t cut = in.empty() ? 0 : static_cast<unsigned char>(in[0]) % (wire.size() + 1);
  AsciiDecoder decoder;
  std::string back;
  decoder.Decode(wire.data(), cut, &back);
  decoder.Decode(wire.data() + cut, wire.size() - cut, &back);
  decoder.Finish(&back);
  Require(back == in);
  AsciiDecoder raw;
  std::string decoded;
  raw.Decode(in.data(), in.size(), &decoded);
  raw.Finish(&decoded);
  size_t crlf = 0;  // every CR right before an LF is dropped, every other byte kept
  for (size_t i = 0; i + 1 < in.size(); ++i) crlf += in[i] == '\r' && in[i + 1] == '\n';
  Require(decoded.size() == in.size() - crlf);
  if (decoded.find("\r\n") != std::string::npos)
    Require(in.find("\r\r\n") != std::string_view::npos);
}

}  // namespace san::ftp::fuzz
