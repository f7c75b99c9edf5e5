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
and the peak RSS of the FUSE daemon (VmHWM). The ecfs mounts use
cache_size and prefetch_mem of --ecfs-mem each, so the daemon fits the cap.
Before each peer's epoch 1 the page cache is dropped and storaged is
restarted; the disk caches start empty (epoch 1 is cold everywhere).

Usage: bench_bigdata.py [--files 3072] [--kib 256] [--cap-mib 256]
       [--threads 8] [--peers local,ecfs,ecfs-cdir,s3fs-cache,rclone-full]
       [--ecfs-mem 48M] [--work DIR]
Everything it starts (storaged, mounts, the cgroup) is gone at exit.
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


def upload(srv, root, names):
    import boto3
    from botocore.config import Config
    c = boto3.client("s3", endpoint_url=srv.endpoint,
                     aws_access_key_id=bl.ACCESS,
                     aws_secret_access_key=bl.SECRET, region_name="us-east-1",
                     config=Config(max_pool_connections=16))
    c.create_bucket(Bucket=bl.BUCKET)

    def put(n):
        with open(os.path.join(root, n), "rb") as f:
            c.put_object(Bucket=bl.BUCKET, Key="%s/%s" % (bl.PREFIX, n),
                         Body=f.read())

    with ThreadPoolExecutor(16) as ex:
        list(ex.map(put, names))


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
    """A bench_loader Mount with this benchmark's options."""
    m = bl.Mount("ecfs" if kind.startswith("ecfs") else
                 "s3fs" if kind.startswith("s3fs") else
                 "rclone", os.path.join(work, "mnt-" + kind), srv, work,
                 bl.PREFIX)
    base = m.argv_env

    def argv_env():
        argv, env = base()
        if kind == "ecfs":
            argv[-1] += ",cache_size=%s,prefetch_mem=%s" % (a.ecfs_mem,
                                                            a.ecfs_mem)
        elif kind == "ecfs-cdir":
            argv[-1] += (",cache_size=%s,prefetch_mem=%s,cache_dir=%s" %
                         (a.ecfs_mem, a.ecfs_mem,
                          os.path.join(work, "ecfs-cache")))
        elif kind == "s3fs-cache":
            argv[-1] += ",use_cache=%s" % os.path.join(work, "s3fs-cache")
        elif kind == "rclone-full":
            argv += ["--vfs-cache-mode", "full"]
        return argv, env

    m.argv_env = argv_env
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=3072)
    ap.add_argument("--kib", type=int, default=256)
    ap.add_argument("--cap-mib", type=int, default=256)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--ecfs-mem", default="48M")
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    peers = a.peers.split(",")
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
    atexit.register(cleanup)
    upload(srv, data, names)
    print("dataset %d files x %d KiB = %.0f MiB, cgroup cap %d MiB, "
          "%d threads" % (a.files, a.kib, total_mib, a.cap_mib, a.threads))
    res = {}
    for kind in peers:
        for d in ("ecfs-cache", "s3fs-cache", "rclone-cache"):
            shutil.rmtree(os.path.join(work, d), ignore_errors=True)
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
        rates = []
        for ep in range(a.epochs):
            secs, tot = loader_epoch(root, names, a.threads, ep + 1, cg)
            assert tot == a.files * a.kib * 1024, (kind, tot)
            rates.append(tot / 1048576.0 / secs)
            print("  %-12s epoch %d  %8.1f MiB/s" % (kind, ep + 1,
                                                     rates[-1]), flush=True)
        peak = hwm_kib(m.proc.pid) if m else 0
        res[kind] = (rates, peak)
        if m:
            m.unmount()
            mounts.remove(m)
    loc = res.get("local", ([0] * a.epochs, 0))[0]
    print("\n| peer | " + " | ".join("epoch %d MiB/s" % (i + 1)
                                      for i in range(a.epochs)) +
          " | peak RSS |")
    print("|---|" + "---|" * (a.epochs + 1))
    for kind in peers:
        rates, peak = res[kind]
        cells = []
        for i, r in enumerate(rates):
            ratio = " (%.2fx)" % (r / loc[i]) if loc[i] and kind != "local" \
                else ""
            cells.append("%.1f%s" % (r, ratio))
        print("| %s | %s | %s |" % (kind, " | ".join(cells),
                                   "%.0f MiB" % (peak / 1024.0) if peak
                                   else "-"))


if __name__ == "__main__":
    main()
