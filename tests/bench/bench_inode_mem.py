#!/usr/bin/python3
"""tests/bench/bench_inode_mem.py - ecfs's heap per directory entry and per
inode at 10^5..10^6 files (issue 16), this build beside another
(--base-bin), on the fake listing server of test_fuse_memory.py (one
directory d/ of N files, answered from arithmetic).

For each N and build: a ro mount; RssAnon before, after `ls -f d | wc -l`
(the listing: bytes per entry) and after `find d -printf '%s\\n'` (a stat,
so a LOOKUP and an inode, per entry: bytes per inode held, divided by the
inodes .ecfs-stats counts).

Usage: bench_inode_mem.py [--sizes 100000,1000000] [--base-bin DIR]
"""

import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from fake_list_server import FakeListServer  # noqa: E402
import fuse_util  # noqa: E402


def run(n, ecfs, work):
    srv = FakeListServer(n).start()
    m = fuse_util.Mount(work, srv.endpoint, "b", opts=["ro"],
                        access_key="fake", secret_key="fake",
                        foreground=True)
    m.argv[0] = ecfs
    try:
        m.start(timeout=60)
        pid = m.proc.pid
        d = os.path.join(m.path, "d")
        r0 = fuse_util.rss_anon_kib(pid)
        out = subprocess.run("ls -f '%s' | wc -l" % d, shell=True,
                             capture_output=True, text=True, timeout=900)
        assert int(out.stdout) == n + 2, out.stdout
        r1 = fuse_util.rss_anon_kib(pid)
        out = subprocess.run("find '%s' -printf '%%s\\n' | wc -l" % d,
                             shell=True, capture_output=True, text=True,
                             timeout=1800)
        assert int(out.stdout) == n + 1, out.stdout
        r2 = fuse_util.rss_anon_kib(pid)
        with open(os.path.join(m.path, ".ecfs-stats")) as f:
            inodes = fuse_util.parse_stats(f.read())["inodes"]
    finally:
        if fuse_util.is_mounted(m.path):
            subprocess.run(["fusermount3", "-u", m.path])
        if m.proc is not None:
            m.proc.wait(30)
        srv.stop()
    return ((r1 - r0) * 1024.0 / n, (r2 - r1) * 1024.0 / max(inodes, 1),
            inodes, r2 / 1024.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--base-bin", default=None)
    a = ap.parse_args()
    builds = [("this", os.path.join(fuse_util.BIN_DIR, "ecfs"))]
    if a.base_bin:
        builds.append(("base", os.path.join(a.base_bin, "ecfs")))
    work = tempfile.mkdtemp(prefix="bench-inode-")
    print("| N | build | B/entry (ls -f) | B/inode (find -printf) | inodes "
          "| RssAnon MiB |")
    print("|---|---|---|---|---|---|")
    for n in [int(x) for x in a.sizes.split(",")]:
        for name, ecfs in builds:
            e, i, cnt, rss = run(n, ecfs, work)
            print("| %d | %s | %.0f | %.0f | %d | %.0f |" % (n, name, e, i,
                                                            cnt, rss),
                  flush=True)
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
