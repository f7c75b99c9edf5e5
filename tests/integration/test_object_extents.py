"""Per-drive extent files (`storaged serve --extents`; storaged/FORMAT.md
"Extent files") through the real S3 server (boto3 on loopback, 16 drives):

- round trips at 8 KiB + 1 .. 1 MiB with random ranges: the shards land in
  DRIVE/.ecfs.sys/ext/*.x, the metas carry no data, and a GET of one is
  served by the event loop without opening any file (strace);
- a delete or an overwrite punches the old records (the files' blocks
  shrink, the size stays);
- any 4 of 16 drives lost, or their extent files corrupted: every byte
  right, the damage counted and healed; a 5th lost: errors, never wrong
  bytes;
- concurrent commits share one fsync of each drive's extent file (file
  mode: storaged_sync_shared_total);
- a stale drive never brings back an overwritten or deleted object, across
  a restart and a kill -9; kill -9 under concurrent PUTs loses no
  acknowledged one;
- a restart without --extents still reads them, an index rebuilt from the
  metas knows the records again (`storaged index check` agrees), and a
  drive replaced by an empty directory while serving gets its own extent
  file and is refilled.
"""

import glob
import os
import random
import re
import shutil
import subprocess
import time
import urllib.request

import pytest

from test_object_fault import away, rnd
from test_object_medium import (five_lost_never_wrong, kill9_under_puts,
                                stale_drive_rounds, concurrent_puts)

KIB, MIB = 1024, 1024 * 1024
SIZES = [8 * KIB + 1, 64 * KIB, 128 * KIB - 1, 128 * KIB + 1, 320 * KIB,
         MIB - 1, MIB]


def metrics(srv):
    with urllib.request.urlopen(srv.endpoint + "/metrics", timeout=5) as r:
        return r.read().decode()


def metric(text, name):
    m = re.search(r"^%s (\d+)" % re.escape(name), text, re.M)
    return int(m.group(1)) if m else 0


def ext_files(srv):
    return sorted(p for d in srv.drives
                  for p in glob.glob(os.path.join(d, ".ecfs.sys/ext/*.x")))


def ext_blocks(srv):
    return sum(os.stat(p).st_blocks for p in ext_files(srv))


def check(c, bucket, objs, rng, n=3):
    for k, v in objs.items():
        assert c.get_object(Bucket=bucket, Key=k)["Body"].read() == v, k
        for _ in range(n):
            a = rng.randrange(len(v))
            b = a + rng.randrange(1, 200 * KIB)
            got = c.get_object(Bucket=bucket, Key=k,
                               Range="bytes=%d-%d" % (a, b))["Body"].read()
            assert got == v[a:b + 1], (k, a, b)


def shards(n):
    """k + m of an inline-class object of @n bytes at 12+4 (FORMAT.md)."""
    return min(12, max(1, n // 4096)) + 4


def ext_server(storaged, ndrives=16, args=(), **kw):
    return storaged(ndrives=ndrives, args=["--extents"] + list(args), **kw)


def test_extents_round_trips_loop_and_punch(storaged):
    # no scanner: its reads of the metas would show in the strace below;
    # no body cache: the repeated GETs are counted as loop reads
    srv = ext_server(storaged, args=["--zc-cache-mem", "0"],
                     env={"STORAGED_NO_BACKGROUND": "1"})
    c = srv.client()
    c.create_bucket(Bucket="ext")
    rng = random.Random(14)
    objs = {"e/%d" % n: rnd(n, n) for n in SIZES}
    small = rnd(4 * KIB, 4)  # kept in the index: inline metas as before
    big = rnd(MIB + 1, 5)  # shard files as before
    for k, v in objs.items():
        c.put_object(Bucket="ext", Key=k, Body=v)
    c.put_object(Bucket="ext", Key="small", Body=small)
    c.put_object(Bucket="ext", Key="big", Body=big)
    assert len(ext_files(srv)) == 16
    # shards in the extent files, not in the metas (a meta is < 1 KiB)
    metas = [os.path.join(r, f) for d in srv.drives
             for r, _, fs in os.walk(os.path.join(d, "b", "ext"))
             for f in fs if f.endswith(".m")]
    assert len(metas) == sum(shards(len(v)) for v in objs.values()) + 16 + 5
    assert sum(os.path.getsize(m) > 2048 for m in metas) == 5  # small's
    stored = sum(os.path.getsize(p) for p in ext_files(srv))
    assert stored >= sum(len(v) for v in objs.values())
    check(c, "ext", objs, rng)
    assert c.get_object(Bucket="ext", Key="small")["Body"].read() == small
    assert c.get_object(Bucket="ext", Key="big")["Body"].read() == big
    # served by the loop (no worker, no fallback) and no meta or extent
    # file opened by any thread (strace sees the syscalls; the loop's own
    # ring makes no openat for these: its reads name open fds)
    before = metrics(srv)
    log = os.path.join(srv.workdir, "strace.txt")
    st = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=openat,open",
                           "-o", log, "-p", str(srv.proc.pid)],
                          stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached
    for _ in range(3):
        for k, v in objs.items():
            assert c.get_object(Bucket="ext", Key=k)["Body"].read() == v
    time.sleep(0.3)
    st.terminate()
    st.wait(10)
    after = metrics(srv)
    served = (metric(after, 'storaged_get_loop_total{result="served"}') -
              metric(before, 'storaged_get_loop_total{result="served"}'))
    fallback = (metric(after, 'storaged_get_loop_total{result="fallback"}') -
                metric(before, 'storaged_get_loop_total{result="fallback"}'))
    assert served == 3 * len(objs) and fallback == 0, (served, fallback)
    with open(log) as f:
        opened = [ln for ln in f if "/b/ext/" in ln or ".ecfs.sys/ext" in ln]
    assert opened == [], opened[:5]
    # a delete and an overwrite punch the old records: blocks go down,
    # the files keep their size (offsets are never reused); the punches
    # come from the reclaim thread a little later, one per drive per run
    # of adjacent records
    size0 = sum(os.path.getsize(p) for p in ext_files(srv))
    blocks0 = ext_blocks(srv)
    m0 = metrics(srv)
    c.delete_object(Bucket="ext", Key="e/%d" % MIB)
    c.put_object(Bucket="ext", Key="e/%d" % (320 * KIB), Body=b"x" * 100)
    want = (MIB + 320 * KIB) * 16 // 12 - 16 * 4096
    deadline = time.time() + 10
    while (blocks0 - ext_blocks(srv)) * 512 < want and time.time() < deadline:
        time.sleep(0.1)
    freed = (blocks0 - ext_blocks(srv)) * 512
    assert freed >= want, freed
    assert sum(os.path.getsize(p) for p in ext_files(srv)) == size0
    m1 = metrics(srv)
    nfreed = (metric(m1, "storaged_extent_freed_total") -
              metric(m0, "storaged_extent_freed_total"))
    npunch = (metric(m1, "storaged_extent_punches_total") -
              metric(m0, "storaged_extent_punches_total"))
    assert nfreed == 32 and 0 < npunch <= nfreed, (nfreed, npunch)
    objs.pop("e/%d" % MIB)
    objs["e/%d" % (320 * KIB)] = b"x" * 100
    check(c, "ext", objs, rng, n=1)
    # back to an extent object after a small one, and a copy
    v = rnd(200 * KIB, 77)
    c.put_object(Bucket="ext", Key="e/%d" % (320 * KIB), Body=v)
    c.copy_object(Bucket="ext", Key="copy", CopySource="ext/e/%d" % (320 * KIB))
    assert c.get_object(Bucket="ext", Key="copy")["Body"].read() == v


def corrupt_extents(drive, rng):
    """Flips bytes inside every record (header and data) of the drive's
    extent files."""
    for p in glob.glob(os.path.join(drive, ".ecfs.sys/ext/*.x")):
        size = os.path.getsize(p)
        with open(p, "r+b") as fh:
            for off in range(0, size, 4096):
                fh.seek(off)
                if fh.read(8) != b"ECFSEXT1":
                    continue
                for at in (off + rng.randrange(64),
                           off + 64 + rng.randrange(64)):
                    fh.seek(at)
                    b = fh.read(1)
                    fh.seek(at)
                    fh.write(bytes([b[0] ^ 0x5A]))


def scanned_store(storaged, bucket, seed):
    """A 16-drive --extents server scanning every 2 s, holding one object
    of each of SIZES in @bucket: (srv, client, rng, objects)."""
    srv = ext_server(storaged, env={"STORAGED_SCAN_INTERVAL": "2"})
    c = srv.client()
    c.create_bucket(Bucket=bucket)
    objs = {"o/%d" % n: rnd(n, n + seed) for n in SIZES}
    for k, v in objs.items():
        c.put_object(Bucket=bucket, Key=k, Body=v)
    return srv, c, random.Random(seed), objs


def wait_scans(srv, n=2, timeout=90):
    """Until @n more whole scanner cycles have run."""
    cycles = metric(metrics(srv), "storaged_scan_cycles_total")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and \
            metric(metrics(srv), "storaged_scan_cycles_total") < cycles + n:
        time.sleep(0.5)


def test_extents_lost_or_corrupt(storaged):
    srv, c, rng, objs = scanned_store(storaged, "extf", 5)
    lost = rng.sample(srv.drives, 4)
    for d in lost:
        away(d)
    check(c, "extf", objs, rng, n=2)
    for d in lost:
        away(d, False)
    bad = rng.sample(srv.drives, 4)
    for d in bad:
        corrupt_extents(d, rng)
    check(c, "extf", objs, rng, n=2)
    m = metrics(srv)
    assert metric(m, "storaged_corrupt_found_total") > 0
    assert metric(m, "storaged_degraded_reads_total") > 0
    # the heal (queued by the degraded reads, and the scanner) rewrites the
    # damaged shards into new records: then GETs are served by the loop
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        before = metrics(srv)
        for k, v in objs.items():
            assert c.get_object(Bucket="extf", Key=k)["Body"].read() == v
        after = metrics(srv)
        fb = 'storaged_get_loop_total{result="fallback"}'
        if metric(after, fb) == metric(before, fb):
            break
        time.sleep(1)
    else:
        pytest.fail("damaged extent shards never healed")
    five_lost_never_wrong(srv, c, "extf", objs, rng)


def test_extents_stale_drive(storaged):
    stale_drive_rounds(ext_server(storaged, ndrives=4), "exts",
                       [128 * KIB + 1, 320 * KIB, MIB, 64 * KIB])


def body(rng):
    return rng.randbytes(rng.choice([16 * KIB + 1, 128 * KIB + 1, 320 * KIB,
                                     MIB - 1, MIB + 1]))


def test_extents_kill9_concurrent_puts(storaged):
    assert kill9_under_puts(ext_server(storaged), "extk", body, 2) >= 8


def test_extents_share_fsyncs(storaged):
    """File mode, 12 writers of 320 KiB objects at once: the commits that
    wait together share one fsync of each drive's extent file
    (storaged_sync_shared_total), so fewer files are fsynced than the
    barriers name, and every object reads back."""
    srv = ext_server(storaged, env={"STORAGED_SYNC_MODE": "file"})
    c = srv.client(max_pool_connections=12)
    c.create_bucket(Bucket="exts")
    objs = {"s/%d" % i: rnd(320 * KIB, 900 + i) for i in range(48)}
    d = concurrent_puts(srv, c, "exts", objs)
    assert d["failures"] == 0 and d["rounds"] == 0
    # each PUT's first barrier names 16 temp metas and 16 extent files;
    # the files of commits that waited together were fsynced once
    assert d["shared"] > 0, d
    assert d["fsyncs"] + d["shared"] >= 32 * len(objs), d
    for k, v in objs.items():
        assert c.get_object(Bucket="exts", Key=k)["Body"].read() == v, k


def test_extents_off_rebuild_and_replaced_drive(storaged):
    srv, c, rng, objs = scanned_store(storaged, "extr", 21)
    # the option off: extent objects still read, new ones are inline again
    srv.extra_args = ["--no-extents"]
    srv.restart()
    check(c, "extr", objs, rng, n=1)
    c.put_object(Bucket="extr", Key="inline", Body=rnd(320 * KIB, 1))
    srv.stop()
    # a lost index: rebuilt from the metas, which name the records, so the
    # rebuilt index knows them (the offline check agrees with it)
    for d in srv.drives:
        shutil.rmtree(os.path.join(d, ".ecfs.sys", "index"),
                      ignore_errors=True)
    srv.extra_args = ["--extents"]
    srv.start()
    objs["inline"] = rnd(320 * KIB, 1)
    before = metrics(srv)
    check(c, "extr", objs, rng, n=1)
    after = metrics(srv)
    fb = 'storaged_get_loop_total{result="fallback"}'
    assert metric(after, fb) == metric(before, fb)
    srv.stop_and_check_index()
    # a drive replaced by an empty directory while serving: formatted into
    # its slot with an extent file of its own, and refilled by the scan
    srv.start()
    d = srv.drives[5]
    away(d)
    os.makedirs(d)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not glob.glob(
            os.path.join(d, ".ecfs.sys/ext/*.x")):
        time.sleep(0.5)
    assert glob.glob(os.path.join(d, ".ecfs.sys/ext/*.x"))
    objs["after"] = rnd(320 * KIB, 2)
    c.put_object(Bucket="extr", Key="after", Body=objs["after"])
    wait_scans(srv)  # two whole cycles after the replacement refill it
    assert metric(metrics(srv), "storaged_shards_healed_total") > 0
    check(c, "extr", objs, rng, n=1)
    shutil.rmtree(d + ".away")
    # with 4 other drives away, every 16-shard object needs the refilled
    # drive's records: they must be good
    others = [x for x in srv.drives if x != d][:4]
    for x in others:
        away(x)
    check(c, "extr", objs, rng, n=1)
    for x in others:
        away(x, False)


def test_extents_off_heals_a_replaced_drive_inline(storaged):
    """Extent objects, the option off, a drive replaced by an empty
    directory: the heal has no extent file there to write to, so the
    rebuilt shards go inline into their metas (a reader takes either
    form); every byte reads with 4 other drives lost, also after the index
    is rebuilt from such mixed metas."""
    srv, c, rng, objs = scanned_store(storaged, "exth", 8)
    srv.extra_args = ["--no-extents"]
    srv.restart()
    d = srv.drives[9]
    away(d)
    os.makedirs(d)
    wait_scans(srv)
    assert metric(metrics(srv), "storaged_shards_healed_total") > 0
    assert glob.glob(os.path.join(d, ".ecfs.sys/ext/*.x")) == []
    shutil.rmtree(d + ".away")
    # 4 others away: every 16-shard object needs the healed drive's shards
    others = [x for x in srv.drives if x != d][:4]

    def with_others_away():
        for x in others:
            away(x)
        check(c, "exth", objs, rng, n=1)
        for x in others:
            away(x, False)

    with_others_away()
    srv.stop()
    for x in srv.drives:
        shutil.rmtree(os.path.join(x, ".ecfs.sys", "index"),
                      ignore_errors=True)
    srv.start()
    with_others_away()
