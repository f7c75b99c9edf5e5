"""ecfs medium files (above one block, up to -o whole_max): whichever read
of a file comes first fetches all of it with one GET, so a loader's sample
costs one request, not one per block plus readahead. Checked on a real
storaged and a real mount with small blocks (64 KiB, whole_max 512 KiB) so
the sizes stay small: 128 KiB - 1, 128 KiB and 128 KiB + 1 (one block +-1
over two), 320 KiB, and the threshold 512 KiB - 1, 512 KiB, 512 KiB + 1
(the last is read block by block, as before). Every byte is compared, the
GET counter of .ecfs-stats shows the request count, and many threads
reading the same and different medium files at once still cost one GET per
file. A whole_max above 64 blocks is refused at mount time. And what a warm
pass costs on a ro mount: one ioctl per buffered open (Python's isatty(),
counted as `ioctls`), none unbuffered, no GET."""

import concurrent.futures
import os
import random
import subprocess

from fuse_util import Mount, client_bucket, is_mounted, mount_of

K = 1024
OPTS = ["ro", "block_size=64K", "whole_max=512K"]
SIZES = [128 * K - 1, 128 * K, 128 * K + 1, 320 * K, 512 * K - 1, 512 * K,
         512 * K + 1]


def gets(m):
    return m.stats()["get"]


def test_first_read_fetches_whole_file_once(storaged, ecfs_mount):
    srv = storaged()
    c, b = client_bucket(srv, "md")
    rnd = random.Random(14)
    data = {"s%d" % n: rnd.randbytes(n) for n in SIZES}
    for k, v in data.items():
        c.put_object(Bucket=b, Key=k, Body=v)
    m = mount_of(srv, ecfs_mount, b, opts=OPTS)
    for k, v in data.items():
        n = len(v)
        p = os.path.join(m.path, k)
        g0 = gets(m)
        fd = os.open(p, os.O_RDONLY)
        try:
            # first touch in the middle (not at 0), then random ranges and
            # the whole file: a file <= whole_max costs exactly one GET
            off = n // 2 + 7
            assert os.pread(fd, 5000, off) == v[off:off + 5000], k
            for _ in range(20):
                o = rnd.randrange(n)
                ln = rnd.randrange(1, 200 * K)
                assert os.pread(fd, ln, o) == v[o:o + ln], (k, o, ln)
            assert os.pread(fd, 10, n - 1) == v[-1:], k
            assert os.pread(fd, 10, n) == b"", k
        finally:
            os.close(fd)
        with open(p, "rb") as f:
            assert f.read() == v, k
        spent = gets(m) - g0
        if n <= 512 * K:
            assert spent == 1, (k, spent)
        else:
            # block by block: more than one GET, every byte still exact
            assert spent > 1, (k, spent)


def test_concurrent_readers_one_get_per_file(storaged, ecfs_mount):
    srv = storaged()
    c, b = client_bucket(srv, "mc")
    rnd = random.Random(16)
    data = {"f%02d" % i: rnd.randbytes(rnd.choice([200 * K, 320 * K + 3,
                                                   500 * K]))
            for i in range(12)}
    for k, v in data.items():
        c.put_object(Bucket=b, Key=k, Body=v)
    m = mount_of(srv, ecfs_mount, b, opts=OPTS)
    g0 = gets(m)

    def read(arg):
        k, off = arg
        v = data[k]
        with open(os.path.join(m.path, k), "rb", buffering=0) as f:
            f.seek(off)
            got = f.read()
        return got == v[off:]

    # 16 readers of one file at once (different offsets), then 12 readers
    # of 12 files at once: one GET per file all the same
    one = [("f00", (i * 37 * K) % len(data["f00"])) for i in range(16)]
    every = [(k, 0) for k in data]
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        assert all(ex.map(read, one))
        assert all(ex.map(read, every))
    assert gets(m) - g0 == len(data)


def test_whole_max_above_64_blocks_is_refused(storaged, tmp_path):
    srv = storaged()
    _c, b = client_bucket(srv, "mo")
    m = Mount(tmp_path, srv.endpoint, b,
              opts=["block_size=64K", "whole_max=4097K"],
              access_key=srv.access_key, secret_key=srv.secret_key)
    r = subprocess.run(m.argv, env=m.env, capture_output=True, timeout=30)
    assert r.returncode == 1, r.stderr
    assert b"whole_max" in r.stderr, r.stderr
    assert not is_mounted(m.path)


def raw_stats(m):
    """.ecfs-stats read unbuffered: this read itself sends no ioctl."""
    with open(os.path.join(m.path, ".ecfs-stats"), "rb", buffering=0) as f:
        return dict((k, int(v)) for k, v in
                    (line.split() for line in f.read().decode().splitlines()))


def test_warm_pass_costs_one_ioctl_per_buffered_open(storaged, ecfs_mount):
    """On a ro mount a warm open+read of a cached file sends the kernel's
    IOCTL of Python's isatty() and nothing that reaches S3; an unbuffered
    open sends no ioctl at all."""
    srv = storaged()
    c, b = client_bucket(srv, "mw")
    rnd = random.Random(19)
    data = {"w%02d" % i: rnd.randbytes(200 * K + i) for i in range(20)}
    for k, v in data.items():
        c.put_object(Bucket=b, Key=k, Body=v)
    m = mount_of(srv, ecfs_mount, b, opts=["ro"])
    for k, v in data.items():  # cold
        with open(os.path.join(m.path, k), "rb") as f:
            assert f.read() == v
    s0 = raw_stats(m)
    for k, v in data.items():  # warm, buffered: isatty() each
        with open(os.path.join(m.path, k), "rb") as f:
            assert f.read() == v
    s1 = raw_stats(m)
    for k, v in data.items():  # warm, unbuffered: no isatty()
        with open(os.path.join(m.path, k), "rb", buffering=0) as f:
            assert f.read() == v
    s2 = raw_stats(m)
    assert s1["ioctls"] - s0["ioctls"] == len(data)
    assert s2["ioctls"] - s1["ioctls"] == 0
    assert s2["get"] == s0["get"] == len(data)


def test_shuffled_epoch_hands_blocks_to_page_cache(storaged, ecfs_mount):
    """A shuffled epoch of 8 MiB through a small block cache (4 MiB) on a ro
    mount, with directory prefetch on (the default): every byte exact,
    exactly one GET per file (a prefetch never fetches a file the epoch
    already read, though its block left the cache at once), and blocks
    whose bytes all went to the page cache do not fill the cache: a
    sixteenth of it holds them (fc_cache_handed; 256 KiB, and blocks a
    prefetch worker still held when they were handed). Then the page cache
    of the last file read is dropped: its block is still a block-cache hit;
    an old one is fetched again, exact."""
    srv = storaged()
    c, b = client_bucket(srv, "mh")
    rnd = random.Random(21)
    data = {"d%d/f%03d" % (i % 4, i): rnd.randbytes(rnd.randrange(20 * K,
                                                                  60 * K))
            for i in range(200)}
    for k, v in data.items():
        c.put_object(Bucket=b, Key=k, Body=v)
    m = mount_of(srv, ecfs_mount, b, opts=["ro", "block_size=64K",
                                          "cache_size=4M", "prefetch_mem=4M",
                                          "dir_prefetch=2"])
    names = sorted(data)
    for d in ("d0", "d1", "d2", "d3"):  # the listings, as a loader's scan
        os.listdir(os.path.join(m.path, d))
    g0 = gets(m)
    order = list(names)
    rnd.shuffle(order)
    for k in order:
        with open(os.path.join(m.path, k), "rb") as f:
            assert f.read() == data[k], k
    st = m.stats()
    assert st["get"] - g0 == len(data), st
    assert st["dir_prefetch_gets"] > 0, st  # prefetch did run
    assert st["dir_prefetch_unread_bytes"] == 0, st
    # 200 files of 20-60 KiB went through; the handed share (256 KiB) and
    # a few blocks held by prefetch workers when handed stay
    assert st["cache_bytes"] <= 512 * K, st
    last, old = order[-1], order[0]
    for k in (last, old):
        fd = os.open(os.path.join(m.path, k), os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            g1 = gets(m)
            assert os.pread(fd, len(data[k]) + 1, 0) == data[k], k
            spent = gets(m) - g1
        finally:
            os.close(fd)
        assert spent == (0 if k == last else 1), (k, spent)
