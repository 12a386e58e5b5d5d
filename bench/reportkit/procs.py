"""Processes of one benchmark run: start (pinned, with an environment), wait with a deadline,
stop, and the CPU each used.

Every process is started in a session of its own, so stopping it stops what it forked (nginx's
worker, a daemon's sessions). Its CPU (user + system, all threads and every child it reaped) comes
from wait4(2) when it is reaped: the figure the report puts beside each latency and rate.
Nothing here sleeps unbounded: every wait has a deadline, after which the process group is killed.
Not thread-safe; one driver thread owns its Procs.
"""
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time


class Failed(Exception):
    """A run that did not work (hung, crashed, wrong bytes, not on shm): its row is FAILED."""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port):
    """Whether something listens on TCP port `port`, read from /proc (no probe connection, which
    would count as a kernel-TCP connection in a SAN server's SAN_REPORT line)."""
    want = ":%04X" % port
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[1].endswith(want) and fields[3] == "0A":
                        return True
        except OSError:
            pass
    return False


def wait_listening(port, proc, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if listening(port):
            return
        if proc.poll_exited():
            raise Failed("%s exited before listening on port %d" % (proc.name, port))
        time.sleep(0.02)
    raise Failed("%s did not listen on port %d within %.0f s" % (proc.name, port, timeout))


def pin_prefix(cpu):
    """taskset prefix pinning to `cpu`, when there are two CPUs or more and taskset exists."""
    if cpu is None or (os.cpu_count() or 1) < 2 or not shutil.which("taskset"):
        return []
    return ["taskset", "-c", str(cpu)]


class Proc:
    """One started program. Its stdout and stderr go to the file `log`, or with `capture` to an
    unnamed file read into .output when it is reaped (a file, not a pipe: the process is reaped
    by wait4 here, for its CPU, never by Popen)."""

    def __init__(self, argv, env=None, cpu=None, log=None, capture=False, cwd=None):
        self.name = os.path.basename(argv[0])
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.capture = tempfile.TemporaryFile() if capture else None
        out = self.capture or (open(log, "ab") if log else subprocess.DEVNULL)
        try:
            self.p = subprocess.Popen(pin_prefix(cpu) + list(argv), env=full_env, stdout=out,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
                                      start_new_session=True)
        except OSError as e:  # not installed: the row fails, the report goes on
            raise Failed("%s: %s" % (argv[0], e.strerror))
        if out is not subprocess.DEVNULL and out is not self.capture:
            out.close()
        self.started = time.monotonic()
        self.wall_s = None
        self.cpu_s = None
        self.status = None
        self.output = b""

    def _reap(self, flags):
        pid, status, usage = os.wait4(self.p.pid, flags)
        if pid == 0:
            return False
        self.wall_s = time.monotonic() - self.started
        self.cpu_s = usage.ru_utime + usage.ru_stime
        self.status = os.waitstatus_to_exitcode(status)
        self.p.returncode = self.status  # reaped here, not by Popen
        if self.capture:
            self.capture.seek(0)
            self.output = self.capture.read()
            self.capture.close()
        return True

    def poll_exited(self):
        return self.status is not None or self._reap(os.WNOHANG)

    def wait(self, timeout):
        """Waits for the program to end by itself; past `timeout` s it is killed and Failed."""
        deadline = time.monotonic() + timeout
        while not self.poll_exited():
            if time.monotonic() > deadline:
                self.stop(grace=1)
                raise Failed("%s did not finish within %.0f s" % (self.name, timeout))
            time.sleep(0.005)
        return self.status

    def stop(self, sig=signal.SIGTERM, grace=5.0):
        """Signals the process group and reaps the process (SIGKILL after `grace` s)."""
        if self.status is None:
            try:
                os.killpg(self.p.pid, sig)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + grace
            while not self.poll_exited():
                if time.monotonic() > deadline:
                    os.killpg(self.p.pid, signal.SIGKILL)
                    self._reap(0)
                    break
                time.sleep(0.01)
        try:  # what it left in its group (a worker whose master went first)
            os.killpg(self.p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return self.status


def become_subreaper():
    """Makes this process the reaper of its descendants' orphans (prctl PR_SET_CHILD_SUBREAPER),
    so that a server's grandchild whose parent exits first (vsftpd's session processes) is
    reaped here with its CPU, not by init with it lost. Best effort: False where it fails."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def reap_orphans(grace=0.2):
    """Reaps the orphans handed to this process (see become_subreaper) and returns their CPU
    seconds. Called after a run's own processes were reaped, so only orphans are left."""
    total, deadline = 0.0, time.monotonic() + grace
    while True:
        try:
            pid, _, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return total
        if pid == 0:
            if time.monotonic() > deadline:
                return total
            time.sleep(0.01)
            continue
        total += usage.ru_utime + usage.ru_stime


def run(argv, timeout, env=None, cpu=None, cwd=None):
    """Runs a program to its end and returns the Proc (output in .output, CPU in .cpu_s)."""
    p = Proc(argv, env=env, cpu=cpu, capture=True, cwd=cwd)
    p.wait(timeout)
    return p
