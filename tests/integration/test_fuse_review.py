"""ecfs review regressions: odd key names, file/dir name clashes, prefix
mounts with and without a trailing slash, directories over one LIST page,
changed objects on a non-ro mount, concurrent readers of the same and of
different files, errno mapping, and the stats file colliding with a real
object. Each runs against a real storaged and a real FUSE mount."""

import concurrent.futures
import errno
import os
import random
import time
import uuid

import pytest



@pytest.fixture
def srv(storaged):
    return storaged()


def new_bucket(srv):
    c = srv.client()
    name = "rv-" + uuid.uuid4().hex[:10]
    c.create_bucket(Bucket=name)
    return c, name


def mount(srv, ecfs_mount, bucket, **kw):
    return ecfs_mount(srv.endpoint, bucket, access_key=srv.access_key,
                      secret_key=srv.secret_key, **kw)


ODD = ["a b.txt", "pct%20x", "plus+sign", "hash#tag", "q?uery", "amp&eq=1",
       "ünï cödé 日本.bin", "tilde~star*", "semi;colon,comma", "back\\slash",
       "quote'\"", "[brackets]{}", "caret^`pipe|", "L" * 255]


def test_odd_names_list_stat_read(srv, ecfs_mount):
    c, b = new_bucket(srv)
    want = {}
    for i, n in enumerate(ODD):
        for d in ("", "dir %+#?/"):
            body = (d + n).encode() * (i + 1)
            c.put_object(Bucket=b, Key=d + n, Body=body)
            want[d + n] = body
    # a key longer than a file name: never shown, never breaks the listing
    c.put_object(Bucket=b, Key="M" * 300, Body=b"x")
    m = mount(srv, ecfs_mount, b)
    assert sorted(os.listdir(m.path)) == sorted(ODD + ["dir %+#?"])
    assert sorted(os.listdir(os.path.join(m.path, "dir %+#?"))) == sorted(ODD)
    for k, body in want.items():
        p = os.path.join(m.path, k)
        assert os.stat(p).st_size == len(body), k
        with open(p, "rb") as f:
            assert f.read() == body, k
    with pytest.raises(OSError) as ei:
        os.stat(os.path.join(m.path, "M" * 300))
    assert ei.value.errno == errno.ENAMETOOLONG
    # the same names through a fresh mount with no listing (HEAD + LIST)
    m2 = mount(srv, ecfs_mount, b)
    for k, body in want.items():
        with open(os.path.join(m2.path, k), "rb") as f:
            assert f.read() == body, k


def test_file_and_dir_same_name(srv, ecfs_mount):
    c, b = new_bucket(srv)
    c.put_object(Bucket=b, Key="x", Body=b"file")
    c.put_object(Bucket=b, Key="x/y", Body=b"yy")
    for listed in (True, False):
        m = mount(srv, ecfs_mount, b)
        if listed:
            assert os.listdir(m.path) == ["x"]
        assert os.path.isdir(os.path.join(m.path, "x"))
        with open(os.path.join(m.path, "x/y"), "rb") as f:
            assert f.read() == b"yy"


@pytest.mark.parametrize("prefix", ["data", "data/", "/data//"])
def test_prefix_forms(srv, ecfs_mount, prefix):
    c, b = new_bucket(srv)
    c.put_object(Bucket=b, Key="data/a", Body=b"A")
    c.put_object(Bucket=b, Key="data/s/b", Body=b"B")
    c.put_object(Bucket=b, Key="database", Body=b"no")
    c.put_object(Bucket=b, Key="data", Body=b"no")
    m = mount(srv, ecfs_mount, b, prefix=prefix)
    assert sorted(os.listdir(m.path)) == ["a", "s"]
    with open(os.path.join(m.path, "s/b"), "rb") as f:
        assert f.read() == b"B"


def test_directory_over_one_page(srv, ecfs_mount):
    c, b = new_bucket(srv)
    names = ["f%05d" % i for i in range(1203)]
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda n: c.put_object(Bucket=b, Key="big/" + n,
                                           Body=n.encode()), names))
    m = mount(srv, ecfs_mount, b)
    got = os.listdir(os.path.join(m.path, "big"))
    assert sorted(got) == names
    # scandir with stat (readdirplus) twice: same inodes, right sizes
    ino1 = {e.name: e.inode() for e in os.scandir(os.path.join(m.path, "big"))}
    for e in os.scandir(os.path.join(m.path, "big")):
        assert e.stat().st_size == 6 and ino1[e.name] == e.inode()
    with open(os.path.join(m.path, "big", names[-1]), "rb") as f:
        assert f.read() == names[-1].encode()


def test_changed_object_seen_after_ttl(srv, ecfs_mount):
    c, b = new_bucket(srv)
    c.put_object(Bucket=b, Key="d/f", Body=b"one")
    m = mount(srv, ecfs_mount, b, opts=["list_ttl=1", "attr_timeout=0.5"])
    p = os.path.join(m.path, "d/f")
    assert os.listdir(os.path.join(m.path, "d")) == ["f"]
    with open(p, "rb") as f:
        assert f.read() == b"one"
    c.put_object(Bucket=b, Key="d/f", Body=b"TWO!")  # other size
    c.put_object(Bucket=b, Key="d/g", Body=b"new")
    time.sleep(1.3)
    assert sorted(os.listdir(os.path.join(m.path, "d"))) == ["f", "g"]
    assert os.stat(p).st_size == 4
    with open(p, "rb") as f:
        assert f.read() == b"TWO!"
    c.put_object(Bucket=b, Key="d/f", Body=b"3333")  # same size
    time.sleep(1.3)
    with open(p, "rb") as f:
        assert f.read() == b"3333"
    c.delete_object(Bucket=b, Key="d/f")
    time.sleep(1.3)
    assert not os.path.exists(p)
    assert os.listdir(os.path.join(m.path, "d")) == ["g"]


def test_concurrent_readers_same_and_different(srv, ecfs_mount):
    c, b = new_bucket(srv)
    rnd = random.Random(7)
    data = {}
    for i in range(6):
        n = rnd.choice([1, 5000, 1 << 20, (1 << 20) + 1, 3 << 20])
        data["f%d" % i] = rnd.randbytes(n)
    data["big"] = rnd.randbytes(9 * (1 << 20) + 333)
    for k, v in data.items():
        c.put_object(Bucket=b, Key=k, Body=v)
    for opts in ([], ["ro"]):
        m = mount(srv, ecfs_mount, b, opts=opts + ["block_size=256K"])

        def work(seed):
            r = random.Random(seed)
            for _ in range(20):
                k = r.choice(list(data))
                v = data[k]
                fd = os.open(os.path.join(m.path, k), os.O_RDONLY)
                try:
                    if r.random() < 0.3:
                        got = b"".join(iter(lambda: os.read(fd, 1 << 17), b""))
                        assert got == v, k
                    else:
                        off = r.randrange(len(v))
                        ln = r.randrange(1, 300000)
                        assert os.pread(fd, ln, off) == v[off:off + ln], k
                finally:
                    os.close(fd)
            return True

        with concurrent.futures.ThreadPoolExecutor(12) as ex:
            assert all(ex.map(work, range(24)))


def test_errno_mapping(srv, ecfs_mount):
    c, b = new_bucket(srv)
    c.put_object(Bucket=b, Key="f", Body=b"x")
    m = mount(srv, ecfs_mount, b)
    with pytest.raises(NotADirectoryError):
        os.listdir(os.path.join(m.path, "f"))
    with pytest.raises(NotADirectoryError):
        os.stat(os.path.join(m.path, "f/g"))
    with pytest.raises(IsADirectoryError):
        open(m.path, "rb").read()
    # a name under a file is not a directory, for writes too
    with pytest.raises(NotADirectoryError):
        os.mkdir(os.path.join(m.path, "f", "new"))


def test_change_seen_under_steady_lookups(srv, ecfs_mount):
    """A file opened by path again and again (a DataLoader with a file
    list) must see an overwrite once list_ttl has passed: lookups of a live
    inode must not keep renewing its attributes' age."""
    c, b = new_bucket(srv)
    c.put_object(Bucket=b, Key="d/f", Body=b"one")
    for listed in (False, True):
        m = mount(srv, ecfs_mount, b, opts=["list_ttl=1.5",
                                            "attr_timeout=0.2",
                                            "negative_timeout=0.2"])
        p = os.path.join(m.path, "d/f")
        if listed:
            os.listdir(os.path.join(m.path, "d"))
        with open(p, "rb") as f:
            body0 = f.read()
        new = b"TWO!" if body0 == b"one" else b"one"
        c.put_object(Bucket=b, Key="d/f", Body=new)
        deadline = time.monotonic() + 6
        got = None
        while time.monotonic() < deadline:
            with open(p, "rb") as f:
                got = f.read()
            if got == new:
                break
            time.sleep(0.1)
        assert got == new


@pytest.mark.parametrize("prefix", [None, "p"])
def test_real_stats_object_is_not_hidden(srv, ecfs_mount, prefix):
    c, b = new_bucket(srv)
    pre = "" if prefix is None else prefix + "/"
    c.put_object(Bucket=b, Key=pre + ".ecfs-stats", Body=b"my own data")
    c.put_object(Bucket=b, Key=pre + "a", Body=b"a")
    m = mount(srv, ecfs_mount, b, prefix=prefix)
    p = os.path.join(m.path, ".ecfs-stats")
    with open(p, "rb") as f:
        assert f.read() == b"my own data"
    assert sorted(os.listdir(m.path)) == [".ecfs-stats", "a"]
    # -o nostats: no stats file where there is no such object either
    c.delete_object(Bucket=b, Key=pre + ".ecfs-stats")
    m2 = mount(srv, ecfs_mount, b, prefix=prefix, opts=["nostats"])
    with pytest.raises(FileNotFoundError):
        os.stat(os.path.join(m2.path, ".ecfs-stats"))
    # default: the counters are there
    m3 = mount(srv, ecfs_mount, b, prefix=prefix)
    assert "get" in m3.stats()


def test_control_characters_do_not_break_a_directory(srv, ecfs_mount):
    """Keys XML 1.0 cannot carry (LIST asks for encoding-type=url): the
    directory lists, and every name opens with its own bytes."""
    c, b = new_bucket(srv)
    keys = ["w/ok", "w/ctl\x01x", "w/cr\rx", "w/nl\nx", "w/tab\tx",
            "w/sp ace+plus%25", "w/sub\x02dir/f"]
    for k in keys:
        c.put_object(Bucket=b, Key=k, Body=k.encode())
    m = mount(srv, ecfs_mount, b, opts=["umask=022"])
    assert sorted(os.listdir(os.path.join(m.path, "w"))) == sorted(
        ["ok", "ctl\x01x", "cr\rx", "nl\nx", "tab\tx", "sp ace+plus%25",
         "sub\x02dir"])
    for k in keys:
        with open(os.path.join(m.path, k), "rb") as f:
            assert f.read() == k.encode(), repr(k)


def test_empty_umask_is_refused(srv, ecfs_mount):
    c, b = new_bucket(srv)
    m = mount(srv, ecfs_mount, b, opts=["umask="], start=False)
    import subprocess
    r = subprocess.run(m.argv, env=m.env, capture_output=True, timeout=20)
    assert r.returncode != 0 and b"umask" in r.stderr


def test_relative_log_file_is_relative_to_cwd(srv, ecfs_mount, tmp_path):
    """The daemon chdirs to /: a relative log_file must still land in the
    directory ecfs was started from."""
    import subprocess
    c, b = new_bucket(srv)
    m = mount(srv, ecfs_mount, b, start=False)
    argv = list(m.argv)
    argv[-1] = argv[-1].replace("log_file=" + m.log,
                                "log_file=rel.log,log_level=info")
    r = subprocess.run(argv, env=m.env, capture_output=True, timeout=20,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    m.unmount()
    assert os.path.getsize(os.path.join(str(tmp_path), "rel.log")) > 0
    assert not os.path.exists("/rel.log")


class _FaultProxy:
    """HTTP/1.1 proxy in front of the real storaged that answers the first
    @n_fail object GETs with 503 SlowDown and a 2 KiB XML error body (as a
    throttling S3 does), and forwards everything else unchanged."""

    def __init__(self, upstream, n_fail):
        import http.client
        import http.server
        import threading
        host, port = upstream.split("//")[1].split(":")
        proxy = self
        self.n_fail = n_fail
        self.failed = 0
        self.lock = threading.Lock()

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _fwd(self, method):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                if method == "GET" and "?" not in self.path:
                    with proxy.lock:
                        fail = proxy.failed < proxy.n_fail
                        proxy.failed += fail
                    if fail:
                        msg = (b"<?xml version=\"1.0\"?><Error><Code>SlowDown"
                               b"</Code><Message>" + b"x" * 2048 +
                               b"</Message></Error>")
                        self.send_response(503)
                        self.send_header("Content-Length", str(len(msg)))
                        self.end_headers()
                        self.wfile.write(msg)
                        return
                c = http.client.HTTPConnection(host, int(port), timeout=20)
                c.request(method, self.path, body=body,
                          headers=dict(self.headers))
                r = c.getresponse()
                data = r.read()
                self.send_response(r.status)
                for k, v in r.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection"):
                        self.send_header(k, v)
                if r.getheader("Content-Length") is None:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if method != "HEAD":
                    self.wfile.write(data)
                c.close()

            def do_GET(self):
                self._fwd("GET")

            def do_HEAD(self):
                self._fwd("HEAD")

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True
        self.endpoint = "http://127.0.0.1:%d" % self.srv.server_address[1]
        self.th = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.th.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def test_throttled_small_get_is_retried(srv, ecfs_mount):
    """A 503 whose error body is larger than the file asked for must be
    retried like any 503, not end in EIO."""
    c, b = new_bucket(srv)
    c.put_object(Bucket=b, Key="tiny", Body=b"0123456789")
    c.put_object(Bucket=b, Key="mid", Body=b"m" * 3000)
    px = _FaultProxy(srv.endpoint, 0)
    try:
        m = ecfs_mount(px.endpoint, b, access_key=srv.access_key,
                       secret_key=srv.secret_key, opts=["retries=4"])
        os.listdir(m.path)
        px.n_fail = 2
        with open(os.path.join(m.path, "tiny"), "rb") as f:
            assert f.read() == b"0123456789"
        px.failed, px.n_fail = 0, 1
        with open(os.path.join(m.path, "mid"), "rb") as f:
            assert f.read() == b"m" * 3000
        assert m.stats()["retries"] >= 3
    finally:
        px.close()


def test_odd_prefix_mount(srv, ecfs_mount):
    c, b = new_bucket(srv)
    pre = "we ird%+#?é,x"
    c.put_object(Bucket=b, Key=pre + "/a", Body=b"A")
    c.put_object(Bucket=b, Key=pre + "/s/b", Body=b"B")
    c.put_object(Bucket=b, Key=pre + "x/no", Body=b"no")
    m = mount(srv, ecfs_mount, b, prefix=pre + "/")
    assert sorted(os.listdir(m.path)) == ["a", "s"]
    with open(os.path.join(m.path, "s/b"), "rb") as f:
        assert f.read() == b"B"
    assert "get" in m.stats()


def test_old_dir_snapshot_does_not_shrink_a_file(srv, ecfs_mount):
    """readdirplus from a directory handle opened before an overwrite must
    not hand the kernel the old size of an inode that already knows the new
    one (the kernel bounds reads by it: the read came back short)."""
    c, b = new_bucket(srv)
    c.put_object(Bucket=b, Key="d/f", Body=b"one")
    m = mount(srv, ecfs_mount, b, opts=["list_ttl=1", "attr_timeout=0.3",
                                        "negative_timeout=0.3"])
    d = os.path.join(m.path, "d")
    it = os.scandir(d)  # opendir: the snapshot says 3 bytes
    c.put_object(Bucket=b, Key="d/f", Body=b"TWO!!")
    time.sleep(1.2)
    assert os.stat(os.path.join(d, "f")).st_size == 5  # HEAD: 5 bytes
    names = [e.name for e in it]  # readdirplus from the old snapshot
    it.close()
    assert names == ["f"]
    with open(os.path.join(d, "f"), "rb") as f:
        assert f.read() == b"TWO!!"
    assert os.stat(os.path.join(d, "f")).st_size == 5
