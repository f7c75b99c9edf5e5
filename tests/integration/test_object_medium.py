"""Medium objects (128 KiB .. 8 MiB) through the real S3 server (boto3 on
loopback): the sizes around the inline limit (1 MiB: shards inline in the
metas, served by the event loop) and around 8 MiB (shard files), with both
group-commit modes (storaged/FORMAT.md "Writes"): `file` (each file fsynced:
drives on a shared filesystem, the default here) and `fs` (one shared
syncfs per filesystem: what a drive that is its own filesystem gets; forced
with STORAGED_SYNC_MODE=fs).

- round trips at 128 KiB +-1, 320 KiB, 1 MiB +-1 and 8 MiB +-1 with random
  ranges, and overwrites that cross the inline limit both ways;
- any 4 of 16 drives lost or corrupted: every byte still right; a 5th lost:
  errors, never wrong bytes;
- a stale drive never brings back overwritten or deleted medium objects,
  across a restart and a kill -9;
- kill -9 under concurrent medium PUTs: every acknowledged PUT reads back;
- concurrent PUTs share syncfs rounds in fs mode (storaged_sync_* counters).
"""

import hashlib
import os
import random
import threading
import time

import pytest
from botocore.exceptions import ClientError

from test_object_crash import writer
from test_object_fault import away, corrupt_drive, rnd, wait_probe

KIB, MIB = 1024, 1024 * 1024
SIZES = [128 * KIB - 1, 128 * KIB, 128 * KIB + 1, 320 * KIB, MIB - 1, MIB,
         MIB + 1, 8 * MIB - 1, 8 * MIB + 1]
MODES = ["file", "fs"]


def check_ranges(c, bucket, key, v, rng, n=6):
    """Whole object plus @n random ranges (first byte, last byte, one that
    runs past the end)."""
    assert c.get_object(Bucket=bucket, Key=key)["Body"].read() == v, key
    size = len(v)
    spans = [(0, 0), (size - 1, size - 1), (size - 5, size + 100)]
    for _ in range(n):
        a = rng.randrange(size)
        spans.append((a, a + rng.randrange(1, 3 * 64 * KIB)))
    for a, b in spans:
        got = c.get_object(Bucket=bucket, Key=key,
                           Range="bytes=%d-%d" % (a, b))["Body"].read()
        assert got == v[a:b + 1], (key, a, b)


@pytest.mark.parametrize("mode", MODES)
def test_medium_round_trips(storaged, mode):
    srv = storaged(ndrives=16, env={"STORAGED_SYNC_MODE": mode})
    c = srv.client()
    c.create_bucket(Bucket="med")
    rng = random.Random(14)
    objs = {"m/%d" % n: rnd(n, n) for n in SIZES}
    for k, v in objs.items():
        c.put_object(Bucket="med", Key=k, Body=v)
    for k, v in objs.items():
        check_ranges(c, "med", k, v, rng)
    # overwrites across the inline limit and back, read back each time
    for n in (MIB + 1, 320 * KIB, 8 * MIB + 1, 128 * KIB + 1):
        v = rnd(n, 1000 + n)
        c.put_object(Bucket="med", Key="m/x", Body=v)
        check_ranges(c, "med", "m/x", v, rng, n=2)
        assert c.head_object(Bucket="med", Key="m/x")["ContentLength"] == n
    # a 320 KiB object is 16 inline metas and no shard file; 1 MiB + 1 has
    # shard files (one per drive)
    names = [f for d in srv.drives
             for _, _, fs in os.walk(os.path.join(d, "b", "med"))
             for f in fs]
    assert sum(f.endswith(".m") for f in names) == 16 * (len(objs) + 1)
    assert sum(not f.endswith(".m") and f != "bucket" for f in names) == \
        16 * sum(n > MIB for n in SIZES)
    with open(srv.log) as f:
        log = f.read()
    assert ("group commit by syncfs" in log) == (mode == "fs"), log[-2000:]
    assert ("group commit fsyncs each file" in log) == (mode == "file")


def sync_counts(srv):
    """The group-commit counters of /metrics."""
    import urllib.request
    with urllib.request.urlopen(srv.endpoint + "/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("storaged_sync_"):
            name, val = line.split()
            out[name[len("storaged_sync_"):-len("_total")]] = int(val)
    return out


def concurrent_puts(srv, c, bucket, objs, writers=12):
    """PUTs @objs from @writers threads at once; returns how much each
    group-commit counter (sync_counts) grew meanwhile."""
    before = sync_counts(srv)
    keys = list(objs)

    def put(i):
        for k in keys[i::writers]:
            c.put_object(Bucket=bucket, Key=k, Body=objs[k])

    ts = [threading.Thread(target=put, args=(i,)) for i in range(writers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return {k: v - before.get(k, 0) for k, v in sync_counts(srv).items()}


@pytest.mark.parametrize("mode", MODES)
def test_medium_group_commit_counters(storaged, mode):
    """12 writers PUT 320 KiB objects at once: every commit waits on its
    barriers (/metrics storaged_sync_*). fs mode: syncfs rounds are shared,
    fewer rounds than barriers, no per-file fsync; file mode: no syncfs,
    each barrier fsyncs its files. Every object reads back."""
    srv = storaged(ndrives=16, env={"STORAGED_SYNC_MODE": mode})
    c = srv.client(max_pool_connections=12)
    c.create_bucket(Bucket="gcommit")
    objs = {"g/%d" % i: rnd(320 * KIB, 500 + i) for i in range(36)}
    d = concurrent_puts(srv, c, "gcommit", objs)
    assert d["failures"] == 0
    # new inline keys commit with one barrier each (two with --extents,
    # test_object_new_dirs.py)
    assert d["barriers"] >= len(objs), d
    if mode == "fs":
        assert d["fsyncs"] == 0
        assert 0 < d["rounds"] < d["barriers"], d
    else:
        # each shard's meta goes to its filesystem's journal (FORMAT.md "The
        # meta journal"; one for the 16 drive directories here): one
        # fdatasync of it per barrier, run by this commit or shared with
        # another's; no meta, no directory
        assert d["rounds"] == 0
        assert d["fsyncs"] + d["shared"] == d["barriers"], d
    for k, v in objs.items():
        assert c.get_object(Bucket="gcommit", Key=k)["Body"].read() == v, k


def read_all(c, bucket, objs):
    for k, v in objs.items():
        assert c.get_object(Bucket=bucket, Key=k)["Body"].read() == v, k
        a = len(v) // 3
        r = c.get_object(Bucket=bucket, Key=k,
                         Range="bytes=%d-%d" % (a, a + 70000))["Body"].read()
        assert r == v[a:a + 70001], k


def five_lost_never_wrong(srv, c, bucket, objs, rng):
    """With 5 of 16 drives away every GET fails (an error or a broken
    stream), never with wrong bytes."""
    five = rng.sample(srv.drives, 5)
    for d in five:
        away(d)
    for k, v in objs.items():
        try:
            got = c.get_object(Bucket=bucket, Key=k)["Body"].read()
        except ClientError as e:
            assert e.response["ResponseMetadata"]["HTTPStatusCode"] >= 500
        except Exception:
            pass  # a broken stream is fine: wrong bytes are not
        else:
            assert got == v, "wrong bytes with 5 of 16 drives lost: " + k
    for d in five:
        away(d, False)


def test_medium_lost_or_corrupt(storaged):
    srv = storaged(ndrives=16)
    c = srv.client()
    c.create_bucket(Bucket="medf")
    objs = {"f/%d" % n: rnd(n, n + 3) for n in SIZES}
    for k, v in objs.items():
        c.put_object(Bucket="medf", Key=k, Body=v)
    rng = random.Random(5)
    for _ in range(2):
        lost = rng.sample(srv.drives, 4)
        for d in lost:
            away(d)
        read_all(c, "medf", objs)
        for d in lost:
            away(d, False)
    for d in rng.sample(srv.drives, 4):
        corrupt_drive(d, rng)
    read_all(c, "medf", objs)
    five_lost_never_wrong(srv, c, "medf", objs, rng)


def stale_drive_rounds(srv, bucket, sizes):
    """Drive 3 of @srv goes away; half the keys are deleted and half
    overwritten (sizes from @sizes) while it is gone; it comes back: the
    listing, every byte and the deletes hold, across a restart and a
    kill -9 (its stale copies never come back)."""
    c = srv.client()
    c.create_bucket(Bucket=bucket)
    keys = ["s/%02d" % i for i in range(8)]
    for i, k in enumerate(keys):
        c.put_object(Bucket=bucket, Key=k, Body=rnd(sizes[i % 4], i))
    away(srv.drives[2])
    wait_probe()
    new = {}
    for i, k in enumerate(keys):
        if i % 2:
            c.delete_object(Bucket=bucket, Key=k)
        else:
            new[k] = rnd(sizes[(i + 1) % 4], 500 + i)
            c.put_object(Bucket=bucket, Key=k, Body=new[k])
    away(srv.drives[2], False)
    wait_probe()

    def check():
        listed = [o["Key"] for o in
                  c.list_objects_v2(Bucket=bucket).get("Contents", [])]
        assert listed == sorted(new)
        read_all(c, bucket, new)
        for i, k in enumerate(keys):
            if i % 2:
                with pytest.raises(ClientError):
                    c.head_object(Bucket=bucket, Key=k)

    check()
    srv.restart()
    check()
    srv.restart(graceful=False)
    check()


def test_medium_stale_drive(storaged):
    stale_drive_rounds(storaged(ndrives=4), "meds",
                       [128 * KIB + 1, 320 * KIB, MIB, MIB + 1])


def body(rng):
    n = rng.choice([128 * KIB - 1, 128 * KIB + 1, 320 * KIB, 320 * KIB,
                    MIB - 1, MIB + 1, 3 * MIB])
    return rng.randbytes(n)


def kill9_under_puts(srv, bucket, make_body, rounds, seed=9, nthreads=6):
    """@rounds times: @nthreads writers PUT bodies from @make_body to their
    own keys, the server is killed with -9 and restarted; every
    acknowledged PUT must read back, and nothing partial or stale may be
    visible. Returns how many PUTs were acknowledged."""
    c = srv.client()
    c.create_bucket(Bucket=bucket)
    keys = [["t%d/k%d" % (t, i) for i in range(4)] for t in range(nthreads)]
    state = {k: {"acked": None, "inflight": set(), "acked_seq": []}
             for ks in keys for k in ks}
    rng = random.Random(seed)
    for rnd_ in range(rounds):
        stop = threading.Event()
        cl = [srv.client() for _ in range(nthreads)]
        ths = [threading.Thread(target=writer, args=(cl[t], keys[t], state,
                                                     stop, rnd_ * 10 + t,
                                                     bucket, make_body))
               for t in range(nthreads)]
        for t in ths:
            t.start()
        time.sleep(rng.uniform(1.0, 2.5))
        srv.kill9()
        stop.set()
        for t in ths:
            t.join(30)
        srv.start()
        for k, st in state.items():
            try:
                got = c.get_object(Bucket=bucket, Key=k)["Body"].read()
            except ClientError as e:
                assert e.response["Error"]["Code"] == "NoSuchKey", k
                assert st["acked"] is None, "acknowledged PUT lost: " + k
                continue
            h = hashlib.md5(got).hexdigest()
            ok = ({st["acked"]} if st["acked"] else set()) | st["inflight"]
            assert h in ok, "partial or stale object visible: " + k
            st["acked"] = h
            st["inflight"] = set()
    return sum(len(st["acked_seq"]) for st in state.values())


@pytest.mark.parametrize("mode", MODES)
def test_medium_kill9_concurrent_puts(storaged, mode):
    srv = storaged(ndrives=16, env={"STORAGED_SYNC_MODE": mode})
    # fs mode on a shared filesystem waits for a syncfs of everyone's dirty
    # data: few acks under load, but each one is checked
    assert kill9_under_puts(srv, "medk", body, 3) >= 8
