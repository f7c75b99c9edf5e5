#!/usr/bin/python3
"""tests/bench/bench_listed_meta.py - what fetching the stored attributes of
entries known only from a listing costs (-o meta_fetch, fuse/README.md):
a fresh mount, `ls -lR` (cold) then again (warm), and on another fresh
mount `find -type f` (names only), over (a) the 3000-file dataset uploaded
by boto3 (no directory markers, no x-amz-meta-*: meta_fetch=marked fetches
nothing), (b) the same tree copied in through an ecfs mount with the --new
build (cp -r: marker objects; since session 10 they say that the entries,
of the default modes, store no attributes: one HEAD per marker; before, one
HEAD per entry) and (c) the boto3 tree on an allow_other mount (session 9:
meta_fetch=all, one HEAD per entry; since session 10 marked there too).
Two ecfs builds
side by side (--base BIN_DIR, --new BIN_DIR), rounds alternating; seconds
and S3 HEAD/LIST counts (.ecfs-stats), medians and [min-max]. Figures,
not pass/fail. Needs root (mounts) and the dataset of bench_write.py
(var/bench/dataset-w3000). Run under flock /tmp/ecfs-bench.lock.

Usage: bench_listed_meta.py --base DIR --new DIR [--rounds N] [--workdir D]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_loader as bl  # noqa: E402  (Storaged, upload_tree)

ap = argparse.ArgumentParser()
ap.add_argument("--base", required=True)
ap.add_argument("--new", required=True)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--workdir", default=None)
a = ap.parse_args()
work = tempfile.mkdtemp(prefix="lsl-", dir=a.workdir)
data = os.path.join(bl.REPO, "var", "bench", "dataset-w3000")
assert os.path.isdir(data), data
srv = bl.Storaged(os.path.join(work, "drives"))
srv.start()
env = dict(os.environ, AWS_ACCESS_KEY_ID=bl.ACCESS,
           AWS_SECRET_ACCESS_KEY=bl.SECRET)


def mount(bindir, opts=""):
    mnt = tempfile.mkdtemp(prefix="m-", dir=work)
    o = "endpoint=%s%s" % (srv.endpoint, ("," + opts) if opts else "")
    subprocess.run([os.path.join(bindir, "ecfs"), "lsl", mnt, "-o", o],
                   check=True, env=env)
    return mnt


def umount(mnt):
    subprocess.run(["fusermount3", "-u", mnt], check=True)
    time.sleep(0.3)


def stats(mnt):
    out = {}
    with open(os.path.join(mnt, ".ecfs-stats")) as f:
        for line in f:
            k, v = line.split()
            out[k] = int(v)
    return out


def timed(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


try:
    import boto3
    from botocore.config import Config
    s3 = boto3.client("s3", endpoint_url=srv.endpoint,
                      aws_access_key_id=bl.ACCESS,
                      aws_secret_access_key=bl.SECRET, region_name="us-east-1",
                      config=Config(s3={"addressing_style": "path"}))
    s3.create_bucket(Bucket="lsl")
    paths = [os.path.join(d, n) for d, _, fs in os.walk(data) for n in fs]
    bl.BUCKET = "lsl"
    bl.upload_tree(srv.endpoint, data, paths, "up/")
    m = mount(a.new)
    subprocess.run(["cp", "-r", data, os.path.join(m, "ecfs")], check=True)
    umount(m)
    res = {}
    for r in range(a.rounds):
        for name, bindir in ((("base", a.base), ("new", a.new))
                             if r % 2 == 0 else
                             (("new", a.new), ("base", a.base))):
            for tree, opts in (("up", ""), ("ecfs", ""),
                               ("up", "allow_other")):
                key = (name, tree, opts)
                m = mount(bindir, opts)
                s0 = stats(m)
                cold = timed(["ls", "-lR", os.path.join(m, tree)])
                s1 = stats(m)
                warm = timed(["ls", "-lR", os.path.join(m, tree)])
                s2 = stats(m)
                umount(m)
                m = mount(bindir, opts)
                f0 = stats(m)
                find = timed(["find", os.path.join(m, tree), "-type", "f"])
                f1 = stats(m)
                umount(m)
                res.setdefault(key, []).append(
                    (cold, warm, find, s1["head"] - s0["head"],
                     s1["list"] - s0["list"], s2["head"] - s1["head"],
                     f1["head"] - f0["head"]))
                print(name, tree, opts or "-", "cold %.2f s warm %.2f s "
                      "find %.2f s; HEAD cold %d LIST %d, warm HEAD %d, "
                      "find HEAD %d" % res[key][-1], flush=True)
    print("\n| build | tree | mount | ls -lR cold s | warm s | find s | "
          "HEAD cold | HEAD warm | HEAD find |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key, v in res.items():
        med = [statistics.median(x[i] for x in v) for i in range(7)]
        def rng(i, v=v, med=med):
            return "%.2f [%.2f-%.2f]" % (med[i], min(x[i] for x in v),
                                         max(x[i] for x in v))
        print("| %s | %s | %s | %s | %s | %s | %d | %d | %d |" % (
            key[0], key[1], key[2] or "default", rng(0), rng(1), rng(2),
            med[3], med[5], med[6]))
finally:
    srv.stop()
    for line in open("/proc/self/mountinfo"):
        if work in line:
            subprocess.run(["fusermount3", "-u", "-z", line.split()[4]])
    shutil.rmtree(work, ignore_errors=True)
