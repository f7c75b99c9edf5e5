"""GETs of small (inline) objects served by the event loop itself.

storaged reads a small object's metas on the loop thread's io_uring and
answers from there; whatever does not verify goes to a worker, which
rebuilds from parity. These cases drive that path through the real server
(boto3 and raw HTTP on loopback) and check it with the
storaged_get_loop_total{result=served|fallback} counters: it is taken, a
cold page cache (reads the kernel must punt to its workers) still answers,
a corrupt or missing data shard falls back and still returns exact bytes,
overwrites racing with GETs never mix versions, and more concurrent GETs
than the ring has slots all succeed. With --cache-mem the loop answers
repeated GETs from memory: never an overwritten or deleted version.
"""

import concurrent.futures
import os
import random
import re
import threading
import urllib.request

import pytest



def rnd(n, seed):
    return random.Random(seed).randbytes(n)


def metric(srv, name):
    """Sum of every sample of metric @name (a regex over the sample)."""
    with urllib.request.urlopen(srv.endpoint + "/metrics", timeout=5) as r:
        text = r.read().decode()
    tot = 0
    for line in text.splitlines():
        if re.match(name + r"(\s|$)", line.split(" ")[0] + " "):
            tot += float(line.rsplit(" ", 1)[1])
    return tot


def served(srv):
    return metric(srv, r'storaged_get_loop_total\{result="served"\}')


def fallback(srv):
    return metric(srv, r'storaged_get_loop_total\{result="fallback"\}')


def cached(srv):
    return metric(srv, r'storaged_get_loop_total\{result="cached"\}')


def object_files(srv):
    """Every file under the drives' bucket trees."""
    out = []
    for d in srv.drives:
        for root, _, files in os.walk(os.path.join(d, "b")):
            out += [os.path.join(root, f) for f in files if f != "bucket"]
    return out


@pytest.fixture
def srv16(storaged):
    return storaged(ndrives=16)


def test_small_gets_are_served_by_the_loop(srv16):
    c = srv16.client()
    c.create_bucket(Bucket="fastget")
    objs = {"k/%d" % n: rnd(n, n) for n in (1, 100, 4096, 5000, 16 * 1024,
                                             100 * 1024, 128 * 1024)}
    for k, v in objs.items():
        c.put_object(Bucket="fastget", Key=k, Body=v, ContentType="text/x-test")
    before = served(srv16)
    for k, v in objs.items():
        r = c.get_object(Bucket="fastget", Key=k)
        assert r["Body"].read() == v
        assert r["ContentType"] == "text/x-test"
        assert r["ContentLength"] == len(v)
    # ranges and conditionals are answered on the loop too
    r = c.get_object(Bucket="fastget", Key="k/4096", Range="bytes=10-19")
    assert r["Body"].read() == objs["k/4096"][10:20]
    etag = c.head_object(Bucket="fastget", Key="k/4096")["ETag"]
    with pytest.raises(Exception) as ei:
        c.get_object(Bucket="fastget", Key="k/4096", IfNoneMatch=etag)
    assert "304" in str(ei.value)
    assert served(srv16) - before >= len(objs) + 2
    assert fallback(srv16) == 0
    # a big object and a missing key take the worker path, same answers
    big = rnd(3 * 1024 * 1024 + 5, 7)
    c.put_object(Bucket="fastget", Key="big", Body=big)
    assert c.get_object(Bucket="fastget", Key="big")["Body"].read() == big
    with pytest.raises(c.exceptions.NoSuchKey):
        c.get_object(Bucket="fastget", Key="nope")


def test_cold_page_cache(srv16):
    """Reads that miss the page cache go to the kernel's io_uring workers;
    their completions must still wake the loop (a stall here once came
    from IORING_SETUP_DEFER_TASKRUN)."""
    c = srv16.client()
    c.create_bucket(Bucket="fastget")
    objs = {"c/%d" % i: rnd(4096, i) for i in range(30)}
    for k, v in objs.items():
        c.put_object(Bucket="fastget", Key=k, Body=v)
    for _ in range(3):
        for p in object_files(srv16):
            fd = os.open(p, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        for k, v in objs.items():
            assert c.get_object(Bucket="fastget", Key=k)["Body"].read() == v
    assert fallback(srv16) == 0


def test_corrupt_or_missing_shard_falls_back(srv16):
    """16 drives: a 4 KiB object is 1 data + 4 parity shards, each inline in
    a meta file. Corrupting or deleting the data shard's file makes the
    loop's read fail verification; the worker rebuilds it from parity."""
    c = srv16.client()
    c.create_bucket(Bucket="fastget")
    objs = {"f/%d" % i: rnd(4096, 100 + i) for i in range(8)}
    for k, v in objs.items():
        c.put_object(Bucket="fastget", Key=k, Body=v)
    files = object_files(srv16)
    assert len(files) == 8 * 5
    by_obj = {}
    for p in files:
        by_obj.setdefault(os.path.basename(p), []).append(p)
    assert len(by_obj) == 8
    rng = random.Random(5)
    # damage 4 of each object's 5 shard files (deleted or corrupted): the
    # one data shard the loop reads is among them 4 times in 5, and every
    # object stays readable from the shard that is left
    for paths in by_obj.values():
        for p in rng.sample(sorted(paths), 4):
            if rng.random() < 0.5:
                os.unlink(p)
            else:
                with open(p, "r+b") as f:
                    f.seek(rng.randrange(os.path.getsize(p)))
                    b = f.read(1)
                    f.seek(-1, os.SEEK_CUR)
                    f.write(bytes([b[0] ^ 0xFF]))
    fb0, deg0 = fallback(srv16), metric(srv16, "storaged_degraded_reads_total")
    for k, v in objs.items():
        assert c.get_object(Bucket="fastget", Key=k)["Body"].read() == v
    fb = fallback(srv16) - fb0
    deg = metric(srv16, "storaged_degraded_reads_total") - deg0
    assert fb >= 1, "no object's data shard was damaged: test setup"
    assert deg >= fb


@pytest.mark.parametrize("cache", [False, True])
def test_overwrite_races_never_mix_versions(storaged, cache):
    srv16 = storaged(ndrives=16, args=["--cache-mem", "8"] if cache else None)
    c = srv16.client()
    c.create_bucket(Bucket="fastget")
    versions = [bytes([i]) * 4096 for i in range(1, 9)] + \
        [rnd(9000, i) for i in range(8)]
    allowed = set(versions)
    c.put_object(Bucket="fastget", Key="hot", Body=versions[0])
    stop = threading.Event()
    bad = []

    def writer():
        i = 0
        w = srv16.client()
        while not stop.is_set():
            w.put_object(Bucket="fastget", Key="hot", Body=versions[i % len(versions)])
            i += 1

    def reader():
        rc = srv16.client()
        n = 0
        while not stop.is_set() or n < 20:
            got = rc.get_object(Bucket="fastget", Key="hot")["Body"].read()
            if got not in allowed:
                bad.append(len(got))
            n += 1
        return n

    with concurrent.futures.ThreadPoolExecutor(5) as ex:
        wf = ex.submit(writer)
        rfs = [ex.submit(reader) for _ in range(4)]
        threading.Timer(4.0, stop.set).start()
        wf.result()
        reads = sum(f.result() for f in rfs)
    assert not bad
    assert reads >= 80
    assert served(srv16) > 0


def test_more_concurrent_gets_than_ring_slots(storaged):
    """k = 12 inline shards per 128 KiB object, 64 clients at once: more
    files in flight than the loop ring's 256 slots; the excess must wait or
    take a worker, never fail."""
    srv = storaged(ndrives=16, threads=1)
    c = srv.client(max_pool_connections=64)
    c.create_bucket(Bucket="fastget")
    objs = {"s/%d" % i: rnd(128 * 1024, i) for i in range(16)}
    for k, v in objs.items():
        c.put_object(Bucket="fastget", Key=k, Body=v)
    keys = list(objs) * 12

    def get(k):
        return c.get_object(Bucket="fastget", Key=k)["Body"].read() == objs[k]

    with concurrent.futures.ThreadPoolExecutor(64) as ex:
        assert all(ex.map(get, keys))
    assert served(srv) > 0


def test_cache_serves_only_current_versions(storaged):
    srv = storaged(ndrives=16, args=["--cache-mem", "4"])
    c = srv.client()
    c.create_bucket(Bucket="fastget")
    c.create_bucket(Bucket="fastget2")
    v1, v2 = rnd(4096, 1), rnd(5000, 2)
    c.put_object(Bucket="fastget", Key="k", Body=v1, ContentType="a/b")
    c.put_object(Bucket="fastget2", Key="k", Body=v2)  # same key, other bucket
    for _ in range(4):
        assert c.get_object(Bucket="fastget", Key="k")["Body"].read() == v1
        assert c.get_object(Bucket="fastget2", Key="k")["Body"].read() == v2
    assert cached(srv) >= 4
    r = c.get_object(Bucket="fastget", Key="k")
    assert r["ContentType"] == "a/b" and r["Body"].read() == v1
    # overwrite: the next GET reads the new version, never the cached one
    v3 = rnd(4096, 3)
    c.put_object(Bucket="fastget", Key="k", Body=v3)
    for _ in range(3):
        assert c.get_object(Bucket="fastget", Key="k")["Body"].read() == v3
    # delete: gone, even though its bytes were cached
    c.delete_object(Bucket="fastget", Key="k")
    with pytest.raises(c.exceptions.NoSuchKey):
        c.get_object(Bucket="fastget", Key="k")
    # bounded: far more small objects than 4 MiB hold, all exact
    objs = {"m/%d" % i: rnd(100 * 1024, 10 + i) for i in range(80)}
    for k, v in objs.items():
        c.put_object(Bucket="fastget", Key=k, Body=v)
    for _ in range(2):
        for k, v in objs.items():
            assert c.get_object(Bucket="fastget", Key=k)["Body"].read() == v
    with open("/proc/%d/status" % srv.proc.pid) as f:
        rss = [int(l.split()[1]) for l in f if l.startswith("VmRSS:")][0]
    assert rss < 200 * 1024, rss
