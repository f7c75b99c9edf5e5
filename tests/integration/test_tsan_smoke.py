"""ThreadSanitizer smoke: storaged under 16 concurrent boto3 threads
(PUT/GET/LIST/DELETE of small and 6 MiB objects), then ecfs under parallel
readers (cat and find over one mount), with both daemons built by
`make SAN=thread`. The test fails if either daemon prints a ThreadSanitizer
report (each daemon writes to its own log_path in the test dir), if any
request fails, or if a byte read back differs.

Runs only when ECFS_SAN=thread (set by `make SAN=thread check`, or by hand:
ECFS_SAN=thread ECFS_BIN_DIR=$PWD/build/tsan/bin pytest ...); skipped
otherwise, since without TSan binaries it would prove nothing new.
Bounded: about 10 s of S3 load and a few seconds of FUSE reads.
"""

import hashlib
import os
import subprocess
import threading
import time
import uuid

import pytest


S3_SECONDS = float(os.environ.get("ECFS_TSAN_SECONDS", "10"))
# S3 load for S3_SECONDS (joined within S3_SECONDS + 120), then cat/find on
# the mount (120 s each at most), all under TSan
pytestmark = [
    pytest.mark.skipif(
        os.environ.get("ECFS_SAN") != "thread",
        reason="TSan smoke needs SAN=thread binaries (ECFS_SAN=thread)"),
    pytest.mark.slow,
    pytest.mark.timeout(S3_SECONDS + 300),
]

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
THREADS = 16
BIG = 6 * 1024 * 1024 + 13


def tsan_env(tmp_path, name):
    """TSAN_OPTIONS for one daemon: reports to TMP/tsan-NAME.PID."""
    d = tmp_path / "tsan"
    d.mkdir(exist_ok=True)
    supp = os.path.join(REPO, "tests", "tsan.supp")
    return {"TSAN_OPTIONS": "second_deadlock_stack=1:history_size=4:"
                            "suppressions=%s:log_path=%s"
                            % (supp, d / ("tsan-" + name))}


def tsan_reports(tmp_path):
    d = tmp_path / "tsan"
    out = []
    if d.is_dir():
        for p in sorted(d.iterdir()):
            t = p.read_text(errors="replace")
            if "ThreadSanitizer" in t:
                out.append("---- %s ----\n%s" % (p, t[-8000:]))
    return out


def s3_worker(client, bucket, tid, deadline, big, errors, counts):
    """PUT/GET/LIST/DELETE loop of one thread until @deadline."""
    i = 0
    try:
        while time.monotonic() < deadline:
            key = "t%02d/o%04d" % (tid, i)
            body = big if i % 8 == 0 else os.urandom(100 + (tid * 131 + i) % 9000)
            client.put_object(Bucket=bucket, Key=key, Body=body)
            got = client.get_object(Bucket=bucket, Key=key)["Body"].read()
            if got != body:
                errors.append("%s: read back differs" % key)
                return
            if i % 4 == 0:
                client.list_objects_v2(Bucket=bucket, Prefix="t%02d/" % tid)
            if i % 3 == 0:
                client.delete_object(Bucket=bucket, Key=key)
            i += 1
    except Exception as e:  # noqa: BLE001 - any failure fails the test
        errors.append("thread %d: %r" % (tid, e))
    counts[tid] = i


def test_tsan_storaged_and_ecfs(storaged, ecfs_mount, tmp_path):
    srv = storaged(ndrives=4, env=tsan_env(tmp_path, "storaged"))
    bucket = "tsan-" + uuid.uuid4().hex[:8]
    srv.client().create_bucket(Bucket=bucket)

    # 1. S3 load: 16 threads, one client each (boto3 clients are not shared)
    big = os.urandom(BIG)
    clients = [srv.client(max_pool_connections=2) for _ in range(THREADS)]
    errors, counts = [], {}
    deadline = time.monotonic() + S3_SECONDS
    ths = [threading.Thread(target=s3_worker,
                            args=(clients[t], bucket, t, deadline, big,
                                  errors, counts))
           for t in range(THREADS)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(S3_SECONDS + 120)
    assert not any(t.is_alive() for t in ths), "S3 load threads hung"
    assert not errors, errors[:5]
    assert sum(counts.values()) >= THREADS, counts

    # 2. FUSE: a small tree, read by parallel cat and find processes
    s3 = srv.client()
    want = {}
    for i in range(24):
        k = "tree/c%d/f%02d.bin" % (i % 3, i)
        want[k] = os.urandom(BIG if i % 8 == 0 else 50000 + i)
        s3.put_object(Bucket=bucket, Key=k, Body=want[k])
    m = ecfs_mount(srv.endpoint, bucket, access_key=srv.access_key,
                   secret_key=srv.secret_key,
                   env=tsan_env(tmp_path, "ecfs"))
    files = sorted(want)
    procs = []
    for r in range(4):
        paths = [os.path.join(m.path, k) for k in files[r::2] + files]
        procs.append(subprocess.Popen(
            ["/bin/bash", "-c", 'cat "$@" | sha256sum', "cat"] + paths,
            stdout=subprocess.PIPE))
        procs.append(subprocess.Popen(["find", os.path.join(m.path, "tree"),
                                       "-type", "f"],
                                      stdout=subprocess.PIPE))
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), [p.returncode for p in procs]
    for r in range(4):
        h = hashlib.sha256()
        for k in files[r::2] + files:
            h.update(want[k])
        assert outs[2 * r].split()[0].decode() == h.hexdigest()
        found = sorted(os.path.relpath(p, m.path)
                       for p in outs[2 * r + 1].decode().split("\n") if p)
        assert found == files
    m.unmount()
    assert srv.stop() == 0, srv.log_text()[-4000:]

    reports = tsan_reports(tmp_path)
    assert not reports, "\n".join(reports)
