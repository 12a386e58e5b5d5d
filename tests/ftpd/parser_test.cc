// Unit tests of ftpd's and ftp_client's pure parsers: the command line, PORT/EPRT/PASV/EPSV
// arguments and replies, REST offsets, reply formatting and assembly, virtual paths, ftp:// URLs,
// the users file and crypt(3) checks, xferlog records and listing lines.
#include <arpa/inet.h>

#include <gtest/gtest.h>

#include "files/virtual_path.h"
#include "ftp/protocol/address.h"
#include "ftp/protocol/ascii.h"
#include "ftp/protocol/command.h"
#include "ftp/protocol/reply.h"
#include "ftp_client/url.h"
#include "ftpd/auth/users.h"
#include "ftpd/fs/listing.h"
#include "ftpd/server/xferlog.h"

namespace san::ftp {
namespace {

TEST(FtpCommand, VerbUppercasedArgVerbatim) {
  ParseOutcome p = ParseCommand("retr  two spaces.txt ");
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.command.verb, "RETR");
  EXPECT_TRUE(p.command.has_arg);
  EXPECT_EQ(p.command.arg, " two spaces.txt ");
  p = ParseCommand("NOOP");
  ASSERT_TRUE(p.ok);
  EXPECT_FALSE(p.command.has_arg);
  p = ParseCommand("CWD ");
  ASSERT_TRUE(p.ok);
  EXPECT_TRUE(p.command.has_arg);
  EXPECT_EQ(p.command.arg, "");
}

TEST(FtpCommand, RejectsBadVerbsAndControlBytes) {
  for (const char* bad : {"", "AB", "ABCDE", "R3TR x", " RETR x", "RE\xc3\xa9 x"}) {
    ParseOutcome p = ParseCommand(bad);
    EXPECT_FALSE(p.ok) << bad;
    EXPECT_EQ(p.reply_code, 500) << bad;
  }
  EXPECT_FALSE(ParseCommand(std::string("RETR a\0b", 8)).ok);
  EXPECT_FALSE(ParseCommand("RETR a\rb").ok);
  EXPECT_FALSE(ParseCommand(std::string(kMaxCommandLine + 1, 'A')).ok);
}

TEST(FtpCommand, TelnetSequencesStripped) {
  // IAC IP IAC DM before ABOR, as netkit-ftp sends it; IAC WILL x negotiation; IAC IAC is 0xFF.
  ParseOutcome p = ParseCommand(
      "\xff\xf4\xff\xf2"
      "ABOR");
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.command.verb, "ABOR");
  EXPECT_EQ(StripTelnet("\xff\xfb\x01NOOP"), "NOOP");
  EXPECT_EQ(StripTelnet("a\xff\xff"
                        "b"),
            "a\xff"
            "b");
  EXPECT_EQ(StripTelnet("x\xff"), "x");
}

TEST(FtpAddress, PortArgument) {
  auto hp = ParsePortArg("127,0,0,1,4,1");
  ASSERT_TRUE(hp);
  EXPECT_EQ(hp->host(), "127.0.0.1");
  EXPECT_EQ(hp->port(), 1025);
  EXPECT_EQ(FormatPortArg(*hp), "127,0,0,1,4,1");
  for (const char* bad : {"", "1,2,3,4,5", "1,2,3,4,5,6,7", "256,0,0,1,1,1", "1,2,3,4,5,-6",
                          "1,2,3,4,5, 6", "1,,3,4,5,6", "a,b,c,d,e,f", "1,2,3,4,5,6,"}) {
    EXPECT_FALSE(ParsePortArg(bad)) << bad;
  }
}

TEST(FtpAddress, EprtArgument) {
  auto v4 = ParseEprtArg("|1|132.235.1.2|6275|");
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->host(), "132.235.1.2");
  EXPECT_EQ(v4->port(), 6275);
  EXPECT_EQ(FormatEprtArg(*v4), "|1|132.235.1.2|6275|");
  auto v6 = ParseEprtArg("!2!::1!5282!");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->family(), AF_INET6);
  EXPECT_EQ(v6->port(), 5282);
  for (const char* bad : {"|3|1.2.3.4|1|", "|1|::1|1|", "|2|1.2.3.4|1|", "|1|1.2.3.4|70000|",
                          "|1|1.2.3.4|1", "1|1.2.3.4|1|", "|1||1|", "|1|1.2.3.4||"}) {
    EXPECT_FALSE(ParseEprtArg(bad)) << bad;
  }
}

TEST(FtpAddress, PassiveReplies) {
  EXPECT_EQ(ParseEpsvReply("Entering Extended Passive Mode (|||6446|)").value_or(0), 6446);
  EXPECT_FALSE(ParseEpsvReply("Entering Extended Passive Mode (|||0|)"));
  EXPECT_FALSE(ParseEpsvReply("no parens"));
  auto hp = ParsePasvReply("Entering Passive Mode (10,0,0,2,200,10).");
  ASSERT_TRUE(hp);
  EXPECT_EQ(hp->host(), "10.0.0.2");
  EXPECT_EQ(hp->port(), 200 * 256 + 10);
  EXPECT_TRUE(ParsePasvReply("=10,0,0,2,200,10"));  // RFC 1123: no parentheses
  EXPECT_FALSE(ParsePasvReply("Entering Passive Mode (10,0,0,2,200)"));
}

TEST(FtpAddress, Offsets) {
  EXPECT_EQ(ParseOffset("0").value(), 0u);
  EXPECT_EQ(ParseOffset("123456789012345678").value(), 123456789012345678u);
  for (const char* bad : {"", "-1", "+1", "1 ", "0x10", "1234567890123456789"}) {
    EXPECT_FALSE(ParseOffset(bad)) << bad;
  }
}

TEST(FtpReply, FormatAndAssembleRoundTrip) {
  EXPECT_EQ(FormatReply(200, "ok"), "200 ok\r\n");
  const std::string multi = FormatReply(211, "Features:\nEPSV\n211 looks like an end\nEnd");
  EXPECT_EQ(multi, "211-Features:\r\n EPSV\r\n 211 looks like an end\r\n211 End\r\n");
  ReplyAssembler a;
  size_t pos = 0;
  ReplyAssembler::Result r = ReplyAssembler::Result::kNeedMore;
  while (pos < multi.size()) {
    const size_t end = multi.find("\r\n", pos);
    r = a.Feed(std::string_view(multi).substr(pos, end - pos));
    pos = end + 2;
  }
  ASSERT_EQ(r, ReplyAssembler::Result::kDone);
  EXPECT_EQ(a.reply().code, 211);
  EXPECT_EQ(a.reply().text, "Features:\n EPSV\n 211 looks like an end\nEnd");
  ReplyAssembler b;
  EXPECT_EQ(b.Feed("hello"), ReplyAssembler::Result::kBad);
  EXPECT_EQ(b.Feed("600 no"), ReplyAssembler::Result::kBad);
  EXPECT_EQ(b.Feed("226"), ReplyAssembler::Result::kDone);
}

TEST(FtpVirtualPath, DotDotNeverClimbsAboveRoot) {
  EXPECT_EQ(files::ResolveVirtual("/", "..").value(), "/");
  EXPECT_EQ(files::ResolveVirtual("/a/b", "../../../../etc/passwd").value(), "/etc/passwd");
  EXPECT_EQ(files::ResolveVirtual("/a", "b//c/./d/..").value(), "/a/b/c");
  EXPECT_EQ(files::ResolveVirtual("/a", "/x/../y").value(), "/y");
  EXPECT_EQ(files::ResolveVirtual("/a", "").value(), "/a");
  EXPECT_EQ(files::ResolveVirtual("/a", "...").value(), "/a/...");
  EXPECT_FALSE(files::ResolveVirtual("/", std::string("a\0b", 3)));
  EXPECT_EQ(files::BaseName("/a/b"), "b");
  EXPECT_EQ(files::DirName("/a/b"), "/a");
  EXPECT_EQ(files::DirName("/a"), "/");
  EXPECT_EQ(files::BaseName("/"), "");
}

TEST(FtpUrlParse, Forms) {
  auto u = ParseFtpUrl("ftp://al%40ice:p%3Ass@127.0.0.1:2121/dir/a%20b.txt");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->user, "al@ice");
  EXPECT_EQ(u->password, "p:ss");
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 2121);
  EXPECT_EQ(u->path, "dir/a b.txt");
  auto v6 = ParseFtpUrl("ftp://[::1]/x");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 21);
  EXPECT_TRUE(ParseFtpUrl("FTP://host"));
  for (const char* bad : {"http://h/x", "ftp://", "ftp://h:0/x", "ftp://h:99999/", "ftp://h/%zz",
                          "ftp://h/a%00b", "ftp://h/a%0d%0aDELE%20x", "ftp://h/x;type=i",
                          "ftp://u%2fv@h/", "ftp://h/a\nb", "ftp://h/a\rDELE x"}) {
    EXPECT_FALSE(ParseFtpUrl(bad)) << bad;
  }
}

TEST(FtpUsers, ParseAndVerify) {
  auto hash = HashPassword("s3cret");
  ASSERT_TRUE(hash.ok());
  EXPECT_EQ(hash->rfind("$y$", 0), 0u);
  auto sha = HashPassword("s3cret", "$6$");
  ASSERT_TRUE(sha.ok());
  std::string err;
  auto users =
      Users::Parse("# comment\n\nalice:" + *hash + ":/srv/a\nbob:" + *sha + ":/srv/b:ro\n", &err);
  ASSERT_TRUE(users.ok()) << err;
  EXPECT_EQ(users->size(), 2u);
  EXPECT_TRUE(users->Verify("alice", "s3cret"));
  EXPECT_FALSE(users->Verify("alice", "s3cret "));
  EXPECT_FALSE(users->Verify("carol", "s3cret"));
  const Account* bob = users->Verify("bob", "s3cret");
  ASSERT_TRUE(bob);
  EXPECT_FALSE(bob->writable);
  EXPECT_EQ(bob->root, "/srv/b");
  auto with_user =
      Users::Parse("carol:" + *sha + ":/srv/c:rw:www-data\ndave:" + *sha + ":/srv/d:ro:\n", &err);
  ASSERT_TRUE(with_user.ok()) << err;
  EXPECT_EQ(with_user->Find("carol")->system_user, "www-data");
  EXPECT_EQ(with_user->Find("dave")->system_user, "");  // empty field: ftpd's --run-as
  for (const char* bad : {"alice", "alice:$6$x:relative", "alice:plain:/r", ":$6$x:/r",
                          "a:$6$x:/r:rx", "a:$6$x:/r\na:$6$y:/s", "a:$6$x:/r:rw:-o",
                          "a:$6$x:/r:rw:../x", "a:$6$x:/r:rw:u:extra", "a:$6$x:/r:rw:a b"}) {
    std::string why;
    EXPECT_FALSE(Users::Parse(bad, &why).ok()) << bad;
    EXPECT_NE(why.find("line"), std::string::npos);
  }
  EXPECT_FALSE(CheckPassword("x", "not-a-hash"));
}

TEST(FtpXferlog, RecordFormat) {
  TransferRecord r;
  r.seconds = 0.2;
  r.remote_host = "127.0.0.1";
  r.bytes = 1234;
  r.path = "/dir/a b.txt";
  r.user = "alice";
  r.incoming = true;
  r.complete = false;
  const std::string line = FormatTransferRecord(r, 0);
  EXPECT_NE(line.find(" 1 127.0.0.1 1234 /dir/a_b.txt b _ i r alice ftp 0 * i\n"),
            std::string::npos)
      << line;
}

TEST(FtpListing, LsLineAndFacts) {
  DirEntry e;
  e.name = "f.txt";
  e.st.st_mode = S_IFREG | 0644;
  e.st.st_nlink = 1;
  e.st.st_size = 42;
  e.st.st_mtime = 1000000000;  // 2001-09-09
  const std::string ls = FormatListLine(e, 1000000000 + 10);
  EXPECT_EQ(ls.substr(0, 10), "-rw-r--r--");
  EXPECT_NE(ls.find(" 42 Sep 09 01:46 f.txt"), std::string::npos) << ls;
  EXPECT_NE(FormatListLine(e, 2000000000).find("Sep 09  2001"), std::string::npos);
  EXPECT_EQ(FormatFacts(e, false),
            "type=file;size=42;modify=20010909014640;perm=r;UNIX.mode=644; f.txt");
  e.st.st_mode = S_IFLNK | 0777;
  e.link_target = "/etc";
  EXPECT_NE(FormatListLine(e, 0).find("f.txt -> /etc"), std::string::npos);
}

TEST(FtpAscii, EncodeTurnsEveryLfIntoCrlf) {
  std::string wire;
  const std::string text = "one\ntwo\r\n\nlone\rcr";
  AsciiEncode(text.data(), text.size(), &wire);
  EXPECT_EQ(wire, "one\r\ntwo\r\r\n\r\nlone\rcr");
  wire.clear();
  AsciiEncode("", 0, &wire);
  EXPECT_EQ(wire, "");
}

TEST(FtpAscii, DecodeDropsTheCrOfCrlfOnlyEvenAcrossChunks) {
  const std::string wire = "a\r\nb\rc\r\r\nd\r";
  std::string whole;
  AsciiDecoder one;
  one.Decode(wire.data(), wire.size(), &whole);
  EXPECT_EQ(whole, "a\nb\rc\r\nd");  // the final CR is still undecided
  one.Finish(&whole);
  EXPECT_EQ(whole, "a\nb\rc\r\nd\r");
  // Every split point, including between the CR and the LF of a pair, gives the same text.
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    AsciiDecoder d;
    std::string out;
    d.Decode(wire.data(), cut, &out);
    d.Decode(wire.data() + cut, wire.size() - cut, &out);
    d.Finish(&out);
    EXPECT_EQ(out, "a\nb\rc\r\nd\r") << cut;
  }
  // Byte by byte.
  AsciiDecoder bytes;
  std::string out;
  for (char c : wire) bytes.Decode(&c, 1, &out);
  bytes.Finish(&out);
  EXPECT_EQ(out, "a\nb\rc\r\nd\r");
}

}  // namespace
}  // namespace san::ftp
