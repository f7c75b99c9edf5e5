"""The .ecfs-stats file and `ecfs stats`, against a real storaged and real
FUSE mounts: the file is "name value" lines with no padding, its size is
the size of what a read returns, a reader reading in small pieces while
the counters move gets one whole snapshot (rw: direct_io handles; ro: the
kernel skips OPEN and reads through the page cache); `ecfs stats MOUNT`
prints the same figures; a held descriptor read again from 0 gets fresh
figures, whole; `ecfs stats -w 1` rates add up to a known read
workload (N files read: the get column adds up to N); clear errors and
exit status 1 for a directory that is not an ecfs mount or has no stats
file, 2 for bad arguments."""

import os
import queue
import re
import subprocess
import threading
import time

import pytest

from fuse_util import ECFS, client_bucket, mount_of, parse_stats

# every counter the file had before it became lines (names are stable)
NAMES = ("get head list retries errors bytes etag_mismatch put parts mpu "
         "del copy bytes_up reads read_gets readahead_gets dir_prefetch_gets "
         "list_prefetches writes streamed staged commits commit_errors efbig "
         "inodes cache_bytes cache_blocks").split()
LINE = re.compile(r"^[a-z_]+ [0-9]+$")


@pytest.fixture
def srv(storaged):
    return storaged()


def filled(srv, n=40, prefix="rv"):
    c, b = client_bucket(srv, prefix)
    for i in range(n):
        c.put_object(Bucket=b, Key="d/f%03d" % i, Body=b"x" * (1000 + i))
    return c, b


def read_all(m, n):
    for i in range(n):
        with open(os.path.join(m.path, "d", "f%03d" % i), "rb") as f:
            assert len(f.read()) == 1000 + i


def check_text(text):
    assert text.endswith("\n"), repr(text[-40:])
    lines = text[:-1].split("\n")
    for line in lines:
        assert LINE.match(line), repr(line)
    return parse_stats(text)


@pytest.mark.parametrize("ro", [False, True])
def test_cat_is_lines_and_size_is_true(srv, ecfs_mount, ro):
    c, b = filled(srv, 4)
    m = mount_of(srv, ecfs_mount, b, opts=["ro"] if ro else None)
    read_all(m, 4)  # ro: the first open answered ENOSYS, the kernel stops
    p = os.path.join(m.path, ".ecfs-stats")
    out = subprocess.run(["cat", p], capture_output=True, check=True).stdout
    text = out.decode()
    assert "  " not in text and len(text) < 2048, repr(text)
    st = check_text(text)
    assert set(NAMES) <= set(st), set(NAMES) - set(st)
    assert st["get"] == 4 and st["reads"] >= 4
    # nothing moves on an idle mount: a fresh look has the same size and
    # Python's read (size from fstat, then to EOF) the same bytes
    assert os.stat(p).st_size == len(out)
    with open(p, "rb") as f:
        assert os.fstat(f.fileno()).st_size == len(out)
        assert f.read() == out
    with open(p) as f:
        assert parse_stats(f.read()) == st
    assert ".ecfs-stats" not in os.listdir(m.path)


@pytest.mark.parametrize("ro", [False, True])
def test_small_pieces_one_snapshot(srv, ecfs_mount, ro):
    c, b = filled(srv, 40)
    m = mount_of(srv, ecfs_mount, b, opts=["ro"] if ro else None)
    read_all(m, 1)
    stop = threading.Event()

    def churn():  # moves the counters: lookups and stats of missing names
        i = 0
        while not stop.is_set():
            try:
                os.stat(os.path.join(m.path, "d", "none%d" % i))
            except FileNotFoundError:
                pass
            i += 1
    t = threading.Thread(target=churn)
    t.start()
    try:
        for _ in range(20):
            fd = os.open(os.path.join(m.path, ".ecfs-stats"), os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                parts = []
                while True:
                    piece = os.read(fd, 7)
                    if not piece:
                        break
                    parts.append(piece)
            finally:
                os.close(fd)
            text = b"".join(parts).decode()
            check_text(text)
            if not ro:  # rw: the handle's snapshot is the one fstat saw
                assert len(text) == size, (len(text), size)
    finally:
        stop.set()
        t.join()


def test_stats_command_once(srv, ecfs_mount):
    c, b = filled(srv, 5)
    m = mount_of(srv, ecfs_mount, b)
    read_all(m, 5)
    r = subprocess.run([ECFS, "stats", m.path], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    st = check_text(r.stdout)
    assert st == m.stats()
    assert set(NAMES) <= set(st) and st["get"] == 5


def test_stats_watch_rates_match_reads(srv, ecfs_mount):
    n = 40
    c, b = filled(srv, n)
    m = mount_of(srv, ecfs_mount, b)
    s0 = m.stats()
    p = subprocess.Popen([ECFS, "stats", m.path, "-w", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    lines = queue.Queue()

    def pump():
        for line in p.stdout:
            lines.put(line)
    t = threading.Thread(target=pump, daemon=True)
    t.start()
    try:
        header = lines.get(timeout=10).split()
        assert set(NAMES) <= set(header) and header == list(m.stats())
        got = []
        read_all(m, n)
        s1 = m.stats()
        # two more lines: the one being measured now and one wholly after
        for _ in range(2):
            got.append(lines.get(timeout=10))
        while not lines.empty():
            got.append(lines.get())
    finally:
        p.terminate()
        p.wait(10)
        p.stdout.close()
        p.stderr.close()
    assert s1["get"] - s0["get"] == n  # one GET per small file
    rows = []
    for line in got:
        f = line.split()
        assert len(f) == len(header) and all(x.isdigit() for x in f), line
        rows.append(dict(zip(header, map(int, f))))
    # per-second rates over ~1 s intervals, rounded: they add up to n
    gets = sum(r["get"] for r in rows)
    reads = sum(r["reads"] for r in rows)
    assert abs(gets - n) <= 2 + n // 20, (gets, n, got)
    assert reads >= gets - 2, (reads, gets)
    # gauges are values, not rates
    assert rows[-1]["inodes"] == m.stats()["inodes"] > 0


def test_stats_errors(srv, ecfs_mount, tmp_path):
    def run(*args):
        return subprocess.run([ECFS, "stats"] + list(args),
                              capture_output=True, text=True, timeout=10)
    r = run(str(tmp_path))
    assert r.returncode == 1 and "not a mount point" in r.stderr, r
    r = run("/proc")
    assert r.returncode == 1 and "not an ecfs mount (it is proc)" in \
        r.stderr, r
    r = run(str(tmp_path / "missing"))
    assert r.returncode == 1 and "No such file" in r.stderr, r
    c, b = filled(srv, 1)
    m = mount_of(srv, ecfs_mount, b, opts=["nostats"])
    r = run(m.path)
    assert r.returncode == 1 and "has no .ecfs-stats" in r.stderr and \
        "nostats" in r.stderr, r
    assert run().returncode == 2
    for bad in (["-w", "0"], ["-w", "x"], ["-c", "3"], ["-w", "1", "-c", "0"],
                ["-x"]):
        r = run(m.path, *bad)
        assert r.returncode == 2 and r.stderr.startswith("ecfs stats: "), \
            (bad, r)
    r = run("--help")
    assert r.returncode == 0 and "-w SECONDS" in r.stdout


@pytest.mark.parametrize("ro", [False, True])
def test_held_fd_rereads_fresh_and_whole(srv, ecfs_mount, ro):
    """A monitor keeping the file open and reading it again from 0 gets
    new figures, whole even when the text grew past the size the kernel
    was told at open (rw: direct_io, no i_size bound; ro: the page cache,
    refreshed by the GETATTR of each read once the snapshot is 1 s old)."""
    c, b = filled(srv, 12)
    m = mount_of(srv, ecfs_mount, b, opts=["ro"] if ro else None)
    read_all(m, 1)
    fd = os.open(os.path.join(m.path, ".ecfs-stats"), os.O_RDONLY)
    try:
        first = check_text(os.pread(fd, 65536, 0).decode())
        os.pread(fd, 65536, 0)
        for i in range(1, 12):  # get 1 -> 12, bytes grows a digit or two
            with open(os.path.join(m.path, "d", "f%03d" % i), "rb") as f:
                f.read()
        if ro:
            time.sleep(1.2)
        text = os.pread(fd, 65536, 0).decode()
    finally:
        os.close(fd)
    again = check_text(text)
    assert first["get"] == 1 and again["get"] == 12, (first, again)
    assert set(again) == set(first)
