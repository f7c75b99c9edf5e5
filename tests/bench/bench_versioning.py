#!/usr/bin/python3
"""tests/bench/bench_versioning.py - a versioned bucket against an
unversioned one on the same storaged (issue 18; figures, not pass/fail).

Both buckets live on one storaged; every figure is measured R times,
alternating the two buckets, with wrk (2 threads, 64 keep-alive
connections, presigned SigV4 URLs, each thread its own slice of the keys) and reported as the median and range of requests/s
and of storaged's CPU time per request (utime+stime from /proc, steadier
than rates on a loaded machine; it includes the CPU storaged spends
after the run until it is idle, at most 3 s: a versioned DELETE's queued
unlinks and the spare pool's refill run after the answers; --no-tail
counts the run only, as before session 15), with the
versioned/unversioned ratio of each. The goal is >= 0.95x.

Phases (--only):
  get       4 KiB GETs rotating over N objects (written with versioning on
            in the versioned bucket, so they carry version ids).
  put_new   4 KiB PUTs of keys never written: each run its own key set,
            sized from the warm-up's rate (3x what the run should need, at
            least --new-keys), each wrk thread its own slice of it
            (twobuckets.lua_slices), so no PUT reuses a key (which in the
            versioned bucket would be an overwrite); a run that still wraps
            is reported and left out, and the versioned bucket's keys and
            versions are counted after the phase (equal: no overwrite).
  put_over  4 KiB PUTs overwriting N existing keys: in the versioned bucket
            each one keeps the old version in place (its metas linked,
            storaged/FORMAT.md "Versions").
  delete    DELETEs (no version id) of existing 4 KiB objects: in the
            versioned bucket each one keeps the current version in place
            and writes the delete marker in the same operation. Before
            each run its own key set of --del-keys (8000) keys is
            written with wrk PUTs until a listing shows every key (fills
            of 16,000 keys took a whole 95 s budget at load 17). Each key
            is deleted once (twobuckets.lua_slices(once)): a run ends when
            its keys do or after --del-seconds (1), and its rate is the
            DELETEs answered over the time from the first send to the
            last answer, so no run wraps (session 10's unversioned runs
            all wrapped 8000 keys at 15,000/s and left no figure), and
            the CPU per DELETE is storaged's over the wrk run divided by
            them.

Every run prints its row as it ends; --budget S stops starting rounds
after S seconds (the phase then reports the rounds it has), and SIGTERM
(timeout's) unwinds, stopping storaged: a run cut short still prints
what it measured.

--aa leaves the second bucket unversioned too: the same run then gives
this machine's A/A floor (two identical buckets measured the same way,
the second always after the first), to read the ratios against.

Usage: tests/bench/bench_versioning.py [--seconds S] [--repeat R]
       [--objects N] [--new-keys K] [--del-keys K] [--del-seconds S]
       [--drives D]
       [--only get,put_new,put_over,delete] [--aa] [--budget S]
       [--no-fsync] [--server-arg=ARG ...] [--workdir DIR] [--keep-store]
       [--no-tail]

--workdir DIR puts the store (and the wrk scripts) in a new directory
under DIR (default /work/data): on this VM's journal-less root ext4 any
file create after a mass delete walks the recently freed inodes (~1 ms
each for minutes, /work/wt/old12/vprobe-report.md), so write figures
are taken on a journaled ext4 (/work/wt/jfs.sh up DIR) and say which.
Environment: ECFS_BIN_DIR (default <repo>/bin). Run it under
`flock /tmp/ecfs-bench.lock` on a shared machine.
"""

import argparse
import concurrent.futures
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from twobuckets import (lua_slices, presign, start_storaged,  # noqa: E402
                        stop_storaged, summary, wrk_cpu)


def fs_of(path):
    """'TYPE on SOURCE' of the filesystem holding @path (findmnt)."""
    try:
        out = subprocess.run(["findmnt", "-n", "-o", "FSTYPE,SOURCE,OPTIONS",
                              "-T", path], capture_output=True, text=True,
                             timeout=10).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return "filesystem unknown"
    return " ".join(out) if out else "filesystem unknown"


def spares(ep):
    """storaged_meta_spares_total by event (/metrics): how many metas took
    a spare inode instead of a create."""
    import re
    import urllib.request
    try:
        with urllib.request.urlopen(ep + "/metrics", timeout=10) as r:
            text = r.read().decode()
    except OSError:
        return {}
    return {m.group(1): int(m.group(2)) for m in re.finditer(
        r'^storaged_meta_spares_total\{event="(\w+)"\} (\d+)', text, re.M)}


def compare(name, unv, ver):
    """Prints one phase's rows and returns its figures (None, said so,
    when a side has no run left)."""
    if not unv or not ver:
        print("%-9s no figure: %d unversioned and %d versioned runs counted"
              % (name, len(unv), len(ver)))
        return None
    out = {"phase": name}
    for key, unit in (("rps", "req/s"), ("cpu_us_per_req", "CPU us/req")):
        a = summary([r[key] for r in unv])
        b = summary([r[key] for r in ver])
        rr = summary([y[key] / x[key] for x, y in zip(unv, ver) if x[key]])
        out[key] = {"unversioned": a, "versioned": b, "ratio": rr}
        print("%-9s %-11s unversioned %9.1f (%.1f-%.1f)  versioned %9.1f "
              "(%.1f-%.1f)  ratio %.3f (%.3f-%.3f)"
              % (name, unit, a["median"], a["min"], a["max"], b["median"],
                 b["min"], b["max"], rr["median"], rr["min"], rr["max"]))
    bad = sum(r["non2xx"] for r in unv + ver)
    if bad:
        print("%-9s WARNING: %d non-2xx answers" % (name, bad))
    out["non2xx"] = bad
    return out


def count_versions(s3, bucket, prefix):
    """(keys, versions) under @prefix: equal when no key was overwritten."""
    keys = versions = 0
    for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix):
        keys += len(page.get("Contents", []))
    for page in s3.get_paginator("list_object_versions").paginate(
            Bucket=bucket, Prefix=prefix):
        versions += len(page.get("Versions", []))
    return keys, versions


def count_keys(s3, bucket, prefix):
    n = 0
    for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix):
        n += len(page.get("Contents", []))
    return n


def populate(s3, ep, work, bucket, ks, tag):
    """Writes every key of @ks (4 KiB each) with wrk PUTs: runs until a
    listing shows them all (at most 6 tries). Returns the seconds spent."""
    script = os.path.join(work, "fill-%s.lua" % tag)
    lua_slices(script, "PUT", presign(s3, "put_object", bucket, ks), 4096)
    prefix = ks[0].rsplit("/", 1)[0] + "/"
    spent, secs = 0, 2
    for _ in range(6):
        r = wrk_cpu(ep, script, secs, [])
        spent += secs
        if count_keys(s3, bucket, prefix) >= len(ks):
            return spent
        secs = max(2, int(len(ks) / max(r["rps"], 1.0)) + 1)
    raise RuntimeError("could not write the %d keys of %s" % (len(ks), tag))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--objects", type=int, default=500)
    ap.add_argument("--new-keys", type=int, default=6000)
    ap.add_argument("--del-keys", type=int, default=8000)
    ap.add_argument("--del-seconds", type=int, default=1)
    ap.add_argument("--drives", type=int, default=4)
    ap.add_argument("--only", default="get,put_new,put_over,delete")
    ap.add_argument("--aa", action="store_true",
                    help="A/A floor: the second bucket stays unversioned")
    ap.add_argument("--no-fsync", action="store_true",
                    help="storaged --no-fsync: no barrier waits, what is "
                    "left is the CPU path")
    ap.add_argument("--server-arg", action="append", default=[],
                    help="one more storaged argument (repeatable), e.g. "
                    "--server-arg=--workers=64")
    ap.add_argument("--no-tail", action="store_true",
                    help="count storaged's CPU over the wrk run only (as "
                    "before session 15), not the work it leaves behind")
    ap.add_argument("--budget", type=float, default=0,
                    help="start no round after S seconds (0: no limit)")
    ap.add_argument("--workdir", default=None,
                    help="the store goes in a new directory under DIR "
                    "(default /work/data, else the system's temp dir)")
    ap.add_argument("--keep-store", action="store_true",
                    help="leave the store for the caller to remove (a full "
                    "run makes ~500,000 files, whose rm takes a minute: a "
                    "quiet hold puts each side on a fresh filesystem "
                    "instead)")
    a = ap.parse_args()
    # `timeout` sends SIGTERM: unwind through the finally block, so a cut
    # run stops its storaged (its rows are already printed)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t_start = time.monotonic()
    only = set(a.only.split(","))
    # hundreds of thousands of files: on /work/data (not /tmp) where it is
    parent = a.workdir or ("/work/data" if os.path.isdir("/work/data")
                           else None)
    work = tempfile.mkdtemp(prefix="bench-vers-", dir=parent)
    print("store in %s (%s)" % (work, fs_of(work)), flush=True)
    sp = None
    try:
        sp, ep, s3 = start_storaged(work, a.drives,
                                    (["--no-fsync"] if a.no_fsync else []) +
                                    a.server_arg)
        buckets = {"unversioned": "plain", "versioned": "vers"}
        for b in buckets.values():
            s3.create_bucket(Bucket=b)
        if not a.aa:
            s3.put_bucket_versioning(Bucket="vers", VersioningConfiguration={
                "Status": "Enabled"})
        keys = ["obj/%05d.bin" % i for i in range(a.objects)]
        body = os.urandom(4096)

        def up(bk):
            s3.put_object(Bucket=bk[0], Key=bk[1], Body=body)
        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            list(ex.map(up, [(b, k) for b in buckets.values() for k in keys]))
        print("storaged %s drives, %d objects of 4 KiB per bucket, %d s x %d "
              "runs per side, alternating%s" % (
                  a.drives, a.objects, a.seconds, a.repeat,
                  "; A/A: both buckets unversioned" if a.aa else ""))
        pids = [sp.pid]
        results = []
        phases = [("get", "GET", "get_object", 0), ("put_new", "PUT",
                  "put_object", 4096), ("put_over", "PUT", "put_object", 4096),
                  ("delete", "DELETE", "delete_object", 0)]
        for name, method, op, blen in phases:
            if name not in only:
                continue
            runs = {"unversioned": [], "versioned": []}
            sp0 = spares(ep)
            vdone = 0  # versioned DELETEs answered, the warm-up's too
            k0 = a.del_keys if name == "delete" else a.new_keys
            nkeys = {"unversioned": k0, "versioned": k0}
            secs = {"unversioned": a.seconds, "versioned": a.seconds}
            if name == "delete":  # a DELETE run ends before its keys do
                secs = {"unversioned": a.del_seconds,
                        "versioned": a.del_seconds}
            for rnd in range(a.repeat + 1):  # run 0 warms up, not counted
                if a.budget and rnd > 1 and \
                        time.monotonic() - t_start > a.budget:
                    print("%s: budget of %.0f s spent: %d rounds" % (
                        name, a.budget, rnd - 1), flush=True)
                    break
                for side in ("unversioned", "versioned"):
                    b = buckets[side]
                    if name == "put_new":
                        ks = ["new/%d/%06d" % (rnd, i)
                              for i in range(nkeys[side])]
                    elif name == "delete":
                        ks = ["del/%d/%06d" % (rnd, i)
                              for i in range(nkeys[side])]
                        populate(s3, ep, work, b, ks, "%s-%d" % (side, rnd))
                    else:
                        ks = keys
                    script = os.path.join(work, "%s-%s-%d.lua"
                                          % (name, side, rnd))
                    lua_slices(script, method, presign(s3, op, b, ks), blen,
                               once=name == "delete")
                    if rnd == 0:
                        w = wrk_cpu(ep, script, 1, pids)
                        if side == "versioned":
                            vdone += w.get("done", 0)
                        if name != "delete":
                            nkeys[side] = max(a.new_keys,
                                              int(3 * w["rps"] * a.seconds))
                        continue
                    s0 = spares(ep) if name == "delete" else {}
                    r = wrk_cpu(ep, script, secs[side], pids,
                                tail=0 if a.no_tail else 3.0)
                    s1 = spares(ep) if name == "delete" else {}
                    if side == "versioned":
                        vdone += r.get("done", 0)
                    print("%s: %s run %d: %.1f req/s, %.1f CPU us/req%s, "
                          "%s%s"
                          % (name, side, rnd, r["rps"], r["cpu_us_per_req"],
                             "" if a.no_tail else
                             " (%.1f of it after the run)"
                             % r["tail_cpu_us_per_req"],
                             "%d s" % secs[side] if "done" not in r else
                             "%d of %d keys in %.3f s" % (
                                 r["done"], len(ks), r["seconds"]),
                             "" if not s1 else
                             "; metas into spares: %d reused, %d made ahead"
                             % (s1.get("reused", 0) - s0.get("reused", 0),
                                s1.get("taken", 0) - s0.get("taken", 0))),
                          flush=True)
                    if name in ("put_new", "delete") and r["wraps"] != 0:
                        print("%s: %s run %d wrapped around its %d keys"
                              " (%s times): left out" % (name, side, rnd,
                                                        len(ks), r["wraps"]))
                        continue
                    runs[side].append(r)
            if name in ("put_new", "delete"):
                print("%s: key sets of %d (unversioned) and %d "
                      "(versioned) keys per run" % (name, nkeys["unversioned"],
                                                    nkeys["versioned"]))
            if name == "delete":
                sp1 = spares(ep)
                print("delete: spare meta inodes over the phase (fills "
                      "included): %s" % ", ".join(
                          "%s %d" % (k, sp1[k] - sp0.get(k, 0))
                          for k in sorted(sp1)))
                print("delete: runs of at most %d s (unversioned) and %d s "
                      "(versioned), each key deleted once" % (
                          secs["unversioned"], secs["versioned"]))
                if not a.aa:
                    nm = sum(len(p.get("DeleteMarkers", [])) for p in
                             s3.get_paginator("list_object_versions")
                             .paginate(Bucket=buckets["versioned"],
                                       Prefix="del/"))
                    print("delete: the versioned bucket holds %d delete "
                          "markers under del/ (%d DELETEs answered)" % (
                              nm, vdone))
            if not a.aa and name == "put_new":
                nk, nv = count_versions(s3, buckets["versioned"], "new/")
                print("put_new: the versioned bucket holds %d keys and %d "
                      "versions under new/ (%s)" % (
                          nk, nv, "every PUT made a new key" if nk == nv
                          else "WARNING: some PUTs were overwrites"))
            res = compare(name, runs["unversioned"], runs["versioned"])
            if res:
                results.append(res)
        return 0
    finally:
        stop_storaged(sp)
        # rm(1): shutil.rmtree of a whole run's store took minutes, and a
        # SIGTERM (timeout's) in it left the store behind
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if a.keep_store:
            print("store left in %s (--keep-store)" % work)
        else:
            subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    sys.exit(main())
