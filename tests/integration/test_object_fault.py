"""Erasure-coding faults through the real S3 server (boto3 on loopback).

A drive is taken away by renaming its directory (what an unmounted or dead
disk looks like to storaged); corruption flips bytes in every file of a
drive. With 16 drives (12+4) any 4 lost or corrupt drives leave every GET
exact; a 5th makes full-width objects fail with a 5xx, never wrong bytes.
Writes succeed with 4 drives away and fail with 503 below the write quorum.
A drive that misses overwrites and deletes never brings old data back, also
across restarts (graceful and kill -9).
"""

import os
import random
import time

import pytest
from botocore.exceptions import ClientError

SIZES = [1, 4096, 16 * 1024, 100 * 1024, 128 * 1024 + 1, 1536 * 1024 + 7,
         3 * 768 * 1024 + 5, 0]


def rnd(n, seed):
    return random.Random(seed).randbytes(n)


def away(drive, gone=True):
    if gone:
        os.rename(drive, drive + ".away")
    else:
        os.rename(drive + ".away", drive)


def wait_probe():
    """The server probes every drive once a second."""
    time.sleep(2.2)


def read_all(c, bucket, objs):
    for k, v in objs.items():
        got = c.get_object(Bucket=bucket, Key=k)["Body"].read()
        assert got == v, k
        if len(v) > 10:
            a = len(v) // 3
            r = c.get_object(Bucket=bucket, Key=k,
                             Range="bytes=%d-%d" % (a, a + 9))["Body"].read()
            assert r == v[a:a + 10], k


def corrupt_drive(drive, rng):
    """Flips a few bytes in every object file under the drive."""
    for root, _, files in os.walk(os.path.join(drive, "b")):
        for f in files:
            if f == "bucket":
                continue
            p = os.path.join(root, f)
            size = os.path.getsize(p)
            if size == 0:
                continue
            with open(p, "r+b") as fh:
                for _ in range(3):
                    off = rng.randrange(size)
                    fh.seek(off)
                    b = fh.read(1)
                    fh.seek(off)
                    fh.write(bytes([b[0] ^ 0x5A]))


@pytest.fixture
def srv16(storaged):
    return storaged(ndrives=16)


def test_lose_or_corrupt_four_of_sixteen(srv16):
    c = srv16.client()
    c.create_bucket(Bucket="fault")
    objs = {"o/%d" % n: rnd(n, n) for n in SIZES}
    for k, v in objs.items():
        c.put_object(Bucket="fault", Key=k, Body=v)
    rng = random.Random(7)
    for _ in range(3):
        lost = rng.sample(srv16.drives, 4)
        for d in lost:
            away(d)
        read_all(c, "fault", objs)
        for d in lost:
            away(d, False)
    for d in rng.sample(srv16.drives, 4):
        corrupt_drive(d, rng)
    read_all(c, "fault", objs)
    # degraded reads are counted
    import urllib.request
    m = urllib.request.urlopen(srv16.endpoint + "/metrics").read().decode()
    assert "degraded" in m


def test_five_lost_fails_never_lies(srv16):
    c = srv16.client()
    c.create_bucket(Bucket="fault")
    big = rnd(2 * 1024 * 1024, 3)
    mid = rnd(100 * 1024, 4)
    c.put_object(Bucket="fault", Key="big", Body=big)
    c.put_object(Bucket="fault", Key="mid", Body=mid)
    for d in srv16.drives[:5]:
        away(d)
    for k, v in (("big", big), ("mid", mid)):
        try:
            got = c.get_object(Bucket="fault", Key=k)["Body"].read()
        except ClientError as e:
            assert e.response["ResponseMetadata"]["HTTPStatusCode"] >= 500
        except Exception:
            pass  # a broken stream is fine: wrong bytes are not
        else:
            assert got == v, "wrong bytes with 5 of 16 drives lost"
    for d in srv16.drives[:5]:
        away(d, False)
    read_all(c, "fault", {"big": big, "mid": mid})


@pytest.mark.slow
def test_write_quorum(srv16):
    c = srv16.client()
    c.create_bucket(Bucket="wquorum")
    for d in srv16.drives[:4]:
        away(d)
    wait_probe()
    objs = {"w/%d" % n: rnd(n, n + 1) for n in (4096, 100 * 1024,
                                                   2 * 1024 * 1024)}
    for k, v in objs.items():
        c.put_object(Bucket="wquorum", Key=k, Body=v)
    read_all(c, "wquorum", objs)
    away(srv16.drives[4])
    wait_probe()
    with pytest.raises(ClientError) as ei:
        c.put_object(Bucket="wquorum", Key="fail", Body=b"x" * 5000)
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    for d in srv16.drives[:5]:
        away(d, False)
    wait_probe()
    read_all(c, "wquorum", objs)
    with pytest.raises(ClientError):
        c.head_object(Bucket="wquorum", Key="fail")


@pytest.mark.slow
def test_stale_drive_never_resurrects(storaged):
    srv = storaged(ndrives=4)
    c = srv.client()
    c.create_bucket(Bucket="stale")
    keys = ["s/%02d" % i for i in range(24)]
    for i, k in enumerate(keys):
        c.put_object(Bucket="stale", Key=k,
                     Body=rnd(5000 if i % 3 else 200000, i))
    away(srv.drives[1])
    wait_probe()
    new = {}
    for i, k in enumerate(keys):
        if i % 2:
            c.delete_object(Bucket="stale", Key=k)
        else:
            new[k] = rnd(200000 if i % 3 else 5000, 1000 + i)
            c.put_object(Bucket="stale", Key=k, Body=new[k])
    away(srv.drives[1], False)
    wait_probe()

    def check():
        listed = [o["Key"] for o in
                  c.list_objects_v2(Bucket="stale").get("Contents", [])]
        assert listed == sorted(new)
        read_all(c, "stale", new)
        for i, k in enumerate(keys):
            if i % 2:
                with pytest.raises(ClientError):
                    c.head_object(Bucket="stale", Key=k)

    check()
    srv.restart()
    check()
    srv.restart(graceful=False)
    check()
