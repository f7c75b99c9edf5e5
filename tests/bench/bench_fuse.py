#!/usr/bin/python3
"""tests/bench/bench_fuse.py - ecfs against local disk and libfuse's own
passthrough_ll (the cost of FUSE itself), side by side in one run on the
same files. Figures, not pass/fail.

Workloads:
  epoch   ImageFolder raw-bytes epoch, DataLoader(num_workers=4, shuffle),
          samples/s; epoch 1 cold (page cache dropped, fresh ecfs mount),
          epoch 2 warm
  seq     sequential read of one big file (default 1 GiB), cold, MiB/s
  lsr     ls -lR of a 10k-file tree, cold, seconds

Usage: tests/bench/bench_fuse.py [--files N] [--big-mib N] [--tree N]
       [--workdir DIR] [--ecfs-opts OPTS] [--keep]
It builds passthrough_ll from the libfuse3-dev examples into build/bench/,
starts bin/storaged on drive dirs under the workdir, uploads the data with
scripts/gen-dataset / boto3, and mounts. Needs root (drop_caches, mounts).
"""

import argparse
import glob
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
                       capture_output=True, text=True,
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--big-mib", type=int, default=1024)
    ap.add_argument("--tree", type=int, default=10000)
    ap.add_argument("--workdir", default=os.path.join(REPO, "build", "bench"))
    ap.add_argument("--ecfs-opts", default="ro")
    a = ap.parse_args()
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
    srv = subprocess.Popen([os.path.join(BIN, "storaged"), "serve",
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
        for m in (pmnt, emnt):
            umount(m)
            os.makedirs(m, exist_ok=True)
        p = subprocess.Popen([pll, "-f", "-o", "source=" + wd, pmnt],
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        procs.append(p)
        wait_mounted(pmnt, p)
        mounts.append(pmnt)

        def ecfs_mount():
            umount(emnt)
            opts = "endpoint=%s,log_file=%s" % (ep, os.path.join(wd,
                                                                 "ecfs.log"))
            if a.ecfs_opts:
                opts += "," + a.ecfs_opts
            sh(os.path.join(BIN, "ecfs"), "bench", emnt, "-o", opts, env=env)
            if emnt not in mounts:
                mounts.append(emnt)

        roots = {"local": wd, "passthrough_ll": pmnt, "ecfs": emnt}
        res = {}
        for name, root in roots.items():
            r = res[name] = {}
            sub = "data" if name != "ecfs" else "data"
            if name == "ecfs":
                ecfs_mount()
            drop_caches()
            r["epoch1"] = epoch(os.path.join(root, sub), 1)
            r["epoch2"] = epoch(os.path.join(root, sub), 2)
            if name == "ecfs":
                ecfs_mount()
            drop_caches()
            r["seq"] = seq_read(os.path.join(root, "big", "big.bin"))
            if name == "ecfs":
                ecfs_mount()
            drop_caches()
            r["lsr"] = lsr(os.path.join(root, "tree"))
            if name == "ecfs":
                with open(os.path.join(emnt, ".ecfs-stats")) as f:
                    r["stats"] = " ".join(f.read().split())
        loc, pl, ec = res["local"], res["passthrough_ll"], res["ecfs"]
        print("\nbench_fuse: %d files ImageFolder, %d MiB sequential, "
              "%d-file ls -lR; ecfs -o %s" % (a.files, a.big_mib, a.tree,
                                              a.ecfs_opts))
        print("%-28s %12s %15s %12s %10s %10s" % (
            "", "local", "passthrough_ll", "ecfs", "ecfs/pll", "ecfs/local"))
        for key, label, unit in (("epoch1", "epoch 1 cold (samples/s)", ""),
                                 ("epoch2", "epoch 2 warm (samples/s)", ""),
                                 ("seq", "seq read cold (MiB/s)", ""),
                                 ("lsr", "ls -lR cold (s, lower=better)",
                                  "")):
            print("%-28s %12.3f %15.3f %12.3f %10.2f %10.2f" % (
                label, loc[key], pl[key], ec[key], ec[key] / pl[key],
                ec[key] / loc[key]))
        print("ecfs stats after last run:", ec.get("stats"))
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
