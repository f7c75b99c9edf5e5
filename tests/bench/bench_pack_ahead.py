#!/usr/bin/python3
"""tests/bench/bench_pack_ahead.py - a shuffled epoch over a pack larger
than the cache: read-ahead of unread members (pack_fetch=ahead, the default
for such a pack) against an LRU of 1 MiB blocks (pack_fetch=block, the
default before) and against the same files unpacked, in one run.

What: the dataset (default: the 3000-file JPEG set of bench_loader.py,
var/bench/dataset-default) is uploaded as loose objects and packed with
`ecfs pack --shard-size 8M`. Then, per repetition and per row, a fresh ro
mount (page cache dropped) reads every file once in a shuffled order from
--threads threads (a loader's workers), and compares nothing but sizes
(the tests check bytes). Rows: unpacked ecfs, and for each cache_size as a
fraction f of the pack's shard bytes, pack_fetch=ahead and =block. Per row:
GETs of the epoch (median [min..max]), GETs per file, the lower bound of
misses per file for any read-ahead of budget f ((1-f) - f ln(1/f), 0 for
f >= 1; fuse/PACK.md), MiB fetched, files/s, and the CPU ms of ecfs and of
storaged per 1000 files.

--cache-dir adds, per cache_size, two read-ahead rows with -o cache_dir
(a fresh directory under the work folder): the cold epoch (every member
a GET brings lands in the disk cache; aligned 4 MiB windows, so about
bytes / 4 MiB + shards GETs whatever the order) and the epoch of a
remount over the same directory (page cache dropped; the bytes come from
the disk).

How: its own storaged (16 drive folders in a temporary folder, free port);
everything it starts is removed at exit. --lock FILE takes an flock around
the measured epochs only (not the upload), so benchmarks sharing the
machine take turns.

Usage: bench_pack_ahead.py [--dataset DIR] [--fractions 0.25,0.43,0.6,1.2 |
       --cache-sizes 1G,2G] [--modes ahead,block] [--cache-dir] [--repeat 3]
       [--threads 4] [--lock FILE] [--workdir DIR]
Environment: ECFS_BIN_DIR (default <repo>/bin).
"""

import argparse
import atexit
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_loader as bl  # noqa: E402


def bound(f):
    """Least misses per member of a uniform shuffle with budget f x pack."""
    return 0.0 if f >= 1 else (1 - f) - f * math.log(1 / f)


def stats(mnt):
    with open(os.path.join(mnt, ".ecfs-stats")) as f:
        return {k: int(v) for k, v in re.findall(r"(\w+)[= ](\d+)", f.read())}


def epoch(mnt, rels, seed, threads):
    """Reads every file of @rels below @mnt once, shuffled, from @threads
    threads; returns (seconds, bytes)."""
    order = list(rels)
    random.Random(seed).shuffle(order)
    lock = threading.Lock()
    pos = [0]
    total = [0]

    def work():
        n = 0
        while True:
            with lock:
                if pos[0] >= len(order):
                    break
                rel = order[pos[0]]
                pos[0] += 1
            with open(os.path.join(mnt, rel), "rb") as f:
                n += len(f.read())
        with lock:
            total[0] += n
    t0 = time.perf_counter()
    ts = [threading.Thread(target=work) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.perf_counter() - t0, total[0]


def med(xs, nd=0):
    fmt = "%%.%df" % nd
    return (fmt + " [" + fmt + ".." + fmt + "]") % (
        statistics.median(xs), min(xs), max(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset",
                    default=os.path.join(bl.REPO, "var", "bench",
                                         "dataset-default"))
    ap.add_argument("--fractions", default="0.25,0.43,0.6,1.2")
    ap.add_argument("--cache-sizes", default="",
                    help="cache_size values (e.g. 1G,2G) instead of "
                    "--fractions")
    ap.add_argument("--modes", default="ahead,block")
    ap.add_argument("--cache-dir", action="store_true",
                    help="also read-ahead rows with -o cache_dir: the cold "
                    "epoch and a remount's")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--shard-size", default="8M")
    ap.add_argument("--lock", metavar="FILE")
    ap.add_argument("--workdir", default=None,
                    help="where the drives go (default: a temporary folder)")
    a = ap.parse_args()
    fracs = [float(x) for x in a.fractions.split(",") if x]
    modes = [x for x in a.modes.split(",") if x]

    if not os.path.isdir(a.dataset):
        subprocess.run([bl.PY, os.path.join(bl.REPO, "scripts",
                                            "gen-dataset"), a.dataset,
                        "--preset", "default"], check=True)
    work = tempfile.mkdtemp(prefix="ecfs-packahead-", dir=a.workdir)
    srv = bl.Storaged(os.path.join(work, "drives"))
    mounts = []

    def cleanup():
        for m in mounts:
            m.unmount()
        srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    atexit.register(cleanup)
    srv.start()
    paths = sorted(os.path.join(d, n) for d, _x, ns in os.walk(a.dataset)
                   for n in ns)
    rels = [os.path.relpath(p, a.dataset) for p in paths]
    t0 = time.perf_counter()
    data = bl.upload_tree(srv.endpoint, a.dataset, paths, "loose/")
    env = dict(os.environ, AWS_ACCESS_KEY_ID=bl.ACCESS,
               AWS_SECRET_ACCESS_KEY=bl.SECRET)
    r = subprocess.run([os.path.join(bl.BIN, "ecfs"), "pack", a.dataset,
                        "%s:packed" % bl.BUCKET, "-q", "-o",
                        "endpoint=" + srv.endpoint, "--shard-size",
                        a.shard_size], env=env, capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise SystemExit("ecfs pack failed: %s%s" % (r.stdout, r.stderr))
    bl.log("%d files, %.1f MiB uploaded and packed in %.0f s"
           % (len(paths), data / 1048576, time.perf_counter() - t0))

    m = bl.Mount("ecfs", os.path.join(work, "mnt"), srv, work, "packed")
    mounts.append(m)
    m.mount()
    shard_bytes = stats(m.mnt)["pack_shard_bytes"]
    m.unmount()
    mounts.remove(m)
    rows = [("ecfs (unpacked)", "loose", "", None, None)]
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if a.cache_sizes:
        fracs = [int(x[:-1]) * units[x[-1]] / shard_bytes
                 if x[-1] in units else int(x) / shard_bytes
                 for x in a.cache_sizes.split(",") if x]
    for f in fracs:
        for mode in modes:
            rows.append(("ecfs-pack %s" % mode, "packed", mode, f, None))
        if a.cache_dir:
            d = os.path.join(work, "dcache-%.3f" % f)
            rows.append(("ecfs-pack ahead + cache_dir, cold", "packed",
                         "ahead", f, ("cold", d)))
            rows.append(("ecfs-pack ahead + cache_dir, remount", "packed",
                         "ahead", f, ("again", d)))
    res = {i: [] for i in range(len(rows))}
    for rep in range(a.repeat):
        for i, (name, prefix, mode, f, disk) in enumerate(rows):
            extra = ""
            if f is not None:
                extra = "cache_size=%d,pack_fetch=%s" % (
                    max(1 << 20, round(f * shard_bytes)), mode)
            if disk is not None:
                if disk[0] == "cold":
                    shutil.rmtree(disk[1], ignore_errors=True)
                extra += ",cache_dir=" + disk[1]
            with bl.peer_lock(a.lock):
                bl.drop_caches()
                m = bl.Mount("ecfs", os.path.join(work, "mnt"), srv, work,
                             prefix, extra=extra)
                mounts.append(m)
                m.mount()
                s0 = stats(m.mnt)
                c0, k0 = m.cpu(), srv.cpu()
                secs, nbytes = epoch(m.mnt, rels, seed=rep, threads=a.threads)
                c1, k1 = m.cpu(), srv.cpu()
                s1 = stats(m.mnt)
                m.unmount()
                mounts.remove(m)
            if nbytes != data:
                raise SystemExit("%s read %d bytes, expected %d"
                                 % (name, nbytes, data))
            gets = s1["get"] - s0["get"]
            res[i].append(dict(gets=gets, secs=secs,
                               moved=s1.get("pack_block_bytes", 0) -
                               s0.get("pack_block_bytes", 0),
                               ecfs=(c1 - c0), srv=(k1 - k0)))
            bl.log("#%d %s %s: %d GETs, %.1f s" % (rep + 1, name,
                                                   extra, gets, secs))

    n = len(paths)
    base = statistics.median(x["gets"] for x in res[0])
    print("## Shuffled epoch over a pack larger than the cache: %d files, "
          "%.1f MiB, pack %.1f MiB of shards\n"
          % (n, data / 1048576, shard_bytes / 1048576))
    print("Command: tests/bench/bench_pack_ahead.py %s (load average %.0f "
          "at the end; medians [min..max] of %d)\n"
          % (" ".join(sys.argv[1:]), os.getloadavg()[0], a.repeat))
    print("| row | cache_size (f = cache / pack) | GETs | GETs/file | "
          "bound | vs unpacked | MiB fetched | files/s | ecfs CPU ms/1k "
          "files | storaged CPU ms/1k files |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for i, (name, _p, mode, f, _d) in enumerate(rows):
        xs = res[i]
        g = statistics.median(x["gets"] for x in xs)
        print("| %s | %s | %s | %.3f | %s | %.3f | %s | %s | %s | %s |" % (
            name, "default (1G)" if f is None else
            "%.0f MiB (f = %.2f)" % (f * shard_bytes / 1048576, f),
            med([x["gets"] for x in xs]), g / n,
            "%.3f" % bound(f) if f is not None and mode == "ahead" and
            _d is None else "",
            g / base, med([x["moved"] / 1048576 for x in xs], 1)
            if f is not None else "", med([n / x["secs"] for x in xs]),
            med([1e6 * x["ecfs"] / n for x in xs]),
            med([1e6 * x["srv"] / n for x in xs])))


if __name__ == "__main__":
    main()
