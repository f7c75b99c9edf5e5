"""ecfs -o cache_dir=DIR: the persistent on-disk block cache (fuse/dcache.c),
on a real storaged and real mounts, counted by MOUNT/.ecfs-stats:
- a second mount with the same cache_dir reads the cached tree with 0 GETs;
  a mount beside a live one on the same cache_dir is refused, clearly;
- a flipped byte or a truncated segment (DIR/v2: blocks appended to
  segment files, an index beside each) is dropped and fetched again, the
  read stays exact;
- an object overwritten between mounts is read new (its ETag changed);
- a full cache filesystem (a small tmpfs) and a tiny cache_dir_size still
  read exact bytes, the bound is kept by eviction;
- kill -9 of ecfs while it caches: the next mount starts and reads exact
  bytes; a cache of the old layout (DIR/v1) is removed, never read."""

import os
import random
import signal
import struct
import subprocess
import threading
import time
import uuid

import pytest

from fuse_util import is_mounted, mount_of


def block_records(cache_dir):
    """The blocks the cache holds, as a mount would load them: every
    segment's index (DIR/v2/NNNNNNNN.idx, 40-byte entries: hash, offset,
    datalen, idlen, flags, crc) in order, a drop entry (flags 1) removing
    its block. A list of (segment path, offset, datalen, idlen)."""
    v2 = os.path.join(cache_dir, "v2")
    live = {}
    for name in sorted(os.listdir(v2)):
        if not name.endswith(".idx"):
            continue
        seg = os.path.join(v2, name[:-4] + ".seg")
        with open(os.path.join(v2, name), "rb") as f:
            raw = f.read()
        for i in range(0, len(raw) - len(raw) % 40, 40):
            h, off, dlen, ilen, flags, _ = struct.unpack_from("=16sQIIII",
                                                              raw, i)
            if flags == 1:
                live.pop(h, None)
            else:
                live[h] = (seg, off, dlen, ilen)
    return list(live.values())


def segments(cache_dir):
    v2 = os.path.join(cache_dir, "v2")
    return [os.path.join(v2, n) for n in sorted(os.listdir(v2))]


@pytest.fixture
def tree(s3_server):
    """A bucket of 30 small files (one block each) and one 3.5 MiB file
    (4 blocks of the default 1 MiB)."""
    c = s3_server.client()
    bucket = "dc-" + uuid.uuid4().hex[:10]
    c.create_bucket(Bucket=bucket)
    rnd = random.Random(16)
    bodies = {"d/f%02d.bin" % i: rnd.randbytes(1000 + 700 * i)
              for i in range(30)}
    bodies["big.bin"] = rnd.randbytes(3 * (1 << 20) + (1 << 19))
    for k, v in bodies.items():
        c.put_object(Bucket=bucket, Key=k, Body=v)
    return c, bucket, bodies


def stores_settled(m, n, timeout=20):
    """The stats once n disk-cache stores are done (the writer thread stores
    behind the readers)."""
    deadline = time.monotonic() + timeout
    while True:
        s = m.stats()
        if s["dcache_stores"] + s["dcache_store_errors"] >= n or \
                time.monotonic() > deadline:
            return s
        time.sleep(0.05)


def read_all(m, bodies):
    for k, v in sorted(bodies.items()):
        with open(os.path.join(m.path, k), "rb") as f:
            assert f.read() == v, k


def mount_cached(s3_server, ecfs_mount, bucket, cache_dir, extra=()):
    return mount_of(s3_server, ecfs_mount, bucket,
                    opts=["ro", "cache_dir=" + str(cache_dir)] + list(extra))


def test_second_mount_zero_gets(s3_server, tree, ecfs_mount, tmp_path):
    _, bucket, bodies = tree
    cd = tmp_path / "cache"
    m = mount_cached(s3_server, ecfs_mount, bucket, cd)
    read_all(m, bodies)
    s = stores_settled(m, 34)
    assert s["get"] >= len(bodies) and s["dcache_stores"] == 30 + 4, s

    # a second mount of the same cache_dir while the first is up: refused
    m2 = mount_of(s3_server, ecfs_mount, bucket, start=False,
                  opts=["ro", "cache_dir=" + str(cd)])
    r = subprocess.run(m2.argv, env=m2.env, capture_output=True, timeout=20)
    assert r.returncode != 0 and not is_mounted(m2.path)
    err = r.stderr.decode()
    # the pid is the daemon's once it started (the lock file is written
    # again after fuse_daemonize), the mount command's just before
    assert "cache_dir %s is in use by another ecfs mount (pid " % cd in err, err
    m.unmount()

    m = mount_cached(s3_server, ecfs_mount, bucket, cd)
    read_all(m, bodies)
    s = m.stats()
    assert s["get"] == 0, s
    assert s["dcache_hits"] == 34 and s["dcache_corrupt"] == 0, s
    m.unmount()


def test_corrupt_block_refetched(s3_server, tree, ecfs_mount, tmp_path):
    _, bucket, bodies = tree
    cd = tmp_path / "cache"
    m = mount_cached(s3_server, ecfs_mount, bucket, cd)
    read_all(m, bodies)
    m.unmount()
    recs = sorted(block_records(cd), key=lambda r: (r[0], r[1]))
    assert len(recs) == 34
    # flip a byte of one block's data; cut the segment in the last block
    seg, off, dlen, _ = recs[3]
    with open(seg, "r+b") as f:
        f.seek(off + dlen // 2)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0x40]))
    seg, off, dlen, _ = recs[-1]
    assert all(r[1] < off for r in recs if r[0] == seg and r != recs[-1])
    os.truncate(seg, off + dlen // 2)

    m = mount_cached(s3_server, ecfs_mount, bucket, cd)
    read_all(m, bodies)
    s = stores_settled(m, 2)
    assert s["get"] == 2 and s["dcache_corrupt"] == 2, s
    assert s["dcache_hits"] == 32 and s["dcache_stores"] == 2, s
    m.unmount()
    assert len(block_records(cd)) == 34  # both written again, whole


def test_overwritten_between_mounts(s3_server, tree, ecfs_mount, tmp_path):
    c, bucket, bodies = tree
    cd = tmp_path / "cache"
    m = mount_cached(s3_server, ecfs_mount, bucket, cd)
    read_all(m, bodies)
    m.unmount()
    # same sizes, new bytes: only the ETag tells the versions apart
    for k in ("d/f05.bin", "big.bin"):
        bodies[k] = bytes(b ^ 0x5a for b in bodies[k])
        c.put_object(Bucket=bucket, Key=k, Body=bodies[k])

    m = mount_cached(s3_server, ecfs_mount, bucket, cd)
    read_all(m, bodies)
    s = stores_settled(m, 5)
    assert s["dcache_hits"] == 29 and s["dcache_stores"] == 1 + 4, s
    assert 2 <= s["get"] <= 5, s  # one small GET, the big file's blocks
    m.unmount()


@pytest.fixture
def small_fs(tmp_path):
    """A 2 MiB tmpfs (smaller than the tree)."""
    d = tmp_path / "tiny"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs",
                        str(d)], capture_output=True)
    if r.returncode != 0:
        pytest.fail("cannot mount a tmpfs: %s" % r.stderr.decode())
    yield d
    subprocess.run(["umount", "-l", str(d)], capture_output=True)


def test_full_cache_filesystem(s3_server, tree, ecfs_mount, small_fs):
    _, bucket, bodies = tree
    cd = small_fs / "cache"
    # the tree (4 MiB) cannot fit: stores fail or are skipped, and the
    # eviction thread makes room under the free-space floor
    for rnd in range(2):
        m = mount_cached(s3_server, ecfs_mount, bucket, cd)
        read_all(m, bodies)
        s = m.stats()
        assert s["dcache_corrupt"] == 0, s
        m.unmount()
    # now really full: a filler takes every byte left
    with open(small_fs / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    m = mount_cached(s3_server, ecfs_mount, bucket, cd)
    read_all(m, bodies)
    s = m.stats()
    assert s["dcache_hits"] + s["get"] >= len(bodies), s
    m.unmount()


def test_cache_dir_size_bound(s3_server, tree, ecfs_mount, tmp_path):
    _, bucket, bodies = tree
    cd = tmp_path / "cache"
    m = mount_cached(s3_server, ecfs_mount, bucket, cd,
                     ["cache_dir_size=1M"])
    read_all(m, bodies)
    stores_settled(m, 34)  # then the writer thread is idle
    deadline = time.monotonic() + 30
    while m.stats()["dcache_bytes"] > (1 << 20):
        assert time.monotonic() < deadline, m.stats()
        time.sleep(0.1)
    s = m.stats()
    assert s["dcache_evicted"] > 0, s
    m.unmount()
    total = sum(os.path.getsize(p) for p in segments(cd))
    assert total <= (1 << 20), total


def test_kill9_while_caching(s3_server, tree, ecfs_mount, tmp_path):
    _, bucket, bodies = tree
    cd = tmp_path / "cache"
    m = mount_cached(s3_server, ecfs_mount, bucket, cd)
    stop = threading.Event()

    def reader():
        try:
            read_all(m, bodies)
        except OSError:
            pass  # the daemon died under us
        stop.set()

    t = threading.Thread(target=reader)
    t.start()
    time.sleep(0.05)
    for pid in m.pids():
        os.kill(pid, signal.SIGKILL)
    t.join(60)
    assert stop.is_set()
    subprocess.run(["umount", "-l", m.path], capture_output=True)
    # a crash's torn index entry and a segment cut to nothing; a cache of
    # the old one-file-per-block layout
    segs = segments(cd)
    idx = [p for p in segs if p.endswith(".idx")]
    if idx:
        with open(idx[-1], "ab") as f:
            f.write(b"torn")
        os.truncate(idx[-1][:-4] + ".seg", 0)
    os.makedirs(os.path.join(cd, "v1", "ab"), exist_ok=True)
    with open(os.path.join(cd, "v1", "ab", "0" * 32), "wb") as f:
        f.write(b"ECFSDC1\n")

    m = mount_cached(s3_server, ecfs_mount, bucket, cd)
    read_all(m, bodies)
    s = m.stats()
    assert s["get"] + s["dcache_hits"] >= len(bodies), s
    m.unmount()
    assert not os.path.exists(os.path.join(cd, "v1"))
    m = mount_cached(s3_server, ecfs_mount, bucket, cd)
    read_all(m, bodies)
    assert m.stats()["get"] == 0
    m.unmount()


def test_write_through_mount_drops_old_blocks(s3_server, tree, ecfs_mount,
                                              tmp_path):
    _, bucket, bodies = tree
    cd = tmp_path / "cache"
    m = mount_of(s3_server, ecfs_mount, bucket,
                 opts=["cache_dir=" + str(cd)])
    read_all(m, bodies)
    stores_settled(m, 34)
    assert len(block_records(cd)) == 34
    new = os.urandom(5000)
    with open(os.path.join(m.path, "d/f07.bin"), "wb") as f:
        f.write(new)
    bodies["d/f07.bin"] = new
    # the replaced version's block is gone; the new one is read and cached
    assert len(block_records(cd)) == 33
    read_all(m, bodies)
    m.unmount()
    m = mount_cached(s3_server, ecfs_mount, bucket, cd)
    read_all(m, bodies)
    s = m.stats()
    assert s["get"] == 0 and s["dcache_hits"] == 34, s
    m.unmount()
