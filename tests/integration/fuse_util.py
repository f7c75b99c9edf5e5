"""Fixtures and helpers for the ecfs FUSE client tests (test_fuse_*.py).

- ``Mount``: one ``bin/ecfs`` mount (daemon mode, log file in the test dir)
  with ``.stats()`` (the counters of MOUNT/.ecfs-stats as a dict),
  ``.unmount()`` (fusermount3 -u, falling back to a lazy unmount) and
  ``.log_text()``.
- ``ecfs_mount``: factory fixture ``ecfs_mount(endpoint, bucket, opts=None,
  access_key=..., secret_key=..., prefix=None, env=None)`` -> Mount; every
  mount and every ecfs process is gone at teardown.
- ``s3rver``: a second S3 server (npm's s3rver, installed by the test into
  build/node/ when missing; skipped only if npm cannot install it), with
  ``.endpoint``, ``.client()``, ``.stop()``.
- ``mount_of(server, ecfs_mount, bucket, **kw)``: a mount of @bucket on
  @server with its keys; ``client_bucket(srv)``: (boto3 client, fresh
  bucket) on a storaged.
- ``upload_tree(client, bucket, root, prefix="")``: uploads a local tree.
- ``make_tree(root)``: writes an ImageFolder-like tree with nested dirs,
  0-byte and multi-MiB files, names with spaces and unicode.
"""

import hashlib
import os
import random
import shutil
import signal
import subprocess
import time
import uuid

import pytest

from conftest import BIN_DIR, REPO, boto3_client, free_port, http_status

ECFS = os.path.join(BIN_DIR, "ecfs")
NODE_DIR = os.path.join(REPO, "build", "node")
S3RVER_JS = os.path.join(NODE_DIR, "node_modules", "s3rver", "bin",
                         "s3rver.js")


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) > 1 and parts[1].encode().decode(
                    "unicode_escape") == path:
                return True
    return False


def _default_sigint():
    """In the child before exec: SIGINT back to its default disposition."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def parse_stats(text):
    """The counters of a .ecfs-stats text ("name value" lines) as a dict
    of ints; a line of any other shape fails the test."""
    out = {}
    for line in text.splitlines():
        name, value = line.split(" ")
        assert name and name not in out and value.isdigit(), line
        out[name] = int(value)
    return out


class Mount:
    """A running ecfs mount (see module doc)."""

    def __init__(self, workdir, endpoint, bucket, opts=None, access_key=None,
                 secret_key=None, prefix=None, env=None, foreground=False):
        self.workdir = str(workdir)
        self.path = os.path.join(self.workdir, "mnt-" + uuid.uuid4().hex[:6])
        os.makedirs(self.path)
        self.log = os.path.join(self.workdir, "ecfs-%s.log"
                                % os.path.basename(self.path))
        self.endpoint = endpoint
        src = bucket if prefix is None else "%s:%s" % (bucket, prefix)
        o = ["endpoint=" + endpoint, "log_file=" + self.log]
        o += list(opts or [])
        self.argv = [ECFS, src, self.path, "-o", ",".join(o)]
        self.env = dict(os.environ)
        for k in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                  "AWS_SESSION_TOKEN"):
            self.env.pop(k, None)
        if access_key is not None:
            self.env["AWS_ACCESS_KEY_ID"] = access_key
            self.env["AWS_SECRET_ACCESS_KEY"] = secret_key
        self.env.update(env or {})
        self.proc = None
        self.foreground = foreground

    def start(self, timeout=20):
        if self.foreground:
            logf = open(self.log, "ab")
            # a runner started in the background of a script (`cmd &`)
            # ignores SIGINT, ecfs inherits that, and libfuse then leaves
            # the disposition alone: give the daemon the default, as an
            # interactive `ecfs -f` has
            self.proc = subprocess.Popen(self.argv + ["-f"],
                                         stdout=logf, stderr=logf,
                                         env=self.env,
                                         start_new_session=True,
                                         preexec_fn=_default_sigint)
            logf.close()
            deadline = time.monotonic() + timeout
            while not is_mounted(self.path):
                assert self.proc.poll() is None, self.log_text()
                assert time.monotonic() < deadline, "mount timeout"
                time.sleep(0.05)
            return self
        r = subprocess.run(self.argv, env=self.env, capture_output=True,
                           timeout=timeout)
        assert r.returncode == 0, "ecfs failed: %s\n%s" % (
            r.stderr.decode(errors="replace"), self.log_text())
        # daemon mode returns once the mount is in place
        assert is_mounted(self.path), "ecfs returned but nothing mounted"
        return self

    def pids(self):
        """Pids of ecfs processes serving this mount."""
        out = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if argv and argv[0] == ECFS.encode() and \
                    self.path.encode() in argv:
                out.append(int(pid))
        return out

    def stats(self):
        """ecfs's request counters: the hidden file .ecfs-stats at the root
        (found by name, never listed), one "name value" line each."""
        with open(os.path.join(self.path, ".ecfs-stats")) as f:
            return parse_stats(f.read())

    def unmount(self, timeout=10):
        """fusermount3 -u; waits for the daemon to exit."""
        pids = self.pids()
        if is_mounted(self.path):
            r = subprocess.run(["fusermount3", "-u", self.path],
                               capture_output=True)
            if r.returncode != 0:
                subprocess.run(["fusermount3", "-u", "-z", self.path],
                               capture_output=True)
        deadline = time.monotonic() + timeout
        while any(os.path.exists("/proc/%d" % p) and
                  not _is_zombie(p) for p in pids):
            if time.monotonic() > deadline:
                for p in pids:
                    try:
                        os.kill(p, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                raise AssertionError("ecfs did not exit after unmount")
            time.sleep(0.05)
        if self.proc is not None:
            self.proc.wait(timeout)

    def cleanup(self):
        try:
            self.unmount()
        except AssertionError:
            pass
        for p in self.pids():
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if is_mounted(self.path):
            subprocess.run(["umount", "-l", self.path], capture_output=True)
        detach_moved_mounts(basename=os.path.basename(self.path))

    def log_text(self):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""


def detach_moved_mounts(source=None, basename=None):
    """Lazily unmounts ecfs mounts whose mountpoint moved away: pytest
    sessions running side by side rotate each other's basetemp directories
    (renaming them to garbage-*), and a test that then unmounts by its old
    path would leave the mount and its daemon behind. Matches by mount
    source (the BUCKET[:PREFIX] argument) or by mountpoint basename."""
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) < 3 or parts[2] != "fuse.ecfs":
                continue
            mp = parts[1].encode().decode("unicode_escape")
            if (source is not None and parts[0] == source) or \
                    (basename is not None and os.path.basename(mp) == basename):
                subprocess.run(["umount", "-l", mp], capture_output=True)


def _is_zombie(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


@pytest.fixture
def ecfs_mount(request, tmp_path):
    """Factory fixture for ecfs mounts (see module doc)."""
    if not os.access(ECFS, os.X_OK):
        pytest.fail("no ecfs binary at %s (run make)" % ECFS)
    if not os.path.exists("/dev/fuse"):
        pytest.skip("needs /dev/fuse")
    mounts = []

    def make(endpoint, bucket, opts=None, access_key=None, secret_key=None,
             prefix=None, env=None, foreground=False, start=True):
        m = Mount(tmp_path, endpoint, bucket, opts, access_key, secret_key,
                  prefix, env, foreground)
        mounts.append(m)
        if start:
            m.start()
        return m

    yield make
    failed = any(getattr(request.node, "rep_" + w, None) is not None and
                 getattr(request.node, "rep_" + w).failed
                 for w in ("setup", "call"))
    for m in mounts:
        m.cleanup()
        if failed:
            print("\n---- ecfs log %s ----\n%s" % (m.log, m.log_text()[-20000:]))


class S3rver:
    """npm's s3rver on 127.0.0.1 (it checks no signatures)."""

    access_key = "S3RVER"
    secret_key = "S3RVER"

    def __init__(self, workdir):
        self.dir = os.path.join(str(workdir), "s3rver")
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        self.endpoint = "http://127.0.0.1:%d" % self.port
        self.log = os.path.join(str(workdir), "s3rver.log")
        self.start()

    def start(self):
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(
            ["node", "--openssl-legacy-provider", S3RVER_JS, "-d", self.dir,
             "-a", "127.0.0.1", "-p", str(self.port), "--silent"],
            stdout=logf, stderr=logf, start_new_session=True)
        logf.close()
        deadline = time.monotonic() + 20
        while http_status(self.endpoint + "/", 0.5) is None:
            assert self.proc.poll() is None, open(self.log).read()
            assert time.monotonic() < deadline, "s3rver did not start"
            time.sleep(0.1)

    def client(self):
        return boto3_client(self.endpoint, self.access_key, self.secret_key)

    def restart(self):
        self.stop()
        self.start()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def ensure_s3rver():
    """Installs s3rver into build/node when missing; skips if impossible."""
    if os.path.exists(S3RVER_JS):
        return
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("s3rver needs node and npm, which are not installed")
    os.makedirs(NODE_DIR, exist_ok=True)
    r = subprocess.run(["npm", "install", "--no-audit", "--no-fund",
                        "--prefix", NODE_DIR, "s3rver"],
                       capture_output=True, timeout=300)
    if r.returncode != 0 or not os.path.exists(S3RVER_JS):
        pytest.skip("npm could not install s3rver (registry unreachable?): "
                    + r.stderr.decode(errors="replace")[-500:])


@pytest.fixture
def s3rver(tmp_path):
    ensure_s3rver()
    srv = S3rver(tmp_path)
    yield srv
    srv.stop()


def make_tree(root, seed=1, nclass=3, per_class=6, big_mib=(3, 5)):
    """Writes an ImageFolder-like tree under @root; returns {relpath: bytes
    length}. Contains nested dirs, empty files, multi-MiB files, names with
    spaces and unicode."""
    rnd = random.Random(seed)
    files = {}

    def put(rel, data):
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
        files[rel] = len(data)

    names = ["cat", "dog house", "ünïcödé 日本"][:nclass]
    for c in names:
        for i in range(per_class):
            n = rnd.choice([0, 1, 100, 4096, 4097, 30000, 65536])
            put("train/%s/img %03d.jpg" % (c, i), rnd.randbytes(n))
    put("train/dog house/nested/deeper/leaf é.bin", rnd.randbytes(777))
    for j, mib in enumerate(big_mib):
        put("big/blob%d.bin" % j, rnd.randbytes(mib * 1024 * 1024 + 12345))
    put("top level.txt", b"hello world\n")
    put("empty", b"")
    # one object directly in every directory: s3rver (the second server)
    # omits CommonPrefixes that hold no direct object
    dirs = {os.path.dirname(r) for r in files}
    for d in list(dirs):
        while d:
            put(os.path.join(d, "README"), d.encode())
            d = os.path.dirname(d)
    return files


class ForwardProxy:
    """HTTP/1.1 proxy on 127.0.0.1 in front of a real server (@upstream,
    "http://host:port") for tests that need another client to act, or a
    fault, at an exact request. Each request is forwarded unchanged (its
    body read by Content-Length, Expect dropped), except that
    @before(method, path, headers) runs first and may answer it instead by
    returning (status, body), and @after(method, path, headers, status)
    runs once the server answered, before the answer is passed on (it may
    hold it). The mount signs for the proxy's Host header, which is
    forwarded as is."""

    def __init__(self, upstream, before=None, after=None):
        import http.client
        import http.server
        import threading
        host, port = upstream.split("//")[1].split(":")

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _answer(self, status, headers, data):
                self.send_response(status)
                for k, v in headers:
                    if k.lower() not in ("transfer-encoding", "connection",
                                         "content-length"):
                        self.send_header(k, v)
                n = dict((k.lower(), v) for k, v in headers).get(
                    "content-length") if self.command == "HEAD" else None
                self.send_header("Content-Length", n or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _fwd(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                if before is not None:
                    got = before(self.command, self.path, self.headers)
                    if got is not None:
                        self._answer(got[0], [], got[1])
                        return
                hdrs = {k: v for k, v in self.headers.items()
                        if k.lower() != "expect"}
                c = http.client.HTTPConnection(host, int(port), timeout=60)
                try:
                    c.request(self.command, self.path, body=body,
                              headers=hdrs)
                    r = c.getresponse()
                    data = r.read()
                    if after is not None:
                        after(self.command, self.path, self.headers, r.status)
                    self._answer(r.status, r.getheaders(), data)
                finally:
                    c.close()

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _fwd

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True
        self.endpoint = "http://127.0.0.1:%d" % self.srv.server_address[1]
        self.th = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.th.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def client_bucket(srv, prefix="rv"):
    """A boto3 client of @srv and a fresh bucket made with it: (client,
    name)."""
    c = srv.client()
    name = "%s-%s" % (prefix, uuid.uuid4().hex[:10])
    c.create_bucket(Bucket=name)
    return c, name


def rss_anon_kib(pid):
    """RssAnon of process @pid in KiB (/proc/PID/status): the heap and
    other anonymous mappings, what ecfs's memory budget bounds."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    raise AssertionError("no RssAnon")


def mount_of(server, ecfs_mount, bucket, **kw):
    """Mounts @bucket of @server (anything with .endpoint, .access_key and
    .secret_key: an s3_backend, a Storaged) through the ecfs_mount
    factory; returns the Mount."""
    return ecfs_mount(server.endpoint, bucket, access_key=server.access_key,
                      secret_key=server.secret_key, **kw)


def upload_tree(client, bucket, root, prefix=""):
    """Uploads every file under @root as PREFIX + relative path."""
    n = 0
    for d, _, fs in os.walk(root):
        for name in fs:
            p = os.path.join(d, name)
            key = prefix + os.path.relpath(p, root)
            with open(p, "rb") as f:
                client.put_object(Bucket=bucket, Key=key, Body=f.read())
            n += 1
    return n


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
