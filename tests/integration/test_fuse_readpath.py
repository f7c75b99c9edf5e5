"""ecfs read path, byte for byte, across block geometries: range GETs land
straight in the cache blocks (scatter GET), replies are written from the
pinned blocks (fuse_reply_iov), and a read that spans more blocks than one
pin holds (tiny block_size) falls back to copying, and big block buffers
are recycled through a cache smaller than the file. Every byte is checked
against the uploaded object, and the request counters show that one
sequential pass fetches each byte once (readahead, no waste). Also: many
threads reading the same and different files at random offsets, on rw
and ro mounts, and a throttled GET (503 SlowDown with an error body bigger
than the file) is retried, not turned into EIO."""

import concurrent.futures
import os
import random
import uuid

import pytest

from fuse_util import ForwardProxy, client_bucket, mount_of


# odd sizes: the last block is partial; the big one is fetched by readahead
SIZES = {"big.bin": (9 << 20) + 12345, "one.bin": 1, "small.bin": 70001}


def body(name, size):
    rec = b"".join(b"%s:%010d\n" % (name.encode()[:3], i)
                   for i in range(size // 15 + 1))
    return rec[:size]


@pytest.fixture
def objs(storaged):
    srv = storaged(ndrives=4)
    c = srv.client()
    bucket = "rp-" + uuid.uuid4().hex[:8]
    c.create_bucket(Bucket=bucket)
    for k, n in SIZES.items():
        c.put_object(Bucket=bucket, Key="d/" + k, Body=body(k, n))
    return srv, bucket


def mount(srv, ecfs_mount, bucket, opts):
    return ecfs_mount(srv.endpoint, bucket, access_key=srv.access_key,
                      secret_key=srv.secret_key, opts=["ro"] + opts)


@pytest.mark.parametrize("geom", [
    # one 1 MiB kernel read spans 256 blocks: the copying fallback
    ["block_size=4K", "readahead_init=64K", "readahead_max=256K",
     "part_size=64K"],
    # blocks that do not divide a page-aligned read evenly
    ["block_size=48K", "readahead_init=96K", "readahead_max=768K",
     "part_size=192K"],
    # big (mapped) block buffers through a cache smaller than the file:
    # evicted buffers are recycled for the next parts
    ["block_size=512K", "cache_size=2M", "readahead_init=1M",
     "readahead_max=2M", "part_size=1M"],
    [],  # defaults: 1 MiB blocks, 8 MiB parts
])
def test_bytes_and_one_fetch_per_byte(objs, ecfs_mount, geom):
    srv, bucket = objs
    m = mount(srv, ecfs_mount, bucket, geom)
    before = m.stats()
    for k, n in SIZES.items():
        with open(os.path.join(m.path, "d", k), "rb", buffering=0) as f:
            got = b""
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                got += b
        assert len(got) == n, k
        assert got == body(k, n), k
    after = m.stats()
    fetched = after["bytes"] - before["bytes"]
    if "cache_size=2M" in geom:
        # a cache smaller than the file may evict a prefetched block
        # before its read: at most a refetch, never a wrong byte
        assert fetched >= sum(SIZES.values())
    else:
        # one pass over cold objects fetches every byte exactly once
        assert fetched == sum(SIZES.values())
    assert after["errors"] == before["errors"]
    assert after["reads"] > before["reads"]
    # the big file was sequential: with a readahead window larger than
    # the 1 MiB reads, readahead parts fetched ahead of the reader. (With a
    # smaller window each read already covers the window, and whether a
    # part is claimed by the prefetcher or by the reader itself is a race -
    # seen once in CI; bytes and fetch count are checked above either way.)
    ra_max = 32 << 20
    for o in geom:
        if o.startswith("readahead_max="):
            v = o.split("=", 1)[1]
            ra_max = int(v[:-1]) << {"K": 10, "M": 20}[v[-1]]
    if ra_max >= 2 << 20:
        assert after["readahead_gets"] > before["readahead_gets"]


def test_random_preads_match(objs, ecfs_mount):
    srv, bucket = objs
    m = mount(srv, ecfs_mount, bucket, ["block_size=64K", "cache_size=256K"])
    n = SIZES["big.bin"]
    want = body("big.bin", n)
    rnd = random.Random(7)
    fd = os.open(os.path.join(m.path, "d", "big.bin"), os.O_RDONLY)
    try:
        for _ in range(200):
            off = rnd.randrange(0, n)
            ln = rnd.choice([1, 100, 4096, 65536, 200000, 1 << 20])
            # O_DIRECT is not used: page-cache reads reach ecfs as
            # page-aligned reads of various lengths, across blocks that a
            # 256 KiB cache keeps evicting
            assert os.pread(fd, ln, off) == want[off:off + ln]
    finally:
        os.close(fd)
    assert m.stats()["errors"] == 0


# ---- concurrent readers and retried GETs (plain mounts) ----


@pytest.fixture
def srv(storaged):
    return storaged()

class _FaultProxy(ForwardProxy):
    """Answers the first @n_fail object GETs with 503 SlowDown and a 2 KiB
    XML error body (as a throttling S3 does), and forwards everything else
    unchanged to the real storaged."""

    def __init__(self, upstream, n_fail):
        import threading
        self.n_fail = n_fail
        self.failed = 0
        self.lock = threading.Lock()
        super().__init__(upstream, self._before)

    def _before(self, method, path, headers):
        if method != "GET" or "?" in path:
            return None
        with self.lock:
            fail = self.failed < self.n_fail
            self.failed += fail
        if not fail:
            return None
        return 503, (b"<?xml version=\"1.0\"?><Error><Code>SlowDown"
                     b"</Code><Message>" + b"x" * 2048 +
                     b"</Message></Error>")


def test_concurrent_readers_same_and_different(srv, ecfs_mount):
    c, b = client_bucket(srv)
    rnd = random.Random(7)
    data = {}
    for i in range(6):
        n = rnd.choice([1, 5000, 1 << 20, (1 << 20) + 1, 3 << 20])
        data["f%d" % i] = rnd.randbytes(n)
    data["big"] = rnd.randbytes(9 * (1 << 20) + 333)
    for k, v in data.items():
        c.put_object(Bucket=b, Key=k, Body=v)
    for opts in ([], ["ro"]):
        m = mount_of(srv, ecfs_mount, b, opts=opts + ["block_size=256K"])

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


def test_throttled_small_get_is_retried(srv, ecfs_mount):
    """A 503 whose error body is larger than the file asked for must be
    retried like any 503, not end in EIO."""
    c, b = client_bucket(srv)
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
