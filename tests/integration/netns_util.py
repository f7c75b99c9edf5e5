"""Network namespaces of our own for many-client tests and benchmarks.

``NetnsLab(n)`` creates n network namespaces ``ecfs-PID-I``, each joined to
the host by a veth pair (host end ``ePIDhI``, namespace end ``ePIDnI``) on a
/30 of its own inside 10.213.A.0/24, where A is the first third octet no
host interface uses yet (picked under a lock file, so runs side by side get
different ones):

    pair I: host end 10.213.A.(4I+1)/30, namespace end 10.213.A.(4I+2)/30

``.server_addr`` is the host end of pair 0: a server listens there (one
address, never 0.0.0.0); every other namespace reaches it through a /32
route via its own host end, so each client's packets cross its own veth
(the host accepts them on any interface: the address is local).

``.wrap(i, argv)`` runs argv in namespace i's network only (``nsenter
--net``: same mount namespace, so a FUSE mount made there is visible
here). ``.close()`` removes the veths and namespaces; it also runs at exit,
and a new lab first removes the namespaces and veths of runs whose process
is gone (a test killed by a timeout leaves them behind otherwise).

Needs root (CAP_NET_ADMIN), ``ip`` (iproute2) and ``nsenter``
(util-linux); ``available()`` says why not when it cannot work.
"""

import atexit
import fcntl
import os
import re
import shutil
import subprocess

PREFIX = "10.213"
LOCK = "/tmp/ecfs-netns.lock"


def _ip(*args, check=True, ns=None):
    argv = ["ip"] + (["-n", ns] if ns else []) + list(args)
    r = subprocess.run(argv, capture_output=True, timeout=20)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(argv),
                                       r.stderr.decode(errors="replace")))
    return r.stdout.decode()


def available():
    """None when namespaces can be made here, else the reason."""
    if os.geteuid() != 0:
        return "needs root for ip netns"
    for tool in ("ip", "nsenter"):
        if shutil.which(tool) is None:
            return "needs %s" % tool
    return None


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def sweep_stale():
    """Removes namespaces and host veths of lab runs whose process died."""
    for line in _ip("netns", "list", check=False).splitlines():
        m = re.match(r"ecfs-(\d+)-\d+\b", line)
        if m and not _pid_alive(int(m.group(1))):
            _ip("netns", "del", line.split()[0], check=False)
    for line in _ip("-o", "link", "show", check=False).splitlines():
        m = re.match(r"\d+: (e(\d+)h\d+)[@:]", line)
        if m and not _pid_alive(int(m.group(2))):
            _ip("link", "del", m.group(1), check=False)


class NetnsLab:
    """n namespaces with a veth pair each (module doc)."""

    def __init__(self, n):
        if not 1 <= n <= 32:
            raise ValueError("1..32 namespaces")
        self.n = n
        self.pid = os.getpid()
        self.names = ["ecfs-%d-%d" % (self.pid, i) for i in range(n)]
        self.host_if = ["e%dh%d" % (self.pid, i) for i in range(n)]
        self.ns_if = ["e%dn%d" % (self.pid, i) for i in range(n)]
        self.created_ns, self.created_if = [], []
        self.octet = None
        atexit.register(self.close)
        with open(LOCK, "a") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX)
            try:
                sweep_stale()
                self.octet = self._free_octet()
                self._build()
            except BaseException:
                self.close()
                raise
            finally:
                fcntl.flock(lk, fcntl.LOCK_UN)

    def _free_octet(self):
        used = set()
        for m in re.finditer(r"inet %s\.(\d+)\." % re.escape(PREFIX),
                             _ip("-4", "-o", "addr", "show")):
            used.add(int(m.group(1)))
        for a in range(1, 255):
            if a not in used:
                return a
        raise RuntimeError("no free %s.A.0/24 left" % PREFIX)

    def host_addr(self, i):
        return "%s.%d.%d" % (PREFIX, self.octet, 4 * i + 1)

    def client_addr(self, i):
        return "%s.%d.%d" % (PREFIX, self.octet, 4 * i + 2)

    @property
    def server_addr(self):
        return self.host_addr(0)

    def _build(self):
        for i in range(self.n):
            ns, hif, nif = self.names[i], self.host_if[i], self.ns_if[i]
            _ip("netns", "add", ns)
            self.created_ns.append(ns)
            _ip("link", "add", hif, "type", "veth", "peer", "name", nif)
            self.created_if.append(hif)
            _ip("link", "set", nif, "netns", ns)
            _ip("addr", "add", self.host_addr(i) + "/30", "dev", hif)
            _ip("link", "set", hif, "up")
            _ip("link", "set", "lo", "up", ns=ns)
            _ip("addr", "add", self.client_addr(i) + "/30", "dev", nif, ns=ns)
            _ip("link", "set", nif, "up", ns=ns)
            if i:
                _ip("route", "add", self.server_addr + "/32", "via",
                    self.host_addr(i), "dev", nif, ns=ns)

    def wrap(self, i, argv):
        """argv run in namespace i's network (same mounts, same files)."""
        return ["nsenter", "--net=/run/netns/" + self.names[i], "--"] + \
            list(argv)

    def established(self, i, port):
        """(local, peer) address pairs of namespace i's TCP connections to
        the server's @port."""
        r = subprocess.run(self.wrap(i, ["ss", "-tnH", "state", "established",
                                         "dst", "%s:%d" % (self.server_addr,
                                                           port)]),
                           capture_output=True, timeout=10)
        out = []
        for line in r.stdout.decode().splitlines():
            f = line.split()
            if len(f) >= 4:
                out.append((f[-2].rsplit(":", 1)[0], f[-1].rsplit(":", 1)[0]))
        return out

    def close(self):
        for hif in self.created_if:
            _ip("link", "del", hif, check=False)
        for ns in self.created_ns:
            _ip("netns", "del", ns, check=False)
        self.created_if, self.created_ns = [], []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
