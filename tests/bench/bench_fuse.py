#!/usr/bin/python3
"""tests/bench/bench_fuse.py - ecfs against local disk and libfuse's own
passthrough_ll (the cost of FUSE itself), side by side in one run on the
same files. Figures, not pass/fail.

Workloads:
  epoch   ImageFolder raw-bytes epoch, DataLoader(num_workers=4, shuffle,
          the same seed for every peer), samples/s; epoch 1 cold, epoch 2
          warm (the same mount and page cache, a different order)
  seq     sequential read of one big file (default 1 GiB), cold, MiB/s
  lsr     ls -lR of a 10k-file tree, cold, seconds

Cold means, for every peer alike: sync + drop_caches (page cache, dentries
and inodes: also storaged's drive files, so its GETs read the disk, as
local reads do) and, for ecfs and passthrough_ll, a fresh mount (ecfs:
empty block and metadata caches). storaged keeps no object data in memory
between requests, so it is not restarted. Each repeat round measures every peer, in a rotated order so
a burst of other load on the shared machine does not always hit the same
peer; the table gives medians and [min-max] over the rounds, and the ratios
are medians of the per-round ratios (peers of one round ran back to back).
For every ecfs phase the script prints the requests it cost: ecfs's own
counters (MOUNT/.ecfs-stats) and storaged's (/metrics), as deltas.

Usage: tests/bench/bench_fuse.py [--files N] [--big-mib N] [--tree N]
       [--repeat N] [--tests epoch,seq,lsr] [--workdir DIR]
       [--ecfs-opts OPTS] [--ecfs BIN] [--storaged BIN] [--ecfs-base BIN]
--ecfs-base BIN adds a peer "ecfs-base": another ecfs binary (e.g. the one
built from main before a change) mounted the same way, for A/B runs.
--ecfs/--storaged name the binaries (default bin/): on a shared tree, copy
them aside first so a rebuild in the middle of a run changes nothing.
It builds passthrough_ll from the libfuse3-dev examples into build/bench/,
starts bin/storaged on drive dirs under the workdir, uploads the data with
scripts/gen-dataset / boto3, and mounts. Needs root (drop_caches, mounts).
"""

import argparse
import glob
import re
import statistics
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(REPO, "bin")
PY = "/usr/bin/python3"
AK, SK = "benchroot", "bench-secret-key-0123456789abcdef"


def sh(*a, **kw):
    return subprocess.run(list(a), check=True, **kw)


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_passthrough(outdir):
    exdir = "/usr/share/doc/libfuse3-dev/examples"
    os.makedirs(outdir, exist_ok=True)
    for name in ("passthrough_ll.c", "passthrough_helpers.h"):
        srcs = glob.glob(os.path.join(exdir, name + "*"))
        if not srcs:
            sys.exit("%s not found (apt install libfuse3-dev)" % name)
        dst = os.path.join(outdir, name)
        if srcs[0].endswith(".gz"):
            with open(dst, "wb") as f:
                sh("gzip", "-dc", srcs[0], stdout=f)
        else:
            shutil.copy(srcs[0], dst)
    src = os.path.join(outdir, "passthrough_ll.c")
    exe = os.path.join(outdir, "passthrough_ll")
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "fuse3"],
                           capture_output=True, text=True,
                           check=True).stdout.split()
    sh("cc", "-O2", "-o", exe, src, *flags, "-pthread")
    return exe


def wait_mounted(path, proc=None, timeout=20):
    t = time.monotonic() + timeout
    while time.monotonic() < t:
        if os.path.ismount(path):
            return
        if proc is not None and proc.poll() is not None:
            sys.exit("mount of %s failed" % path)
        time.sleep(0.05)
    sys.exit("mount timeout %s" % path)


def umount(path):
    subprocess.run(["fusermount3", "-u", "-z", path], capture_output=True)
    t = time.monotonic() + 10
    while os.path.ismount(path) and time.monotonic() < t:
        time.sleep(0.05)


EPOCH_CODE = r"""
import sys, time, torch, torchvision
root, seed = sys.argv[1], int(sys.argv[2])
def raw(p):
    with open(p, "rb") as f:
        return f.read()
ds = torchvision.datasets.ImageFolder(root, loader=raw)
g = torch.Generator(); g.manual_seed(seed)
dl = torch.utils.data.DataLoader(ds, batch_size=None, shuffle=True,
                                 num_workers=4, generator=g)
t = time.monotonic(); n = 0; b = 0
for x, y in dl:
    n += 1; b += len(x)
dt = time.monotonic() - t
print("%d %d %.4f" % (n, b, dt))
"""


def epoch(root, seed):
    r = subprocess.run([PY, "-c", EPOCH_CODE, root, str(seed)],
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, PYTHONWARNINGS="ignore"))
    if r.returncode != 0:
        sys.exit("epoch failed: " + r.stderr[-2000:])
    n, b, dt = r.stdout.split()
    return int(n) / float(dt)


def seq_read(path):
    t = time.monotonic()
    n = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            n += len(b)
    return n / (1 << 20) / (time.monotonic() - t)


def lsr(path):
    t = time.monotonic()
    sh("ls", "-lR", path, stdout=subprocess.DEVNULL)
    return time.monotonic() - t


def storaged_counts(ep):
    """Requests storaged answered so far, by API (from /metrics)."""
    out = {}
    try:
        txt = urllib.request.urlopen(ep + "/metrics", timeout=5).read()
    except Exception:
        return out
    for m in re.finditer(rb'^storaged_requests_total\{api="([^"]+)",'
                         rb'status="[^"]+"\} (\d+)', txt, re.M):
        k = m.group(1).decode()
        out[k] = out.get(k, 0) + int(m.group(2))
    return out


def ecfs_counts(mnt):
    """ecfs's request counters (MOUNT/.ecfs-stats) as a dict of ints."""
    try:
        with open(os.path.join(mnt, ".ecfs-stats")) as f:
            txt = f.read()
    except OSError:
        return {}
    # "name value" lines; name=value pairs from a baseline binary built
    # before the file became lines
    return {k: int(v) for k, v in re.findall(r"(\w+)[= ](\d+)", txt)}


def delta(after, before, keys=None):
    keys = keys or sorted(set(after) | set(before))
    return " ".join("%s=%d" % (k, after.get(k, 0) - before.get(k, 0))
                    for k in keys if after.get(k, 0) != before.get(k, 0))


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def rng(xs):
    return "%.3g-%.3g" % (min(xs), max(xs)) if xs else "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--big-mib", type=int, default=1024)
    ap.add_argument("--tree", type=int, default=10000)
    ap.add_argument("--workdir", default=os.path.join(REPO, "build", "bench"))
    ap.add_argument("--ecfs-opts", default="ro")
    ap.add_argument("--ecfs", default=os.path.join(BIN, "ecfs"),
                    help="the ecfs binary (default bin/ecfs)")
    ap.add_argument("--storaged", default=os.path.join(BIN, "storaged"),
                    help="the storaged binary (default bin/storaged)")
    ap.add_argument("--ecfs-base", default=None,
                    help="a second ecfs binary, peer ecfs-base (A/B)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tests", default="epoch,seq,lsr")
    a = ap.parse_args()
    tests = a.tests.split(",")
    wd = os.path.abspath(a.workdir)
    os.makedirs(wd, exist_ok=True)
    pll = build_passthrough(wd)
    data = os.path.join(wd, "data")       # ImageFolder root
    big = os.path.join(wd, "big", "big.bin")
    tree = os.path.join(wd, "tree")
    sh(PY, os.path.join(REPO, "scripts", "gen-dataset"), os.path.join(data),
       "--files", str(a.files), "--quiet")
    if not os.path.exists(big) or os.path.getsize(big) != a.big_mib << 20:
        os.makedirs(os.path.dirname(big), exist_ok=True)
        with open(big, "wb") as f:
            for _ in range(a.big_mib):
                f.write(os.urandom(1 << 20))
    if not os.path.exists(os.path.join(tree, ".done-%d" % a.tree)):
        shutil.rmtree(tree, ignore_errors=True)
        for i in range(a.tree):
            d = os.path.join(tree, "d%03d" % (i % 100))
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "f%05d" % i), "wb") as f:
                f.write(b"x" * (i % 500))
        open(os.path.join(tree, ".done-%d" % a.tree), "w").close()

    # storaged with the same files
    drives = [os.path.join(wd, "drives", "d%d" % i) for i in range(4)]
    for d in drives:
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    port = free_port()
    ep = "http://127.0.0.1:%d" % port
    env = dict(os.environ, STORAGED_ROOT_USER=AK, STORAGED_ROOT_PASSWORD=SK,
               AWS_ACCESS_KEY_ID=AK, AWS_SECRET_ACCESS_KEY=SK)
    slog = open(os.path.join(wd, "storaged.log"), "ab")
    srv = subprocess.Popen([os.path.abspath(a.storaged), "serve",
                            "--address", "127.0.0.1:%d" % port] + drives,
                           stdout=slog, stderr=slog, env=env,
                           start_new_session=True)
    mounts = []
    procs = [srv]
    try:
        t = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(ep + "/health/ready", timeout=1)
                break
            except Exception:
                if time.monotonic() > t:
                    sys.exit("storaged not ready")
                time.sleep(0.1)
        print("uploading ...", file=sys.stderr)
        sh(PY, os.path.join(REPO, "scripts", "gen-dataset"), data,
           "--files", str(a.files), "--quiet", "--endpoint", ep,
           "--bucket", "bench", "--prefix", "data/", env=env)
        up = r"""
import os, sys, boto3
from concurrent.futures import ThreadPoolExecutor
from botocore.config import Config
c = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1",
                 config=Config(s3={"addressing_style": "path"},
                               max_pool_connections=16))
root, prefix = sys.argv[2], sys.argv[3]
items = []
for d, _, fs in os.walk(root):
    for n in fs:
        if not n.startswith(".done"):
            p = os.path.join(d, n)
            items.append((p, prefix + os.path.relpath(p, root)))
def put(it):
    c.upload_file(it[0], "bench", it[1])
with ThreadPoolExecutor(16) as ex:
    list(ex.map(put, items))
"""
        sh(PY, "-c", up, ep, tree, "tree/", env=env)
        sh(PY, "-c", up, ep, os.path.dirname(big), "big/", env=env)

        pmnt = os.path.join(wd, "mnt-pll")
        emnt = os.path.join(wd, "mnt-ecfs")
        bmnt = os.path.join(wd, "mnt-ecfs-base")
        for m in (pmnt, emnt, bmnt):
            umount(m)
            os.makedirs(m, exist_ok=True)
        pll_proc = []

        def pll_mount():
            """A fresh passthrough_ll process per cold phase: like a fresh
            ecfs mount, and it drops the O_PATH fd it keeps per inode it
            knows (a 10k-file tree and repeats reach the fd limit)."""
            umount(pmnt)
            for q in pll_proc:
                if q.poll() is None:
                    q.terminate()
                    q.wait(10)
            pll_proc.clear()
            q = subprocess.Popen([pll, "-f", "-o", "source=" + wd, pmnt],
                                 stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            procs.append(q)
            pll_proc.append(q)
            wait_mounted(pmnt, q)
            if pmnt not in mounts:
                mounts.append(pmnt)

        def ecfs_mount(exe, mnt, tag):
            umount(mnt)
            opts = "endpoint=%s,log_file=%s" % (
                ep, os.path.join(wd, "%s.log" % tag))
            if a.ecfs_opts:
                opts += "," + a.ecfs_opts
            sh(exe, "bench", mnt, "-o", opts, env=env)
            if mnt not in mounts:
                mounts.append(mnt)

        peers = [("local", wd, None), ("passthrough_ll", pmnt, None),
                 ("ecfs", emnt, os.path.abspath(a.ecfs))]
        if a.ecfs_base:
            peers.append(("ecfs-base", bmnt, os.path.abspath(a.ecfs_base)))
        res = {name: {} for name, _, _ in peers}

        def cold(name, root, exe):
            if exe:
                ecfs_mount(exe, root, name)
            elif name == "passthrough_ll":
                pll_mount()
            drop_caches()

        def measure(name, root, exe, key, fn, *args):
            s0 = storaged_counts(ep) if exe else {}
            e0 = ecfs_counts(root) if exe else {}
            v = fn(*args)
            res[name].setdefault(key, []).append(v)
            if exe:
                print("  %-10s %-7s %10.1f  ecfs: %s | storaged: %s" % (
                    name, key, v, delta(ecfs_counts(root), e0,
                                        ["get", "head", "list", "retries",
                                         "errors", "reads", "read_gets",
                                         "readahead_gets",
                                         "dir_prefetch_gets"]),
                    delta(storaged_counts(ep), s0)), file=sys.stderr)
            else:
                print("  %-10s %-7s %10.1f" % (name, key, v),
                      file=sys.stderr)

        for rnd in range(a.repeat):
            print("round %d/%d" % (rnd + 1, a.repeat), file=sys.stderr)
            k = rnd % len(peers)
            for name, root, exe in peers[k:] + peers[:k]:
                if "epoch" in tests:
                    cold(name, root, exe)
                    data_root = os.path.join(root, "data")
                    measure(name, root, exe, "epoch1", epoch, data_root, 1)
                    measure(name, root, exe, "epoch2", epoch, data_root, 2)
                if "seq" in tests:
                    cold(name, root, exe)
                    measure(name, root, exe, "seq", seq_read,
                            os.path.join(root, "big", "big.bin"))
                if "lsr" in tests:
                    cold(name, root, exe)
                    measure(name, root, exe, "lsr", lsr,
                            os.path.join(root, "tree"))
                if exe:
                    umount(root)
        names = [n for n, _, _ in peers]
        print("\nbench_fuse: %d files ImageFolder, %d MiB sequential, "
              "%d-file ls -lR; ecfs -o %s; %d round(s): median "
              "[min-max]" % (a.files, a.big_mib, a.tree, a.ecfs_opts,
                             a.repeat))
        hdr = "%-26s" % ""
        for n in names:
            hdr += " %22s" % n
        print(hdr + " %18s %18s" % ("ecfs/pll", "ecfs/local"))
        for key, label in (("epoch1", "epoch 1 cold (samples/s)"),
                           ("epoch2", "epoch 2 warm (samples/s)"),
                           ("seq", "seq read cold (MiB/s)"),
                           ("lsr", "ls -lR cold (s, lower=better)")):
            if key not in res["ecfs"]:
                continue
            line = "%-26s" % label
            for n in names:
                xs = res[n][key]
                line += " %22s" % ("%.1f [%s]" % (med(xs), rng(xs)))
            for base in ("passthrough_ll", "local"):
                rs = [e / b for e, b in zip(res["ecfs"][key], res[base][key])]
                line += " %18s" % ("%.2f [%s]" % (med(rs), rng(rs)))
            print(line)
            if a.ecfs_base:
                rs = [e / b for e, b in zip(res["ecfs"][key],
                                            res["ecfs-base"][key])]
                print("%-26s ecfs/ecfs-base %.2f [%s]" % ("", med(rs),
                                                          rng(rs)))
    finally:
        for m in mounts:
            umount(m)
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()


if __name__ == "__main__":
    main()
