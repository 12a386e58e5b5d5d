// Emitters and driver: the generated C has rpcgen's names and signatures in each mode, and the
// driver writes all files or none.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "rpcgen_via/c_types.h"
#include "rpcgen_via/driver.h"
#include "rpcgen_via/emit_client.h"
#include "rpcgen_via/emit_header.h"
#include "rpcgen_via/emit_sample.h"
#include "rpcgen_via/emit_server.h"
#include "rpcgen_via/emit_xdr.h"

namespace san::rpcgen {
namespace {

const char kSource[] =
    "const MAX = 8;\n"
    "enum e { A = 1, B, C = MAX, D };\n"
    "typedef opaque dig[4];\n"
    "typedef dig dig2;\n"
    "struct n { int v; n *next; string s<MAX>; dig d; dig2 d2; hyper h<>; };\n"
    "union u switch (e k) { case A: n x; case B: void; };\n"
    "program P { version V { void NUL(void) = 0; n GET(u) = 1; string NAME(int, string) = 2; } = "
    "3; } = 0x100;\n";

struct Generated {
  std::string header, xdr, client, server, sample_client, sample_server, makefile;
};

Generated Generate(bool mt, bool newstyle, bool inetd = false,
                   std::vector<std::string> nettypes = {}) {
  Specification spec;
  Diagnostic error;
  EXPECT_TRUE(CompileText(kSource, "t.x", true, &spec, &error)) << error.ToString();
  CTypes types(spec);
  EmitOptions o;
  o.base = "t";
  o.header_name = "t.h";
  o.mt_safe = mt;
  o.newstyle = newstyle;
  o.inetd = inetd;
  o.closedown_seconds = inetd ? 120 : -1;
  o.nettypes = std::move(nettypes);
  EmitContext c{spec, types, o};
  return Generated{EmitHeader(c),       EmitXdr(c),          EmitClient(c),  EmitServer(c, true),
                   EmitSampleClient(c), EmitSampleServer(c), EmitMakefile(c)};
}

void ExpectHas(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "missing: " << part << "\n--- in ---\n" << text;
}

TEST(RpcgenViaEmit, HeaderTypes) {
  const Generated g = Generate(false, true);
  ExpectHas(g.header, "#ifndef _T_H_RPCGEN");
  ExpectHas(g.header, "#define MAX 8");
  ExpectHas(g.header, "\tB = 2,\n");
  ExpectHas(g.header, "\tD = (MAX) + 1,\n");
  ExpectHas(g.header, "typedef char dig[4];");
  ExpectHas(g.header, "typedef struct n n;\nstruct n {\n\tint v;\n\tn *next;\n\tchar *s;");
  ExpectHas(g.header, "\tstruct {\n\t\tu_int h_len;\n\t\tquad_t *h_val;\n\t} h;");
  ExpectHas(g.header, "\tunion {\n\t\tn x;\n\t} u_u;");
  ExpectHas(g.header, "extern bool_t xdr_dig (XDR *, dig);");
  ExpectHas(g.header, "extern bool_t xdr_dig2 (XDR *, dig2);");
  ExpectHas(g.header, "extern bool_t xdr_n (XDR *, n *);");
  ExpectHas(g.header, "#define P 0x100");
  ExpectHas(g.header, "#define GET 1");
  EXPECT_EQ(g.header.find("#define NUL"), g.header.find("#define NUL 0"));
  ExpectHas(g.header, "#include <rpcvia/rpcvia.h>");  // the via hook, behind RPCGEN_VIA_TRANSPORT
}

TEST(RpcgenViaEmit, XdrCalls) {
  const Generated g = Generate(false, true);
  ExpectHas(g.xdr, "xdr_pointer (xdrs, (char **)&objp->next, sizeof (n), (xdrproc_t) xdr_n)");
  ExpectHas(g.xdr, "xdr_string (xdrs, &objp->s, MAX)");
  ExpectHas(g.xdr, "xdr_dig (xdrs, objp->d)");
  ExpectHas(g.xdr, "xdr_dig2 (xdrs, objp->d2)");  // a typedef of a vector is still a vector
  ExpectHas(g.xdr, "xdr_array (xdrs, (char **)&objp->h.h_val, (u_int *) &objp->h.h_len, ~0,");
  ExpectHas(g.xdr, "xdr_opaque (xdrs, objp, 4)");
  ExpectHas(g.xdr, "xdr_enum (xdrs, (enum_t *) objp)");
  ExpectHas(g.xdr, "\tcase B:\n\t\tbreak;\n\tdefault:\n\t\treturn FALSE;");
  ExpectHas(g.xdr, "bool_t\nxdr_name_3_argument (XDR *xdrs, name_3_argument *objp)");
  ExpectHas(g.xdr, "xdr_string (xdrs, &objp->arg2, ~0)");
}

TEST(RpcgenViaEmit, DefaultSignatures) {
  const Generated g = Generate(false, false == true);
  ExpectHas(g.header, "extern n *get_3(u *, CLIENT *);");
  ExpectHas(g.header, "extern n *get_3_svc(u *, struct svc_req *);");
  ExpectHas(g.header, "extern void * nul_3(void *, CLIENT *);");
  ExpectHas(g.client, "static n clnt_res;");
  ExpectHas(g.server, "local = (char *(*)(char *, struct svc_req *)) get_3_svc;");
  ExpectHas(g.server, "svc_create (p_3, P, V, nettypes[i])");
  ExpectHas(g.server, "\"udp\", \"tcp\", NULL");
  ExpectHas(g.server, "\t\"via\",");
}

// -s via: the server file selects the transport itself, lists "via" once, and the Makefile
// template links librpcvia.
TEST(RpcgenViaEmit, DashSViaNeedsNoExtraFlags) {
  const Generated g = Generate(false, false, false, {"via", "udp"});
  ExpectHas(g.server, "#ifndef RPCGEN_VIA_TRANSPORT\n#define RPCGEN_VIA_TRANSPORT 1");
  EXPECT_LT(g.server.find("#define RPCGEN_VIA_TRANSPORT"), g.server.find("#include \"t.h\""));
  ExpectHas(g.server, "\t\"via\", \"udp\", NULL");
  EXPECT_EQ(g.server.find("\t\"via\",\n"), std::string::npos);  // not twice
  ExpectHas(g.makefile, "-DRPCGEN_VIA_TRANSPORT");
  ExpectHas(g.makefile, "LDLIBS += -lrpcvia -lsan -ltirpc");
  ExpectHas(g.sample_client, "\"via\");");
  const Generated plain = Generate(false, false);
  EXPECT_EQ(plain.makefile.find("rpcvia"), std::string::npos);
  EXPECT_EQ(plain.server.find("#define RPCGEN_VIA_TRANSPORT"), std::string::npos);
}

TEST(RpcgenViaEmit, MtAndNewstyleSignatures) {
  const Generated g = Generate(true, true);
  ExpectHas(g.header, "extern enum clnt_stat name_3(int, char *, char **, CLIENT *);");
  ExpectHas(g.header, "extern bool_t name_3_svc(int, char *, char **, struct svc_req *);");
  ExpectHas(g.header, "extern enum clnt_stat nul_3(void *, CLIENT *);");
  ExpectHas(g.header, "extern enum clnt_stat get_3(u, n *, CLIENT *);");
  ExpectHas(g.client, "name_3(int arg1, char *arg2, char **clnt_res, CLIENT *clnt)");
  ExpectHas(g.client, "arg.arg2 = arg2;");
  ExpectHas(g.server, "return (name_3_svc(argp->arg1, argp->arg2, result, rqstp));");
  ExpectHas(g.server, "p_3_freeresult (transp, _xdr_result, (caddr_t) &result)");
  ExpectHas(g.sample_server,
            "p_3_freeresult (SVCXPRT *transp, xdrproc_t xdr_result, caddr_t result)");
  ExpectHas(g.sample_client, "retval = name_3(name_3_arg1, name_3_arg2, &result_name_3, clnt);");
  ExpectHas(g.makefile, "TARGETS = t.h t_xdr.c t_clnt.c t_svc.c t_client.c t_server.c");
}

TEST(RpcgenViaEmit, ServerWithoutMain) {
  Specification spec;
  Diagnostic error;
  ASSERT_TRUE(CompileText(kSource, "t.x", true, &spec, &error)) << error.ToString();
  CTypes types(spec);
  EmitOptions o;
  o.header_name = "t.h";
  o.newstyle = true;
  EmitContext c{spec, types, o};
  const std::string with = EmitServer(c, true), without = EmitServer(c, false);
  ExpectHas(with, "static void\np_3(struct svc_req *rqstp, SVCXPRT *transp)");
  ExpectHas(with, "main (int argc, char **argv)");
  ExpectHas(without, "\nvoid\np_3(struct svc_req *rqstp, SVCXPRT *transp)");  // for the user's main
  EXPECT_EQ(without.find("main ("), std::string::npos);
}

TEST(RpcgenViaEmit, InetdMode) {
  const Generated g = Generate(false, true, /*inetd=*/true);
  ExpectHas(g.server, "getsockname (0, (struct sockaddr *)&saddr, &asize) == 0");
  ExpectHas(g.server, "svc_reg (transp, P, V, p_3, NULL)");
  ExpectHas(g.server, "#define _RPCSVC_CLOSEDOWN 120");
}

// --- the driver ---------------------------------------------------------------------------------

class RpcgenViaDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rpcgen_via_driver_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { ASSERT_EQ(system(("rm -rf " + dir_).c_str()), 0); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
  }
  std::string Read(const std::string& name) {
    std::ifstream in(dir_ + "/" + name);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  bool Exists(const std::string& name) { return access((dir_ + "/" + name).c_str(), F_OK) == 0; }
  int Run(std::vector<std::string> args, std::string* messages) {
    std::vector<const char*> argv = {"rpcgen_via"};
    for (std::string& a : args) argv.push_back(a.c_str());
    Options o;
    std::string error;
    if (!ParseOptions(static_cast<int>(argv.size()), argv.data(), &o, &error)) return 2;
    FILE* err = tmpfile();
    const int rc = RunCompiler(o, err);
    rewind(err);
    char buf[4096];
    messages->clear();
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, err)) > 0) messages->append(buf, n);
    fclose(err);
    return rc;
  }
  std::string dir_;
};

TEST_F(RpcgenViaDriver, GeneratesEveryFileBesideTheInput) {
  Write("t.x", kSource);
  std::string messages;
  ASSERT_EQ(Run({"-N", "-a", dir_ + "/t.x"}, &messages), 0) << messages;
  for (const char* f :
       {"t.h", "t_xdr.c", "t_clnt.c", "t_svc.c", "t_client.c", "t_server.c", "Makefile.t"}) {
    EXPECT_TRUE(Exists(f)) << f;
  }
  ExpectHas(Read("t_xdr.c"), "#include \"t.h\"");
}

TEST_F(RpcgenViaDriver, PreprocessorDefinesAndPassthrough) {
  Write("p.x", "#ifdef RPC_HDR\n%/* header only */\n#endif\n%#define PASSED 1\nconst K = VALUE;\n");
  std::string messages;
  ASSERT_EQ(Run({"-DVALUE=42", dir_ + "/p.x"}, &messages), 0) << messages;
  ExpectHas(Read("p.h"), "/* header only */");
  ExpectHas(Read("p.h"), "#define K 42");
  EXPECT_EQ(Read("p_xdr.c").find("header only"), std::string::npos);
  ExpectHas(Read("p_xdr.c"), "#define PASSED 1");
}

TEST_F(RpcgenViaDriver, ErrorsNameTheFileAndWriteNothing) {
  Write("bad.x", "const A = 1;\n\nstruct s {\n\tint a;\n\tstring b;\n};\n");
  Write("bad.h", "precious");
  std::string messages;
  EXPECT_EQ(Run({dir_ + "/bad.x"}, &messages), 1);
  ExpectHas(messages, dir_ + "/bad.x:5:10: error: a string must be declared with <>");
  EXPECT_EQ(Read("bad.h"), "precious");
  EXPECT_FALSE(Exists("bad_xdr.c"));
}

TEST_F(RpcgenViaDriver, MissingInputAndIncludedFilePositions) {
  std::string messages;
  EXPECT_EQ(Run({dir_ + "/none.x"}, &messages), 1);
  ExpectHas(messages, "cannot open");
  Write("inc.x", "struct ok { int a; };\nstruct broken { int };\n");
  Write("main.x", "const X = 1;\n#include \"inc.x\"\n");
  EXPECT_EQ(Run({"-h", "-o", dir_ + "/out.h", dir_ + "/main.x"}, &messages), 1);
  ExpectHas(messages, "inc.x:2:21: error:");
}

TEST_F(RpcgenViaDriver, PreprocessorFailureIsReported) {
  Write("m.x", "#include \"nowhere.x\"\n");
  std::string messages;
  EXPECT_EQ(Run({dir_ + "/m.x"}, &messages), 1);
  ExpectHas(messages, "the C preprocessor failed on");
  EXPECT_FALSE(Exists("m.h"));
  EXPECT_EQ(Run({"-Y", dir_ + "/no-such-dir", dir_ + "/m.x"}, &messages), 1);
  ExpectHas(messages, "cannot run the C preprocessor");
}

TEST_F(RpcgenViaDriver, SamplesAreNeverOverwritten) {
  Write("t.x", kSource);
  Write("t_server.c", "my code");
  std::string messages;
  ASSERT_EQ(Run({"-N", "-a", dir_ + "/t.x"}, &messages), 0) << messages;
  EXPECT_EQ(Read("t_server.c"), "my code");
  ExpectHas(messages, "already exists");
}

}  // namespace
}  // namespace san::rpcgen
