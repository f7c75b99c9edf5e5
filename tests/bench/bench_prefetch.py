#!/usr/bin/python3
"""tests/bench/bench_prefetch.py - the directory prefetch's trade-off
(issue 16): what the waste bound costs a cold shuffled epoch, and what it
saves on a random subset.

Peers (ecfs -o ro, one at a time, each from cold: storaged restarted, page
cache dropped, a fresh mount):
  ecfs       this build: outside listing order at most one prefetched-but-
             unread file per 12 read, unread bytes within the caches
  ecfs-off   this build with -o dir_prefetch=0 (readers fetch every file)
  ecfs-old   --old-bin DIR: a build from before the bound (c62ca08^), whose
             prefetch fetched the whole directory after 8 reads

Two tests per peer and round:
Each pass first walks the mount (os.walk, as ImageFolder does): the
directory prefetch works from those listings. Then:
  epoch   every file once in a shuffled order (--threads readers): files/s,
          GETs per file, the daemon's CPU per file
  subset  a fresh mount reads --subset of the files (random): files/s and
          GETs per file read (the issue's goal: at most 1.1)
GETs are ecfs's own counters (.ecfs-stats: read_gets + dir_prefetch_gets +
readahead_gets). --rounds N interleaves the peers and prints medians with
[min-max].

Usage: bench_prefetch.py [--dirs 10] [--files-per-dir 300] [--kib 16]
       [--threads 8] [--subset 0.3] [--rounds 3] [--old-bin DIR]
       [--work DIR]
Everything it starts is gone at exit.
"""

import argparse
import atexit
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_bigdata as bb  # noqa: E402  (upload, cpu_s, median, stats)
import bench_loader as bl  # noqa: E402  (Storaged, Mount)


def make_dataset(root, dirs, per, kib):
    rnd = random.Random(17)
    names = []
    for d in range(dirs):
        os.makedirs(os.path.join(root, "d%02d" % d), exist_ok=True)
        for i in range(per):
            n = "d%02d/f%05d.bin" % (d, i)
            p = os.path.join(root, n)
            if not os.path.exists(p):
                with open(p, "wb") as f:
                    f.write(rnd.randbytes(kib * 1024 // 2 +
                                          rnd.randrange(kib * 1024)))
            names.append(n)
    return names


def read_all(root, names, threads):
    """Reads @names whole with @threads readers; (seconds, bytes)."""
    from concurrent.futures import ThreadPoolExecutor

    def rd(n):
        with open(os.path.join(root, n), "rb", buffering=0) as f:
            t = 0
            while True:
                b = f.read(1 << 20)
                if not b:
                    return t
                t += len(b)
    t0 = time.monotonic()
    with ThreadPoolExecutor(threads) as ex:
        tot = sum(ex.map(rd, names))
    return time.monotonic() - t0, tot


def gets(st):
    return sum(st.get(k, 0) for k in ("read_gets", "dir_prefetch_gets",
                                       "readahead_gets"))


def one(kind, srv, work, names, order, a, mounts):
    """One cold pass of @order on a fresh mount: (files/s, GETs per file
    read, daemon CPU us per file read, prefetched-but-unread MiB)."""
    srv.restart()
    bb.drop_caches()
    m = bl.Mount("ecfs", os.path.join(work, "mnt-" + kind), srv, work,
                 bl.PREFIX)
    m.log = os.path.join(work, "%s.log" % kind)
    base = m.argv_env

    def argv_env():
        argv, env = base()
        if kind == "ecfs-off":
            argv[-1] += ",dir_prefetch=0"
        elif kind == "ecfs-old":
            argv[0] = os.path.join(a.old_bin, "ecfs")
        return argv, env
    m.argv_env = argv_env
    mounts.append(m)
    m.mount(timeout=60)
    try:
        c0 = bb.cpu_s(m.proc.pid)
        # a loader scans the tree first (ImageFolder, os.walk): the
        # directory prefetch works from those listings
        seen = sum(len(f) for _, _, f in os.walk(m.mnt))
        assert seen == len(names), seen
        secs, _ = read_all(m.mnt, order, a.threads)
        c1 = bb.cpu_s(m.proc.pid)
        time.sleep(0.5)  # prefetches still in flight land in the counters
        st = bb.ecfs_stats(m.mnt)
    finally:
        m.unmount()
        mounts.remove(m)
    n = len(order)
    unread = st.get("dir_prefetch_unread_bytes", 0) / 1048576.0
    return n / secs, gets(st) / n, (c1 - c0) * 1e6 / n, unread


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dirs", type=int, default=10)
    ap.add_argument("--files-per-dir", type=int, default=300)
    ap.add_argument("--kib", type=int, default=16)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--subset", type=float, default=0.3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--old-bin", default=None)
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    peers = ["ecfs", "ecfs-off"] + (["ecfs-old"] if a.old_bin else [])
    work = a.work or tempfile.mkdtemp(prefix="bench-prefetch-")
    os.makedirs(work, exist_ok=True)
    data = os.path.join(bl.REPO, "var", "bench", "prefetch-%d-%d-%d" %
                        (a.dirs, a.files_per_dir, a.kib))
    names = make_dataset(data, a.dirs, a.files_per_dir, a.kib)
    srv = bl.Storaged(os.path.join(work, "storaged"))
    srv.start()
    mounts = []

    def cleanup():
        for m in mounts:
            m.unmount()
        srv.stop()
    atexit.register(cleanup)
    bb.upload(srv, data, names)
    print("dataset %d dirs x %d files of %d KiB on average, %d readers, "
          "subset %.0f%%, %d rounds" % (a.dirs, a.files_per_dir, a.kib,
                                        a.threads, 100 * a.subset,
                                        a.rounds), flush=True)
    res = {(p, t): [] for p in peers for t in ("epoch", "subset")}
    for r in range(a.rounds):
        rnd = random.Random(100 + r)
        epoch = list(names)
        rnd.shuffle(epoch)
        subset = rnd.sample(names, int(len(names) * a.subset))
        for p in peers:
            for t, order in (("epoch", epoch), ("subset", subset)):
                v = one(p, srv, work, names, order, a, mounts)
                res[(p, t)].append(v)
                print("  round %d %-9s %-6s %7.0f files/s  %.3f GETs/file  "
                      "%5.0f us CPU/file  %.1f MiB unread" % ((r + 1, p, t) +
                                                              v), flush=True)

    def cell(p, t, i, fmt):
        v = [x[i] for x in res[(p, t)]]
        return (fmt % bb.median(v)) + (" [%s-%s]" % (fmt % min(v),
                                                     fmt % max(v))
                                       if len(v) > 1 else "")
    print("\nmedians of %d rounds [min-max]\n" % a.rounds)
    print("| peer | epoch files/s | epoch GETs/file | epoch CPU us/file | "
          "subset files/s | subset GETs/file read |")
    print("|---|---|---|---|---|---|")
    for p in peers:
        print("| %s | %s | %s | %s | %s | %s |" % (
            p, cell(p, "epoch", 0, "%.0f"), cell(p, "epoch", 1, "%.3f"),
            cell(p, "epoch", 2, "%.0f"), cell(p, "subset", 0, "%.0f"),
            cell(p, "subset", 1, "%.3f")))
    base = bb.median([x[0] for x in res[("ecfs-off", "epoch")]])
    for p in peers:
        e = bb.median([x[0] for x in res[(p, "epoch")]])
        print("%s: shuffled epoch at %.2fx of no directory prefetch" %
              (p, e / base if base else 0))
    shutil.rmtree(os.path.join(work, "storaged"), ignore_errors=True)


if __name__ == "__main__":
    main()
