#!/usr/bin/python3
"""tests/bench/bench_pack_index.py - how a big pack index loads.

What: `ecfs pack` of N empty files in D folders, then, per repetition, a
fresh ecfs mount of the pack (page cache dropped first): the mount time
(until the root lists), the `find MNT` time, mount + find, and the ecfs
daemon's memory after the find: VmRSS, RssAnon (heap: what the index costs
in RAM), RssFile (mapped index pages, reclaimable) and VmHWM (peak). With
`--opts cache_dir=DIR` the index is kept as a file in DIR/pack/ and mapped
(fuse/PACK.md), and the second mount of it GETs nothing but one HEAD.

How: the tree is made in --workdir (default /dev/shm: N inodes of tmpfs),
storaged runs on 4 drive folders in a temporary folder on a free port,
everything is removed at exit. Figures are medians with [min..max].

Usage: bench_pack_index.py [--members 1000000] [--dirs 1000] [--repeat 3]
       [--opts cache_dir=/var/tmp/ecfs-cache] [--workdir DIR] [--keep-tree]
       [--lock FILE] [--synthetic]
--synthetic skips the tree and `ecfs pack`: the index `ecfs pack` would
write for it is made by tests/bench/pack_index_gen.c (the packer's own
fc_pack_encode, built against build/rel/libecfs.a) with one shard, for sizes
past the inodes a machine can spare (10^7); the mount and find are the same.
Environment: ECFS_BIN_DIR (default <repo>/bin).
"""

import argparse
import atexit
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_loader as bl  # noqa: E402  (Storaged, drop_caches, is_mounted)


def make_tree(root, members, dirs):
    """N empty files in D folders under @root (kept when complete)."""
    stamp = root + ".stamp"  # beside the tree: not a member
    want = "%d %d\n" % (members, dirs)
    if os.path.exists(stamp) and open(stamp).read() == want:
        return
    shutil.rmtree(root, ignore_errors=True)
    if os.path.exists(stamp):
        os.unlink(stamp)
    os.makedirs(root)
    per = -(-members // dirs)
    n = 0
    for d in range(dirs):
        dp = os.path.join(root, "d%05d" % d)
        os.mkdir(dp)
        for _ in range(min(per, members - n)):
            os.close(os.open(os.path.join(dp, "f%08d" % n),
                             os.O_CREAT | os.O_WRONLY, 0o644))
            n += 1
    with open(stamp, "w") as f:
        f.write(want)


def synthetic_pack(a, srv, work):
    """--synthetic: the index `ecfs pack` would write for the tree, made by
    tests/bench/pack_index_gen.c (built here against build/rel/libecfs.a)
    and uploaded with one empty-member shard, so the tree need not exist."""
    import boto3
    gen = os.path.join(work, "pack_index_gen")
    rel = os.path.join(bl.REPO, "build", "rel")
    subprocess.run(["cc", "-O2", "-std=c11", "-D_GNU_SOURCE", "-I", bl.REPO,
                    "-o", gen, os.path.join(bl.REPO, "tests", "bench",
                                            "pack_index_gen.c"),
                    os.path.join(rel, "libecfs.a"),
                    os.path.join(rel, "libcommon.a"), "-lisal", "-lcrypto",
                    "-pthread"],
                   check=True)
    idx = os.path.join(work, "index")
    shard = b"\0" * 1536  # one empty member's header + the end blocks
    subprocess.run([gen, str(a.members), str(a.dirs), str(len(shard)), idx],
                   check=True, stdout=subprocess.DEVNULL)
    s3 = boto3.client("s3", endpoint_url=srv.endpoint,
                      aws_access_key_id=bl.ACCESS,
                      aws_secret_access_key=bl.SECRET,
                      region_name="us-east-1")
    s3.put_object(Bucket=bl.BUCKET, Key="packed/.ecfs-pack/shard-000000.tar",
                  Body=shard)
    s3.upload_file(idx, bl.BUCKET, "packed/.ecfs-pack/index")
    os.unlink(idx)


def status(pid):
    """kB fields of /proc/PID/status we report."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                out[k] = int(v.split()[0])
    return out


def med(xs):
    return "%.2f [%.2f..%.2f]" % (statistics.median(xs), min(xs), max(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--members", type=int, default=1000000)
    ap.add_argument("--dirs", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--opts", default="",
                    help="extra -o options of the mount (e.g. cache_dir=D)")
    ap.add_argument("--workdir", default="/dev/shm")
    ap.add_argument("--keep-tree", action="store_true",
                    help="keep the generated tree for the next run")
    ap.add_argument("--synthetic", action="store_true",
                    help="no tree and no `ecfs pack`: the same index made "
                    "by tests/bench/pack_index_gen.c (for 10^7 members)")
    ap.add_argument("--lock", metavar="FILE",
                    help="flock FILE around each measured mount + find "
                    "(not the tree and the pack), to take turns with other "
                    "benchmarks")
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="ecfs-packidx-")
    tree = os.path.join(a.workdir, "ecfs-packidx-tree")
    srv = bl.Storaged(os.path.join(work, "drives"), ndrives=4)
    procs = []

    def cleanup():
        for p, mnt in procs:
            if bl.is_mounted(mnt):
                subprocess.run(["fusermount3", "-uz", mnt],
                               capture_output=True)
            if p.poll() is None:
                p.kill()
                p.wait()
        srv.stop()
        shutil.rmtree(work, ignore_errors=True)
        if not a.keep_tree:
            shutil.rmtree(tree, ignore_errors=True)
            if os.path.exists(tree + ".stamp"):
                os.unlink(tree + ".stamp")
    atexit.register(cleanup)

    if not a.synthetic:
        t0 = time.perf_counter()
        make_tree(tree, a.members, a.dirs)
        bl.log("tree of %d files in %d folders at %s (%.1f s)"
               % (a.members, a.dirs, tree, time.perf_counter() - t0))
    srv.start()
    env = dict(os.environ, AWS_ACCESS_KEY_ID=bl.ACCESS,
               AWS_SECRET_ACCESS_KEY=bl.SECRET)
    ecfs = os.path.join(bl.BIN, "ecfs")
    subprocess.run([sys.executable, "-c",
                    "import boto3; boto3.client('s3', endpoint_url='%s', "
                    "region_name='us-east-1').create_bucket(Bucket='%s')"
                    % (srv.endpoint, bl.BUCKET)], env=env, check=True)
    t0 = time.perf_counter()
    if a.synthetic:
        synthetic_pack(a, srv, work)
        out = "synthetic index of %d members" % a.members
    else:
        p = subprocess.Popen([ecfs, "pack", tree, "%s:packed" % bl.BUCKET,
                              "-q", "-o", "endpoint=" + srv.endpoint],
                             env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        out = p.communicate()[0].decode()
        if p.returncode != 0:
            raise SystemExit("ecfs pack failed: %s" % out)
    pack_s = time.perf_counter() - t0
    pack_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    bl.log(out.strip())

    rows = []
    for rep in range(a.repeat):
        with bl.peer_lock(a.lock):
            rows.append(measure(a, srv, env, ecfs, work, procs, rep))
    report(a, rows, pack_s, pack_rss)


def measure(a, srv, env, ecfs, work, procs, rep):
    """One fresh mount (page cache dropped) and a find of it: a row."""
    bl.drop_caches()
    mnt = os.path.join(work, "mnt%d" % rep)
    os.makedirs(mnt)
    opts = "endpoint=%s,ro" % srv.endpoint + (
        "," + a.opts if a.opts else "")
    t0 = time.perf_counter()
    m = subprocess.Popen([ecfs, "%s:packed" % bl.BUCKET, mnt, "-f", "-o",
                          opts], env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(work, "ecfs.log"), "a"))
    procs.append((m, mnt))
    while True:
        if m.poll() is not None:
            raise SystemExit("ecfs exited %s" % m.returncode)
        if bl.is_mounted(mnt):
            try:
                os.listdir(mnt)
                break
            except OSError:
                pass
        time.sleep(0.01)
    mount_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    f = subprocess.run(["find", mnt], capture_output=True)
    find_s = time.perf_counter() - t0
    lines = f.stdout.count(b"\n")
    st = status(m.pid)
    with open(os.path.join(mnt, ".ecfs-stats")) as sf:
        kv = dict(x.split()[:2] for x in sf.read().splitlines()
                  if len(x.split()) >= 2)
    subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
    m.wait(30)
    row = dict(mount=mount_s, find=find_s, lines=lines, **st,
               index=int(kv.get("pack_index_bytes", 0)),
               mapped=kv.get("pack_index_mapped", "?"))
    bl.log("mount %.2f s, find %.2f s (%d lines), RSS %d kB (anon %d, "
           "file %d, peak %d), index mapped %s"
           % (mount_s, find_s, lines, st["VmRSS"], st["RssAnon"],
              st["RssFile"], st["VmHWM"], row["mapped"]))
    return row


def report(a, rows, pack_s, pack_rss):
    """The Markdown summary of @rows on stdout."""
    n = a.members
    print("## Pack index load: %d members in %d folders (%s%s)\n"
          % (n, a.dirs, "-o " + a.opts if a.opts else "index in memory",
             ", synthetic index" if a.synthetic else ""))
    print("Command: tests/bench/bench_pack_index.py %s\n"
          % " ".join(sys.argv[1:]))
    print("- %s: %.1f s, peak RSS %.0f MiB; index %d bytes "
          "(%.1f B/member)" % ("index made and uploaded" if a.synthetic
                               else "`ecfs pack`", pack_s, pack_rss / 1024,
                               rows[0]["index"], rows[0]["index"] / n))
    print("- mount s: %s" % med([r["mount"] for r in rows]))
    print("- find s: %s (%d lines)" % (med([r["find"] for r in rows]),
                                        rows[0]["lines"]))
    print("- mount + find s: %s" % med([r["mount"] + r["find"]
                                         for r in rows]))
    for k in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
        xs = [r[k] for r in rows]
        print("- %s after find: %.0f MiB [%.0f..%.0f] = %.1f B/member"
              % (k, statistics.median(xs) / 1024, min(xs) / 1024,
                 max(xs) / 1024, statistics.median(xs) * 1024 / n))
    print("- index mapped from the cache directory: %s" % rows[0]["mapped"])
    print("- machine: %d cores, load average %.1f at the end"
          % (os.cpu_count(), os.getloadavg()[0]))


if __name__ == "__main__":
    main()
