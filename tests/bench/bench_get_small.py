#!/usr/bin/python3
"""tests/bench/bench_get_small.py - storaged's CPU per 4 KiB GET, side by side
(figures, not pass/fail).

Several storaged "sides" serve the same objects (16 drives, 1+4 shards per
4 KiB object, presigned SigV4 GETs from wrk over 64 keep-alive connections
rotating over --objects keys). The rounds alternate between the sides, so
load from elsewhere on the machine falls on every side alike; each round
reports req/s and the server's CPU time per request (utime + stime from
/proc: far steadier than req/s on a shared machine). The table gives the
median and the range of each side over the rounds, and the ratio of the
medians against the first side.

Sides (each a server of its own, filled the same way):
  * body0   this build with --index-body-max 0: every GET reads the data
            shard's meta file on the loop's io_uring (openat+read+close);
  * index   this build with its defaults: a small object's body is kept in
            the index too, so a GET reads no file;
  * base    (with --base-bin DIR) another build, e.g. the previous main.

Usage: tests/bench/bench_get_small.py [--rounds R] [--seconds S]
       [--objects N] [--size BYTES] [--base-bin DIR] [--out FILE.md]
       [--json FILE]
Environment: ECFS_BIN_DIR (default <repo>/bin).
Run it under `flock /tmp/ecfs-bench.lock` on a shared machine.
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_s3_server as b  # noqa: E402


def start(binary, work, name, args):
    drives = [os.path.join(work, name, "d%d" % (i + 1)) for i in range(16)]
    for d in drives:
        os.makedirs(d)
    port = b.free_port()
    env = dict(os.environ, STORAGED_ROOT_USER=b.AK,
               STORAGED_ROOT_PASSWORD=b.SK, STORAGED_NO_BACKGROUND="1")
    log = open(os.path.join(work, name + ".log"), "wb")
    p = subprocess.Popen([os.path.join(binary, "storaged"), "serve",
                          "--address", "127.0.0.1:%d" % port,
                          "--log-level", "warn"] + args + drives,
                         env=env, stdout=log, stderr=log)
    ep = "http://127.0.0.1:%d" % port
    b.wait_http(ep + "/health/ready")
    return p, ep


def fill(ep, nobj, size, work, name):
    s3 = b.client(ep)
    s3.create_bucket(Bucket="bench")
    keys = ["obj/%06d.bin" % i for i in range(nobj)]
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda k: s3.put_object(Bucket="bench", Key=k,
                                            Body=os.urandom(size)), keys))
    urls = ["/" + s3.generate_presigned_url(
        "get_object", Params={"Bucket": "bench", "Key": k},
        ExpiresIn=7200).split("://", 1)[1].split("/", 1)[1] for k in keys]
    sc = os.path.join(work, name + ".lua")
    b.lua_rotate(sc, "GET", urls)
    return sc


def settle(pids, limit=60):
    """Waits (at most @limit s) until the servers are idle (<= 2 % of a
    core over a second): a fill leaves background work (perf showed the
    journal checkpoint's syncfs), and the side filled last measured up to
    25 % more CPU per GET in its first rounds than in its later ones."""
    hz = os.sysconf("SC_CLK_TCK")
    t0 = time.time()
    while time.time() - t0 < limit:
        before = b.cpu_ticks(pids)
        time.sleep(1)
        if b.cpu_ticks(pids) - before <= max(1, hz // 50):  # <= 2 % of a core
            break
    print("settled in %.0f s" % (time.time() - t0), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--objects", type=int, default=1000)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--base-bin", default="")
    ap.add_argument("--out", default="")
    ap.add_argument("--json", default="",
                    help="also write {side: [[req/s, CPU us/req], ...]}")
    a = ap.parse_args()
    sides = [("body0", b.BIN, ["--index-body-max", "0"]),
             ("index", b.BIN, [])]
    if a.base_bin:
        sides.insert(0, ("base", a.base_bin, []))
    work = tempfile.mkdtemp(prefix="bench-get-small-")
    procs = {}
    try:
        run = {}
        for name, binary, args in sides:
            p, ep = start(binary, work, name, args)
            procs[name] = p
            run[name] = (ep, fill(ep, a.objects, a.size, work, name), p.pid)
            b.wrk(ep, run[name][1], 2)  # warm-up
        settle([run[name][2] for name, _, _ in sides])
        res = {name: [] for name, _, _ in sides}
        for r in range(a.rounds):
            for name, _, _ in sides:
                ep, sc, pid = run[name]
                x = b.wrk_cpu(ep, sc, a.seconds, [pid])
                if x["non2xx"]:
                    sys.exit("%s: %d non-2xx answers" % (name, x["non2xx"]))
                res[name].append((x["rps"], x["cpu_us_per_req"]))
                print("round %d %-6s %8.0f req/s %6.2f us CPU/req" %
                      (r + 1, name, x["rps"], x["cpu_us_per_req"]), flush=True)
        ref = b.median([c for _, c in res[sides[0][0]]])
        lines = ["| side | req/s median [range] | CPU us/req median [range]"
                 " | CPU ratio |", "|---|---|---|---|"]
        for name, _, _ in sides:
            rps = [x for x, _ in res[name]]
            cpu = [c for _, c in res[name]]
            lines.append("| %s | %.0f [%.0f-%.0f] | %.2f [%.2f-%.2f] | %.3f |" % (
                name, b.median(rps), min(rps), max(rps), b.median(cpu),
                min(cpu), max(cpu), b.median(cpu) / ref))
        text = ("GET %d B, %d objects, %d rounds of %d s, load %s\n\n" %
                (a.size, a.objects, a.rounds, a.seconds,
                 " ".join(open("/proc/loadavg").read().split()[:3])) +
                "\n".join(lines) + "\n")
        print(text)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(res, f)
        if a.out:
            with open(a.out, "w") as f:
                f.write(text)
    finally:
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
