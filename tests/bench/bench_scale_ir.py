#!/usr/bin/python3
"""tests/bench/bench_scale_ir.py - instructions per request of storaged on a
kept bench_scale store (figures, not pass/fail): does the work per request
grow with the bucket? (This VM has no hardware counters, so perf stat cannot
count instructions; valgrind's callgrind can, exactly.)

Starts `storaged serve` under `valgrind --tool=callgrind --instr-atstart=no`
on the store a `bench_scale.py --fill-only` (or --keep) run left in STORE,
filled to N objects, waits for the index check, reads the hot set once,
then for each request kind switches the instrumentation on around COUNT
requests (PAGES for LIST) and dumps: the instructions (Ir) of all the
server's threads, user space, divided by the requests. With --cache-sim
also callgrind's simulated D1/LL misses per request. Kinds: get_hot,
head_hot (obj/000000000..999), get_any (any key), list_hot (the ListObjectsV2
page after obj/000000000), put (new keys), delete (the keys just put).

Usage: tests/bench/bench_scale_ir.py STORE N [--ops get_hot,list_hot,put,delete]
       [--count 200] [--pages 10] [--cache-sim] [--out DIR]
Compare two sizes by running it on each store (e.g. 10^3 and 10^6), same build.
Environment: ECFS_BIN_DIR (default <repo>/bin)."""
import argparse
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_scale as B  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("store")
    ap.add_argument("n", type=int)
    ap.add_argument("--ops", default="get_hot,list_hot,put,delete")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--pages", type=int, default=10)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--drives", type=int, default=4)
    ap.add_argument("--cache-sim", action="store_true")
    ap.add_argument("--out", default=None,
                    help="keep the callgrind files here (default: a temp "
                         "folder, removed)")
    a = ap.parse_args()
    out = a.out or tempfile.mkdtemp(prefix="scale_ir.")
    os.makedirs(out, exist_ok=True)
    real = os.path.join(B.BIN, "storaged")
    vgbin = os.path.join(out, "bin")
    os.makedirs(vgbin, exist_ok=True)
    wrap = os.path.join(vgbin, "storaged")
    with open(wrap, "w") as f:
        f.write("#!/bin/sh\nexec valgrind --tool=callgrind --instr-atstart=no"
                " %s --callgrind-out-file=%s/cg.%d.%%p %s \"$@\"\n"
                % ("--cache-sim=yes" if a.cache_sim else "", out, a.n, real))
    os.chmod(wrap, 0o755)
    B.BIN = vgbin
    drives = [os.path.join(a.store, "d%d" % i) for i in range(a.drives)]
    srv = B.Server(drives, os.path.join(a.store, "storaged.log"))
    srv.start()
    try:
        B.wait_index_check(srv.url, timeout=3000)
        pid = srv.proc.pid
        cl = [srv.client() for _ in range(a.clients)]
        rng = random.Random(7)
        hot = ["obj/%09d" % i for i in range(min(a.n, 1000))]
        body = os.urandom(1024)
        put_keys = []

        def get(c, k):
            c.get_object(Bucket=B.BUCKET, Key=k)["Body"].read()

        def head(c, k):
            c.head_object(Bucket=B.BUCKET, Key=k)

        def page(c, m):
            c.list_objects_v2(Bucket=B.BUCKET, StartAfter=m, MaxKeys=1000)

        def put(c, k):
            c.put_object(Bucket=B.BUCKET, Key=k, Body=body)

        def delete(c, k):
            c.delete_object(Bucket=B.BUCKET, Key=k)

        def items(op):
            if op == "list_hot":
                return ["obj/000000000"] * a.pages
            if op in ("get_hot", "head_hot"):
                return [rng.choice(hot) for _ in range(a.count)]
            if op == "get_any":
                return ["obj/%09d" % rng.randrange(a.n)
                        for _ in range(a.count)]
            if op == "put":
                put_keys.append(["new/ir/%d/%06d" % (len(put_keys), i)
                                 for i in range(a.count)])
                return put_keys[-1]
            return put_keys.pop(0)  # delete
        fns = {"list_hot": page, "get_hot": get, "head_hot": head,
               "get_any": get, "put": put, "delete": delete}

        def ctl(*args):
            subprocess.run(["callgrind_control"] + list(args) + [str(pid)],
                           check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        B.run_ops(srv, cl, hot, get)  # the hot set once, unmeasured
        print("| objects | request | instructions/req | D1 misses/req "
              "| LL misses/req |\n|---|---|---|---|---|")
        for i, op in enumerate(a.ops.split(",")):
            its = items(op)
            B.settle(srv)
            ctl("--zero")
            ctl("-i", "on")
            B.run_ops(srv, cl, its, fns[op])
            ctl("-i", "off")
            ctl("--dump=%s" % op)
            path = "%s/cg.%d.%d.%d" % (out, a.n, pid, i + 1)
            with open(path) as f:
                ev = tot = None
                for line in f:
                    if line.startswith("events:"):
                        ev = line.split()[1:]
                    elif line.startswith("totals:"):
                        tot = [int(x) for x in line.split()[1:]]
            v = dict(zip(ev, tot))
            n = len(its)
            d1 = v.get("D1mr", 0) + v.get("D1mw", 0)
            ll = v.get("DLmr", 0) + v.get("DLmw", 0)
            print("| %d | %s | %.0f | %s | %s |" % (
                a.n, op, v["Ir"] / n,
                "%.0f" % (d1 / n) if a.cache_sim else "-",
                "%.0f" % (ll / n) if a.cache_sim else "-"), flush=True)
    finally:
        srv.stop()
        if a.out is None:
            subprocess.run(["rm", "-rf", out])


if __name__ == "__main__":
    main()
