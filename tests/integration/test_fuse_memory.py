"""ecfs's memory per directory entry (fuse/README.md, "Memory"): a ro
mount of a 10^5- and a 10^6-entry directory, listed (ls -f | wc -l) and
scanned (find), grows ecfs's anonymous RSS by at most 200 bytes per entry
(the listing: one arena of names and ETags, 48-byte entries; readdirplus
of a directory past 16384 entries makes no inodes). The directory is
served by a fake listing server (tests/integration/fake_list_server.py):
filling a real bucket with 10^6 objects takes too long for the suite.
Entries still look up and read: a stat and a read of one file at the end."""

import os
import subprocess

import pytest

from fake_list_server import FakeListServer
from fuse_util import mount_of, rss_anon_kib

PER_ENTRY = 200


@pytest.mark.parametrize("n", [100000, 1000000])
def test_listing_rss_per_entry(n, ecfs_mount):
    srv = FakeListServer(n).start()
    try:
        m = mount_of(srv, ecfs_mount, "b", opts=["ro"])
        pid = m.pids()[0]
        before = rss_anon_kib(pid)
        d = os.path.join(m.path, "d")
        out = subprocess.run("ls -f '%s' | wc -l" % d, shell=True,
                             capture_output=True, text=True, timeout=300)
        assert int(out.stdout) == n + 2  # . and ..
        out = subprocess.run("find '%s' | wc -l" % d, shell=True,
                             capture_output=True, text=True, timeout=300)
        assert int(out.stdout) == n + 1
        grown = (rss_anon_kib(pid) - before) * 1024
        assert grown <= PER_ENTRY * n, "%.0f bytes per entry" % (grown / n)
        s = m.stats()
        # the pages of d/ and the lookup probe of d; no inode per entry
        assert n // 1000 <= s["list"] <= n // 1000 + 2, s
        assert s["inodes"] < 100, s
        name = "f%07d" % (n - 3)
        assert os.stat(os.path.join(d, name)).st_size == 1000
        with open(os.path.join(d, name), "rb") as f:
            assert f.read() == b"x" * 1000
        print("n=%d: %.0f bytes per entry" % (n, grown / n))
        m.unmount()
    finally:
        srv.stop()


PER_INODE = 300  # fuse/README.md "Memory": about 250 B per inode held


@pytest.mark.parametrize("n", [100000])
def test_inode_rss(n, ecfs_mount):
    """stat of every entry (one LOOKUP, one inode each, answered from the
    listing): the RSS grown past the listing's, divided by the inodes ecfs
    holds, stays within PER_INODE (about 860 B before the compact inode).
    bench_inode_mem.py runs the same at 10^6."""
    srv = FakeListServer(n).start()
    try:
        m = mount_of(srv, ecfs_mount, "b", opts=["ro"])
        pid = m.pids()[0]
        d = os.path.join(m.path, "d")
        out = subprocess.run("ls -f '%s' | wc -l" % d, shell=True,
                             capture_output=True, text=True, timeout=300)
        assert int(out.stdout) == n + 2
        before = rss_anon_kib(pid)
        out = subprocess.run("find '%s' -printf '%%s\\n' | sort | uniq -c"
                             % d, shell=True, capture_output=True,
                             text=True, timeout=300)
        # n files of 1000 bytes, and d itself
        assert out.stdout.split()[:2] == [str(n), "1000"], out.stdout
        grown = (rss_anon_kib(pid) - before) * 1024
        # the most held at once: another process's drop_caches (benchmarks
        # do it) makes the kernel forget inodes, but not the memory they took
        inodes = m.stats()["inodes_peak"]
        assert inodes >= n // 2, inodes  # the kernel kept most of them
        assert grown <= PER_INODE * inodes, "%.0f bytes per inode" % (
            grown / inodes)
        print("n=%d: %d inodes, %.0f bytes per inode" % (n, inodes,
                                                         grown / inodes))
        m.unmount()
    finally:
        srv.stop()
