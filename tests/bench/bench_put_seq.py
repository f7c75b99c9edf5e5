#!/usr/bin/python3
"""tests/bench/bench_put_seq.py - one client's sequential small PUTs, the
request `cp -r` through a mount waits for once per file: storaged built
from two trees side by side (--base-bin, --new-bin), same drives layout,
alternating rounds. Figures, not pass/fail.

Each round starts a fresh storaged on 16 drive directories under
--workdir (the bench_write layout: file-mode group commit, see
storaged/FORMAT.md "Writes"), creates a new bucket and PUTs --puts objects
of 8-24 KiB (random bytes) one after the other with boto3:
  cold   the first --puts PUTs into the new bucket (each makes the object
         directories DRIVE/b/BUCKET/hh/ it is the first to use)
  warm   --puts more after --warm PUTs that made most of them
A fresh store's meta journal files start at their header: before session
16 every PUT of the first seconds appended to them (each fdatasync then
waited for a jbd2 commit), so both phases measured that; since 72f1586 the
journal switches to a zeroed, longer file after its first MiB of records
(storaged/FORMAT.md "The meta journal").
Per phase: client-side latency per PUT (median of the round's PUTs), the
server's mean PutObject duration (/metrics) and its CPU per PUT.
Tables give the median and [min-max] over rounds.

STORAGED_SYNC_MODE=fs in the environment (passed to both servers), with
--workdir on a filesystem of its own, measures the syncfs rounds of fs mode
instead (FORMAT.md "Writes"); the table's header names the mode.

Usage: tests/bench/bench_put_seq.py --base-bin DIR --new-bin DIR
       [--rounds N] [--puts N] [--warm N] [--no-fsync] [--workdir DIR]
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_loader as bl  # noqa: E402  (Storaged, ACCESS, SECRET)
import bench_write as bw  # noqa: E402  (server_counters)


def put_phase(c, srv, bodies, prefix, n):
    """(median client latency s, server PutObject mean s, CPU s per PUT)."""
    b0, cpu0, lat = bw.server_counters(srv), srv.cpu(), []
    for i in range(n):
        t = time.perf_counter()
        c.put_object(Bucket="seqput", Key="%s/f%05d" % (prefix, i),
                     Body=bodies[i % len(bodies)])
        lat.append(time.perf_counter() - t)
    b1, cpu1 = bw.server_counters(srv), srv.cpu()
    cnt = b1["PutObject"][0] - b0.get("PutObject", (0, 0.0))[0]
    dur = b1["PutObject"][1] - b0.get("PutObject", (0, 0.0))[1]
    return statistics.median(lat), dur / cnt, (cpu1 - cpu0) / n


def one_round(bindir, a, bodies, work):
    import boto3
    from botocore.config import Config
    root = os.path.join(work, "srv")
    shutil.rmtree(root, ignore_errors=True)
    bl.BIN = bindir
    srv = bl.Storaged(root, args=["--no-fsync"] if a.no_fsync else [])
    srv.start()
    try:
        c = boto3.client("s3", endpoint_url=srv.endpoint,
                         aws_access_key_id=bl.ACCESS,
                         aws_secret_access_key=bl.SECRET,
                         region_name="us-east-1",
                         config=Config(s3={"addressing_style": "path"},
                                       retries={"max_attempts": 0}))
        c.create_bucket(Bucket="seqput")
        cold = put_phase(c, srv, bodies, "cold", a.puts)
        for i in range(a.warm):
            c.put_object(Bucket="seqput", Key="fill/%05d" % i,
                         Body=bodies[i % len(bodies)])
        warm = put_phase(c, srv, bodies, "warm", a.puts)
    finally:
        srv.stop()
        shutil.rmtree(root, ignore_errors=True)
    return {"cold": cold, "warm": warm}


def fmt(xs, scale):
    xs = [x * scale for x in xs]
    f = "%.0f [%.0f-%.0f]" if scale > 1e3 else "%.2f [%.2f-%.2f]"
    return f % (statistics.median(xs), min(xs), max(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base-bin", required=True)
    ap.add_argument("--new-bin", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--puts", type=int, default=500)
    ap.add_argument("--warm", type=int, default=2500)
    ap.add_argument("--no-fsync", action="store_true")
    ap.add_argument("--workdir", default=None)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="bench_put_seq.", dir=a.workdir)
    bodies = [os.urandom(8192 + (i * 4096) % 16385) for i in range(64)]
    res = {}
    try:
        for r in range(a.rounds):
            order = [("base", a.base_bin), ("new", a.new_bin)]
            if r % 2:
                order.reverse()
            for name, bindir in order:
                out = one_round(bindir, a, bodies, work)
                for ph, v in out.items():
                    res.setdefault((name, ph), []).append(v)
                    print("round %d %s %s: latency %.2f ms, server PutObject "
                          "%.2f ms, server CPU %.0f us/PUT" % (
                              r, name, ph, v[0] * 1e3, v[1] * 1e3, v[2] * 1e6),
                          flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n## Sequential small PUTs, one client (tests/bench/bench_put_seq.py)"
          "\n\n%d round(s) x %d PUTs of 8-24 KiB per phase, %s; median "
          "[min-max] over rounds.\n" % (
              a.rounds, a.puts,
              "--no-fsync" if a.no_fsync else "fsync (%s mode, 16 drives)" %
              os.environ.get("STORAGED_SYNC_MODE", "file")))
    print("| build | phase | client latency ms | server PutObject ms | "
          "server CPU us/PUT |")
    print("|---|---|---|---|---|")
    for ph in ("cold", "warm"):
        for name in ("base", "new"):
            v = res[(name, ph)]
            print("| %s | %s | %s | %s | %s |" % (
                name, ph, fmt([x[0] for x in v], 1e3),
                fmt([x[1] for x in v], 1e3), fmt([x[2] for x in v], 1e6)))
    for ph in ("cold", "warm"):
        b = statistics.median(x[0] for x in res[("base", ph)])
        n = statistics.median(x[0] for x in res[("new", ph)])
        print("%s: new/base client latency %.2fx" % (ph, n / b))
    return 0


if __name__ == "__main__":
    sys.exit(main())
