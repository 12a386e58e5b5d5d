"""FTP: ftp_client against ftpd with the data path over SAN, against the same pair on kernel
TCP (SAN_PROVIDER=off), and against vsftpd on kernel TCP with the same client, for get and put
of one file on tmpfs. The figure is the client's wall time from exec to exit (connect, login,
transfer, the 226 reply and QUIT included: what a user waits for), timed here with
microseconds; cp of the same file is timed the same way for scale. Every copy is compared with
its source byte for byte, and a SAN run must show the file's bytes on shm in SAN_REPORT.
"""
import filecmp
import os
import pwd
import shutil
import subprocess

from .pair import run_pair
from .procs import Failed, free_port, run as run_prog
from .results import interleave

SECTION = "FTP (ftp_client + ftpd, SAN data path, vs kernel TCP and vsftpd)"
SIZES = (19090223, 145864380)
TCP_OFF = {"SAN_PROVIDER": "off"}

VSFTPD_CONF = """listen=YES
listen_ipv6=NO
background=NO
listen_address=127.0.0.1
listen_port={port}
anonymous_enable=YES
local_enable=NO
no_anon_password=YES
anon_root={root}
write_enable=YES
anon_upload_enable=YES
anon_umask=022
connect_from_port_20=NO
seccomp_sandbox=NO
isolate=NO
isolate_network=NO
secure_chroot_dir={empty}
xferlog_enable=NO
"""


class Site:
    """The files, the accounts and the servers' command lines, made once per report."""

    def __init__(self, ctx, sizes):
        self.ctx = ctx
        self.root = os.path.join(ctx.tmp, "ftp-root")
        self.local = os.path.join(ctx.tmp, "ftp-local")
        for d in (self.root, os.path.join(self.root, "up"), self.local,
                  os.path.join(ctx.tmp, "ftp-empty")):
            os.makedirs(d, exist_ok=True)
        os.chmod(self.root, 0o755)
        for s in sizes:
            with open(os.path.join(self.root, "f%d" % s), "wb") as f:
                f.write(os.urandom(s))
            os.chmod(os.path.join(self.root, "f%d" % s), 0o644)
        hash_ = subprocess.run(["openssl", "passwd", "-6", "bench"], capture_output=True,
                               text=True).stdout.strip()
        self.users = os.path.join(ctx.tmp, "ftp-users")
        with open(self.users, "w") as f:
            f.write("bench:%s:%s:rw\n" % (hash_, self.root))
        self.vsftpd = shutil.which("vsftpd") or (
            "/usr/sbin/vsftpd" if os.access("/usr/sbin/vsftpd", os.X_OK) else None)
        try:
            os.chown(os.path.join(self.root, "up"), pwd.getpwnam("ftp").pw_uid, -1)
        except (KeyError, PermissionError):
            self.vsftpd = None  # anonymous upload needs the ftp user and root

    def ftpd(self, port):
        return [self.ctx.bin("ftpd"), "-D", "--listen-address", "127.0.0.1", "--port", str(port),
                "--users-file", self.users, "--login-fail-delay-ms", "0", "--chroot=no"]

    def vsftpd_argv(self, port):
        conf = os.path.join(self.ctx.tmp, "vsftpd-%d.conf" % port)
        with open(conf, "w") as f:
            f.write(VSFTPD_CONF.format(port=port, root=self.root,
                                       empty=os.path.join(self.ctx.tmp, "ftp-empty")))
        return [self.vsftpd, conf]

    def client(self, url_base, size, op):
        name = "f%d" % size
        if op == "get":
            return [self.ctx.bin("ftp_client"), "-v", "--timeout", "20000", url_base + "/" + name,
                    "-o", os.path.join(self.local, name)]
        return [self.ctx.bin("ftp_client"), "-v", "--timeout", "20000", "--put",
                os.path.join(self.root, name), url_base + "/up/" + name]

    def copy_path(self, size, op):
        name = "f%d" % size
        return os.path.join(self.local if op == "get" else os.path.join(self.root, "up"), name)

    def clear(self, size, op):
        if os.path.exists(self.copy_path(size, op)):
            os.unlink(self.copy_path(size, op))

    def check(self, size, op):
        got = self.copy_path(size, op)
        if not filecmp.cmp(os.path.join(self.root, "f%d" % size), got, shallow=False):
            raise Failed("the %s copy differs from its source" % op)


def on_shm(output, _):
    """ftp_client -v says where each connection ran (san_getinfo)."""
    for what in ("control", "data"):
        if "--- %s connection: shm" % what not in output:
            raise Failed("ftp_client -v does not show its %s connection on shm" % what)


def run(ctx, results):
    sizes = SIZES[:1] if ctx.quick else SIZES
    site = Site(ctx, sizes)
    plans = [("ftpd", "ftpd SAN vs ftpd TCP")]
    if site.vsftpd:
        plans.append(("vsftpd", "ftpd SAN vs vsftpd"))
    for size in sizes:
        for op in ("get", "put"):
            for peer, label in plans:
                name = "%s %.0f MB (%s)" % (op, size / 1e6, label)

                def measure(transport, mode, run_no, size=size, op=op, peer=peer, name=name):
                    port = free_port()
                    vs = transport == "tcp" and peer == "vsftpd"
                    server = site.vsftpd_argv(port) if vs else site.ftpd(port)
                    user = "anonymous:x" if vs else "bench:bench"
                    client = site.client("ftp://%s@127.0.0.1:%d" % (user, port), size, op)
                    site.clear(size, op)
                    try:
                        r = run_pair(ctx, "ftp", transport, mode, server, client, port, 60,
                                     min_bytes=size, preload=False, tcp_env=TCP_OFF,
                                     upgraded=1, settle_s=0.2, check=on_shm if transport == "san" else None)
                        site.check(size, op)
                    finally:
                        site.clear(size, op)
                    return [(name, "wall time", "ms", False, r.wall_s * 1e3,
                             r.cpu_s / (size / 1e9), "s/GB",
                             r.verified + "; ftp_client -v: control and data on shm; "
                             "file compared")]

                interleave(results, SECTION, ctx.runs, ("default",), measure,
                           lambda mode, name=name: [(name, "wall time", "ms", False, "s/GB")])
    cp_note(ctx, results, site, sizes)
    results.note(SECTION, "wall time: exec of ftp_client to its exit (after the 226 reply and "
                 "QUIT), microsecond clock. CPU: client + server (daemon and the session it "
                 "reaped) per GB. vsftpd is anonymous with the same ftp_client on kernel TCP; its "
                 "session processes that outlive their parent are reaped by the driver (a child "
                 "subreaper) and counted with the server.")


def cp_note(ctx, results, site, sizes):
    for size in sizes:
        src = os.path.join(site.root, "f%d" % size)
        dst = os.path.join(site.local, "cp")
        walls = []
        for _ in range(max(ctx.runs, 3)):
            p = run_prog(["cp", src, dst], 60, cpu=1)
            walls.append(p.wall_s * 1e3)
            os.unlink(dst)
        walls.sort()
        results.note(SECTION, "cp of the %.0f MB file on tmpfs, timed the same way (exec to "
                     "exit): %.1f ms median [%.1f..%.1f]" % (size / 1e6, walls[len(walls) // 2],
                                                             walls[0], walls[-1]))
