#!/usr/bin/python3
"""tests/bench/bench_bigdata.py - a dataset larger than the memory the job
may use (issue 16): epochs 1-3 of a raw-bytes loader and the FUSE daemon
in one memory-capped cgroup (cgroup v1 memory controller at
/sys/fs/cgroup/memory, else v2 at /sys/fs/cgroup), so the page cache
counts against the cap and nothing warm comes from RAM:

  local        the dataset's local copy, read from disk
  ecfs         ecfs -o ro (block cache in RAM only)
  ecfs-cdir    ecfs -o ro,cache_dir=DIR on local disk
  s3fs-cache   s3fs-fuse -o use_cache=DIR
  rclone-full  rclone mount --vfs-cache-mode full

The loader reads every file whole in a random order (a new order each
epoch) with --threads readers; MiB/s per epoch, the ratio to local disk,
the FUSE daemon's CPU per file read (utime + stime, steadier than rates
on a loaded machine), ecfs's request and disk-cache counters per epoch,
and the peak RSS of the FUSE daemon (VmHWM). --rounds N repeats every
peer (interleaved, so load swings hit all alike) and prints medians with
[min-max]; --base-bin DIR adds ecfs-cdir-base, the same mount run by
another build's ecfs (a side-by-side baseline); --perf PREFIX records
the ecfs daemon over the warm epochs with perf. The ecfs mounts use
cache_size and prefetch_mem of --ecfs-mem each, so the daemon fits the cap.
Before each peer's epoch 1 the page cache is dropped and storaged is
restarted; the disk caches start empty (epoch 1 is cold everywhere).

Usage: bench_bigdata.py [--files 3072] [--kib 256] [--cap-mib 256]
       [--threads 8] [--peers local,ecfs,ecfs-cdir,s3fs-cache,rclone-full]
       [--ecfs-mem 48M] [--rounds 1] [--base-bin DIR] [--perf PREFIX]
       [--work DIR] [--upload-only] [--lock FILE]
Everything it starts (storaged, mounts, the cgroup) is gone at exit.

Big datasets in short runs: with a kept --work DIR the storaged drives stay
there, and a bucket that already holds every file (same names and sizes) is
not uploaded again. --upload-only writes the dataset, uploads it and exits;
--lock FILE takes flock(FILE) around each peer's epochs only (the same lock
as `flock FILE cmd`; --lock-scope round: around each round of all peers),
so the upload and the dataset writing never hold it:
  bench_bigdata.py --files 12288 --kib 256 --cap-mib 1024 --work W --upload-only
  bench_bigdata.py --files 12288 --kib 256 --cap-mib 1024 --work W \
      --lock /tmp/ecfs-bench.lock --peers local,ecfs-cdir
"""

import argparse
import atexit
import fcntl
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_loader as bl  # noqa: E402  (Storaged, Mount, helpers)

PEERS = ["local", "ecfs", "ecfs-cdir", "s3fs-cache", "rclone-full"]


class Cgroup:
    """A memory-capped cgroup (v1 memory controller, or v2)."""

    def __init__(self, cap):
        v1 = "/sys/fs/cgroup/memory"
        name = "ecfs-bench-%d" % os.getpid()
        if os.path.isdir(v1):
            self.path = os.path.join(v1, name)
            os.mkdir(self.path)
            self._write("memory.limit_in_bytes", str(cap))
        else:
            self.path = os.path.join("/sys/fs/cgroup", name)
            os.mkdir(self.path)
            self._write("memory.max", str(cap))

    def _write(self, f, v):
        with open(os.path.join(self.path, f), "w") as fh:
            fh.write(v)

    def add(self, pid):
        self._write("cgroup.procs", str(pid))

    def remove(self):
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as f:
                pids = f.read().split()
            parent = os.path.dirname(self.path)
            for p in pids:
                with open(os.path.join(parent, "cgroup.procs"), "w") as f:
                    f.write(p)
            os.rmdir(self.path)
        except OSError:
            pass


def drop_caches():
    try:
        subprocess.run(["sync"])
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass


def hwm_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def make_dataset(root, files, kib):
    rnd = random.Random(16)
    names = []
    for i in range(files):
        d = os.path.join(root, "c%02d" % (i % 32))
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, "f%06d.bin" % i)
        if not os.path.exists(p):
            with open(p, "wb") as f:
                f.write(rnd.randbytes(kib * 1024))
        names.append(os.path.relpath(p, root))
    return names


def uploaded(c, names, size):
    """True when the bucket holds every one of @names at @size bytes (a
    kept --work from an earlier run): nothing to upload."""
    want = {"%s/%s" % (bl.PREFIX, n) for n in names}
    try:
        for page in c.get_paginator("list_objects_v2").paginate(
                Bucket=bl.BUCKET, Prefix=bl.PREFIX + "/"):
            for o in page.get("Contents", []):
                if o["Key"] in want and o["Size"] == size:
                    want.discard(o["Key"])
    except c.exceptions.NoSuchBucket:
        return False
    return not want


def upload(srv, root, names, size):
    import boto3
    from botocore.config import Config
    c = boto3.client("s3", endpoint_url=srv.endpoint,
                     aws_access_key_id=bl.ACCESS,
                     aws_secret_access_key=bl.SECRET, region_name="us-east-1",
                     config=Config(max_pool_connections=16))
    if uploaded(c, names, size):
        print("bucket already holds the dataset: not uploaded", flush=True)
        return
    try:
        c.create_bucket(Bucket=bl.BUCKET)
    except c.exceptions.BucketAlreadyOwnedByYou:
        pass

    def put(n):
        with open(os.path.join(root, n), "rb") as f:
            c.put_object(Bucket=bl.BUCKET, Key="%s/%s" % (bl.PREFIX, n),
                         Body=f.read())

    t0 = time.monotonic()
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(put, names))
    print("uploaded %d files in %.0f s" % (len(names), time.monotonic() - t0),
          flush=True)


def loader_epoch(root, names, threads, seed, cg):
    """Reads every file once in a random order, in a child process inside
    the cgroup; returns (seconds, bytes)."""
    order = list(names)
    random.Random(seed).shuffle(order)
    lst = os.path.join(tempfile.gettempdir(), "bench-bigdata-%d.lst"
                       % os.getpid())
    with open(lst, "w") as f:
        f.write("\n".join(order))
    code = (
        "import os,sys,time\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "root,lst,th=sys.argv[1],sys.argv[2],int(sys.argv[3])\n"
        "names=open(lst).read().split('\\n')\n"
        "def rd(n):\n"
        "    with open(os.path.join(root,n),'rb',buffering=0) as f:\n"
        "        t=0\n"
        "        while True:\n"
        "            b=f.read(1<<20)\n"
        "            if not b: return t\n"
        "            t+=len(b)\n"
        "t0=time.monotonic()\n"
        "with ThreadPoolExecutor(th) as ex: tot=sum(ex.map(rd,names))\n"
        "print(time.monotonic()-t0, tot)\n")
    p = subprocess.Popen([bl.PY, "-c", code, root, lst, str(threads)],
                         stdout=subprocess.PIPE, text=True,
                         preexec_fn=lambda: cg.add(os.getpid()))
    out, _ = p.communicate(timeout=3600)
    os.unlink(lst)
    if p.returncode != 0:
        raise RuntimeError("loader failed (%s)" % p.returncode)
    secs, tot = out.split()
    return float(secs), int(tot)


def peer_mount(kind, srv, work, a):
    """A bench_loader Mount with this benchmark's options. "ecfs-cdir-base"
    is ecfs-cdir run by the binary in --base-bin (a side-by-side
    baseline: the same run, another build)."""
    m = bl.Mount("ecfs" if kind.startswith("ecfs") else
                 "s3fs" if kind.startswith("s3fs") else
                 "rclone", os.path.join(work, "mnt-" + kind), srv, work,
                 bl.PREFIX)
    m.log = os.path.join(work, "%s.log" % kind)
    base = m.argv_env

    def argv_env():
        argv, env = base()
        if kind == "ecfs":
            argv[-1] += ",cache_size=%s,prefetch_mem=%s" % (a.ecfs_mem,
                                                            a.ecfs_mem)
        elif kind.startswith("ecfs-cdir"):
            argv[-1] += (",cache_size=%s,prefetch_mem=%s,cache_dir=%s" %
                         (a.ecfs_mem, a.ecfs_mem,
                          os.path.join(a.cache_root or work, "ecfs-cache")))
            if kind == "ecfs-cdir-base":
                argv[0] = os.path.join(a.base_bin, "ecfs")
        elif kind == "s3fs-cache":
            argv[-1] += ",use_cache=%s" % os.path.join(work, "s3fs-cache")
        elif kind == "rclone-full":
            argv += ["--vfs-cache-mode", "full"]
        return argv, env

    m.argv_env = argv_env
    return m


def drop_disk_caches(work, a):
    """Removes every peer's disk cache (ecfs's under --cache-root)."""
    shutil.rmtree(os.path.join(a.cache_root or work, "ecfs-cache"),
                  ignore_errors=True)
    for d in ("s3fs-cache", "rclone-cache"):
        shutil.rmtree(os.path.join(work, d), ignore_errors=True)


def cpu_s(pid):
    """utime + stime of @pid (all its threads), seconds."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            v = f.read().rsplit(")", 1)[1].split()
        return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def ecfs_stats(mnt):
    """The counters of MNT/.ecfs-stats (ecfs only), {} elsewhere."""
    try:
        with open(os.path.join(mnt, ".ecfs-stats")) as f:
            text = f.read()
    except OSError:
        return {}
    out = {}
    for tok in text.split():
        k, _, v = tok.partition("=")
        if v.isdigit():
            out[k] = int(v)
    for line in text.splitlines():
        p = line.split()
        if len(p) == 2 and p[1].isdigit():
            out[p[0]] = int(p[1])
    return out


def median(v):
    v = sorted(v)
    n = len(v)
    return (v[n // 2] + v[(n - 1) // 2]) / 2.0 if n else 0.0


def run_peer(kind, srv, work, data, names, a, cg, mounts):
    """Epochs 1..a.epochs of one peer from cold; returns (rates MiB/s,
    daemon CPU us per file per epoch, stats deltas per epoch, peak KiB)."""
    drop_disk_caches(work, a)
    srv.restart()
    drop_caches()
    m = None
    if kind == "local":
        root = data
    else:
        m = peer_mount(kind, srv, work, a)
        mounts.append(m)
        m.mount(timeout=60)
        cg.add(m.proc.pid)
        root = m.mnt
    rates, cpus, deltas = [], [], []
    perf = None
    for ep in range(a.epochs):
        if a.perf and m and ep == a.perf_from - 1 and \
                kind.startswith("ecfs"):
            perf = subprocess.Popen(
                ["perf", "record", "-g", "-F", "499", "-p",
                 str(m.proc.pid), "-o", "%s.%s.data" % (a.perf, kind)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        c0 = cpu_s(m.proc.pid) if m else 0.0
        s0 = ecfs_stats(root) if m else {}
        secs, tot = loader_epoch(root, names, a.threads, ep + 1, cg)
        assert tot == a.files * a.kib * 1024, (kind, tot)
        c1 = cpu_s(m.proc.pid) if m else 0.0
        s1 = ecfs_stats(root) if m else {}
        rates.append(tot / 1048576.0 / secs)
        cpus.append((c1 - c0) * 1e6 / a.files)
        deltas.append({k: s1[k] - s0.get(k, 0) for k in s1
                       if k.startswith(("dcache_hits", "dcache_misses",
                                        "dcache_store", "read_gets",
                                        "dir_prefetch_gets", "reads"))})
        print("  %-15s epoch %d  %8.1f MiB/s  daemon CPU %6.0f us/file  %s"
              % (kind, ep + 1, rates[-1], cpus[-1],
                 " ".join("%s=%d" % kv for kv in sorted(deltas[-1].items()))),
              flush=True)
    if perf:
        perf.send_signal(2)
        perf.wait(30)
    peak = hwm_kib(m.proc.pid) if m else 0
    if m:
        m.unmount()
        mounts.remove(m)
    # drop this peer's disk cache now, not just before the next peer's
    # epoch 1: on ext4 without a journal (this VM) an inode freed in the
    # last 60-360 s is skipped, one by one, when a file is created
    # (recently_deleted() under ext4_create: 29 % of ecfs's CPU in a cold
    # epoch with cache_dir right after such a delete); order --peers so
    # that another peer runs between two disk-cache peers
    drop_disk_caches(work, a)
    return rates, cpus, deltas, peak


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=3072)
    ap.add_argument("--kib", type=int, default=256)
    ap.add_argument("--cap-mib", type=int, default=256)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeat every peer; medians and [min-max]")
    ap.add_argument("--ecfs-mem", default="48M")
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--base-bin", default=None,
                    help="adds peer ecfs-cdir-base: ecfs-cdir run by the "
                    "ecfs in this folder (another build, side by side)")
    ap.add_argument("--perf", default=None,
                    help="perf record the ecfs daemon over the warm epochs "
                    "into PREFIX.PEER.data")
    ap.add_argument("--perf-from", type=int, default=2,
                    help="first epoch --perf records (to the last)")
    ap.add_argument("--work", default=None,
                    help="kept folder: its storaged drives (with the "
                    "uploaded dataset) serve the next run too")
    ap.add_argument("--cache-root", default=None,
                    help="folder for ecfs's cache_dir (default --work), "
                    "e.g. another file system")
    ap.add_argument("--upload-only", action="store_true",
                    help="write and upload the dataset, then exit")
    ap.add_argument("--lock", default=None,
                    help="flock this file around each peer's epochs")
    ap.add_argument("--lock-scope", choices=("peer", "round"),
                    default="peer", help="--lock around each peer, or "
                    "around each round of all peers (fewer waits; keep a "
                    "round under the 8 minutes a hold may take)")
    a = ap.parse_args()

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)  # so the atexit cleanup runs
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)  # also when started with &
    peers = a.peers.split(",")
    if a.base_bin and "ecfs-cdir-base" not in peers:
        peers.append("ecfs-cdir-base")
    work = a.work or tempfile.mkdtemp(prefix="bench-bigdata-")
    os.makedirs(work, exist_ok=True)
    data = os.path.join(bl.REPO, "var", "bench", "bigdata-%d-%d" %
                        (a.files, a.kib))
    names = make_dataset(data, a.files, a.kib)
    total_mib = a.files * a.kib / 1024.0
    srv = bl.Storaged(os.path.join(work, "storaged"))
    srv.start()
    cg = Cgroup(a.cap_mib << 20)
    mounts = []

    def cleanup():
        for m in mounts:
            m.unmount()
        srv.stop()
        cg.remove()
        drop_disk_caches(work, a)
    atexit.register(cleanup)
    upload(srv, data, names, a.kib * 1024)
    if a.upload_only:
        return
    print("dataset %d files x %d KiB = %.0f MiB, cgroup cap %d MiB, "
          "%d threads, %d rounds" % (a.files, a.kib, total_mib, a.cap_mib,
                                     a.threads, a.rounds))
    res = {k: [] for k in peers}
    for r in range(a.rounds):
        # peers interleaved round by round, so load swings hit all alike
        for i, kind in enumerate(peers):
            first = i == 0 or a.lock_scope == "peer"
            last = i == len(peers) - 1 or a.lock_scope == "peer"
            if a.lock and first:
                lk = open(a.lock, "a")
                fcntl.flock(lk, fcntl.LOCK_EX)
                print("  (lock %s taken %s)" % (a.lock, time.strftime(
                    "%H:%M:%S", time.gmtime())), flush=True)
            try:
                res[kind].append(run_peer(kind, srv, work, data, names, a,
                                          cg, mounts))
            finally:
                if a.lock and last:
                    lk.close()  # releases the flock
    E = a.epochs

    def med(kind, i, what=0):
        return median([run[what][i] for run in res[kind]])

    def rng(kind, i):
        v = [run[0][i] for run in res[kind]]
        return "[%.0f-%.0f]" % (min(v), max(v)) if len(v) > 1 else ""

    print("\nmedians of %d rounds, MiB/s [range] (ratio of medians to "
          "local); daemon CPU us per file" % a.rounds)
    print("\n| peer | " + " | ".join("epoch %d" % (i + 1) for i in range(E))
          + " | CPU us/file e1/e2/e3 | peak RSS |")
    print("|---|" + "---|" * (E + 2))
    for kind in peers:
        cells = []
        for i in range(E):
            ratio = ""
            if "local" in res and kind != "local" and med("local", i):
                ratio = " (%.2fx)" % (med(kind, i) / med("local", i))
            cells.append("%.1f %s%s" % (med(kind, i), rng(kind, i), ratio))
        cpu = "/".join("%.0f" % med(kind, i, 1) for i in range(E)) \
            if kind != "local" else "-"
        peak = max(run[3] for run in res[kind])
        print("| %s | %s | %s | %s |" % (kind, " | ".join(cells), cpu,
                                        "%.0f MiB" % (peak / 1024.0) if peak
                                        else "-"))


if __name__ == "__main__":
    main()
