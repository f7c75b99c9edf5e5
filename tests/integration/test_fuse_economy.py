"""ecfs request economy, counted by ecfs's own counters (MOUNT/.ecfs-stats,
found by name, never listed), so it holds against any S3 server (run
against every ``s3_backend``: storaged, s3rver, Ceph RGW):
- scanning a directory of N files (ls -l, os.scandir + stat) issues
  ceil(N/1000) LISTs and zero HEADs;
- reading N small files issues N GETs (one whole-object GET each);
- a second pass over the tree with -o ro issues no request at all;
- concurrent scanners of one directory share one listing."""

import math
import os
import subprocess
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from fuse_util import mount_of

N = 2100


def delta(a, b):
    return {k: b[k] - a[k] for k in a}


@pytest.fixture
def many(s3_backend):
    bucket = "eco-" + uuid.uuid4().hex[:10]
    s3_backend.s3.create_bucket(Bucket=bucket)
    bodies = {"many/f%05d.jpg" % i: os.urandom(100 + (i * 37) % 4000)
              for i in range(N)}

    def put(kv):
        s3_backend.s3.put_object(Bucket=bucket, Key=kv[0], Body=kv[1])

    with ThreadPoolExecutor(16) as ex:
        list(ex.map(put, bodies.items()))
    return bucket, bodies


def test_scan_and_read_economy(s3_backend, many, ecfs_mount):
    bucket, bodies = many
    m = mount_of(s3_backend, ecfs_mount, bucket, opts=["log_level=debug"])
    d = os.path.join(m.path, "many")
    os.stat(d)  # the lookup of "many" itself (HEAD + LIST probe)
    s0 = m.stats()
    r = subprocess.run(["ls", "-l", d], capture_output=True)
    assert r.returncode == 0
    assert len(r.stdout.splitlines()) == N + 1  # "total" line
    sizes = {e.name: e.stat().st_size for e in os.scandir(d)}
    assert len(sizes) == N
    s1 = m.stats()
    dl = delta(s0, s1)
    assert dl["list"] == math.ceil(N / 1000), dl
    assert dl["head"] == 0 and dl["get"] == 0, str(dl)
    for k, v in bodies.items():
        assert sizes[k.split("/")[1]] == len(v)

    for k, v in bodies.items():
        with open(os.path.join(m.path, k), "rb") as f:
            assert f.read() == v
    s2 = m.stats()
    dl = delta(s1, s2)
    assert dl["get"] == N, dl
    assert dl["head"] == 0 and dl["list"] == 0, str(dl)


def test_ro_second_pass_is_free(s3_backend, many, ecfs_mount):
    bucket, bodies = many
    m = mount_of(s3_backend, ecfs_mount, bucket, opts=["ro"])

    def one_pass():
        for e in os.scandir(os.path.join(m.path, "many")):
            with open(e.path, "rb") as f:
                assert f.read() == bodies["many/" + e.name]
        subprocess.run(["ls", "-lR", m.path], capture_output=True, check=True)

    one_pass()
    s1 = m.stats()
    assert s1["get"] == N
    one_pass()
    s2 = m.stats()
    req = ("get", "head", "list", "retries", "errors", "bytes")
    assert {k: s2[k] - s1[k] for k in req} == {k: 0 for k in req}, str(s2)


def test_concurrent_scans_share_one_listing(s3_backend, many, ecfs_mount):
    bucket, _ = many
    m = mount_of(s3_backend, ecfs_mount, bucket)
    d = os.path.join(m.path, "many")
    os.stat(d)
    s0 = m.stats()
    out = []
    ths = [threading.Thread(target=lambda: out.append(len(os.listdir(d))))
           for _ in range(6)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    assert out == [N] * 6
    dl = delta(s0, m.stats())
    assert dl["list"] == math.ceil(N / 1000), dl
