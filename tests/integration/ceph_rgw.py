"""A real single-node Ceph cluster with a RADOS Gateway (S3) for the tests.

``CephCluster(workdir).start()`` runs Debian's Ceph 16.2 daemons in the
foreground as children of this process, everything under @workdir (no
systemd, nothing in /etc or /var/lib/ceph):

- 1 ceph-mon (msgr2 only, on a free 127.0.0.1 port), 1 ceph-mgr,
- 1 BlueStore ceph-osd on a sparse file (``osd0.block``, 8 GiB apparent),
- 1 radosgw (beast frontend on a free 127.0.0.1 port),
- an S3 user made with ``radosgw-admin user create``.

Memory and threads are cut down for a small shared machine (osd_memory_target
1 GiB, small RocksDB and RGW thread pools, pools of 8 PGs, replication 1).
cephx is on, with one keyring under @workdir holding every daemon's key
(imported by the mon's mkfs); S3 requests are SigV4-authenticated by RGW.

``stop()`` SIGKILLs every daemon (they hold nothing worth a clean shutdown)
and removes @workdir. The daemons also die with this process
(PR_SET_PDEATHSIG), and a tiny reaper removes @workdir when this process
is gone, so a pytest killed by a timeout leaves nothing behind either.

The session fixture ``rgw_cluster`` (in s3_backends.py) starts one cluster
per pytest session; ``CEPH_BIN_DIR`` selects where the ceph binaries live
(default /usr/bin).
"""

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

CEPH_BIN = os.environ.get("CEPH_BIN_DIR", "/usr/bin")
BINARIES = ("ceph-mon", "ceph-mgr", "ceph-osd", "radosgw", "radosgw-admin",
            "ceph", "monmaptool", "ceph-authtool")
BRINGUP_TIMEOUT = 180.0
BLOCK_SIZE = 8 << 30  # apparent size of the OSD's sparse file
RGW_ACCESS_KEY = "ECFSRGWACCESSKEY0001"
RGW_SECRET_KEY = "ecfs-rgw-secret-key-0123456789abcdefghij"

_PR_SET_PDEATHSIG = 1

# every entity's key, in one keyring that ceph-mon --mkfs imports
KEYS = [
    ("mon.", [("mon", "allow *")]),
    ("client.admin", [("mon", "allow *"), ("osd", "allow *"),
                      ("mgr", "allow *"), ("mds", "allow *")]),
    ("mgr.x", [("mon", "allow profile mgr"), ("osd", "allow *"),
               ("mds", "allow *")]),
    ("osd.0", [("mon", "allow profile osd"), ("mgr", "allow profile osd"),
               ("osd", "allow *")]),
    ("client.rgw.a", [("mon", "allow rw"), ("osd", "allow rwx"),
                      ("mgr", "allow rw")]),
]


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    """In the child before exec: SIGKILL when the parent goes away, and the
    default SIGINT (a runner started with `cmd &` ignores it)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except OSError:
        pass
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def missing_binaries():
    return [b for b in BINARIES
            if not os.access(os.path.join(CEPH_BIN, b), os.X_OK)]


class CephError(RuntimeError):
    pass


class CephCluster:
    """One mon, one mgr, one BlueStore OSD and one radosgw (module doc)."""

    def __init__(self, workdir):
        self.dir = os.path.abspath(str(workdir))
        self.conf = os.path.join(self.dir, "ceph.conf")
        self.logdir = os.path.join(self.dir, "log")
        self.fsid = str(uuid.uuid4())
        self.mon_port = _free_port()
        self.rgw_port = _free_port()
        self.endpoint = "http://127.0.0.1:%d" % self.rgw_port
        self.access_key = RGW_ACCESS_KEY
        self.secret_key = RGW_SECRET_KEY
        self.procs = {}          # name -> Popen
        self.timings = {}        # step -> seconds
        self.version = None
        self._reaper = None

    # -- helpers ---------------------------------------------------------

    def _env(self):
        env = dict(os.environ)
        env["CEPH_CONF"] = self.conf
        return env

    def _run(self, argv, timeout=60, check=True):
        argv = [os.path.join(CEPH_BIN, argv[0])] + list(argv[1:])
        r = subprocess.run(argv, capture_output=True, env=self._env(),
                           timeout=timeout, stdin=subprocess.DEVNULL,
                           preexec_fn=_die_with_parent)
        if check and r.returncode != 0:
            raise CephError("%s exited %d:\n%s%s" % (
                " ".join(argv), r.returncode,
                r.stdout.decode(errors="replace"),
                r.stderr.decode(errors="replace")))
        return r

    def ceph(self, *args, timeout=30):
        """Runs the `ceph` CLI against this cluster; returns stdout."""
        r = self._run(["ceph", "--connect-timeout", str(int(timeout))]
                      + list(args), timeout=timeout + 10)
        return r.stdout.decode()

    def _daemon(self, name, argv):
        out = open(os.path.join(self.logdir, name + ".out"), "ab")
        try:
            p = subprocess.Popen(
                [os.path.join(CEPH_BIN, argv[0])] + list(argv[1:]),
                stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                env=self._env(), preexec_fn=_die_with_parent)
        finally:
            out.close()
        self.procs[name] = p
        return p

    def _check_alive(self):
        for name, p in self.procs.items():
            if p.poll() is not None:
                raise CephError("%s exited with %s during bring-up"
                                % (name, p.returncode))

    def _wait(self, what, pred, timeout):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                if pred():
                    return
            except (CephError, subprocess.TimeoutExpired, OSError,
                    ValueError) as e:
                last = e
            time.sleep(0.25)
        raise CephError("timed out after %.0fs waiting for %s (last: %s)"
                        % (timeout, what, last))

    def _step(self, name, t0):
        self.timings[name] = round(time.monotonic() - t0, 1)

    # -- bring-up --------------------------------------------------------

    def write_conf(self):
        d = self.dir
        conf = """\
[global]
fsid = {fsid}
mon_host = [v2:127.0.0.1:{mon_port}]
public_addr = 127.0.0.1
ms_bind_msgr1 = false
ms_bind_ipv6 = false
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
run_dir = {d}/run
admin_socket = {d}/run/$name.asok
pid_file = {d}/run/$name.pid
log_file = {d}/log/$name.log
crash_dir = {d}/crash
mon_cluster_log_file = {d}/log/cluster.log
log_to_stderr = false
err_to_stderr = true
keyring = {d}/keyring
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
osd_crush_chooseleaf_type = 0
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
mon_allow_pool_delete = true
ms_async_op_threads = 1
ms_bind_retry_count = 2
ms_bind_retry_delay = 1
rocksdb_cache_size = 33554432

[mon]
mon_data = {d}/mon.$id
mon_memory_target = 268435456

[mgr]
mgr_data = {d}/mgr.$id
mgr_initial_modules = iostat

[osd]
osd_data = {d}/osd$id
osd_objectstore = bluestore
bluestore_block_path = {d}/osd$id.block
bluestore_block_size = {block_size}
bluestore_block_create = true
bluestore_cache_autotune = false
bluestore_cache_size = 134217728
osd_memory_target = 1073741824
osd_memory_base = 268435456
osd_memory_cache_min = 67108864
osd_op_num_shards = 1
osd_op_num_threads_per_shard = 2
osd_max_backfills = 1
osd_scrub_auto_repair = false
osd_scrub_begin_hour = 0
osd_scrub_end_hour = 0
osd_scrub_min_interval = 31536000
osd_scrub_max_interval = 31536000
osd_deep_scrub_interval = 31536000
bdev_enable_discard = false

[client.rgw.a]
rgw_data = {d}/rgw.a
rgw_frontends = beast endpoint=127.0.0.1:{rgw_port} tcp_nodelay=1
rgw_thread_pool_size = 32
rgw_dns_name = localhost
rgw_enable_usage_log = false
rgw_gc_processor_period = 60
rgw_lc_debug_interval = 0
rgw_max_concurrent_requests = 256
""".format(fsid=self.fsid, mon_port=self.mon_port, rgw_port=self.rgw_port,
           d=d, block_size=BLOCK_SIZE)
        with open(self.conf, "w") as f:
            f.write(conf)

    def start(self):
        t_all = time.monotonic()
        miss = missing_binaries()
        if miss:
            raise CephError("missing ceph binaries in %s: %s (run "
                            "scripts/install-deps)" % (CEPH_BIN,
                                                       " ".join(miss)))
        for sub in ("run", "log", "crash", "mon.a", "mgr.x", "osd0",
                    "rgw.a"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        self._start_reaper()
        self.write_conf()
        self.version = self._run(["ceph", "--version"]).stdout.decode() \
            .split("(")[0].replace("ceph version", "").strip()

        t0 = time.monotonic()
        keyring = os.path.join(self.dir, "keyring")
        for i, (name, caps) in enumerate(KEYS):
            argv = ["ceph-authtool", keyring, "--gen-key", "-n", name]
            if i == 0:
                argv.insert(2, "--create-keyring")
            for svc, cap in caps:
                argv += ["--cap", svc, cap]
            self._run(argv)
        monmap = os.path.join(self.dir, "monmap")
        self._run(["monmaptool", "--create", "--fsid", self.fsid,
                   "--addv", "a", "[v2:127.0.0.1:%d]" % self.mon_port,
                   monmap])
        self._run(["ceph-mon", "--mkfs", "-i", "a", "--monmap", monmap,
                   "--keyring", keyring])
        self._daemon("mon.a", ["ceph-mon", "-f", "-i", "a"])
        self._wait("the monitor", lambda: "HEALTH" in self.ceph(
            "health", timeout=5), 60)
        self._step("mon", t0)

        t0 = time.monotonic()
        self._daemon("mgr.x", ["ceph-mgr", "-f", "-i", "x"])
        # the BlueStore device: a sparse file (bluestore links osd0/block
        # to it)
        with open(os.path.join(self.dir, "osd0.block"), "wb") as f:
            f.truncate(BLOCK_SIZE)
        osd_uuid = str(uuid.uuid4())
        osd_id = self.ceph("osd", "new", osd_uuid).strip()
        if osd_id != "0":
            raise CephError("ceph osd new gave id %r, want 0" % osd_id)
        self._run(["ceph-osd", "-i", "0", "--mkfs", "--osd-uuid", osd_uuid],
                  timeout=120)
        self._step("osd_mkfs", t0)
        t0 = time.monotonic()
        self._daemon("osd.0", ["ceph-osd", "-f", "-i", "0"])
        self._wait("osd.0 up", self._osd_up, 90)
        self._step("osd_up", t0)

        t0 = time.monotonic()
        self._daemon("client.rgw.a", ["radosgw", "-f", "-n", "client.rgw.a"])
        self._wait("radosgw on %s" % self.endpoint, self._rgw_answers,
                   BRINGUP_TIMEOUT)
        self._step("rgw", t0)

        t0 = time.monotonic()
        self._run(["radosgw-admin", "-n", "client.rgw.a", "user", "create",
                   "--uid", "ecfs", "--display-name", "ecfs tests",
                   "--access-key", self.access_key,
                   "--secret-key", self.secret_key], timeout=60)
        self._step("user", t0)
        self.timings["total"] = round(time.monotonic() - t_all, 1)
        return self

    def _osd_up(self):
        st = json.loads(self.ceph("osd", "stat", "--format", "json",
                                  timeout=5))
        st = st.get("osdmap", st)
        return st.get("num_up_osds") == 1 and st.get("num_in_osds") == 1

    def _rgw_answers(self):
        try:
            with urllib.request.urlopen(self.endpoint + "/", timeout=2) as r:
                return r.status == 200
        except urllib.error.HTTPError as e:
            return e.code < 500
        except OSError:
            return False

    def _start_reaper(self):
        """A detached shell that removes the work dir once this process is
        gone (the daemons die with it through PR_SET_PDEATHSIG)."""
        script = ('while kill -0 %d 2>/dev/null; do sleep 2; done; '
                  'sleep 1; rm -rf -- "$0"' % os.getpid())
        self._reaper = subprocess.Popen(
            ["sh", "-c", script, self.dir], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)

    # -- state and teardown ----------------------------------------------

    def alive(self):
        return all(p.poll() is None for p in self.procs.values())

    def rgw_restart(self, down_s=0.0):
        """Stops radosgw (SIGTERM, then SIGKILL) and starts it again on the
        same port; the cluster's data stays."""
        self.rgw_stop()
        if down_s:
            time.sleep(down_s)
        self.rgw_start()

    def rgw_stop(self):
        p = self.procs.get("client.rgw.a")
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)

    def rgw_start(self):
        self._daemon("client.rgw.a", ["radosgw", "-f", "-n", "client.rgw.a"])
        self._wait("radosgw on %s" % self.endpoint, self._rgw_answers, 60)

    def logs(self, tail=20000):
        """Every daemon's log (the last @tail bytes of each), for failures."""
        out = []
        names = sorted(os.listdir(self.logdir)) if os.path.isdir(
            self.logdir) else []
        for n in names:
            p = os.path.join(self.logdir, n)
            try:
                with open(p, "rb") as f:
                    f.seek(0, 2)
                    size = f.tell()
                    f.seek(max(0, size - tail))
                    text = f.read().decode("utf-8", "replace")
            except OSError:
                continue
            out.append("---- %s (%d bytes, last %d) ----\n%s"
                       % (p, size, min(size, tail), text))
        return "\n".join(out)

    def stop(self, remove=True):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
        for p in self.procs.values():
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                pass
        # radosgw-admin or ceph CLIs of ours are waited for by _run; any
        # other process still holding files under the dir is not ours
        if remove:
            shutil.rmtree(self.dir, ignore_errors=True)
        if self._reaper is not None and self._reaper.poll() is None:
            self._reaper.kill()
            self._reaper.wait(5)


if __name__ == "__main__":
    # by hand: python3 ceph_rgw.py [DIR] -> brings a cluster up, prints the
    # timings, does one PUT/GET with boto3, tears it down
    import tempfile
    wd = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(
        prefix="ceph-")
    c = CephCluster(wd)
    try:
        c.start()
        print("ceph %s up in %s" % (c.version, c.timings))
        import boto3
        s3 = boto3.client("s3", endpoint_url=c.endpoint,
                          aws_access_key_id=c.access_key,
                          aws_secret_access_key=c.secret_key,
                          region_name="us-east-1")
        s3.create_bucket(Bucket="smoke")
        s3.put_object(Bucket="smoke", Key="k", Body=b"hello")
        assert s3.get_object(Bucket="smoke", Key="k")["Body"].read() == \
            b"hello"
        print("PUT/GET ok")
    except Exception:
        print(c.logs(4000))
        raise
    finally:
        c.stop()
