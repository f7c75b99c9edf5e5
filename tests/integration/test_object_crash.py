"""Crash safety through the real S3 server: concurrent PUTs of random
objects (inline, shard-file and multipart-free sizes), kill -9 of storaged at
random moments, restart. Every acknowledged PUT reads back exactly; an
unacknowledged one is either absent or complete (old or new value, never a
mix); every listed object reads back whole; temp areas are empty."""

import hashlib
import os
import random
import threading
import time

import pytest
from botocore.exceptions import ClientError


def body(rng):
    n = rng.choice([0, 100, 4096, 30000, 129 * 1024, 700 * 1024,
                    1600 * 1024])
    return rng.randbytes(n)


def writer(c, keys, state, stop, seed, bucket="crash", make_body=body):
    rng = random.Random(seed)
    while not stop.is_set():
        k = rng.choice(keys)
        v = make_body(rng)
        h = hashlib.md5(v).hexdigest()
        st = state[k]
        st["inflight"].add(h)
        try:
            c.put_object(Bucket=bucket, Key=k, Body=v)
        except Exception:
            continue  # the server died under us: outcome unknown
        st["acked"] = h
        st["acked_seq"].append(h)


@pytest.mark.slow
def empty_file(p):
    try:
        return os.path.getsize(p) == 0
    except FileNotFoundError:
        return False


def test_kill9_during_puts(storaged):
    from test_object_journal import spares  # it imports this module
    srv = storaged(ndrives=4)
    c = srv.client()
    c.create_bucket(Bucket="crash")
    nthreads = 4
    # each thread owns its keys, so "last acknowledged" is well defined
    keys = [["t%d/k%02d" % (t, i) for i in range(8)] for t in range(nthreads)]
    state = {k: {"acked": None, "inflight": set(), "acked_seq": []}
             for ks in keys for k in ks}
    rng = random.Random(11)
    for rnd in range(4):
        stop = threading.Event()
        cl = [srv.client() for _ in range(nthreads)]
        ths = [threading.Thread(target=writer,
                                args=(cl[t], keys[t], state, stop,
                                      rnd * 100 + t))
               for t in range(nthreads)]
        for t in ths:
            t.start()
        time.sleep(rng.uniform(0.3, 1.5))
        srv.kill9()
        stop.set()
        for t in ths:
            t.join(30)
        srv.start()
        # the start empties the temp areas; a heal it queued may be
        # rewriting a meta through one right then (a file that comes and
        # goes), so a leftover is one still there after a few seconds.
        # The new run's pool of empty spares (FORMAT.md "What a PUT
        # costs") is there too: exactly made - taken empty sNUM files.
        deadline = time.monotonic() + 5
        while True:
            left = [os.path.join(d, ".ecfs.sys", "tmp", f) for d in srv.drives
                    for f in os.listdir(os.path.join(d, ".ecfs.sys", "tmp"))]
            sp = spares(srv)
            pool = [p for p in left if os.path.basename(p).startswith("s")
                    and empty_file(p)]
            if len(pool) == sp.get("made", 0) - sp.get("taken", 0):
                left = [p for p in left if p not in pool]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert left == []
        listed = set()
        token = None
        while True:
            kw = {"Bucket": "crash"}
            if token:
                kw["ContinuationToken"] = token
            r = c.list_objects_v2(**kw)
            listed.update(o["Key"] for o in r.get("Contents", []))
            if not r.get("IsTruncated"):
                break
            token = r["NextContinuationToken"]
        for k, st in state.items():
            try:
                got = c.get_object(Bucket="crash", Key=k)["Body"].read()
            except ClientError as e:
                assert e.response["Error"]["Code"] == "NoSuchKey", k
                assert st["acked"] is None, "acknowledged PUT lost: " + k
                assert k not in listed
                continue
            h = hashlib.md5(got).hexdigest()
            assert k in listed
            if st["acked"] is not None:
                # the last acked value, or a later unacknowledged one
                ok = {st["acked"]} | st["inflight"]
            else:
                ok = st["inflight"]
            assert h in ok, "partial or stale object visible: " + k
            # what is visible now is the baseline for the next round
            st["acked"] = h
            st["inflight"] = set()
    acked = sum(len(st["acked_seq"]) for st in state.values())
    assert acked >= 40, "too few acknowledged PUTs to mean anything"
