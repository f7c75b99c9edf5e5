#!/usr/bin/python3
"""tests/bench/bench_loader.py - what a training job sees: ecfs vs local disk,
s3fs-fuse and rclone mount, all reading the same dataset in one run.

What it measures (figures, not pass/fail; medians where repeated):
  train  torchvision ImageFolder + DataLoader (shuffle, N workers, prefetch)
         with a fixed simulated compute time per batch: samples/s and the
         data-stall fraction (time the loop waited for a batch / wall time),
         epoch 1 (cold: fresh mount, restarted server, dropped page cache) and
         epoch 2 (warm), reported separately.
  raw    the same walk with a raw-bytes loader (read the file, no decode, no
         compute): files/s and MiB/s, cold and warm; and the CPU seconds per
         GiB read cold of the client process (ecfs, passthrough_ll, s3fs,
         rclone) and of storaged.
  raw0   the raw-bytes loader opening each file unbuffered (open(path, "rb",
         buffering=0)): Python then skips isatty(), the TCGETS ioctl that the
         kernel forwards to the FUSE server on every buffered open; beside
         raw it separates that request's cost from the rest of a warm epoch.
         For raw and raw0 the warm-cost table gives, per file of the warm
         epoch, the FUSE ioctls an ecfs mount counted (.ecfs-stats ioctls),
         the DataLoader workers' CPU and the FUSE client's CPU.
  loop   the raw-bytes loader with the fixed compute time per batch: samples/s
         and the busy fraction (time in the step / wall time), cold and warm.
  meta   `ls -lR` and `find -type f` over the tree, cold (fresh mount) and warm.
  seq    one sequential read (1 MiB reads) of a packed tar shard of >= 512 MiB,
         cold and warm, MiB/s, and the reader's CPU per MiB (its system
         time: the page-cache copy); --seq-warm N reads it warm N times and
         also reports the last warm pass. Beside it (root only): the share
         of the shard's cached pages that sit in large folios (> 4 KiB) after
         the last pass (page_cache_folios.py).
  ioctl  --ioctls N TCGETS ioctls (what Python's isatty() sends on every
         buffered open) on one sample file: wall and the caller's CPU
         microseconds per ioctl, the FUSE client's CPU per ioctl, and how
         many an ecfs mount counted (.ecfs-stats ioctls). Every one must fail
         with ENOTTY, as on local disk.

How: it starts its own storaged (16 drive directories in a temporary folder,
the 12+4 default of `make run`) on a free 127.0.0.1 port, generates the dataset
with scripts/gen-dataset (cached under var/bench/), uploads it to bucket
`bench`, and mounts that bucket with each peer in turn, one at a time, so peers
never compete for the 2 cores. Before every cold measurement the FUSE peer is
freshly mounted and the kernel page cache is dropped (when
/proc/sys/vm/drop_caches is writable); storaged is restarted (its in-memory
caches emptied) before each peer's round of tests.
Every mount and process it starts is removed at exit, also on Ctrl-C.

Output: tables on stdout (with ratios against local disk), and in the results
folder: loader.md (Markdown), loader.json (all numbers), loader.png (gnuplot
bar chart, when gnuplot is installed).

--size medium is the medium-file set instead (issue 14): 6,000 files of
320 KiB +-10 % random bytes, written here (cached under var/bench/), tests raw
and loop, and the passthrough peer (libfuse's passthrough_ll over the local
copy, built into build/bench/ as tests/bench/bench_fuse.py does) beside local,
ecfs, s3fs and rclone:
  tests/bench/bench_loader.py --size medium --results DIR

Peer ecfs-base is ecfs built elsewhere (--base-bin DIR, e.g. main's build),
mounted with the same options against the same server: an A/B of a client
change in one run, round-robin with the other peers.

Usage: bench_loader.py [--size tiny|small|default|large|medium] [--peers local,
       passthrough,ecfs,ecfs-base,ecfs-pack,s3fs,rclone] [--tests train,raw,
       loop,meta,seq] [--base-bin DIR] [--results DIR] [...] (see --help).
       Environment: ECFS_BIN_DIR (default <repo>/bin).
"""

import argparse
import atexit
import fcntl
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import warnings

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("ECFS_BIN_DIR", os.path.join(REPO, "bin"))
PY = "/usr/bin/python3"
BUCKET = "bench"
PREFIX = "train"                          # the dataset: bench/train/<class>/...
SHARD_KEY = "shards/shard-000000.tar"     # outside the ImageFolder root
ACCESS = "benchroot"
SECRET = "bench-secret-key-0123456789abcdef"

# --size: dataset preset of scripts/gen-dataset, shard MiB, per-phase time cap
SIZES = {
    "tiny": dict(preset="tiny", files=200, shard_mib=64, budget=30),
    "small": dict(preset="small", files=1000, shard_mib=512, budget=45),
    "default": dict(preset="default", files=3000, shard_mib=512, budget=45),
    "large": dict(preset="large", files=20000, shard_mib=2048, budget=600),
    # medium files (issue 14): 6,000 files of 320 KiB +-10 % random bytes
    # (not JPEGs: no decode, so no train or seq test), made by this script
    "medium": dict(preset=None, files=6000, shard_mib=0, budget=60,
                   medium_kib=320),
}
PEERS = ["local", "passthrough", "ecfs", "ecfs-base", "ecfs-pack", "s3fs",
         "rclone"]
BASE_BIN = None  # --base-bin: the ecfs of the ecfs-base peer (an A/B)
PACKED = "packed"  # ecfs-pack: `ecfs pack` of the dataset into bench/packed/
TESTS = ["train", "raw", "raw0", "loop", "meta", "seq", "ioctl"]
# what runs without --peers/--tests: passthrough_ll (the cost of FUSE itself,
# over the local copy) joins for the medium set
DEFAULTS = {"peers": ["local", "ecfs", "ecfs-pack", "s3fs", "rclone"],
            "tests": ["train", "raw", "meta", "seq"]}
MEDIUM_DEFAULTS = {"peers": ["local", "passthrough", "ecfs", "s3fs", "rclone"],
                   "tests": ["raw", "loop"]}
SAMPLE_EXT = (".jpg", ".bin")  # the files the loaders read


T0 = time.monotonic()


def log(msg):
    """Progress line on stderr (stdout carries the tables), with the seconds
    since the start."""
    sys.stderr.write("bench: %6.1f %s\n" % (time.monotonic() - T0, msg))
    sys.stderr.flush()


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_status(url, timeout=1.0):
    """Status of GET @url, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (OSError, ValueError):
        return None


def drop_caches():
    """Syncs and drops the kernel page, dentry and inode caches. Returns
    False when not permitted (then "cold" only means a fresh mount)."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def is_mounted(path):
    """True when @path is a mount point (also a dead FUSE one)."""
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            if line.split()[4] == path:
                return True
    return False


def proc_cpu(proc):
    """User+system CPU seconds of the running Popen @proc (its threads
    included), or None."""
    if proc is None or proc.poll() is not None:
        return None
    try:
        with open("/proc/%d/stat" % proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # fields[0] is field 3 (state): utime and stime are fields 14 and 15
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pid_cpu_ns(pid):
    """Nanoseconds on a CPU of the live threads of process @pid (the sum of
    /proc/PID/task/*/schedstat: finer than the 10 ms ticks of proc_cpu,
    but without threads that have exited), or None."""
    total = 0
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return None
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that just ended
    return total


def disk_read_bytes():
    """Bytes read so far from the machine's disks (/proc/diskstats, whole
    disks that have a device: not loop, ram, zram or partitions), or None.
    Around a cold epoch it shows the epoch really read the disk: local disk
    and storaged's drive folders (the same disk here) both at least the
    bytes the loader read; a warm page cache (host or guest) shows less."""
    total = 0
    try:
        with open("/proc/diskstats") as f:
            for line in f:
                p = line.split()
                name = p[2]
                if (name.startswith(("loop", "ram", "zram")) or
                        not os.path.exists("/sys/block/%s/device" % name)):
                    continue
                total += int(p[5]) * 512  # sectors read
    except (OSError, ValueError, IndexError):
        return None
    return total


def machine_busy_s():
    """CPU seconds all processes and the kernel spent on the machine so far
    (/proc/stat: everything but idle and iowait), or None: over an epoch,
    what the loader, its file system client, the server and the kernel's
    work for them cost together on the few cores they share."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def cmd_out(argv, timeout=10):
    """First line of the output of @argv, or 'unavailable'."""
    try:
        r = subprocess.run(argv, capture_output=True, text=True,
                           timeout=timeout)
        out = (r.stdout or r.stderr).strip().splitlines()
        return out[0].strip() if out and r.returncode == 0 else "unavailable"
    except (OSError, subprocess.TimeoutExpired):
        return "unavailable"


class Storaged:
    """The benchmark's own storaged on 16 drive directories under @root."""

    def __init__(self, root, ndrives=16, args=()):
        self.root = root
        self.args = list(args)  # more serve options (--no-fsync)
        self.drives = [os.path.join(root, "d%d" % (i + 1))
                       for i in range(ndrives)]
        for d in self.drives:
            os.makedirs(d, exist_ok=True)
        self.port = free_port()
        self.endpoint = "http://127.0.0.1:%d" % self.port
        self.log = os.path.join(root, "storaged.log")
        self.proc = None

    def start(self):
        """Starts it and waits for /health/ready; raises on failure."""
        env = dict(os.environ, STORAGED_ROOT_USER=ACCESS,
                   STORAGED_ROOT_PASSWORD=SECRET)
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(
                [os.path.join(BIN, "storaged"), "serve", "--address",
                 "127.0.0.1:%d" % self.port] + self.args + self.drives,
                stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, env=env,
                start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("storaged exited %s (log %s)"
                                   % (self.proc.returncode, self.log))
            if http_status(self.endpoint + "/health/ready", 0.5) == 200:
                return
            time.sleep(0.05)
        raise RuntimeError("storaged not ready in 30 s (log %s)" % self.log)

    def stop(self):
        """SIGTERM, then SIGKILL after 10 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def restart(self):
        self.stop()
        self.start()

    def cpu(self):
        """User+system CPU seconds the server has used so far."""
        return proc_cpu(self.proc)


class Mount:
    """One FUSE client process mounted at @mnt (ecfs, s3fs, rclone, or
    passthrough_ll over the local folder @source)."""

    def __init__(self, kind, mnt, storaged, work, prefix, source=None,
                 pll=None, extra=""):
        self.kind = kind
        self.source = source
        self.pll = pll
        self.extra = extra  # more -o options of an ecfs mount (--ecfs-opts)
        self.prefix = prefix  # folder of the bucket to mount
        self.mnt = mnt
        self.srv = storaged
        self.work = work
        self.proc = None
        self.log = os.path.join(work, "%s.log" % kind)

    def argv_env(self):
        """Command line and environment of the client, foreground mode."""
        env = dict(os.environ)
        if self.kind == "passthrough":
            # libfuse's example, keeping the page cache across opens as
            # ecfs -o ro does: the floor any FUSE file system pays
            return ([self.pll, "-f", "-o",
                     "source=%s,cache=always" % self.source, self.mnt], env)
        url = self.srv.endpoint
        if self.kind in ("ecfs", "ecfs-base", "ecfs-pack"):
            env.update(AWS_ACCESS_KEY_ID=ACCESS, AWS_SECRET_ACCESS_KEY=SECRET)
            ecfs = os.path.join(BASE_BIN if self.kind == "ecfs-base" else BIN,
                                "ecfs")
            return ([ecfs, "%s:%s" % (BUCKET, self.prefix),
                     self.mnt, "-f",
                     "-o", "endpoint=%s,ro" % url +
                     ("," + self.extra if self.extra else "")], env)
        if self.kind == "s3fs":
            pw = os.path.join(self.work, "s3fs.passwd")
            with open(pw, "w") as f:
                f.write("%s:%s\n" % (ACCESS, SECRET))
            os.chmod(pw, 0o600)
            cache = os.path.join(self.work, "s3fs-tmp")
            os.makedirs(cache, exist_ok=True)
            return (["s3fs", "%s:/%s" % (BUCKET, self.prefix), self.mnt, "-f",
                     "-o",
                     "url=%s,use_path_request_style,passwd_file=%s,ro,"
                     "endpoint=us-east-1,tmpdir=%s" % (url, pw, cache)], env)
        if self.kind == "rclone":
            env.pop("AWS_CA_BUNDLE", None)
            env.update(RCLONE_CONFIG=os.path.join(self.work, "rclone.conf"),
                       RCLONE_CONFIG_BENCH_TYPE="s3",
                       RCLONE_CONFIG_BENCH_PROVIDER="Other",
                       RCLONE_CONFIG_BENCH_ENDPOINT=url,
                       RCLONE_CONFIG_BENCH_REGION="us-east-1",
                       RCLONE_CONFIG_BENCH_ACCESS_KEY_ID=ACCESS,
                       RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY=SECRET,
                       RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE="true")
            return (["rclone", "mount", "bench:%s/%s" % (BUCKET, self.prefix),
                     self.mnt,
                     "--read-only", "--cache-dir",
                     os.path.join(self.work, "rclone-cache")], env)
        raise ValueError(self.kind)

    def mount(self, timeout=30):
        """Mounts and waits until the root lists; raises on failure."""
        os.makedirs(self.mnt, exist_ok=True)
        argv, env = self.argv_env()
        with open(self.log, "ab") as logf:
            logf.write(("==== %s\n" % " ".join(argv)).encode())
            logf.flush()
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                         stdout=logf, stderr=logf, env=env,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited %s while mounting (log %s)"
                                   % (self.kind, self.proc.returncode,
                                      self.log))
            if is_mounted(self.mnt):
                try:
                    os.listdir(self.mnt)
                    return
                except OSError:
                    pass
            time.sleep(0.05)
        self.unmount()
        raise RuntimeError("%s did not mount in %d s (log %s)"
                           % (self.kind, timeout, self.log))

    def unmount(self):
        """Unmounts (lazily when busy) and reaps the client process."""
        if is_mounted(self.mnt):
            for _ in range(50):
                if subprocess.run(["fusermount3", "-u", self.mnt],
                                  capture_output=True).returncode == 0:
                    break
                time.sleep(0.1)
            else:
                subprocess.run(["fusermount3", "-uz", self.mnt],
                               capture_output=True)
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(5)
        self.proc = None

    def cpu(self):
        """User+system CPU seconds the client process has used so far."""
        return proc_cpu(self.proc)


# ---------------------------------------------------------------- measurements

class RawFiles:
    """Dataset of file paths whose item is the file's bytes count (the file is
    read whole, no decode): pure I/O through the filesystem."""

    def __init__(self, paths, buffering=-1):
        self.paths = paths
        self.buffering = buffering  # 0: unbuffered open, no isatty() ioctl

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb", buffering=self.buffering) as f:
            return len(f.read())


def _sum_collate(batch):
    return sum(batch)


def _first_collate(batch):
    """Collates (tensor, label) pairs into one tensor batch and labels."""
    import torch
    return (torch.stack([b[0] for b in batch]),
            torch.tensor([b[1] for b in batch]))


def workers_cpu(it):
    """CPU seconds of the worker processes of the DataLoader iterator @it
    (persistent workers: the same processes every epoch; pid_cpu_ns), or
    None when they cannot be read."""
    total = 0
    procs = getattr(it, "_workers", None)
    if not procs:
        return None
    for w in procs:
        ns = pid_cpu_ns(w.pid) if w.pid else None
        if ns is None:
            return None
        total += ns
    return total / 1e9


def run_epochs(loader, n_items, epochs, compute_s, budget, count_bytes=False,
               on_epoch=None, probe=None):
    """Iterates @loader for @epochs epochs, sleeping @compute_s after every
    batch (the simulated training step). Per epoch returns dict(wall, items,
    stall, bytes, partial, mark, cpu, wcpu): stall = time spent waiting for
    batches / wall; mark = what @on_epoch() returned after the epoch (None
    without); cpu = the differences of @probe()'s numbers over the epoch
    (CPU seconds of the client and the server), when @probe is given;
    wcpu = CPU seconds the DataLoader worker processes used in the epoch
    (None when they cannot be read).
    An epoch stops early after @budget seconds (partial=True)."""
    res = []
    for _ep in range(epochs):
        c0 = probe() if probe else None
        t0 = time.perf_counter()
        waited = 0.0
        items = 0
        nbytes = 0
        partial = False
        # persistent workers start on the next epoch's first batches inside
        # iter(): read their CPU before it when they exist (epoch 2 on)
        w0 = workers_cpu(getattr(loader, "_iterator", None))
        it = iter(loader)
        if w0 is None:
            w0 = workers_cpu(it)
        while True:
            tw = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                waited += time.perf_counter() - tw
                break
            waited += time.perf_counter() - tw
            if count_bytes:
                nbytes += int(batch)
                items += min(loader.batch_size, n_items - items)
            else:
                items += len(batch[1])
            if compute_s > 0:
                time.sleep(compute_s)
            if time.perf_counter() - t0 > budget:
                partial = True
                break
        wall = time.perf_counter() - t0
        w1 = workers_cpu(it)
        del it
        c1 = probe() if probe else None
        cpu = None
        if c0 is not None and c1 is not None:
            cpu = [None if x is None or y is None else y - x
                   for x, y in zip(c0, c1)]
        res.append(dict(wall=wall, items=items, stall=waited / wall,
                        bytes=nbytes, partial=partial,
                        mark=on_epoch() if on_epoch else None, cpu=cpu,
                        wcpu=None if w0 is None or w1 is None else w1 - w0))
    return res


def bench_train(root, a, budget):
    """ImageFolder epochs over @root; returns (per-epoch list, scan seconds)."""
    import torch
    import torchvision.transforms as T
    from torchvision.datasets import ImageFolder

    torch.manual_seed(0)
    t0 = time.perf_counter()
    tf = T.Compose([T.RandomResizedCrop(a.crop), T.RandomHorizontalFlip(),
                    T.ToTensor()])
    ds = ImageFolder(root, transform=tf)
    scan = time.perf_counter() - t0
    dl = torch.utils.data.DataLoader(
        ds, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
        prefetch_factor=a.prefetch, persistent_workers=True,
        collate_fn=_first_collate)
    res = run_epochs(dl, len(ds), a.epochs, a.compute_ms / 1000.0, budget)
    del dl
    return res, scan, len(ds)


def bench_raw(root, a, budget, on_epoch=None, compute_s=0.0, probe=None,
              buffering=-1):
    """Raw-bytes epochs over the files below @root, with @compute_s of
    simulated training step per batch (0: none), each file opened with
    @buffering (-1 Python's default, 0 unbuffered); @on_epoch and @probe as
    in run_epochs."""
    import torch

    paths = []
    for d, _dirs, names in os.walk(root):
        for n in names:
            if n.endswith(SAMPLE_EXT):
                paths.append(os.path.join(d, n))
    paths.sort()
    dl = torch.utils.data.DataLoader(
        RawFiles(paths, buffering), batch_size=a.batch_size, shuffle=True,
        num_workers=a.workers, prefetch_factor=a.prefetch,
        persistent_workers=True, collate_fn=_sum_collate)
    res = run_epochs(dl, len(paths), a.epochs, compute_s, budget,
                     count_bytes=True, on_epoch=on_epoch, probe=probe)
    del dl
    return res, len(paths)


class peer_lock:
    """flock(LOCK_EX) on @path for the duration of a with block; no-op
    when @path is None."""

    def __init__(self, path):
        self.path, self.fd = path, None

    def __enter__(self):
        if self.path:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)  # drops the lock
            self.fd = None
        return False


def timed_cmd(argv, budget):
    """Runs @argv (its stdout lines ending in .jpg counted, then discarded);
    returns (seconds, jpg lines, timed_out)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    lines = 0
    timed_out = False
    try:
        out, _ = p.communicate(timeout=budget)
        lines = sum(1 for x in out.split(b"\n")
                    if x.endswith(tuple(e.encode() for e in SAMPLE_EXT)))
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        timed_out = True
    return time.perf_counter() - t0, lines, timed_out


def seq_read(path, budget, ref=None):
    """Reads @path front to back in 1 MiB reads; returns dict(secs, bytes,
    partial, ok, cpu): ok is False when the first or last MiB differ from
    the reference file @ref; cpu = this thread's CPU seconds (user+system:
    mostly the kernel's copy out of the page cache)."""
    bs = 1 << 20
    c0 = time.thread_time()
    t0 = time.perf_counter()
    n = 0
    first = last = b""
    partial = False
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(bs)
            if not b:
                break
            if n == 0:
                first = b
            last = b
            n += len(b)
            if time.perf_counter() - t0 > budget:
                partial = True
                break
    secs = time.perf_counter() - t0
    c1 = time.thread_time()
    ok = True
    if ref is not None and not partial:
        with open(ref, "rb") as f:
            rf = f.read(bs)
            size = os.fstat(f.fileno()).st_size
            f.seek(size - len(last))
            rl = f.read(len(last))
        ok = (rf == first and rl == last and size == n)
    return dict(secs=secs, bytes=n, partial=partial, ok=ok,
                cpu=c1 - c0)


def large_folio_share(path):
    """Share (0..1) of @path's pages in the page cache that sit in folios
    larger than 4 KiB (page_cache_folios.py; the file is mapped, not read
    again when cached), or None when that cannot be read (not root)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from page_cache_folios import PAGE, folio_pages
    try:
        sizes, _absent = folio_pages(path)
    except OSError:
        return None
    total = sum(sizes.values())
    if not total:
        return None
    return sum(v for k, v in sizes.items() if k * 1024 > PAGE) / total


def ioctl_cost(path, n):
    """@n TCGETS ioctls (isatty()'s) on @path, opened O_RDONLY (which sends
    none); returns dict(wall_us, cpu_us): microseconds per ioctl of wall
    time and of this thread's CPU. Raises RuntimeError unless every one
    fails with ENOTTY, local disk's answer."""
    import errno
    import termios
    buf = bytearray(64)  # > sizeof(struct termios)
    fd = os.open(path, os.O_RDONLY)
    try:
        c0, t0 = time.thread_time(), time.perf_counter()
        for _ in range(n):
            try:
                fcntl.ioctl(fd, termios.TCGETS, buf)
            except OSError as e:
                if e.errno != errno.ENOTTY:
                    raise RuntimeError("TCGETS on %s: %s" % (path, e))
            else:
                raise RuntimeError("TCGETS on %s succeeded" % path)
        t1, c1 = time.perf_counter(), time.thread_time()
    finally:
        os.close(fd)
    return dict(wall_us=(t1 - t0) * 1e6 / n, cpu_us=(c1 - c0) * 1e6 / n)


def first_sample(root):
    """The first sample file below @root in sorted walk order, or None."""
    for d, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            if name.endswith(SAMPLE_EXT):
                return os.path.join(d, name)
    return None


def gen_medium(root, files, kib, classes=10, seed=14):
    """Writes the medium set under @root (unless it is there already):
    @files files of @kib KiB +-10 % random bytes, round-robin over @classes
    class_NNN folders; names and sizes are deterministic in @seed, the bytes
    random. Returns the file paths."""
    import random
    rnd = random.Random(seed)
    paths = []
    for i in range(files):
        d = os.path.join(root, "class_%03d" % (i % classes))
        p = os.path.join(d, "%06d.bin" % i)
        n = int(kib * 1024 * rnd.uniform(0.9, 1.1))
        paths.append(p)
        if os.path.exists(p) and os.path.getsize(p) == n:
            rnd.randbytes(16)  # same stream whether or not it is written
            continue
        os.makedirs(d, exist_ok=True)
        with open(p + ".tmp", "wb") as f:
            f.write(rnd.randbytes(16) + os.urandom(n - 16))
        os.replace(p + ".tmp", p)
    return paths


def upload_tree(endpoint, root, paths, prefix, jobs=16):
    """PUTs @paths (under @root) to bucket BUCKET as @prefix + relative path,
    @jobs at a time; creates the bucket. Returns the bytes sent."""
    import concurrent.futures
    import boto3
    from botocore.config import Config

    s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS,
                      aws_secret_access_key=SECRET, region_name="us-east-1",
                      config=Config(max_pool_connections=jobs,
                                    retries={"max_attempts": 5}))
    try:
        s3.create_bucket(Bucket=BUCKET)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass

    def put(p):
        with open(p, "rb") as f:
            body = f.read()
        s3.put_object(Bucket=BUCKET, Key=prefix + os.path.relpath(p, root),
                      Body=body)
        return len(body)

    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        return sum(ex.map(put, paths))


# ---------------------------------------------------------------- orchestration

class Bench:
    """Holds the server, the mounts and the results of one run."""

    def __init__(self, a):
        self.a = a
        self.size = SIZES[a.size]
        self.budget = a.budget or self.size["budget"]
        self.work = tempfile.mkdtemp(prefix="ecfs-bench-", dir=a.workdir)
        self.srv = None
        self.mounts = []
        self.results = {}
        self.notes = []
        self.dropped = None
        atexit.register(self.cleanup)

    def cleanup(self):
        """Unmounts everything, stops the server, removes the work folder."""
        for m in self.mounts:
            try:
                m.unmount()
            except Exception as e:  # keep cleaning whatever happened
                log("cleanup: %s: %s" % (m.kind, e))
        self.mounts = []
        if self.srv is not None:
            self.srv.stop()
            self.srv = None
        if self.work and not self.a.keep:
            shutil.rmtree(self.work, ignore_errors=True)
            self.work = None

    def prepare(self):
        """Dataset on local disk (cached), server started, data uploaded."""
        cache = os.path.join(REPO, "var", "bench")
        self.data = os.path.join(cache, "dataset-%s" % self.a.size)
        if "passthrough" in self.a.peers:
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            from bench_fuse import build_passthrough
            self.pll = build_passthrough(os.path.join(REPO, "build", "bench"))
        if self.size["preset"] is None:
            return self.prepare_medium()
        self.shard = os.path.join(cache, "shard-%d.tar" % self.size["shard_mib"])
        files = self.a.files or self.size["files"]
        argv = [PY, os.path.join(REPO, "scripts", "gen-dataset"), self.data,
                "--preset", self.size["preset"], "--files", str(files),
                "--shard", self.shard, "--shard-mib",
                str(self.size["shard_mib"])]
        if any(p != "local" for p in self.a.peers):
            self.srv = Storaged(os.path.join(self.work, "drives"),
                                args=self.a.storaged_args.split())
            self.srv.start()
            log("storaged at %s on 16 drives under %s"
                % (self.srv.endpoint, self.srv.root))
            argv += ["--endpoint", self.srv.endpoint, "--bucket", BUCKET,
                     "--prefix", PREFIX + "/", "--shard-key", SHARD_KEY]
        t0 = time.perf_counter()
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS,
                   AWS_SECRET_ACCESS_KEY=SECRET)
        r = subprocess.run(argv, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("dataset generation/upload failed:\n%s%s"
                               % (r.stdout, r.stderr))
        log(r.stdout.strip())
        self.upload_s = time.perf_counter() - t0
        self.nfiles = files
        self.nclasses = len(next(os.walk(self.data))[1])
        self.data_bytes = sum(os.path.getsize(os.path.join(d, n))
                              for d, _x, ns in os.walk(self.data)
                              for n in ns if n.endswith(".jpg"))
        self.shard_bytes = os.path.getsize(self.shard)
        self.pack_peer()

    def pack_peer(self):
        """For the ecfs-pack peer: the dataset packed by `ecfs pack`."""
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS,
                   AWS_SECRET_ACCESS_KEY=SECRET)
        if "ecfs-pack" in self.a.peers and self.srv is not None:
            # the same files packed into tar shards + index (ecfs pack)
            t0 = time.perf_counter()
            r = subprocess.run([os.path.join(BIN, "ecfs"), "pack", self.data,
                                "%s:%s" % (BUCKET, PACKED), "-q", "-o",
                                "endpoint=" + self.srv.endpoint,
                                "--shard-size", self.a.pack_shard_size],
                               env=env, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError("ecfs pack failed:\n%s%s"
                                   % (r.stdout, r.stderr))
            self.pack_s = time.perf_counter() - t0
            log(r.stdout.strip())

    def prepare_medium(self):
        """The medium set: generated here (cached), uploaded to a fresh
        storaged; no shard."""
        files = self.a.files or self.size["files"]
        t0 = time.perf_counter()
        paths = gen_medium(self.data, files, self.size["medium_kib"])
        if any(p not in ("local", "passthrough") for p in self.a.peers):
            self.srv = Storaged(os.path.join(self.work, "drives"),
                                args=self.a.storaged_args.split())
            self.srv.start()
            log("storaged at %s on 16 drives under %s"
                % (self.srv.endpoint, self.srv.root))
            sent = upload_tree(self.srv.endpoint, self.data, paths,
                               PREFIX + "/")
            log("medium set: %d files, %.0f MiB uploaded" % (
                len(paths), sent / 1048576))
        self.upload_s = time.perf_counter() - t0
        self.nfiles = files
        self.nclasses = len(next(os.walk(self.data))[1])
        self.data_bytes = sum(os.path.getsize(p) for p in paths)
        self.shard = None
        self.shard_bytes = 0
        self.pack_peer()

    def cold(self, peer, prefix=PREFIX):
        """Makes the next measurement of @peer cold: drops the page cache and
        (for the remote peers) mounts afresh; returns the root folder and the
        Mount (None for local disk)."""
        if peer == "local":
            self.dropped = drop_caches()
            return self.data, None
        if peer == "passthrough":
            self.dropped = drop_caches()
            src = (self.data if prefix == PREFIX
                   else os.path.dirname(self.shard))
            m = Mount(peer, os.path.join(self.work, "mnt-" + peer), None,
                      self.work, prefix, source=src, pll=self.pll)
            self.mounts.append(m)
            m.mount()
            return m.mnt, m
        if peer == "ecfs-pack" and prefix == PREFIX:
            prefix = PACKED
        self.dropped = drop_caches()
        m = Mount(peer, os.path.join(self.work, "mnt-" + peer), self.srv,
                  self.work, prefix, extra=self.a.ecfs_opts)
        self.mounts.append(m)
        t0 = time.perf_counter()
        m.mount()
        self.mount_s = time.perf_counter() - t0
        return m.mnt, m

    def probe(self, m):
        """A probe for run_epochs: CPU seconds of the client process of
        @m and of storaged (None where there is none: local disk; the
        server of passthrough), bytes read from the disks, and the whole
        machine's busy CPU seconds."""
        srv = self.srv if m is not None and m.kind != "passthrough" else None
        return lambda: (m.cpu() if m is not None else None,
                        srv.cpu() if srv is not None else None,
                        disk_read_bytes(), machine_busy_s())

    @staticmethod
    def note_cpu(r, test, res):
        """Records the cold epoch's client and server CPU seconds per GiB
        read, the disks' bytes read per GiB and the machine's busy CPU
        seconds per GiB (r[test + " cpu"]: one [client, server, disk,
        machine] list per repetition)."""
        e = res[0]
        gib = e["bytes"] / (1 << 30)
        if not e["cpu"] or gib <= 0:
            return
        r.setdefault(test + " cpu", []).append(
            [None if c is None else c / gib for c in e["cpu"]])

    @staticmethod
    def ecfs_stats(m):
        """The .ecfs-stats counters of an ecfs mount (None for others)."""
        if m is None or m.kind not in ("ecfs", "ecfs-base", "ecfs-pack"):
            return None
        with open(os.path.join(m.mnt, ".ecfs-stats")) as f:
            # "name value" lines (name=value pairs before 2026-12)
            return {k: int(v)
                    for k, v in re.findall(r"(\w+)[= ](\d+)", f.read())}

    @classmethod
    def requests(cls, m):
        """GET+HEAD+LIST counted by an ecfs mount so far (None for others)."""
        kv = cls.ecfs_stats(m)
        if kv is None:
            return None
        return kv["get"] + kv["head"] + kv["list"]

    @classmethod
    def ioctls(cls, m):
        """FUSE ioctls an ecfs mount answered so far (None for others; its
        own reads of .ecfs-stats are not counted)."""
        kv = cls.ecfs_stats(m)
        return None if kv is None else kv.get("ioctls")

    @classmethod
    def fuse_requests(cls, m):
        """FUSE requests of every kind an ecfs mount answered so far (None
        for others and for builds before the counter; its own reads of
        .ecfs-stats are not counted)."""
        kv = cls.ecfs_stats(m)
        return None if kv is None else kv.get("fuse_requests")

    @staticmethod
    def note_warm(r, test, res, io_marks, ns_marks, fr_marks):
        """Records per file of the warm epoch (res[1]): the FUSE ioctls
        (@io_marks: the mount's ioctls at each epoch boundary), the
        DataLoader workers' CPU and the FUSE client's CPU (@ns_marks: its
        CPU ns at each boundary), in microseconds, and the FUSE requests of
        every kind (@fr_marks) (r[test + " warm"]: one [ioctls, workers us,
        client us, requests] per repetition)."""
        if len(res) < 2 or not res[1]["items"]:
            return
        e, n = res[1], res[1]["items"]

        def diff(marks):
            return None if None in marks[1:3] else marks[2] - marks[1]
        io = diff(io_marks)
        io = None if io is None else io / n
        wc = None if e["wcpu"] is None else e["wcpu"] / n * 1e6
        cc = diff(ns_marks)
        cc = None if cc is None else cc / n / 1e3
        fr = diff(fr_marks)
        fr = None if fr is None else fr / n
        r.setdefault(test + " warm", []).append([io, wc, cc, fr])

    def done(self, m):
        if m is not None:
            m.unmount()
            self.mounts.remove(m)

    def run_peer(self, peer, rep):
        """Repetition @rep of all selected tests for @peer; appends to
        self.results[peer][test] one [cold, warm] pair of points. A point is
        dict(v=main figure, x=second figure or None, partial=hit the time
        cap)."""
        a = self.a
        r = self.results.setdefault(peer, {})
        # storaged starts empty-handed for every peer and repetition (a
        # restart costs a few seconds, so not before every test).
        if peer != "local":
            self.srv.restart()
        if "meta" in a.tests:
            for name in ("ls -lR", "find"):
                root, m = self.cold(peer)
                argv = (["ls", "-lR", root] if name == "ls -lR"
                        else ["find", root, "-type", "f"])
                pts = []
                for _ in range(2):
                    secs, lines, to = timed_cmd(argv, self.budget)
                    pts.append(dict(v=secs, x=lines, partial=to))
                self.done(m)
                if name == "find" and m is not None:
                    # mount (until the root lists) + the cold find
                    r.setdefault("mount", []).append(
                        [dict(v=self.mount_s, x=None, partial=False)] * 2)
                    r.setdefault("mount+find", []).append(
                        [dict(v=self.mount_s + pts[0]["v"], x=None,
                              partial=pts[0]["partial"])] * 2)
                if pts[0]["x"] != self.nfiles and not pts[0]["partial"]:
                    self.notes.append("%s: %s listed %d .jpg files, "
                                      "expected %d" % (peer, name,
                                                       pts[0]["x"],
                                                       self.nfiles))
                r.setdefault(name, []).append(pts)
                log("%s %s #%d: cold %.2f s, warm %.2f s" % (
                    peer, name, rep + 1, pts[0]["v"], pts[1]["v"]))
        if "train" in a.tests:
            root, m = self.cold(peer)
            res, scan, n = bench_train(root, a, self.budget)
            self.done(m)
            if n != self.nfiles:
                self.notes.append("%s: ImageFolder found %d images, "
                                  "expected %d" % (peer, n, self.nfiles))
            pts = [dict(v=e["items"] / e["wall"], x=e["stall"],
                        partial=e["partial"]) for e in res]
            r.setdefault("train", []).append(pts)
            r.setdefault("scan", []).append(
                [dict(v=scan, x=None, partial=False)] * 2)
            log("%s train #%d: %s (scan %.2f s)" % (
                peer, rep + 1, ", ".join(
                    "%.0f samples/s stall %.0f%%" % (p["v"], 100 * p["x"])
                    for p in pts), scan))
        for test in ("raw", "raw0"):
            if test not in a.tests:
                continue
            root, m = self.cold(peer)
            def marks_now():
                return (self.requests(m), self.ioctls(m),
                        pid_cpu_ns(m.proc.pid) if m is not None else None,
                        self.fuse_requests(m))
            mark0 = marks_now()
            req0 = mark0[0]
            res, n = bench_raw(root, a, self.budget, on_epoch=marks_now,
                               probe=self.probe(m),
                               buffering=-1 if test == "raw" else 0)
            self.done(m)
            # per epoch boundary: FUSE ioctls, client CPU ns
            io_marks = [mark0[1]] + [e["mark"][1] for e in res]
            ns_marks = [mark0[2]] + [e["mark"][2] for e in res]
            fr_marks = [mark0[3]] + [e["mark"][3] for e in res]
            if req0 is not None:
                # GET+HEAD+LIST of the mount in each epoch (cold, warm)
                marks = [req0] + [e["mark"][0] for e in res]
                pts = [dict(v=marks[i + 1] - marks[i], x=None,
                            partial=res[i]["partial"])
                       for i in range(len(res))]
                r.setdefault("requests" if test == "raw"
                             else test + " requests", []).append(pts)
                log("%s %s #%d: requests per epoch %s, ioctls %s, "
                    "FUSE requests %s" % (peer, test, rep + 1,
                                          [p["v"] for p in pts], io_marks,
                                          fr_marks))
            pts = [dict(v=e["items"] / e["wall"],
                        x=e["bytes"] / 1048576 / e["wall"],
                        partial=e["partial"]) for e in res]
            r.setdefault(test, []).append(pts)
            self.note_cpu(r, test, res)
            self.note_warm(r, test, res, io_marks, ns_marks, fr_marks)
            log("%s %s #%d: %s" % (peer, test, rep + 1, ", ".join(
                "%.0f files/s %.1f MiB/s" % (p["v"], p["x"])
                for p in pts)))
        if "loop" in a.tests:
            # raw bytes with a fixed training step per batch: how much of
            # the time the step ran instead of waiting for data
            root, m = self.cold(peer)
            res, n = bench_raw(root, a, self.budget,
                               compute_s=a.compute_ms / 1000.0,
                               probe=self.probe(m))
            self.done(m)
            pts = [dict(v=e["items"] / e["wall"], x=1.0 - e["stall"],
                        partial=e["partial"]) for e in res]
            r.setdefault("loop", []).append(pts)
            log("%s loop #%d: %s" % (peer, rep + 1, ", ".join(
                "%.0f samples/s busy %.0f%%" % (p["v"], 100 * p["x"])
                for p in pts)))
        if "seq" in a.tests and peer != "ecfs-pack":  # same as ecfs
            root, m = self.cold(peer, prefix=os.path.dirname(SHARD_KEY))
            # passthrough_ll mounts the shard's local folder, ecfs the
            # bucket's shards/ folder
            path = (self.shard if m is None else os.path.join(
                root, os.path.basename(self.shard if peer == "passthrough"
                                       else SHARD_KEY)))
            runs = [seq_read(path, self.budget, self.shard)
                    for _ in range(1 + a.seq_warm)]
            share = large_folio_share(path)
            self.done(m)
            if share is not None:
                r.setdefault("seq folios", []).append(
                    [dict(v=share, x=None, partial=False)])
            for x in runs:
                if not x["ok"]:
                    self.notes.append("%s: shard read returned WRONG "
                                      "BYTES" % peer)
            # x: the reader's CPU microseconds per MiB of the pass
            pts = [dict(v=x["bytes"] / 1048576 / x["secs"],
                        x=x["cpu"] * 1e6 / max(1, x["bytes"] / 1048576),
                        partial=x["partial"]) for x in runs]
            r.setdefault("seq", []).append(pts)
            log("%s seq #%d: %s; %s of the cached pages in large folios"
                % (peer, rep + 1, ", ".join(
                    "%.0f MiB/s (CPU %.0f us/MiB)" % (p["v"], p["x"])
                    for p in pts),
                   "n/a" if share is None else "%.0f%%" % (100 * share)))
        if "ioctl" in a.tests:
            root, m = self.cold(peer)
            path = first_sample(root)
            if path is None:
                raise RuntimeError("ioctl: no sample file below %s" % root)
            pid = m.proc.pid if m is not None else None
            io0 = self.ioctls(m)
            ns0 = pid_cpu_ns(pid) if pid else None
            x = ioctl_cost(path, a.ioctls)
            ns1 = pid_cpu_ns(pid) if pid else None
            io1 = self.ioctls(m)
            self.done(m)
            r.setdefault("ioctl", []).append(
                [dict(v=x["wall_us"], x=x["cpu_us"], partial=False)])
            client = (None if ns0 is None or ns1 is None
                      else (ns1 - ns0) / 1e3 / a.ioctls)
            if client is not None:
                r.setdefault("ioctl client", []).append(
                    [dict(v=client, x=None if io0 is None
                          else (io1 - io0) / a.ioctls, partial=False)])
            log("%s ioctl #%d: %.2f us wall, caller CPU %.2f us, client CPU "
                "%s us per ioctl; %s counted by the mount" % (
                    peer, rep + 1, x["wall_us"], x["cpu_us"],
                    "n/a" if client is None else "%.2f" % client,
                    "n/a" if io0 is None else io1 - io0))

    def run(self):
        """Prepares, then runs the repetitions round-robin over the peers
        (rep 1 of every peer, then rep 2, ...), so a burst of other load on
        the machine is spread over the peers instead of hitting one."""
        self.prepare()
        for rep in range(self.a.repeat):
            for peer in self.a.peers:
                if self.results.get(peer, {}).get("error"):
                    continue
                try:
                    with peer_lock(self.a.lock):
                        self.run_peer(peer, rep)
                except Exception as e:  # one broken peer must not sink the run
                    log("%s FAILED: %s" % (peer, e))
                    self.results.setdefault(peer, {})["error"] = str(e)
                    for m in list(self.mounts):
                        self.done(m)
        if self.srv is not None:
            self.srv.stop()


# ---------------------------------------------------------------- reporting

def machine_info():
    """Dict of the machine and the versions of every peer."""
    mem = 0
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        import PIL
        import torch
        import torchvision
        tv = "torch %s, torchvision %s, Pillow %s" % (
            torch.__version__, torchvision.__version__, PIL.__version__)
    except ImportError:
        tv = "unavailable"
    git = cmd_out(["git", "-C", REPO, "describe", "--always", "--dirty"])
    ecfs = cmd_out([os.path.join(BIN, "ecfs"), "--version"])
    m = re.match(r"^(.*?libcurl/[0-9.]+)", ecfs)
    if m:
        ecfs = m.group(1) + ")"
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": round(mem / 2**30, 1),
        "kernel": platform.release(),
        "os": cmd_out(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
        "ecfs": "%s, git %s" % (ecfs, git),
        "storaged": cmd_out([os.path.join(BIN, "storaged"), "--version"]),
        "s3fs": cmd_out(["s3fs", "--version"]).replace(
            "Amazon Simple Storage Service File System", "s3fs-fuse"),
        "rclone": cmd_out(["rclone", "version"]),
        "fuse": cmd_out(["fusermount3", "--version"]),
        "nginx": cmd_out(["nginx", "-v"]),
        "libcurl": cmd_out(["curl-config", "--version"]),
        "python": platform.python_version(),
        "pytorch": tv,
    }


def fmt(v, nd=0):
    return "n/a" if v is None else ("%.*f" % (nd, v))


def ratio(v, base):
    if v is None or not base:
        return "n/a"
    return "%.2fx" % (v / base)


def point(b, peer, test, i):
    """Median over the repetitions of point @i (0 cold, 1 warm) of @test for
    @peer: dict(v, x, partial), or None when not measured."""
    reps = b.results.get(peer, {}).get(test) or []
    pts = [rep[i] for rep in reps if len(rep) > i]
    if not pts:
        return None
    xs = [p["x"] for p in pts if p["x"] is not None]
    return dict(v=statistics.median(p["v"] for p in pts),
                x=statistics.median(xs) if xs else None,
                lo=min(p["v"] for p in pts), hi=max(p["v"] for p in pts),
                partial=any(p["partial"] for p in pts))


def cpu_cell(b, peer, test, i, scale=1.0):
    """Median [range] of the cold epoch's CPU s/GiB of @test for @peer:
    i = 0 client process, 1 storaged, 3 the whole machine; 2 the disks'
    bytes read per GiB (@scale 2**-30: per byte the loader read)."""
    vals = [rep[i] * scale
            for rep in b.results.get(peer, {}).get(test + " cpu", [])
            if len(rep) > i and rep[i] is not None]
    if not vals:
        return "n/a"
    lo, hi = min(vals), max(vals)
    return "%.2f%s" % (statistics.median(vals), "" if len(vals) < 2 else
                       " [%.2f-%.2f]" % (lo, hi))


def warm_cell(b, peer, test, i, nd):
    """Median [range] of item @i of the warm-epoch costs of @test for
    @peer (Bench.note_warm): 0 FUSE ioctls per file, 1 workers' CPU us per
    file, 2 FUSE client's CPU us per file, 3 FUSE requests of any kind per
    file (results of older runs lack it)."""
    vals = [rep[i] for rep in b.results.get(peer, {}).get(test + " warm", [])
            if len(rep) > i and rep[i] is not None]
    if not vals:
        return "n/a"
    lo, hi = min(vals), max(vals)
    return "%.*f%s" % (nd, statistics.median(vals), "" if len(vals) < 2 else
                       " [%.*f-%.*f]" % (nd, lo, nd, hi))


def tables(b):
    """Builds the Markdown tables; returns (markdown text, chart series)."""
    a = b.a
    out = []
    chart = {}
    peers = a.peers

    def cell(p, nd=0, pre=""):
        if p is None:
            return "n/a"
        # the median, and [lowest-highest] of the repetitions
        spread = ("" if p["lo"] == p["hi"] else " [%s-%s]" % (
            fmt(p["lo"], nd), fmt(p["hi"], nd)))
        return pre + fmt(p["v"], nd) + ("*" if p["partial"] else "") + spread

    def pct(p):
        return "n/a" if p is None or p["x"] is None else "%.0f%%" % (
            100 * p["x"])

    def val(p):
        return None if p is None else p["v"]

    if "train" in a.tests:
        out.append("### Training loader: ImageFolder + DataLoader (shuffle, %d "
                   "workers, prefetch %d, batch %d, %g ms simulated compute "
                   "per batch, RandomResizedCrop %d)\n"
                   % (a.workers, a.prefetch, a.batch_size, a.compute_ms,
                      a.crop))
        out.append("| peer | epoch 1 (cold) samples/s | data stall | vs local "
                   "| epoch 2 (warm) samples/s | data stall | vs local | "
                   "ImageFolder scan s |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        base = [val(point(b, "local", "train", i)) for i in range(2)]
        series = {}
        for peer in peers:
            p = [point(b, peer, "train", i) for i in range(2)]
            series[peer] = [val(x) for x in p]
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                peer, cell(p[0]), pct(p[0]), ratio(val(p[0]), base[0]),
                cell(p[1]), pct(p[1]), ratio(val(p[1]), base[1]),
                cell(point(b, peer, "scan", 0), 2)))
        chart["train"] = series
        out.append("")
    if "raw" in a.tests:
        out.append("### Raw-bytes loader: DataLoader reading whole files (no "
                   "decode, no compute; shuffle, %d workers, batch %d)\n"
                   % (a.workers, a.batch_size))
        out.append("| peer | epoch 1 (cold) files/s | MiB/s | vs local | "
                   "epoch 2 (warm) files/s | MiB/s | vs local | "
                   "S3 requests epoch 1 | epoch 2 (ecfs) | client CPU s/GiB, "
                   "cold | storaged CPU s/GiB, cold | machine CPU s/GiB, "
                   "cold | disk read / bytes read, cold |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
                   "---:|---:|")
        base = [val(point(b, "local", "raw", i)) for i in range(2)]
        series = {}
        for peer in peers:
            p = [point(b, peer, "raw", i) for i in range(2)]
            series[peer] = [val(x) for x in p]
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s "
                       "| %s | %s | %s |" % (
                peer, cell(p[0]), fmt(p[0] and p[0]["x"], 1),
                ratio(val(p[0]), base[0]), cell(p[1]),
                fmt(p[1] and p[1]["x"], 1), ratio(val(p[1]), base[1]),
                cell(point(b, peer, "requests", 0)),
                cell(point(b, peer, "requests", 1)),
                cpu_cell(b, peer, "raw", 0), cpu_cell(b, peer, "raw", 1),
                cpu_cell(b, peer, "raw", 3),
                cpu_cell(b, peer, "raw", 2, 2.0 ** -30)))
        chart["raw"] = series
        out.append("")
    if "raw0" in a.tests:
        out.append("### Raw-bytes loader, files opened unbuffered "
                   "(`open(path, \"rb\", buffering=0)`: no isatty() ioctl; "
                   "otherwise as above)\n")
        out.append("| peer | epoch 1 (cold) files/s | vs local | "
                   "epoch 2 (warm) files/s | MiB/s | vs local | "
                   "warm vs buffered (raw) |")
        out.append("|---|---:|---:|---:|---:|---:|---:|")
        base = [val(point(b, "local", "raw0", i)) for i in range(2)]
        for peer in peers:
            p = [point(b, peer, "raw0", i) for i in range(2)]
            out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                peer, cell(p[0]), ratio(val(p[0]), base[0]), cell(p[1]),
                fmt(p[1] and p[1]["x"], 1), ratio(val(p[1]), base[1]),
                ratio(val(p[1]), val(point(b, peer, "raw", 1)))))
        out.append("")
    warm_tests = [t for t in ("raw", "raw0") if t in a.tests]
    if warm_tests:
        out.append("### What a file of the warm epoch costs (per file, "
                   "medians [range] of the repetitions)\n")
        out.append("| peer | open | warm files/s | vs local | FUSE ioctls "
                   "(ecfs) | FUSE requests, all kinds (ecfs) | DataLoader "
                   "workers' CPU us | FUSE client's CPU us |")
        out.append("|---|---|---:|---:|---:|---:|---:|---:|")
        for t in warm_tests:
            base = val(point(b, "local", t, 1))
            for peer in peers:
                p = point(b, peer, t, 1)
                out.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    peer, "buffered" if t == "raw" else "unbuffered",
                    cell(p), ratio(val(p), base),
                    warm_cell(b, peer, t, 0, 2), warm_cell(b, peer, t, 3, 2),
                    warm_cell(b, peer, t, 1, 1),
                    warm_cell(b, peer, t, 2, 1)))
        out.append("")
    if "loop" in a.tests:
        out.append("### Training-style loop: the raw-bytes loader with %g ms "
                   "of simulated compute per batch of %d (%d workers, "
                   "prefetch %d); busy = time in the step / wall time\n"
                   % (a.compute_ms, a.batch_size, a.workers, a.prefetch))
        out.append("| peer | epoch 1 (cold) samples/s | busy | vs local "
                   "| epoch 2 (warm) samples/s | busy | vs local |")
        out.append("|---|---:|---:|---:|---:|---:|---:|")
        base = [val(point(b, "local", "loop", i)) for i in range(2)]
        for peer in peers:
            p = [point(b, peer, "loop", i) for i in range(2)]
            out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                peer, cell(p[0]), pct(p[0]), ratio(val(p[0]), base[0]),
                cell(p[1]), pct(p[1]), ratio(val(p[1]), base[1])))
        out.append("")
    if "meta" in a.tests:
        out.append("### Metadata walk: `ls -lR` and `find -type f` over %d "
                   "files in %d folders (seconds, lower is better)\n"
                   % (b.nfiles, b.nclasses))
        out.append("| peer | ls -lR cold | ls -lR warm | cold time vs local | "
                   "find cold | find warm | cold time vs local | mount | "
                   "mount + find cold |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        series = {}
        base = {n: val(point(b, "local", n, 0)) for n in ("ls -lR", "find")}
        for peer in peers:
            cells = []
            for name in ("ls -lR", "find"):
                p = [point(b, peer, name, i) for i in range(2)]
                pre = ">" if p[0] and p[0]["partial"] else ""
                cells += [cell(p[0], 2, pre), cell(p[1], 2),
                          ratio(val(p[0]), base[name])]
                series.setdefault(peer, []).append(val(p[0]))
            cells += [cell(point(b, peer, "mount", 0), 2),
                      cell(point(b, peer, "mount+find", 0), 2)]
            out.append("| %s | %s |" % (peer, " | ".join(cells)))
        chart["meta"] = series
        out.append("")
    if "seq" in a.tests:
        out.append("### Sequential read of one %.0f MiB tar shard (1 MiB "
                   "reads, MiB/s)\n" % (b.shard_bytes / 1048576))
        last = a.seq_warm  # index of the last warm pass
        out.append("| peer | cold MiB/s | vs local | warm MiB/s | vs local "
                   "| reader CPU us/MiB, cold | warm |"
                   + (" warm pass %d MiB/s | vs local | CPU us/MiB |" % last
                      if last > 1 else "")
                   + " cached pages in large folios |")
        out.append("|---|---:|---:|---:|---:|---:|---:|"
                   + ("---:|---:|---:|" if last > 1 else "") + "---:|")
        idx = [0, 1] + ([last] if last > 1 else [])
        base = {i: val(point(b, "local", "seq", i)) for i in idx}
        series = {}
        for peer in peers:
            p = {i: point(b, peer, "seq", i) for i in idx}
            series[peer] = [val(p[0]), val(p[1])]
            cpu = {i: fmt(p[i] and p[i]["x"]) for i in idx}
            row = "| %s | %s | %s | %s | %s | %s | %s |" % (
                peer, cell(p[0]), ratio(val(p[0]), base[0]), cell(p[1]),
                ratio(val(p[1]), base[1]), cpu[0], cpu[1])
            if last > 1:
                row += " %s | %s | %s |" % (cell(p[last]),
                                            ratio(val(p[last]), base[last]),
                                            cpu[last])
            fol = point(b, peer, "seq folios", 0)
            row += " %s |" % ("n/a" if fol is None else "%.0f%%" % (
                100 * fol["v"]))
            out.append(row)
        chart["seq"] = series
        out.append("")
    if "ioctl" in a.tests:
        out.append("### One TCGETS ioctl (what `isatty()` sends on every "
                   "buffered `open()`), %d per peer on one sample file "
                   "(microseconds per ioctl)\n" % a.ioctls)
        out.append("| peer | wall | caller's CPU | FUSE client's CPU | "
                   "ioctls the mount counted, per call |")
        out.append("|---|---:|---:|---:|---:|")
        for peer in peers:
            p = point(b, peer, "ioctl", 0)
            q = point(b, peer, "ioctl client", 0)
            out.append("| %s | %s | %s | %s | %s |" % (
                peer, cell(p, 2), fmt(p and p["x"], 2), cell(q, 2),
                fmt(q and q["x"], 2)))
        out.append("")
    errs = ["%s: %s" % (p, b.results[p]["error"]) for p in peers
            if b.results.get(p, {}).get("error")]
    foot = []
    if a.repeat > 1:
        foot.append("Figures are medians of %d repetitions, [lowest-highest] "
                    "beside them." % a.repeat)
    if any("*" in line for line in out):
        foot.append("`*` the epoch or read hit the %g s time cap; the figure "
                    "is over the part done (`>`: the command was stopped)."
                    % b.budget)
    if b.dropped is False:
        foot.append("The page cache could not be dropped: local-disk `cold` "
                    "figures are page-cache warm.")
    foot += ["FAILED %s" % e for e in errs] + b.notes
    if foot:
        out.append("\n".join("- " + f for f in foot))
        out.append("")
    return "\n".join(out), chart


def write_chart(path, chart, work):
    """Writes a 2x2 bar chart PNG of @chart with gnuplot; returns an error
    string or None."""
    if not shutil.which("gnuplot"):
        return "gnuplot not installed"
    panels = [("train", "Training loader, samples/s (higher is better)",
               ["epoch 1 cold", "epoch 2 warm"]),
              ("raw", "Raw-bytes loader, files/s (higher is better)",
               ["epoch 1 cold", "epoch 2 warm"]),
              ("meta", "Metadata walk, cold, seconds (lower is better)",
               ["ls -lR", "find"]),
              ("seq", "Sequential shard read, MiB/s (higher is better)",
               ["cold", "warm"])]
    script = ["set terminal pngcairo size 1400,900 font 'sans,10'",
              "set output '%s'" % path,
              "set multiplot layout 2,2 title 'ecfs loader benchmark'",
              "set style data histograms",
              "set style histogram clustered gap 1",
              "set style fill solid 0.85 border -1",
              "set boxwidth 0.9", "set grid ytics", "set yrange [0:*]",
              "set key top right"]
    for key, title, cols in panels:
        series = chart.get(key)
        if not series:
            continue
        dat = os.path.join(work, "chart-%s.dat" % key)
        with open(dat, "w") as f:
            for peer, vals in series.items():
                f.write('"%s" %s\n' % (peer, " ".join(
                    "%.6g" % v if v is not None else "0" for v in vals)))
        script.append("set title '%s'" % title)
        script.append("plot '%s' using 2:xtic(1) title '%s', '' using 3 "
                      "title '%s'" % (dat, cols[0], cols[1]))
    script.append("unset multiplot")
    r = subprocess.run(["gnuplot"], input="\n".join(script), text=True,
                       capture_output=True)
    return None if r.returncode == 0 else r.stderr.strip()


def server_chart(path):
    """Draws the server figures of tests/bench/bench_s3_server.py (its
    server.json at @path) as server.png beside it: storaged vs nginx for 4 KiB
    GET/PUT at 64 connections and the single-stream 1 GiB GET. Returns an
    error string or None."""
    if not shutil.which("gnuplot"):
        return "gnuplot not installed"
    with open(path) as f:
        j = json.load(f)
    d = os.path.dirname(os.path.abspath(path))
    dat = os.path.join(d, "server-chart.dat")
    try:
        with open(dat, "w") as f:
            f.write('"GET 4 KiB" %g %g\n' % (j["get4k_storaged"]["rps"],
                                              j["get4k_nginx"]["rps"]))
            f.write('"PUT 4 KiB" %g %g\n' % (j["put4k_storaged"]["rps"],
                                              j["put4k_nginx"]["rps"]))
        dat2 = dat + "2"
        with open(dat2, "w") as f:
            f.write('"GET %d MiB" %g %g\n' % (j.get("big_mib", 1024),
                                              j["bigget_storaged_mibs"],
                                              j["bigget_nginx_mibs"]))
    except (KeyError, TypeError) as e:
        return "server.json lacks %s" % e
    script = ["set terminal pngcairo size 1100,450 font 'sans,10'",
              "set output '%s'" % os.path.join(d, "server.png"),
              "set multiplot layout 1,2 title 'storaged vs nginx (same "
              "files, 127.0.0.1)'",
              "set style data histograms",
              "set style histogram clustered gap 1",
              "set style fill solid 0.85 border -1", "set boxwidth 0.9",
              "set grid ytics", "set yrange [0:*]", "set key top right",
              "set title '64 connections, requests/s'",
              "plot '%s' using 2:xtic(1) title 'storaged', '' using 3 title "
              "'nginx'" % dat,
              "set title 'one stream, MiB/s'",
              "plot '%s' using 2:xtic(1) title 'storaged', '' using 3 title "
              "'nginx'" % dat2,
              "unset multiplot"]
    r = subprocess.run(["gnuplot"], input="\n".join(script), text=True,
                       capture_output=True)
    for x in (dat, dat2):
        try:
            os.unlink(x)
        except OSError:
            pass
    return None if r.returncode == 0 else r.stderr.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="default",
                    help="dataset and shard size (default: default = 3000 "
                    "JPEGs 256x192, 512 MiB shard)")
    ap.add_argument("--files", type=int, help="override the number of images")
    ap.add_argument("--peers",
                    help="comma list of %s (default %s; medium: %s)" % (
                        ",".join(PEERS), ",".join(DEFAULTS["peers"]),
                        ",".join(MEDIUM_DEFAULTS["peers"])))
    ap.add_argument("--tests",
                    help="comma list of %s (default %s; medium: %s)" % (
                        ",".join(TESTS), ",".join(DEFAULTS["tests"]),
                        ",".join(MEDIUM_DEFAULTS["tests"])))
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--compute-ms", type=float, default=50.0,
                    help="simulated training step per batch (default 50: on "
                    "2 cores, local disk keeps that step ~95%% busy)")
    ap.add_argument("--crop", type=int, default=112,
                    help="RandomResizedCrop size (default 112)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--seq-warm", type=int, default=1, metavar="N",
                    help="warm passes of the seq test (default 1; the table "
                    "also gives the last one when N > 1)")
    ap.add_argument("--ioctls", type=int, default=20000, metavar="N",
                    help="TCGETS ioctls per peer in the ioctl test "
                    "(default 20000)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="repeat every measurement N times, report medians "
                    "(default 3)")
    ap.add_argument("--budget", type=float,
                    help="time cap per epoch/command in seconds")
    ap.add_argument("--results", default=os.path.join(REPO, "results"),
                    help="results folder (default <repo>/results)")
    ap.add_argument("--workdir", default=None,
                    help="where the temporary drives and mounts go")
    ap.add_argument("--keep", action="store_true",
                    help="keep the work folder (logs) after the run")
    ap.add_argument("--storaged-args", default="",
                    help="more storaged serve options, e.g. --storaged-args="
                         "--extents")
    ap.add_argument("--base-bin", metavar="DIR",
                    help="the ecfs binary of peer ecfs-base (another build, "
                    "e.g. main's, measured beside ecfs in the same run)")
    ap.add_argument("--ecfs-opts", default="",
                    help="more -o options for the ecfs and ecfs-pack mounts "
                    "(e.g. cache_size=16M,pack_fetch=shard)")
    ap.add_argument("--lock", metavar="FILE",
                    help="hold an exclusive flock on FILE while each peer "
                    "is measured (not while the dataset is made and "
                    "uploaded), so benchmarks sharing the machine take turns")
    ap.add_argument("--pack-shard-size", default="256M",
                    help="ecfs pack --shard-size of the ecfs-pack peer")
    ap.add_argument("--server-chart", metavar="SERVER_JSON",
                    help="only draw server.png from bench_s3_server.py's "
                    "server.json, then exit")
    a = ap.parse_args()
    if a.server_chart:
        err = server_chart(a.server_chart)
        if err:
            log("no server chart: %s" % err)
        return 1 if err else 0
    dflt = MEDIUM_DEFAULTS if SIZES[a.size]["preset"] is None else DEFAULTS
    a.peers = ([p for p in a.peers.split(",") if p] if a.peers
               else list(dflt["peers"]))
    a.tests = ([t for t in a.tests.split(",") if t] if a.tests
               else list(dflt["tests"]))
    if SIZES[a.size]["preset"] is None and ({"train", "seq"} & set(a.tests)):
        ap.error("--size %s is raw bytes, not JPEGs, and has no shard: "
                 "tests raw, loop, meta only" % a.size)
    for p in a.peers:
        if p not in PEERS:
            ap.error("unknown peer %s" % p)
    if "ecfs-base" in a.peers:
        if not a.base_bin or not os.access(os.path.join(a.base_bin, "ecfs"),
                                           os.X_OK):
            ap.error("peer ecfs-base needs --base-bin DIR with an ecfs")
        global BASE_BIN
        BASE_BIN = os.path.abspath(a.base_bin)
    for t in a.tests:
        if t not in TESTS:
            ap.error("unknown test %s" % t)
    if a.ioctls < 1:
        ap.error("--ioctls must be >= 1")
    if a.epochs < 2:
        ap.error("--epochs must be >= 2 (cold and warm are reported)")
    if os.geteuid() != 0 and not os.access("/dev/fuse", os.R_OK | os.W_OK):
        ap.error("/dev/fuse is not usable by this user")

    # 4 workers on 2 cores is the point of the test, not a mistake.
    warnings.filterwarnings("ignore", message="This DataLoader will create")

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, on_signal)

    t0 = time.perf_counter()
    info = machine_info()
    load0 = os.getloadavg()[0]
    b = Bench(a)
    try:
        b.run()
    finally:
        b.cleanup()
    elapsed = time.perf_counter() - t0

    os.makedirs(a.results, exist_ok=True)
    md, chart = tables(b)
    # The options a user gave (scripts/bench adds --results itself).
    user_args = []
    argv = sys.argv[1:]
    i = 0
    while i < len(argv):
        if argv[i] == "--results":
            i += 2
            continue
        if not argv[i].startswith("--results="):
            user_args.append(argv[i])
        i += 1
    head = ["## Loader benchmark (%s)\n" % time.strftime("%Y-%m-%d %H:%M UTC",
                                                          time.gmtime()),
            "Command: `make bench%s` (loader part: tests/bench/bench_loader.py"
            " %s), %.0f s in all.\n" % (
                " BENCH_ARGS='%s'" % " ".join(user_args) if user_args else "",
                " ".join(sys.argv[1:]), elapsed),
            "Machine: %d cores (%s), %.1f GiB RAM, %s, kernel %s; "
            "1-minute load average %.1f at the start, %.1f at the end "
            "(other work on the machine makes the figures noisier).\n" % (
                info["cores"], info["cpu"], info["memory_gib"], info["os"],
                info["kernel"], load0, os.getloadavg()[0]),
            "Peers: %s; storaged %s; %s; %s; %s; %s; %s; "
            "Python %s, %s.\n" % (info["ecfs"], info["storaged"], info["s3fs"],
                                  info["rclone"], info["nginx"],
                                  info["fuse"],
                                  info["libcurl"], info["python"],
                                  info["pytorch"]),
            "Dataset: %d %s (%.1f MiB, mean %.1f KiB) in bucket `%s` on one "
            "storaged, 16 drive folders on one disk, 12+4 erasure coding; "
            "prepared in %.1f s. Cold = fresh mount + dropped page cache "
            "(storaged restarted before each peer's round of tests)%s.\n" % (
                b.nfiles, "JPEGs" if SIZES[a.size]["preset"] else
                "files of random bytes", b.data_bytes / 1048576,
                b.data_bytes / 1024 / max(1, b.nfiles), BUCKET, b.upload_s,
                "" if b.dropped else " (drop_caches NOT permitted)"),
            "Mount options: ecfs `-o ro%s`; s3fs `-o ro,use_path_request_style`; "
            "rclone `--read-only` (default VFS cache mode off); passthrough = "
            "libfuse's passthrough_ll `-o cache=always` over the local copy "
            "(the cost of FUSE itself); ecfs-pack: `ecfs pack --shard-size "
            "%s`.\n" % ("," + a.ecfs_opts if a.ecfs_opts else "",
                        a.pack_shard_size)]
    text = "\n".join(head) + "\n" + md
    print(text)
    with open(os.path.join(a.results, "loader.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.results, "loader.json"), "w") as f:
        json.dump(dict(machine=info, args=vars(a), results=b.results,
                       notes=b.notes, files=b.nfiles, bytes=b.data_bytes,
                       shard_bytes=b.shard_bytes, elapsed=elapsed), f,
                  indent=1)
    err = write_chart(os.path.join(a.results, "loader.png"), chart,
                      a.results)
    for k in list(chart):
        try:
            os.unlink(os.path.join(a.results, "chart-%s.dat" % k))
        except OSError:
            pass
    if err:
        log("no chart: %s" % err)
    log("results in %s" % a.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
