"""ecfs read path, byte for byte, across block geometries: range GETs land
straight in the cache blocks (scatter GET), replies are written from the
pinned blocks (fuse_reply_iov), and a read that spans more blocks than one
pin holds (tiny block_size) falls back to copying, and big block buffers
are recycled through a cache smaller than the file. Every byte is checked
against the uploaded object, and the request counters show that one
sequential pass fetches each byte once (readahead, no waste)."""

import os
import random
import uuid

import pytest


# odd sizes: the last block is partial; the big one is fetched by readahead
SIZES = {"big.bin": (3 << 20) + 12345, "one.bin": 1, "small.bin": 70001}


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
