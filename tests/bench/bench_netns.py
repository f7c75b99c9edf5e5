#!/usr/bin/python3
"""tests/bench/bench_netns.py - many ecfs clients on one storaged.

Each ecfs mount runs in a network namespace of its own with a veth pair to
the host (tests/integration/netns_util.py: 10.213.A.x/30 addresses of this
run, removed at exit); storaged listens on the host end of pair 0 only.
All mounts of a configuration read the whole dataset at the same time
(after a barrier), every file hashed and compared with the manifest (every
byte checked; a mismatch aborts the run).

Configurations (fresh mounts each time, so ecfs's caches are cold):
  1x16, 1x32  one mount with 16 / 32 reader threads: the server's
              single-client limit is the better of the two
  4x4, 8x4    4 / 8 mounts, 4 reader threads each
Figures: aggregate samples/s (a sample = one file read whole), the ratio
against the single-client limit (goal >= 0.8), storaged's CPU (ms per 1000
samples and % of one core) and the ecfs processes' CPU, medians of
--repeat rounds (round-robin over the configurations) with min-max.

Usage: bench_netns.py [--files N] [--repeat R] [--configs 1x16,1x32,4x4,8x4]
                      [--results DIR]
Needs root (ip netns, FUSE). Environment: ECFS_BIN_DIR (default <repo>/bin).
"""

import argparse
import hashlib
import json
import multiprocessing
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

from conftest import Storaged  # noqa: E402
from fuse_util import Mount  # noqa: E402
from netns_util import NetnsLab, available  # noqa: E402

T0 = time.monotonic()
HZ = os.sysconf("SC_CLK_TCK")


def log(msg):
    sys.stderr.write("bench_netns: %6.1f %s\n" % (time.monotonic() - T0, msg))
    sys.stderr.flush()


def cpu_s(pids):
    """utime+stime seconds of @pids (threads included)."""
    t = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            t += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return t / HZ


def dataset(n, seed=5):
    """{key: bytes}: JPEG-like sizes (mean ~40 KB) in 20 class folders."""
    rnd = random.Random(seed)
    sizes = [2000, 8000, 15000, 30000, 45000, 60000, 90000, 120000]
    return {"train/c%02d/%05d.jpg" % (i % 20, i):
            rnd.randbytes(rnd.choice(sizes) + rnd.randrange(1000))
            for i in range(n)}


def read_all(root, keys, want, threads, seed):
    """Reads every key under @root with @threads, checks each file's
    sha256; returns the number of files read."""
    keys = list(keys)
    random.Random(seed).shuffle(keys)

    def one(k):
        with open(os.path.join(root, k), "rb") as f:
            b = f.read()
        if hashlib.sha256(b).digest() != want[k]:
            raise AssertionError("wrong bytes in %s under %s" % (k, root))
        return 1

    with ThreadPoolExecutor(threads) as ex:
        return sum(ex.map(one, keys))


def run_config(lab, srv, bucket, keys, want, nmounts, threads, workdir):
    mounts = []
    try:
        for i in range(nmounts):
            m = Mount(workdir, srv.endpoint, bucket, opts=["ro"],
                      access_key=srv.access_key, secret_key=srv.secret_key)
            m.argv = lab.wrap(i, m.argv)
            m.start()
            mounts.append(m)
        ecfs_pids = [p for m in mounts for p in m.pids()]
        # one reader process per mount (threads of one Python process
        # would share one GIL), all started together by a barrier
        mp = multiprocessing.get_context("fork")
        barrier = mp.Barrier(nmounts + 1)
        q = mp.Queue()

        def client(i):
            try:
                barrier.wait(60)
                q.put((i, read_all(mounts[i].path, keys, want, threads,
                                   seed=i)))
            except Exception as e:
                q.put((i, "mount %d: %r" % (i, e)))

        procs = [mp.Process(target=client, args=(i,))
                 for i in range(nmounts)]
        for p in procs:
            p.start()
        s0, c0 = cpu_s([srv.proc.pid]), cpu_s(ecfs_pids)
        barrier.wait(60)
        t0 = time.monotonic()
        got = [q.get(timeout=600) for _ in procs]
        wall = time.monotonic() - t0
        s1, c1 = cpu_s([srv.proc.pid]), cpu_s(ecfs_pids)
        for p in procs:
            p.join(30)
        errs = [r for _, r in got if isinstance(r, str)]
        if errs:
            raise AssertionError("; ".join(errs))
        n = sum(r for _, r in got)
        assert n == nmounts * len(keys), (n, nmounts, len(keys))
        for m in mounts:
            st = m.stats()
            assert st["errors"] == 0 and st["etag_mismatch"] == 0, st
        return {"samples": n, "wall_s": wall, "samples_s": n / wall,
                "server_cpu_s": s1 - s0,
                "server_ms_per_1k": (s1 - s0) * 1e6 / n,
                "server_core_pct": 100 * (s1 - s0) / wall,
                "ecfs_cpu_s": c1 - c0,
                "ecfs_ms_per_1k": (c1 - c0) * 1e6 / n}
    finally:
        for m in mounts:
            m.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--configs", default="1x16,1x32,4x4,8x4")
    ap.add_argument("--results", default=None)
    a = ap.parse_args()
    why = available()
    if why:
        sys.exit("bench_netns: " + why)
    configs = [tuple(int(x) for x in c.split("x"))
               for c in a.configs.split(",")]
    nns = max(m for m, _ in configs)
    tmp = tempfile.mkdtemp(prefix="bench-netns-")
    lab = srv = None
    try:
        lab = NetnsLab(nns)
        log("%d namespaces, server on %s" % (nns, lab.server_addr))
        srv = Storaged(os.path.join(tmp, "srv"), ndrives=16)
        srv.host = lab.server_addr
        srv.endpoint = "http://%s:%d" % (srv.host, srv.port)
        srv.start()
        data = dataset(a.files)
        want = {k: hashlib.sha256(v).digest() for k, v in data.items()}
        c = srv.client()
        c.create_bucket(Bucket="bench")
        with ThreadPoolExecutor(8) as ex:
            list(ex.map(lambda kv: c.put_object(Bucket="bench", Key=kv[0],
                                                Body=kv[1]), data.items()))
        mib = sum(len(v) for v in data.values()) / 2**20
        log("uploaded %d files, %.1f MiB" % (len(data), mib))
        keys = sorted(data)
        del data
        res = {c: [] for c in configs}
        for r in range(a.repeat):
            for cfg in configs:
                x = run_config(lab, srv, "bench", keys, want, cfg[0], cfg[1],
                               os.path.join(tmp, "m"))
                res[cfg].append(x)
                log("round %d %dx%d: %.0f samples/s, server %.0f%% core"
                    % (r + 1, cfg[0], cfg[1], x["samples_s"],
                       x["server_core_pct"]))
    finally:
        if srv is not None:
            srv.stop()
        if lab is not None:
            lab.close()
        shutil.rmtree(tmp, ignore_errors=True)

    def med(cfg, k):
        v = [x[k] for x in res[cfg]]
        return statistics.median(v), min(v), max(v)

    single = max(med(c, "samples_s")[0] for c in configs if c[0] == 1) \
        if any(c[0] == 1 for c in configs) else None
    lines = ["# many ecfs clients, one storaged (%d files, %.1f MiB, "
             "%d rounds, %d cores)" % (len(keys), mib, a.repeat,
                                       os.cpu_count()),
             "",
             "| mounts x threads | samples/s (median, min-max) | vs single-client limit "
             "| storaged ms CPU / 1000 samples | storaged % core | ecfs ms CPU / 1000 samples |",
             "|---|---|---|---|---|---|"]
    for cfg in configs:
        s, lo, hi = med(cfg, "samples_s")
        ratio = "%.2fx" % (s / single) if single else "-"
        lines.append("| %dx%d | %.0f (%.0f-%.0f) | %s | %.0f | %.0f | %.0f |"
                     % (cfg[0], cfg[1], s, lo, hi, ratio,
                        med(cfg, "server_ms_per_1k")[0],
                        med(cfg, "server_core_pct")[0],
                        med(cfg, "ecfs_ms_per_1k")[0]))
    lines.append("")
    lines.append("single-client limit = best 1-mount configuration: %.0f "
                 "samples/s; goal for 4 and 8 mounts: >= 0.8x" % single
                 if single else "no 1-mount configuration run")
    print("\n".join(lines))
    if a.results:
        os.makedirs(a.results, exist_ok=True)
        with open(os.path.join(a.results, "netns.md"), "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(a.results, "netns.json"), "w") as f:
            json.dump({"%dx%d" % c: v for c, v in res.items()}, f, indent=1)


if __name__ == "__main__":
    main()
