#!/usr/bin/python3
"""tests/bench/bench_sse.py - SSE-S3 against plaintext, side by side on one
storaged (figures, not pass/fail; issue 18's goal: GET >= 0.8x).

Two buckets on the same server: "plain", and "enc" with default encryption
AES256 (PutBucketEncryption), so the same presigned requests are encrypted
on one side only. For each size (4 KiB and 1 MiB by default) it runs wrk
GETs rotating over the objects and wrk PUTs (full commit path), R rounds
alternating plain and enc, and prints per row the median req/s with its
range, the server's CPU microseconds per request (utime+stime of storaged
from /proc: steadier than req/s on a loaded machine) and enc/plain ratios.

Usage: tests/bench/bench_sse.py [--seconds S] [--rounds R] [--sizes B,B]
       [--ops GET,PUT] [--objects N] [--drives D] [--conns C] [--keep]
       [--server-arg=ARG ...]
Environment: ECFS_BIN_DIR (default <repo>/bin). Run under
`flock /tmp/ecfs-bench.lock` on a shared machine.
"""

import argparse
import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_s3_server import (AK, BIN, SK, client, cpu_ticks, free_port,  # noqa
                             lua_rotate, median, wait_http, wrk)


def wrk_cpu(url, script, seconds, pid, conns):
    hz = os.sysconf("SC_CLK_TCK")
    t0 = cpu_ticks([pid])
    r = wrk(url, script, seconds, conns=conns)
    t1 = cpu_ticks([pid])
    n = r["rps"] * seconds
    r["cpu_us"] = (t1 - t0) * 1e6 / hz / n if n else float("nan")
    return r


def rng(v):
    return "%.0f-%.0f" % (min(v), max(v))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="4096,1048576")
    ap.add_argument("--ops", default="GET,PUT",
                    help="which rows to run (GET, PUT or both)")
    ap.add_argument("--objects", type=int, default=200)
    ap.add_argument("--drives", type=int, default=4)
    ap.add_argument("--conns", type=int, default=16)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--server-arg", action="append", default=[],
                    help="one more storaged argument (repeatable), e.g. "
                    "--server-arg=--zc-cache-mem=0 (no body cache: every "
                    "GET reads, and an SSE one decrypts)")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="bench-sse-", dir="/work/data"
                            if os.path.isdir("/work/data") else None)
    sp = None
    try:
        drives = [os.path.join(work, "d%d" % i) for i in range(a.drives)]
        for d in drives:
            os.makedirs(d)
        port = free_port()
        env = dict(os.environ, STORAGED_ROOT_USER=AK, STORAGED_ROOT_PASSWORD=SK)
        log = open(os.path.join(work, "storaged.log"), "wb")
        sp = subprocess.Popen([os.path.join(BIN, "storaged"), "serve",
                               "--address", "127.0.0.1:%d" % port,
                               "--log-level", "warn"] + a.server_arg +
                              drives,
                              env=env, stdout=log, stderr=log)
        ep = "http://127.0.0.1:%d" % port
        wait_http(ep + "/health/ready")
        s3 = client(ep)
        for b in ("plain", "enc"):
            s3.create_bucket(Bucket=b)
        s3.put_bucket_encryption(
            Bucket="enc", ServerSideEncryptionConfiguration={"Rules": [{
                "ApplyServerSideEncryptionByDefault": {
                    "SSEAlgorithm": "AES256"}}]})

        def rel(url):
            return "/" + url.split("://", 1)[1].split("/", 1)[1]
        rows = []
        for size in [int(x) for x in a.sizes.split(",")]:
            nobj = a.objects if size <= 65536 else max(20, a.objects // 8)
            keys = ["o/%d/%05d" % (size, i) for i in range(nobj)]
            blob = os.urandom(size)
            scripts = {}
            for b in ("plain", "enc"):
                with concurrent.futures.ThreadPoolExecutor(8) as ex:
                    list(ex.map(lambda k: s3.put_object(Bucket=b, Key=k,
                                                        Body=blob), keys))
                h = s3.head_object(Bucket=b, Key=keys[0])
                assert (h.get("ServerSideEncryption") == "AES256") == \
                    (b == "enc"), h
                g = [rel(s3.generate_presigned_url(
                    "get_object", Params={"Bucket": b, "Key": k},
                    ExpiresIn=7200)) for k in keys]
                p = [rel(s3.generate_presigned_url(
                    "put_object", Params={"Bucket": b, "Key": "w/" + k},
                    ExpiresIn=7200)) for k in keys]
                scripts[("GET", b)] = os.path.join(work, "g-%s-%d.lua" % (b, size))
                scripts[("PUT", b)] = os.path.join(work, "p-%s-%d.lua" % (b, size))
                lua_rotate(scripts[("GET", b)], "GET", g)
                lua_rotate(scripts[("PUT", b)], "PUT", p, size)
            for op in [o.strip().upper() for o in a.ops.split(",")]:
                res = {"plain": [], "enc": []}
                wrk(ep, scripts[(op, "plain")], 1, conns=a.conns)  # warm
                for _ in range(a.rounds):
                    for b in ("plain", "enc"):
                        r = wrk_cpu(ep, scripts[(op, b)], a.seconds, sp.pid,
                                    a.conns)
                        if r["non2xx"] or r["socket_errors"]:
                            print("warning: %s %s %d: %s %s" % (
                                op, b, size, r["non2xx"], r["socket_errors"]))
                        res[b].append(r)
                rows.append((op, size, res))
        print("\nSSE-S3 vs plaintext, one storaged (%d drives), wrk %d conns, "
              "%d x %d s rounds alternating; medians (ranges)" %
              (a.drives, a.conns, a.rounds, a.seconds))
        print("%-4s %8s | %-18s %-18s %6s | %-14s %-14s %6s" % (
            "op", "size", "plain req/s", "sse req/s", "ratio", "plain CPU us",
            "sse CPU us", "ratio"))
        for op, size, res in rows:
            pr = [r["rps"] for r in res["plain"]]
            er = [r["rps"] for r in res["enc"]]
            pc = [r["cpu_us"] for r in res["plain"]]
            ec = [r["cpu_us"] for r in res["enc"]]
            print("%-4s %8d | %7.0f (%9s) %7.0f (%9s) %5.2fx | %5.0f (%7s) "
                  "%5.0f (%7s) %5.2fx" % (
                      op, size, median(pr), rng(pr), median(er), rng(er),
                      median(er) / median(pr), median(pc), rng(pc),
                      median(ec), rng(ec), median(ec) / median(pc)))
    finally:
        if sp:
            sp.terminate()
            sp.wait(timeout=30)
        if a.keep:
            print("kept", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
