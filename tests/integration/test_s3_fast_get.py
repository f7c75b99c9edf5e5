"""GETs of small (inline) objects served by the event loop itself.

storaged reads a small object's metas on the loop thread's io_uring and
answers from there; whatever does not verify goes to a worker, which
rebuilds from parity. These cases drive that path through the real server
(boto3 and raw HTTP on loopback) and check it with the
storaged_get_loop_total{result=served|fallback} counters: it is taken, a
cold page cache (reads the kernel must punt to its workers) still answers,
a corrupt or missing data shard falls back and still returns exact bytes,
overwrites racing with GETs never mix versions, more concurrent GETs
than the ring has room for all succeed, and 40 clients' 320 KiB GETs at
once all stay on the loop (storaged_get_loop_total{result="busy"} 0). With --cache-mem the loop answers
repeated GETs from memory: never an overwritten or deleted version.

The big-GET path (whole stripes read straight into the stream buffer) and
the request-head copy, in the second half: pipelined and split requests,
clients that go away with reads in flight, SIGTERM with loop reads in
flight, a failing io_uring submit (LD_PRELOAD shim), corrupt, truncated and
missing shards of simple and multipart objects, headers that always match
the body under overwrites. Every case compares bytes exactly.
"""

import concurrent.futures
import glob
import os
import random
import re
import socket
import threading
import time
import urllib.request

import pytest

import s3util
from conftest import mpu_one_part



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


# Objects up to --index-body-max (8 KiB by default) keep their body in the
# index and a GET of them reads no meta file at all (test_object_index.py
# covers that path); the cases here that are about the loop's meta reads
# and the body cache turn it off, so those reads still happen.
NOBODY = ["--index-body-max", "0"]


@pytest.fixture
def srv16(storaged):
    return storaged(ndrives=16, args=NOBODY)


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


# Inline metas, named: with extent files (the default) a loop GET reads the
# records and never the metas (FORMAT.md "Extent files"), so the damage
# below would not be seen by it; test_corrupt_extent_record_falls_back is
# the same damage to that layout.
METAS = NOBODY + ["--no-extents"]


def test_corrupt_or_missing_shard_falls_back(storaged):
    """16 drives: a 4 KiB object is 1 data + 4 parity shards, each inline in
    a meta file. Corrupting or deleting the data shard's file makes the
    loop's read fail verification; the worker rebuilds it from parity."""
    srv16 = storaged(ndrives=16, args=METAS)
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


def ext_records(srv):
    """{(object id, version): [(path, offset, shard, length)]} of every
    record in the drives' extent files (FORMAT.md "Extent files")."""
    out = {}
    for d in srv.drives:
        for p in glob.glob(os.path.join(d, ".ecfs.sys/ext/*.x")):
            with open(p, "rb") as f:
                data = f.read()
            for off in range(0, len(data), 4096):
                h = data[off:off + 64]
                if h[:8] != b"ECFSEXT1":
                    continue
                key = (h[8:24], h[24:32])
                out.setdefault(key, []).append(
                    (p, off, h[32], int.from_bytes(h[36:40], "little")))
    return out


def test_corrupt_extent_record_falls_back(storaged):
    """The extent layout's form of test_corrupt_or_missing_shard_falls_back
    (the default layout; --zc-cache-mem 0: the GETs counted here are the
    first reads after the damage, which the body cache would answer): a 4
    KiB object is 1 data + 4 parity records. Each object's data record is
    bit-rotted (a flipped byte of its shard, in the page cache where the
    loop reads it) or lost (zeroed, as a punch or a torn write leaves it),
    and so are 3 of its 4 parity records; the loop GET's check fails, the
    worker rebuilds from the record that is left, answers exact bytes and
    counts a degraded read."""
    srv = storaged(ndrives=16, args=NOBODY + ["--extents", "--zc-cache-mem",
                                              "0"])
    c = srv.client()
    c.create_bucket(Bucket="fastget")
    objs = {"f/%d" % i: rnd(4096, 100 + i) for i in range(8)}
    for k, v in objs.items():
        c.put_object(Bucket="fastget", Key=k, Body=v)
    for k, v in objs.items():  # served by the loop from the records
        assert c.get_object(Bucket="fastget", Key=k)["Body"].read() == v
    recs = ext_records(srv)
    assert len(recs) == 8 and all(len(r) == 5 for r in recs.values())
    assert fallback(srv) == 0
    rng = random.Random(6)
    for rs in recs.values():
        data = [r for r in rs if r[2] == 0]
        assert len(data) == 1
        parity = [r for r in rs if r[2] != 0]
        for p, off, _, n in data + rng.sample(parity, 3):
            with open(p, "r+b") as f:
                if rng.random() < 0.5:
                    f.seek(off)
                    f.write(bytes(64 + n))
                else:
                    at = off + 64 + rng.randrange(n)
                    f.seek(at)
                    b = f.read(1)
                    f.seek(at)
                    f.write(bytes([b[0] ^ 0xFF]))
    fb0, deg0 = fallback(srv), metric(srv, "storaged_degraded_reads_total")
    for k, v in objs.items():
        assert c.get_object(Bucket="fastget", Key=k)["Body"].read() == v
    assert fallback(srv) - fb0 == len(objs)
    assert metric(srv, "storaged_degraded_reads_total") - deg0 >= len(objs)


@pytest.mark.parametrize("cache", [False, True])
def test_overwrite_races_never_mix_versions(storaged, cache):
    srv16 = storaged(ndrives=16,
                     args=NOBODY + ["--cache-mem", "8"] if cache else None)
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
    """k = 12 inline shards per 128 KiB object, 64 clients at once on one
    loop: more reads in flight than the loop ring's CQ budget (1920 SQEs,
    36 per GET); the excess must wait or take a worker, never fail."""
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
    # --cache-mem keeps bodies read from inline metas (METAS above)
    srv = storaged(ndrives=16, args=METAS + ["--cache-mem", "4"])
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


# ---- the big-GET path (whole stripes into the stream buffer), the loop's
# io_uring reads and --cache-mem under pipelining, gone clients, bad shards ----

def shard_files(srv, bucket):
    """Shard files (not metas) of @bucket, every drive."""
    out = []
    for d in srv.drives:
        for root, _, files in os.walk(os.path.join(d, "b", bucket)):
            out += [os.path.join(root, f) for f in files
                    if not f.endswith(".m") and not f.endswith(".p")
                    and f != "bucket"]
    return sorted(out)


def meta_files(srv, bucket):
    out = []
    for d in srv.drives:
        for root, _, files in os.walk(os.path.join(d, "b", bucket)):
            out += [os.path.join(root, f) for f in files if f.endswith(".m")]
    return sorted(out)


def flip(path, off):
    with open(path, "r+b") as f:
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ 0xFF]))


def signed_get(srv, path, extra=None):
    h = {"host": "127.0.0.1:%d" % srv.port}
    h.update(extra or {})
    s3util.sign_headers("GET", path, [], h, s3util.EMPTY_SHA, srv.access_key,
                        srv.secret_key)
    return ("GET %s HTTP/1.1\r\n" % path).encode() + "".join(
        "%s: %s\r\n" % kv for kv in h.items()).encode() + b"\r\n"


BLOCK = 64 * 1024 + 8  # [CRC-64][64 KiB] per stripe in a shard file


@pytest.mark.parametrize("where", ["data", "crc", "truncate", "unlink"])
def test_big_get_bad_shard_never_wrong_bytes(storaged, where):
    """4 drives (2+2): a 3 MiB object has 24 full stripes. One shard file is
    damaged at a few stripes (or cut short, or gone): the in-place stripe
    reads must fall back and rebuild, whole GETs and ranges exact."""
    srv = storaged(ndrives=4)
    c = srv.client()
    c.create_bucket(Bucket="big")
    body = rnd(3 * 1024 * 1024 + 5, 1)
    c.put_object(Bucket="big", Key="o", Body=body)
    files = shard_files(srv, "big")
    assert len(files) == 4
    for i, p in enumerate(files[:2]):  # at most M = 2 files damaged
        if where == "data":
            for s in (0, 3 + i, 9, 23):
                flip(p, s * BLOCK + 8 + 1000 * (i + 1))
        elif where == "crc":
            for s in (1, 5 + i, 16):
                flip(p, s * BLOCK + i)
    if where == "truncate":
        for p in files[:2]:
            os.truncate(p, 7 * BLOCK + 100)
    elif where == "unlink":
        os.unlink(files[0])
    for _ in range(2):
        assert c.get_object(Bucket="big", Key="o")["Body"].read() == body
    for a, z in ((0, 2 * 1024 * 1024 - 1), (128 * 1024, 3 * 1024 * 1024),
                 (131072 * 3, len(body) - 1), (100, 1024 * 1024 + 100)):
        got = c.get_object(Bucket="big", Key="o",
                           Range="bytes=%d-%d" % (a, z))["Body"].read()
        assert got == body[a:z + 1], (a, z)


def test_pipelined_and_split_small_gets(storaged):
    """Many pipelined GETs of inline objects on one connection, sent in one
    write and then one byte at a time: answered in order, exact."""
    srv = storaged(ndrives=16)
    c = srv.client()
    c.create_bucket(Bucket="pipe")
    objs = [rnd(n, n) for n in (0, 1, 4096, 9000, 70000, 128 * 1024)]
    for i, v in enumerate(objs):
        c.put_object(Bucket="pipe", Key="k%d" % i, Body=v)
    order = [i % len(objs) for i in range(40)]
    reqs = b"".join(signed_get(srv, "/pipe/k%d" % i) for i in order)
    for split in (None, 1, 7):
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        try:
            if split is None:
                sock.sendall(reqs)
            else:
                part = reqs[:len(reqs) // 4]
                for j in range(0, len(part), split):
                    sock.sendall(part[j:j + split])
                sock.sendall(reqs[len(part):])
            f = sock.makefile("rb")
            for i in order:
                st, _, b = s3util.read_response(f)
                assert st == 200 and b == objs[i], i
        finally:
            sock.close()


def test_clients_gone_with_loop_reads_in_flight(storaged):
    """Clients that send a GET of an inline object and close at once, with
    the page cache dropped so the loop's reads go to the kernel's workers:
    no crash, no leak (ASan), and the server still answers exactly."""
    srv = storaged(ndrives=16, threads=1, args=NOBODY + ["--cache-mem", "1"])
    c = srv.client()
    c.create_bucket(Bucket="gone")
    objs = {"g/%d" % i: rnd(48 * 1024 + i, i) for i in range(20)}
    for k, v in objs.items():
        c.put_object(Bucket="gone", Key=k, Body=v)
    for rnd_ in range(3):
        for p in meta_files(srv, "gone"):
            fd = os.open(p, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        socks = []
        for k in objs:
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
            s.sendall(signed_get(srv, "/gone/" + k) * 3)
            socks.append(s)
        for s in socks:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                         b"\x01\x00\x00\x00\x00\x00\x00\x00")
            s.close()
    time.sleep(0.3)
    assert srv.alive()
    for k, v in objs.items():
        assert c.get_object(Bucket="gone", Key=k)["Body"].read() == v


def test_delete_and_overwrite_races_with_cache(storaged):
    """Readers racing a writer that deletes and re-puts one key with
    --cache-mem: every GET is one of the versions or a 404, never bytes of
    a deleted version after its delete returned."""
    srv = storaged(ndrives=16, threads=2, args=NOBODY + ["--cache-mem", "8"])
    c = srv.client()
    c.create_bucket(Bucket="race")
    versions = [rnd(4096 + 100 * i, 50 + i) for i in range(6)]
    allowed = set(versions)
    bad = []
    stop = time.monotonic() + 3.0

    def writer():
        w = srv.client()
        i = 0
        while time.monotonic() < stop:
            v = versions[i % len(versions)]
            w.put_object(Bucket="race", Key="hot", Body=v)
            got = w.get_object(Bucket="race", Key="hot")["Body"].read()
            if got != v:  # read-your-write on the same client
                bad.append(("ryw", len(got), len(v)))
            w.delete_object(Bucket="race", Key="hot")
            try:
                got = w.get_object(Bucket="race", Key="hot")["Body"].read()
                bad.append(("after delete", len(got)))
            except w.exceptions.NoSuchKey:
                pass
            i += 1

    def reader():
        rc = srv.client()
        while time.monotonic() < stop:
            try:
                got = rc.get_object(Bucket="race", Key="hot")["Body"].read()
            except rc.exceptions.NoSuchKey:
                continue
            if got not in allowed:
                bad.append(("mixed", len(got)))

    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        fs = [ex.submit(writer)] + [ex.submit(reader) for _ in range(3)]
        for f in fs:
            f.result()
    assert not bad, bad[:5]


@pytest.mark.parametrize("cache", [False, True])
def test_headers_match_body_under_overwrites(storaged, cache):
    """Overwrites that change the size (and so the shard count k: 1, 2,
    12), the content type and metadata, racing GETs and ranged GETs on two
    loops: every answer's ETag, Content-Type and metadata belong to the
    version whose bytes it carries."""
    import hashlib
    srv = storaged(ndrives=16, threads=2,
                   args=NOBODY + ["--cache-mem", "8"] if cache else None)
    c = srv.client()
    c.create_bucket(Bucket="hmb")
    sizes = [0, 1, 4096, 9000, 60000, 128 * 1024, 4100, 100 * 1024]
    versions = [rnd(n, 300 + i) for i, n in enumerate(sizes)]
    info = {hashlib.md5(v).hexdigest(): (v, "t/%d" % i)
            for i, v in enumerate(versions)}
    c.put_object(Bucket="hmb", Key="x", Body=versions[0], ContentType="t/0",
                 Metadata={"v": "0"})
    bad = []
    stop = time.monotonic() + 3.0

    def writer():
        w = srv.client()
        i = 1
        while time.monotonic() < stop:
            j = i % len(versions)
            w.put_object(Bucket="hmb", Key="x", Body=versions[j],
                         ContentType="t/%d" % j, Metadata={"v": str(j)})
            i += 1

    def reader(n):
        rc = srv.client()
        k = 0
        while time.monotonic() < stop:
            k += 1
            rng = None if k % 3 else "bytes=1-5000"
            try:
                r = (rc.get_object(Bucket="hmb", Key="x", Range=rng) if rng
                     else rc.get_object(Bucket="hmb", Key="x"))
            except Exception as e:  # an empty object has no bytes 1-5000
                if "InvalidRange" not in str(e):
                    bad.append(("err", str(e)))
                continue
            body = r["Body"].read()
            etag = r["ETag"].strip('"')
            if etag not in info:
                bad.append(("etag", etag))
                continue
            v, ct = info[etag]
            want = v[1:5001] if rng else v
            if body != want or r["ContentType"] != ct or \
                    r["Metadata"].get("v") != ct[2:]:
                bad.append(("mismatch", len(body), len(want), ct,
                            r["ContentType"], r["Metadata"]))

    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        fs = [ex.submit(writer)] + [ex.submit(reader, n) for n in range(3)]
        for f in fs:
            f.result()
    assert not bad, bad[:5]


def test_big_get_multipart_bad_shard(storaged):
    """A 2-part object (5 MiB + 1 MiB + 3) on 2+2: one shard file of each
    part damaged at several stripes; whole and ranged GETs across the part
    boundary stay exact."""
    srv = storaged(ndrives=4)
    c = srv.client()
    c.create_bucket(Bucket="mpu")
    p1, p2 = rnd(5 * 1024 * 1024, 11), rnd(1024 * 1024 + 3, 12)
    up = c.create_multipart_upload(Bucket="mpu", Key="o")["UploadId"]
    e1 = c.upload_part(Bucket="mpu", Key="o", UploadId=up, PartNumber=1,
                       Body=p1)["ETag"]
    e2 = c.upload_part(Bucket="mpu", Key="o", UploadId=up, PartNumber=2,
                       Body=p2)["ETag"]
    c.complete_multipart_upload(
        Bucket="mpu", Key="o", UploadId=up,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1},
                                   {"PartNumber": 2, "ETag": e2}]})
    body = p1 + p2
    files = shard_files(srv, "mpu")
    assert len(files) == 8
    by_drive = {}
    for p in files:
        by_drive.setdefault(p.split("/b/")[0], []).append(p)
    for d in sorted(by_drive)[:2]:  # two drives: at most M = 2 per stripe
        for p in by_drive[d]:
            n = os.path.getsize(p) // BLOCK
            for s in range(0, n, 3):
                flip(p, s * BLOCK + 8 + 77)
    for _ in range(2):
        assert c.get_object(Bucket="mpu", Key="o")["Body"].read() == body
    for a, z in ((5 * 1024 * 1024 - 131072, 5 * 1024 * 1024 + 131071),
                 (0, len(body) - 1), (262144, 5 * 1024 * 1024 + 5)):
        got = c.get_object(Bucket="mpu", Key="o",
                           Range="bytes=%d-%d" % (a, z))["Body"].read()
        assert got == body[a:z + 1], (a, z)


def drop_cache(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def busy(srv):
    return metric(srv, r'storaged_get_loop_total\{result="busy"\}')


@pytest.mark.parametrize("layout", ["--no-extents", "--extents"])
def test_medium_gets_of_many_clients_stay_on_the_loop(storaged, layout):
    """40 connections on one loop send a 320 KiB GET each at the same moment
    (12 shards: 36 SQEs per GET from inline metas, 12 readv or splices from
    extent records), 5 rounds: every GET is read on the loop's ring, none
    is handed to a worker for want of room (the old ring took 13 such GETs
    at once), and every body and range is exact (the loop sends the
    reader's own buffer, from the range's offset). No body cache: it would
    answer the repeats without reading."""
    srv = storaged(ndrives=16, threads=1,
                   args=[layout, "--zc-cache-mem", "0"])
    c = srv.client()
    c.create_bucket(Bucket="med")
    objs = [rnd(320 * 1024 + i, 900 + i) for i in range(10)]
    for i, v in enumerate(objs):
        c.put_object(Bucket="med", Key="m/%d" % i, Body=v)
    socks = [socket.create_connection(("127.0.0.1", srv.port), timeout=20)
             for _ in range(40)]
    before = served(srv)
    try:
        files = [sk.makefile("rb") for sk in socks]
        for rnd_i in range(5):
            want = []
            reqs = []
            for j in range(len(socks)):
                n = (j + rnd_i) % len(objs)
                v = objs[n]
                a = random.Random(j * 7 + rnd_i).randrange(len(v))
                z = random.Random(j * 11 + rnd_i).randrange(a, len(v))
                ranged = j % 3 == 0
                extra = {"range": "bytes=%d-%d" % (a, z)} if ranged else None
                reqs.append(signed_get(srv, "/med/m/%d" % n, extra))
                want.append((206, v[a:z + 1]) if ranged else (200, v))
            for sk, rq in zip(socks, reqs):
                sk.sendall(rq)
            for f, (st_want, body) in zip(files, want):
                st, _, got = s3util.read_response(f)
                assert st == st_want and got == body
    finally:
        for sk in socks:
            sk.close()
    assert busy(srv) == 0
    assert fallback(srv) == 0
    assert served(srv) - before == 5 * len(socks)


@pytest.mark.parametrize("cache", [False, True])
def test_cold_reads_fill_the_ring(storaged, cache):
    """One loop, k = 12 objects, page cache dropped before each round, 64
    clients at once: more meta reads in flight than the ring takes (its
    slots and CQ budget run out, the rest take a worker); all exact."""
    srv = storaged(ndrives=16, threads=1,
                   args=["--cache-mem", "1"] if cache else None)
    c = srv.client(max_pool_connections=64)
    c.create_bucket(Bucket="cold")
    objs = {"s/%d" % i: rnd(100 * 1024 + i, 700 + i) for i in range(24)}
    for k, v in objs.items():
        c.put_object(Bucket="cold", Key=k, Body=v)

    def get(k):
        return c.get_object(Bucket="cold", Key=k)["Body"].read() == objs[k]

    with concurrent.futures.ThreadPoolExecutor(64) as ex:
        for _ in range(3):
            drop_cache(meta_files(srv, "cold"))
            assert all(ex.map(get, list(objs) * 4))


def test_sigterm_with_loop_reads_in_flight(storaged):
    """SIGTERM while raw pipelined GETs of cold inline objects are in flight
    on the loop's ring: the server drains and exits 0 (sanitized builds:
    no leak, no use after free)."""
    srv = storaged(ndrives=16, threads=1)
    c = srv.client()
    c.create_bucket(Bucket="term")
    objs = {"t/%d" % i: rnd(100 * 1024, 900 + i) for i in range(16)}
    for k, v in objs.items():
        c.put_object(Bucket="term", Key=k, Body=v)
    drop_cache(meta_files(srv, "term"))
    socks = []
    for k in objs:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        s.sendall(signed_get(srv, "/term/" + k) * 4)
        socks.append(s)
    assert srv.stop(timeout=40) == 0
    for s in socks:
        s.close()


# An LD_PRELOAD shim over liburing's io_uring_submit (only the loop rings
# call it; workers use io_uring_submit_and_wait): call SHIM_SLEEP_AT submits
# and then sleeps 300 ms (so the next requests' bytes arrive while the loop
# is busy and are handled in one epoll batch), call SHIM_FAIL_AT fails with
# -EAGAIN without submitting, as the kernel does when it cannot allocate.
SHIM_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
struct io_uring;
int io_uring_submit(struct io_uring *ring)
{
    static int (*real)(struct io_uring *);
    static int calls;
    const char *s = getenv("SHIM_SLEEP_AT"), *f = getenv("SHIM_FAIL_AT");
    int n = __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED), ret;

    if (!real)
        real = (int (*)(struct io_uring *))dlsym(RTLD_NEXT, "io_uring_submit");
    if (f && n == atoi(f))
        return -EAGAIN;
    ret = real(ring);
    if (s && n == atoi(s))
        usleep(300000);
    return ret;
}
"""


def test_ring_submit_failure_leaves_earlier_reads_answered(storaged,
                                                           tmp_path):
    """A loop ring whose submit fails (-EAGAIN: nothing submitted) stops
    taking new reads, but the reads it already runs must still be reaped:
    the request whose metas are on the ring gets its answer (it hung
    forever when the ring fd was dropped from epoll with them pending)."""
    import shutil
    import subprocess
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler for the LD_PRELOAD shim")
    so = str(tmp_path / "shim.so")
    src = tmp_path / "shim.c"
    src.write_text(SHIM_C)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", so, str(src),
                    "-ldl"], check=True)
    env = {"LD_PRELOAD": so, "SHIM_SLEEP_AT": "1", "SHIM_FAIL_AT": "3",
           "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") +
           ":verify_asan_link_order=0"}
    srv = storaged(ndrives=16, threads=1, env=env)
    c = srv.client()
    c.create_bucket(Bucket="ring")
    objs = {"r/%d" % i: rnd(4096 * (i + 1), 40 + i) for i in range(3)}
    for k, v in objs.items():
        c.put_object(Bucket="ring", Key=k, Body=v)
    socks = [socket.create_connection(("127.0.0.1", srv.port), timeout=8)
             for _ in objs]
    try:
        socks[0].sendall(signed_get(srv, "/ring/r/0"))  # submit 1: sleeps
        time.sleep(0.1)
        socks[1].sendall(signed_get(srv, "/ring/r/1"))  # submit 2
        socks[2].sendall(signed_get(srv, "/ring/r/2"))  # submit 3: fails
        for s, (k, v) in zip(socks, objs.items()):
            try:
                st, _, body = s3util.read_response(s.makefile("rb"))
            except TimeoutError:
                pytest.fail("no answer to GET %s" % k)
            assert st == 200 and body == v, k
    finally:
        for s in socks:
            s.close()
    # later small GETs take the workers, and still answer exactly
    for k, v in objs.items():
        assert c.get_object(Bucket="ring", Key=k)["Body"].read() == v


def test_cache_never_serves_after_copy_mpu_or_multi_delete(storaged):
    """A cached small body is replaced by CopyObject (small and metadata
    REPLACE onto itself), by a multipart upload, and removed by
    DeleteObjects: the next GETs see exactly the new state."""
    srv = storaged(ndrives=16, args=NOBODY + ["--cache-mem", "4"])
    c = srv.client()
    c.create_bucket(Bucket="ccb")
    v1, v2 = rnd(5000, 1), rnd(6000, 2)
    c.put_object(Bucket="ccb", Key="a", Body=v1, ContentType="x/1")
    c.put_object(Bucket="ccb", Key="b", Body=v2)

    def warm(k, v):
        for _ in range(3):
            assert c.get_object(Bucket="ccb", Key=k)["Body"].read() == v

    warm("a", v1)
    c.copy_object(Bucket="ccb", Key="a", CopySource={"Bucket": "ccb", "Key": "b"})
    warm("a", v2)
    c.copy_object(Bucket="ccb", Key="a", CopySource={"Bucket": "ccb", "Key": "a"},
                  MetadataDirective="REPLACE", ContentType="x/2")
    r = c.get_object(Bucket="ccb", Key="a")
    assert r["Body"].read() == v2 and r["ContentType"] == "x/2"
    mpu_one_part(c, "ccb", "a", b"m" * 100)
    warm("a", b"m" * 100)
    c.put_object(Bucket="ccb", Key="a", Body=v1)
    warm("a", v1)
    c.delete_objects(Bucket="ccb", Delete={"Objects": [{"Key": "a"},
                                                      {"Key": "b"}]})
    for k in ("a", "b"):
        with pytest.raises(c.exceptions.NoSuchKey):
            c.get_object(Bucket="ccb", Key=k)
    # same key re-created with other bytes of the same size
    v3 = rnd(5000, 3)
    c.put_object(Bucket="ccb", Key="a", Body=v3)
    warm("a", v3)


def test_big_heads_pipelined_across_reads(storaged):
    """GETs with ~60 KiB heads (58 signed headers of 1 KiB; auth takes at
    most 64 signed headers), pipelined, sent in
    pieces that cut heads anywhere (input buffers grow, are recycled
    between requests and the head is copied with its pointers moved):
    every answer exact and in order."""
    srv = storaged(ndrives=16, threads=1)
    c = srv.client()
    c.create_bucket(Bucket="heads")
    objs = [rnd(n, 60 + n) for n in (10, 5000, 70000)]
    for i, v in enumerate(objs):
        c.put_object(Bucket="heads", Key="k%d" % i, Body=v)
    order = [0, 1, 2, 1, 0, 2]
    extra = {"x-pad-%02d" % j: chr(97 + j % 26) * 1024 for j in range(58)}
    reqs = b"".join(signed_get(srv, "/heads/k%d" % i, dict(extra))
                    for i in order)
    assert 58 * 1024 < len(reqs) // len(order) < 63 * 1024
    for piece in (997, 4096, 65536 + 13):
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        try:
            f = sock.makefile("rb")
            sent = 0
            for n, i in enumerate(order):
                end = (n + 1) * len(reqs) // len(order)
                while sent < end:
                    sock.sendall(reqs[sent:sent + piece])
                    sent += piece
                st, _, b = s3util.read_response(f)
                assert st == 200 and b == objs[i], (piece, n)
            # whatever was sent past the last head completes nothing
        finally:
            sock.close()
