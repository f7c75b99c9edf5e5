"""ecfs soak: concurrent readers compare every byte they read.

A bucket of small files (fetched whole, prefetched by directory) and medium
files (block range GETs, readahead) with position-dependent content: every
16-byte record names the object, its version and its index, so a wrong byte
says where it came from. Reader processes (DataLoader-like workers) read in
random order: whole files, random preads, mmap slices, chunked sequential
passes; after each file they drop its page cache (fadvise DONTNEED) so the
next read goes to ecfs again. The block cache is tiny (evictions all the
time) and directory prefetch is on.

Variants:
- static tree, -o ro: every read is right, no error at all;
- storaged SIGKILLed and restarted mid-run: reads are right or EIO, never
  wrong, and every file reads right once the server is back;
- objects overwritten mid-run (same size, new content): every open file
  reads one version whole, or EIO - never a mix of two.

Bounded: each variant runs its readers for a few seconds (SOAK_SECONDS,
default 8)."""

import errno
import functools
import mmap
import multiprocessing
import os
import random
import threading
import time
import traceback
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor

import pytest


SOAK_SECONDS = float(os.environ.get("SOAK_SECONDS", "8"))
# readers run up to about 2.5 x SOAK_SECONDS per test (the restart variant
# runs two passes), plus the tree upload and the mount
pytestmark = [pytest.mark.slow, pytest.mark.timeout(60 + 4 * SOAK_SECONDS)]
WORKERS = 6
BLOCK = 64 * 1024
REC = 16

# a small file is <= BLOCK (one whole GET); medium files span many blocks
SMALL = {"d%d/s%03d.bin" % (d, i): 1 + (i * 7919 + d * 104729) % BLOCK
         for d in range(3) for i in range(50)}
SMALL.update({"d0/exact.bin": BLOCK, "d1/one.bin": 1, "d2/rec.bin": REC})
MEDIUM = {"m/m%d.bin" % i: 300_000 + i * 311_111 for i in range(6)}
MEDIUM["m/edge.bin"] = 5 * BLOCK + 1
SIZES = dict(SMALL, **MEDIUM)

# set by a test before its readers fork: version 1 of every object is
# longer than version 0 (objects change size too, not only content)
RESIZE = False


def size_of(key, ver):
    """The size of version @ver of @key."""
    return SIZES[key] + (4099 if RESIZE and ver % 2 == 1 else 0)


MOUNT_OPTS = ["block_size=64K", "cache_size=1M", "readahead_init=128K",
              "readahead_max=512K", "part_size=128K", "prefetch_mem=2M",
              "dir_prefetch=2", "read_ahead_kb=128", "max_conns=8",
              "threads=8"]


@functools.lru_cache(maxsize=64)
def content(key, ver):
    """The bytes of version @ver of @key: 16-byte records
    "TTTTTTVVNNNNNNN\\n" (object tag, version, record index, hex)."""
    tag = zlib.crc32(key.encode()) & 0xFFFFFF
    n = (size_of(key, ver) + REC - 1) // REC
    head = b"%06x%02x" % (tag, ver % 256)
    return b"".join(head + b"%07x\n" % j for j in range(n))[:size_of(key, ver)]


def describe(key, off, got):
    """Where the first wrong byte of @got (read at @off of @key) came
    from, decoded from its record."""
    exp = content(key, 0)[off:off + len(got)]
    i = next((i for i in range(min(len(got), len(exp)))
              if got[i] != exp[i]), min(len(got), len(exp)))
    pos = off + i
    rs = (pos // REC) * REC - off
    rec = got[max(0, rs):max(0, rs) + REC]
    return ("%s: %d bytes at %d, first difference at byte %d (file offset "
            "%d), record there %r" % (key, len(got), off, i, pos, rec))


def runs(key, off, got, cands):
    """Splits @got (read at @off) into runs of bytes that equal one version:
    [(file offset, length, version or None)], to show where a mix came
    from."""
    out = []
    for i in range(0, len(got), REC):
        pos = off + i
        seg = got[i:i + REC]
        v = next((c for c in cands
                  if content(key, c)[pos:pos + len(seg)] == seg), None)
        if out and out[-1][2] == v and out[-1][0] + out[-1][1] == pos:
            out[-1] = (out[-1][0], out[-1][1] + len(seg), v)
        else:
            out.append((pos, len(seg), v))
    return out[:20]


def versions_of(key, off, got, cands):
    """The candidate versions whose bytes at @off equal @got (a short read
    only at the object's end)."""
    out = set()
    for v in cands:
        exp = content(key, v)[off:off + len(got)]
        if exp == got and (len(got) > 0 or off >= size_of(key, v)):
            out.add(v)
    return out


def reader(root, keys, seconds, seed, cands, allow_eio, use_mmap, q):
    """One reader process: random files, random ways of reading, every
    byte checked. Puts (ops, eio, [problems]) on @q."""
    rnd = random.Random(seed)
    ops = eio = 0
    bad = []
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and len(bad) < 5:
            key = rnd.choice(keys)
            size = max(size_of(key, v) for v in cands)
            mode = rnd.choice(["whole", "pread", "chunks"] +
                              (["mmap"] if use_mmap else []))
            try:
                fd = os.open(os.path.join(root, key), os.O_RDONLY)
            except OSError as e:
                if allow_eio and e.errno == errno.EIO:
                    eio += 1
                    continue
                raise
            ok_vers = set(cands)
            reads = []
            whole = None  # bytes read to EOF by "whole" and "chunks"
            try:
                if mode == "whole":
                    with os.fdopen(os.dup(fd), "rb") as f:
                        reads.append((0, f.read()))
                    whole = len(reads[0][1])
                elif mode == "pread":
                    for _ in range(4):
                        off = rnd.randrange(0, size + 1)
                        n = rnd.choice([1, 100, 4096, 70_000, 200_000])
                        reads.append((off, os.pread(fd, n, off)))
                elif mode == "chunks":
                    off = 0
                    while True:
                        b = os.pread(fd, rnd.choice([4096, 65536, 131072]),
                                     off)
                        if not b:
                            break
                        reads.append((off, b))
                        off += len(b)
                        if rnd.random() < 0.2:
                            time.sleep(0.01)  # let a change land mid-file
                    whole = off
                else:
                    with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as mm:
                        for _ in range(4):
                            off = rnd.randrange(0, size)
                            n = rnd.choice([1, 4096, 100_000])
                            reads.append((off, mm[off:off + n]))
                for off, b in reads:
                    ok_vers &= versions_of(key, off, b, cands)
                    if not ok_vers:
                        if len(cands) == 1:
                            bad.append("WRONG " + describe(key, off, b))
                        else:
                            bad.append("MIX of versions in one open file "
                                       "%s (%s): runs %s" % (
                                           key, mode,
                                           [(o, len(x), runs(key, o, x, cands))
                                            for o, x in reads]))
                        break
                # read to EOF: the length is one version's, whole
                if ok_vers and whole is not None and \
                        not any(whole == size_of(key, v) for v in ok_vers):
                    bad.append("%s read of %s ended at %d, not at the end "
                               "of version(s) %s: %s" % (
                                   mode, key, whole, sorted(ok_vers),
                                   [size_of(key, v) for v in sorted(ok_vers)]))
                ops += 1
            except OSError as e:
                if not (allow_eio and e.errno == errno.EIO):
                    raise
                eio += 1
            finally:
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                except OSError:
                    pass
                os.close(fd)
    except Exception:
        bad.append(traceback.format_exc())
    q.put((ops, eio, bad))


def run_readers(root, seconds, cands=(0,), allow_eio=False, use_mmap=True,
                keys=None):
    """Runs WORKERS reader processes; returns (ops, eio, problems)."""
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    keys = sorted(keys or SIZES)
    procs = [ctx.Process(target=reader,
                         args=(root, keys, seconds, 1000 + i, tuple(cands),
                               allow_eio, use_mmap, q))
             for i in range(WORKERS)]
    for p in procs:
        p.start()
    res = [q.get(timeout=seconds + 120) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    return (sum(r[0] for r in res), sum(r[1] for r in res),
            [b for r in res for b in r[2]])


def upload(client, bucket, ver, keys):
    def put(k):
        client.put_object(Bucket=bucket, Key=k, Body=content(k, ver))

    with ThreadPoolExecutor(8) as ex:
        list(ex.map(put, keys))


@pytest.fixture
def soak_server(storaged):
    srv = storaged(ndrives=4)
    c = srv.client()
    bucket = "soak-" + uuid.uuid4().hex[:8]
    c.create_bucket(Bucket=bucket)
    upload(c, bucket, 0, sorted(SIZES))
    return srv, c, bucket


def mount(srv, ecfs_mount, bucket, opts):
    return ecfs_mount(srv.endpoint, bucket, access_key=srv.access_key,
                      secret_key=srv.secret_key, opts=MOUNT_OPTS + opts)


def verify_all(root):
    """Every file reads whole and right."""
    for k in sorted(SIZES):
        with open(os.path.join(root, k), "rb") as f:
            b = f.read()
        assert b == content(k, 0), describe(k, 0, b)


def test_soak_static_ro(soak_server, ecfs_mount):
    srv, _, bucket = soak_server
    m = mount(srv, ecfs_mount, bucket, ["ro"])
    ops, eio, bad = run_readers(m.path, SOAK_SECONDS)
    assert bad == [], "\n".join(bad)
    assert eio == 0
    assert ops > 100, ops
    st = m.stats()
    # the 1 MiB cache cannot hold the ~5 MiB tree: blocks were evicted and
    # fetched again, so the test exercised eviction
    total = sum(SIZES.values())
    assert st["bytes"] > 2 * total, st
    assert st["cache_bytes"] <= 2 * 1024 * 1024, st
    assert st["errors"] == 0 and st["etag_mismatch"] == 0, st
    verify_all(m.path)


def test_soak_storaged_restart(soak_server, ecfs_mount):
    srv, _, bucket = soak_server
    m = mount(srv, ecfs_mount, bucket, ["ro", "retries=8",
                                        "connect_timeout_ms=500"])
    outage = {}

    def chaos():
        time.sleep(SOAK_SECONDS / 4)
        srv.kill9()
        outage["down"] = time.monotonic()
        time.sleep(1.5)
        srv.start()
        outage["up"] = time.monotonic()

    t = threading.Thread(target=chaos)
    t.start()
    try:
        ops, eio, bad = run_readers(m.path, SOAK_SECONDS, allow_eio=True)
    finally:
        t.join()
    assert bad == [], "\n".join(bad)
    assert "up" in outage
    assert ops > 50, (ops, eio)
    st = m.stats()
    assert st["retries"] > 0, st  # the outage was seen and retried
    verify_all(m.path)


@pytest.mark.parametrize("resize", [False, True])
def test_soak_overwrite(soak_server, ecfs_mount, resize):
    global RESIZE
    RESIZE = resize
    srv, c, bucket = soak_server
    m = mount(srv, ecfs_mount, bucket, ["list_ttl=0.3", "attr_timeout=0.2",
                                        "negative_timeout=0.2"])
    changing = sorted(MEDIUM) + sorted(SMALL)[::10]
    stop = threading.Event()
    vers = {"n": 0}

    def writer():
        v = 0
        while not stop.is_set():
            v = 1 - v
            upload(c, bucket, v, changing)
            vers["n"] += 1
            time.sleep(0.2)

    t = threading.Thread(target=writer)
    t.start()
    try:
        # mmap reads pages the kernel may share between opens: kept out of
        # this variant, which checks the per-open guarantee of read()
        ops, eio, bad = run_readers(m.path, SOAK_SECONDS, cands=(0, 1),
                                    allow_eio=True, use_mmap=False,
                                    keys=changing)
    finally:
        stop.set()
        t.join()
        RESIZE = False
    assert bad == [], "\n".join(bad)
    assert vers["n"] >= 3, vers
    assert ops > 30, (ops, eio)
