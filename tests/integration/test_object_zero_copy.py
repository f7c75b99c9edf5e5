"""Zero-copy GETs of extent objects (storaged/FORMAT.md "Zero-copy GETs")
through the real S3 server (boto3 on loopback, 16 drives, --extents):

- whole-object GETs at 128 KiB - 1, 128 KiB + 1, 320 KiB, 1 MiB - 1 and
  1 MiB are spliced from the extent files to the socket
  (storaged_get_zero_copy_total counts each one), with the right bytes,
  also back to back on one connection (the last shard's padding is
  dropped from the pipe, never sent) and with the page cache dropped;
- ranged GETs of the same objects take the copy path and are exact;
- bit rot in a data shard (its bytes changed in the page cache, header
  intact) is never served: the GET falls back to the worker path, which
  rebuilds the shard from parity, answers the right bytes and heals it;
  the GETs after the heal are zero-copy again;
- an overwrite or delete right after a zero-copy GET keeps the record
  until its pin's grace has passed, then punches it;
- --no-zero-copy and TLS connections copy (counter stays 0); --no-extents
  after --extents writes no extent file.
"""

import glob
import os
import random
import time
import urllib.request

import pytest

from test_object_extents import ext_files, ext_blocks, metric, metrics
from test_object_fault import rnd
from tls_util import make_ca, make_server_cert

KIB, MIB = 1024, 1024 * 1024
SIZES = [128 * KIB - 1, 128 * KIB + 1, 320 * KIB, MIB - 1, MIB]
ZC = "storaged_get_zero_copy_total"
FB = 'storaged_get_loop_total{result="fallback"}'


def put_all(c, bucket, seed):
    c.create_bucket(Bucket=bucket)
    objs = {"z/%d" % n: rnd(n, n + seed) for n in SIZES}
    for k, v in objs.items():
        c.put_object(Bucket=bucket, Key=k, Body=v)
    return objs


def drop_cache(srv):
    for p in ext_files(srv):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def flip_records(files, rng):
    """Changes one data byte of every extent record in @files, in the page
    cache (where the zero-copy check reads it); returns how many."""
    flipped = 0
    for p in files:
        size = os.path.getsize(p)
        with open(p, "r+b") as fh:
            for off in range(0, size, 4096):
                fh.seek(off)
                if fh.read(8) != b"ECFSEXT1":
                    continue
                fh.seek(off + 36)
                n = int.from_bytes(fh.read(4), "little")
                at = off + 64 + rng.randrange(n)
                fh.seek(at)
                b = fh.read(1)
                fh.seek(at)
                fh.write(bytes([b[0] ^ 0x01]))
                flipped += 1
    return flipped


@pytest.mark.slow
def test_zero_copy_round_trips_ranges_and_bit_rot(storaged):
    # the scanner and the heal queue run (a degraded read queues a heal);
    # no body cache: the GETs after the rot are counted as the ones that
    # notice it (test_zc_cache_rot_is_found_and_healed: with the cache)
    srv = storaged(ndrives=16, args=["--extents", "--zc-cache-mem", "0"],
                   env={"STORAGED_SCAN_INTERVAL": "2"})
    c = srv.client()
    objs = put_all(c, "zcb", 1)
    rng = random.Random(14)
    m0 = metrics(srv)
    for _ in range(3):  # one keep-alive connection: pipe reused
        for k, v in objs.items():
            assert c.get_object(Bucket="zcb", Key=k)["Body"].read() == v, k
    drop_cache(srv)  # cold: the splices read the disk
    for k, v in objs.items():
        assert c.get_object(Bucket="zcb", Key=k)["Body"].read() == v, k
    m1 = metrics(srv)
    assert metric(m1, ZC) - metric(m0, ZC) == 4 * len(objs)
    assert metric(m1, FB) == metric(m0, FB)
    # ranges: the copy path, exact
    for k, v in objs.items():
        for _ in range(4):
            a = rng.randrange(len(v))
            b = a + rng.randrange(1, 300 * KIB)
            got = c.get_object(Bucket="zcb", Key=k,
                               Range="bytes=%d-%d" % (a, b))["Body"].read()
            assert got == v[a:b + 1], (k, a, b)
        got = c.get_object(Bucket="zcb", Key=k,
                           Range="bytes=-1000")["Body"].read()
        assert got == v[-1000:]
    assert metric(metrics(srv), ZC) == metric(m1, ZC)
    # a 304 after the pipe was filled: nothing of it sent, the next GET
    # on the connection is exact
    k = "z/%d" % (320 * KIB)
    etag = c.head_object(Bucket="zcb", Key=k)["ETag"]
    with pytest.raises(Exception) as ei:
        c.get_object(Bucket="zcb", Key=k, IfNoneMatch=etag)
    assert "304" in str(ei.value)
    assert c.get_object(Bucket="zcb", Key=k)["Body"].read() == objs[k]

    # bit rot: one data byte of one record of every object, on one drive,
    # changed where the zero-copy check reads it (the page cache)
    d = srv.drives[3]
    flipped = flip_records(
        glob.glob(os.path.join(d, ".ecfs.sys/ext/*.x")), rng)
    assert flipped >= len(objs)
    m2 = metrics(srv)
    for k, v in objs.items():
        assert c.get_object(Bucket="zcb", Key=k)["Body"].read() == v, k
    m3 = metrics(srv)
    assert metric(m3, "storaged_corrupt_found_total") > metric(
        m2, "storaged_corrupt_found_total")
    # drive 3 holds a data shard of some of them (placement): those fell
    # back; every answer above was right either way
    fell = metric(m3, FB) - metric(m2, FB)
    assert fell >= 1
    assert metric(m3, ZC) - metric(m2, ZC) == len(objs) - fell
    # healed: the damaged shards were rewritten, the loop serves them all
    # zero-copy again
    deadline = time.monotonic() + 40
    while True:
        before = metrics(srv)
        for k, v in objs.items():
            assert c.get_object(Bucket="zcb", Key=k)["Body"].read() == v
        after = metrics(srv)
        if metric(after, ZC) - metric(before, ZC) == len(objs):
            break
        assert time.monotonic() < deadline, "damaged shards never healed"
        time.sleep(0.5)


@pytest.mark.slow
def test_zero_copy_pins_delay_the_punch(storaged):
    srv = storaged(ndrives=16, args=["--extents"],
                   env={"STORAGED_NO_BACKGROUND": "1"})
    c = srv.client()
    objs = put_all(c, "zpb", 2)
    k = "z/%d" % MIB
    blocks0 = ext_blocks(srv)
    assert c.get_object(Bucket="zpb", Key=k)["Body"].read() == objs[k]
    t0 = time.monotonic()
    c.delete_object(Bucket="zpb", Key=k)
    # the 12 data records were sent, so pinned: the grace (5 s) keeps them
    # whole for a while; the 4 parity records were not, and go at once
    rec = (64 + (MIB + 11) // 12 + 4095) // 4096 * 4096
    time.sleep(1.0)
    assert blocks0 - ext_blocks(srv) <= 4 * rec // 512
    deadline = time.monotonic() + 30
    while (blocks0 - ext_blocks(srv)) * 512 < 16 * rec:
        assert time.monotonic() < deadline, "the deleted records never punched"
        time.sleep(0.2)
    assert time.monotonic() - t0 >= 4.5
    for kk, v in objs.items():
        if kk != k:
            assert c.get_object(Bucket="zpb", Key=kk)["Body"].read() == v
    # a clean stop right after such a DELETE waits out the grace and
    # punches the held-back records: none of the bytes stays on the drives
    k = "z/%d" % (320 * KIB)
    assert c.get_object(Bucket="zpb", Key=k)["Body"].read() == objs[k]
    blocks1 = ext_blocks(srv)
    c.delete_object(Bucket="zpb", Key=k)
    assert srv.stop() == 0
    rec = (64 + (320 * KIB + 11) // 12 + 4095) // 4096 * 4096
    assert (blocks1 - ext_blocks(srv)) * 512 >= 16 * rec


@pytest.mark.slow
def test_zero_copy_off_and_tls_copy(storaged, tmp_path):
    # --no-extents after --extents: the last wins, no extent file is made
    srv = storaged(ndrives=16, args=["--extents", "--no-extents"])
    c = srv.client()
    objs = put_all(c, "zne", 5)
    for k, v in objs.items():
        assert c.get_object(Bucket="zne", Key=k)["Body"].read() == v
    assert ext_files(srv) == []
    assert metric(metrics(srv), ZC) == 0
    srv.stop()
    srv = storaged(ndrives=16, args=["--extents", "--no-zero-copy"])
    c = srv.client()
    objs = put_all(c, "zob", 3)
    for k, v in objs.items():
        assert c.get_object(Bucket="zob", Key=k)["Body"].read() == v
    assert metric(metrics(srv), ZC) == 0
    srv.stop()
    d = tmp_path / "pki"
    d.mkdir()
    ca, ca_key = make_ca(d, "zc-ca")
    crt, key = make_server_cert(d, ca, ca_key)
    tls = storaged(ndrives=16, args=["--extents"], tls=(crt, key, ca))
    c = tls.client()
    objs = put_all(c, "ztb", 4)
    for k, v in objs.items():
        assert c.get_object(Bucket="ztb", Key=k)["Body"].read() == v
    with urllib.request.urlopen(tls.endpoint + "/metrics", timeout=5,
                                context=tls.ssl_context) as r:
        m = r.read().decode()
    assert metric(m, ZC) == 0
    assert metric(m, 'storaged_get_loop_total{result="served"}') >= len(objs)


ZH = "storaged_zcache_hits_total"


@pytest.mark.slow
@pytest.mark.parametrize("extents", [True, False])
def test_zc_cache_serves_checked_bodies(storaged, extents):
    """--zc-cache-mem (storaged/s3/zcache.h): a body asked for twice is
    kept as pipe pages and later whole-object GETs on plain HTTP are tee'd
    from it: exact bytes at every size, with extents or metas; a byte
    changed in the extent files' page cache afterwards never reaches a
    client (the kept pages are the checked copy); an overwrite, a delete, a
    range and an encrypted object are never answered from it."""
    args = ["--zc-cache-mem", "16"] + (["--extents"] if extents else ["--no-extents"])
    srv = storaged(ndrives=16, args=args)
    c = srv.client()
    objs = put_all(c, "zkb", 7)
    rng = random.Random(15)
    for _ in range(2):  # the second offer admits
        for k, v in objs.items():
            assert c.get_object(Bucket="zkb", Key=k)["Body"].read() == v, k
    m0 = metrics(srv)
    assert metric(m0, "storaged_zcache_puts_total") == len(objs)
    for _ in range(3):
        for k, v in objs.items():
            assert c.get_object(Bucket="zkb", Key=k)["Body"].read() == v, k
    m1 = metrics(srv)
    assert metric(m1, ZH) - metric(m0, ZH) == 3 * len(objs)
    assert metric(m1, FB) == metric(m0, FB)
    # ranges: the copy path, exact
    for k, v in objs.items():
        a = rng.randrange(len(v))
        b = a + rng.randrange(1, 300 * KIB)
        got = c.get_object(Bucket="zkb", Key=k,
                           Range="bytes=%d-%d" % (a, b))["Body"].read()
        assert got == v[a:b + 1], (k, a, b)
    assert metric(metrics(srv), ZH) == metric(m1, ZH)
    # a 304 from a kept body, then the next GET on the connection is exact
    k = "z/%d" % (320 * KIB)
    etag = c.head_object(Bucket="zkb", Key=k)["ETag"]
    with pytest.raises(Exception) as ei:
        c.get_object(Bucket="zkb", Key=k, IfNoneMatch=etag)
    assert "304" in str(ei.value)
    assert c.get_object(Bucket="zkb", Key=k)["Body"].read() == objs[k]
    if extents:
        # bytes changed where the zero-copy check reads them: a kept body
        # is the checked copy, never the changed page
        assert flip_records(ext_files(srv), rng) >= len(objs)
        m2 = metrics(srv)
        for k, v in objs.items():
            assert c.get_object(Bucket="zkb", Key=k)["Body"].read() == v, k
        assert metric(metrics(srv), ZH) - metric(m2, ZH) == len(objs)
    # an overwrite: the new version, never the kept one; a delete: 404
    k1, k2 = "z/%d" % MIB, "z/%d" % (128 * KIB - 1)
    new = rnd(MIB, 99)
    c.put_object(Bucket="zkb", Key=k1, Body=new)
    for _ in range(3):
        assert c.get_object(Bucket="zkb", Key=k1)["Body"].read() == new
    c.delete_object(Bucket="zkb", Key=k2)
    with pytest.raises(Exception) as ei:
        c.get_object(Bucket="zkb", Key=k2)
    assert "NoSuchKey" in str(ei.value)
    # an encrypted object's stored bytes (ciphertext) are never kept; an
    # SSE-S3 object is kept as the plaintext a GET opened (test_s3_sse.py
    # test_sse_s3_plaintext_cached_in_memory_only), an SSE-C one never
    sec = rnd(320 * KIB, 5)
    c.put_object(Bucket="zkb", Key="sse", Body=sec,
                 ServerSideEncryption="AES256")
    ckey = os.urandom(32)
    c.put_object(Bucket="zkb", Key="ssec", Body=sec, SSECustomerAlgorithm=
                 "AES256", SSECustomerKey=ckey)
    m3 = metrics(srv)
    for _ in range(4):
        assert c.get_object(Bucket="zkb", Key="ssec", SSECustomerAlgorithm=
                            "AES256", SSECustomerKey=ckey)["Body"].read() == sec
    m4 = metrics(srv)
    assert metric(m4, ZH) == metric(m3, ZH)
    assert metric(m4, "storaged_zcache_puts_total") == metric(
        m3, "storaged_zcache_puts_total")
    for _ in range(4):
        assert c.get_object(Bucket="zkb", Key="sse")["Body"].read() == sec
    m5 = metrics(srv)
    assert metric(m5, "storaged_zcache_puts_total") == metric(
        m4, "storaged_zcache_puts_total") + 1
    assert metric(m5, ZH) - metric(m4, ZH) == 2


@pytest.mark.slow
def test_zc_cache_rot_is_found_and_healed(storaged):
    """Extent files and the body cache on (the defaults, named): bodies kept
    by the cache, then one data byte of every record on two drives rots. Whole
    GETs stay exact (answered from the checked copy); the first uncached
    reads (ranges) and the scanner find the rot and heal it; restarted
    without the cache, every GET is served zero-copy by the loop again (no
    fallback: the healed records check out) and exact."""
    srv = storaged(ndrives=16, args=["--extents", "--zc-cache-mem", "64"],
                   env={"STORAGED_SCAN_INTERVAL": "2"})
    c = srv.client()
    objs = put_all(c, "zrh", 4)
    rng = random.Random(23)
    for _ in range(3):  # the second offer admits, the third is a hit
        for k, v in objs.items():
            assert c.get_object(Bucket="zrh", Key=k)["Body"].read() == v, k
    m0 = metrics(srv)
    assert metric(m0, ZH) >= len(objs)
    bad = srv.drives[2:4]
    flipped = flip_records([p for d in bad for p in glob.glob(
        os.path.join(d, ".ecfs.sys/ext/*.x"))], rng)
    assert flipped >= len(objs)
    for k, v in objs.items():  # the kept, checked copies
        assert c.get_object(Bucket="zrh", Key=k)["Body"].read() == v, k
    assert metric(metrics(srv), ZH) - metric(m0, ZH) == len(objs)
    for k, v in objs.items():  # not cached: the copy path reads the records
        a = rng.randrange(len(v) // 2)
        got = c.get_object(Bucket="zrh", Key=k,
                           Range="bytes=%d-" % a)["Body"].read()
        assert got == v[a:], k
    deadline = time.monotonic() + 60
    while metric(metrics(srv), "storaged_corrupt_found_total") == metric(
            m0, "storaged_corrupt_found_total"):
        assert time.monotonic() < deadline, "the rot was never found"
        time.sleep(0.5)
    # healed: without the cache, every GET checks the records, and none
    # falls back (the scanner runs every 2 s: give it time to finish)
    srv.extra_args = ["--extents", "--zc-cache-mem", "0"]
    srv.restart()
    deadline = time.monotonic() + 60
    while True:
        before = metrics(srv)
        for k, v in objs.items():
            assert c.get_object(Bucket="zrh", Key=k)["Body"].read() == v, k
        after = metrics(srv)
        # (a GET that meets a punch of a record freed by a heal still
        # running copies instead: exact, but not counted as zero-copy)
        if metric(after, FB) == metric(before, FB) and \
                metric(after, ZC) - metric(before, ZC) == len(objs):
            break
        assert time.monotonic() < deadline, "the rotted records never healed"
        time.sleep(1)


@pytest.mark.slow
def test_tiny_extent_objects_on_the_worker(storaged):
    """Objects of a few bytes kept in extent files (--index-body-max 0):
    their metas are longer than an inline meta of the same shard (the
    record reference outweighs the shard), and the worker's read of them
    once took that for a short file on every drive and answered 500. GETs
    racing overwrites (so some fall back to the worker) are all exact."""
    import concurrent.futures
    srv = storaged(ndrives=16, threads=2,
                   args=["--extents", "--index-body-max", "0"])
    c = srv.client()
    c.create_bucket(Bucket="tny")
    vals = [b"", b"a", rnd(4096, 1), rnd(9000, 2)]
    c.put_object(Bucket="tny", Key="x", Body=vals[1])
    stop = time.monotonic() + 3.0
    bad = []

    def writer():
        w = srv.client()
        i = 0
        while time.monotonic() < stop:
            w.put_object(Bucket="tny", Key="x", Body=vals[i % len(vals)])
            i += 1

    def reader():
        r = srv.client()  # one attempt: a 500 is not retried away
        while time.monotonic() < stop:
            try:
                got = r.get_object(Bucket="tny", Key="x")["Body"].read()
            except Exception as e:
                bad.append(str(e)[:120])
                continue
            if got not in vals:
                bad.append(("bytes", len(got)))

    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        fs = [ex.submit(writer)] + [ex.submit(reader) for _ in range(3)]
        for f in fs:
            f.result()
    assert not bad, bad[:5]
    assert "object layer error" not in srv.log_text()
    # and each size alone
    for v in vals:
        c.put_object(Bucket="tny", Key="y", Body=v)
        assert c.get_object(Bucket="tny", Key="y")["Body"].read() == v
