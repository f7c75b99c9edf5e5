"""ecfs monitoring (issue 19): -o metrics=HOST:PORT (Prometheus text),
-o otlp_endpoint= (OTLP/HTTP JSON push), scraped by a real Prometheus next
to storaged, after a known workload on a real FUSE mount: N cold reads of
small files (N GETs, N block-cache misses, N reader waits), M re-reads from
the block cache (page cache dropped with fadvise: M hits, no GET), and one
sequential read of a multi-block file (readahead: prefetch issued and used);
readahead used and wasted on ro and rw mounts (a whole sequential read uses
all it fetched; a partial read followed by a file larger than the cache
wastes what was fetched past it).
"""

import os
import socket
import statistics
import subprocess
import time
import urllib.request

import pytest

from fuse_util import ECFS, client_bucket, mount_of
from otlp_util import OtlpReceiver, Prometheus, free_port, parse_prom

N = 20  # small files read cold
M = 12  # of them read again from the block cache


def scrape(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                timeout=5) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        return parse_prom(r.read().decode())[0]


def read_file(path, drop=False):
    t = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        if drop:  # out of the page cache: the next read reaches ecfs
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            t = time.perf_counter()
        data = b""
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            data += b
    finally:
        os.close(fd)
    return data, time.perf_counter() - t


def v(series, name, **labels):
    return series.get((name, tuple(sorted(labels.items()))), 0)


def settled(port, done, timeout=5):
    """The series once done(series) holds (or after @timeout s: the
    assertions that follow then say what is missing)."""
    end = time.time() + timeout
    s = scrape(port)
    while not done(s) and time.time() < end:
        time.sleep(0.05)
        s = scrape(port)
    return s


def test_ecfs_metrics_otlp_and_prometheus(storaged, ecfs_mount, tmp_path):
    srv = storaged()
    c, bucket = client_bucket(srv)
    for i in range(2 * N):
        c.put_object(Bucket=bucket, Key="small/f%03d" % i,
                     Body=bytes([i]) * 4096)
    big = os.urandom(8 << 20)
    c.put_object(Bucket=bucket, Key="big.bin", Body=big)
    rx = OtlpReceiver()
    mport = free_port()
    prom = None
    try:
        m = mount_of(srv, ecfs_mount, bucket, opts=[
            "ro", "metrics=127.0.0.1:%d" % mport,
            "otlp_endpoint=" + rx.url, "otlp_interval=0.3",
            "dir_prefetch=0", "list_prefetch=0", "block_size=1M", "whole_max=0",
            "cache_dir=" + str(tmp_path / "dcache")])
        prom = Prometheus(os.path.join(m.workdir, "prom"), {
            "storaged": "127.0.0.1:%d" % srv.port,
            "ecfs": "127.0.0.1:%d" % mport})
        names = sorted(os.listdir(os.path.join(m.path, "small")))
        assert len(names) == 2 * N
        gets0 = v(scrape(mport), "ecfs_s3_requests_total", api="GetObject",
                  status="200")
        assert gets0 == 0
        cold = []
        for i, n in enumerate(names[:N]):
            data, dt = read_file(os.path.join(m.path, "small", n))
            assert data == bytes([i]) * 4096
            cold.append(dt)
        for i, n in enumerate(names[:M]):
            data, _ = read_file(os.path.join(m.path, "small", n), drop=True)
            assert data == bytes([i]) * 4096
        # a FUSE operation is counted when its handler returns, just after
        # its reply, and a disk-cache store by the writer thread: the last
        # counts may land after read() returned
        s = settled(mport, lambda s: v(
            s, "ecfs_fuse_operation_duration_seconds_count", op="read") >=
            N + M and v(s, "ecfs_disk_cache_stores_total") >= N)
        assert v(s, "ecfs_s3_requests_total", api="GetObject",
                 status="200") == N
        assert v(s, "ecfs_block_cache_misses_total") == N
        assert v(s, "ecfs_block_cache_hits_total") == M
        assert v(s, "ecfs_reader_wait_duration_seconds_count") == N
        assert 0 < v(s, "ecfs_reader_wait_seconds_total") == \
            v(s, "ecfs_reader_wait_duration_seconds_sum")
        assert v(s, "ecfs_s3_request_duration_seconds_count",
                 api="GetObject") == N
        assert v(s, "ecfs_s3_received_bytes_total", api="GetObject") == \
            N * 4096
        assert v(s, "ecfs_read_bytes_total") == (N + M) * 4096
        assert v(s, "ecfs_fuse_operation_duration_seconds_count",
                 op="read") == N + M
        assert v(s, "ecfs_fuse_operation_duration_seconds_count",
                 op="lookup") >= 1  # readdirplus answered most
        assert v(s, "ecfs_fuse_operation_duration_seconds_count",
                 op="readdirplus") >= 1
        assert v(s, "ecfs_s3_retries_total") == 0
        # the disk cache under the block cache: each miss looked there first
        assert v(s, "ecfs_disk_cache_misses_total") == N
        assert v(s, "ecfs_disk_cache_stores_total") == N
        assert v(s, "ecfs_disk_cache_hits_total") == 0
        assert v(s, "ecfs_disk_cache_files") == N
        # a sequential read of 8 blocks: readahead fetches ahead (the
        # kernel's parallel reads may claim the first ones), reads use it
        data, _ = read_file(os.path.join(m.path, "big.bin"))
        assert data == big
        s = scrape(mport)
        issued = v(s, "ecfs_prefetch_issued_bytes_total", kind="readahead")
        assert (1 << 20) <= issued <= len(big), issued
        assert v(s, "ecfs_prefetch_issued_bytes_total", kind="dir") == 0
        # the push carries the same values, with the resource attributes
        key = ("ecfs_block_cache_hits_total", ())
        hits = v(s, "ecfs_block_cache_hits_total")  # M + the big file's
        assert hits >= M + 1
        ra = ("ecfs_prefetch_issued_bytes_total", (("kind", "readahead"),))
        res, pushed, kinds = rx.wait_for(
            "ecfs", lambda p: p.get(ra) == issued and p.get(key) == hits)
        assert res["service.instance.id"].endswith(":" + m.path)
        assert kinds["ecfs_s3_requests_total"] == "counter"
        assert kinds["ecfs_reader_wait_duration_seconds"] == "histogram"
        assert pushed[("ecfs_s3_requests_total",
                       (("api", "GetObject"), ("status", "200")))] == \
            v(s, "ecfs_s3_requests_total", api="GetObject", status="200")
        h = pushed[("ecfs_reader_wait_duration_seconds", ())]
        assert h["count"] == v(s, "ecfs_reader_wait_duration_seconds_count")
        assert h["sum"] > 0
        # the collector goes away: reads cost the same, pushes resume
        rx.stop()
        down = []
        for i, n in enumerate(names[N:]):
            data, dt = read_file(os.path.join(m.path, "small", n))
            assert data == bytes([N + i]) * 4096
            down.append(dt)
        base = statistics.median(cold)
        assert statistics.median(down) < max(5 * base, base + 0.02), \
            (cold, down)
        n0 = rx.count("ecfs")
        rx.start()
        rx.wait_for("ecfs", lambda p: rx.count("ecfs") > n0)
        assert sum("otlp: push to" in ln
                   for ln in m.log_text().splitlines()) <= 1
        # Prometheus scraped both; PromQL gives the GET counts
        # (only ecfs sends GETs to this storaged: the two counts agree)
        q_e = 'sum(ecfs_s3_requests_total{api="GetObject"})'
        q_s = 'sum(storaged_requests_total{api="GetObject"})'
        now = scrape(mport)
        gets = sum(val for (name, lab), val in now.items()
                   if name == "ecfs_s3_requests_total" and
                   ("api", "GetObject") in lab)
        assert v(now, "ecfs_s3_requests_total", api="GetObject",
                 status="206") >= 2  # the big file's range GETs
        assert gets >= 2 * N + 1  # small files, then the big file's GETs
        end = time.time() + 20
        while time.time() < end:
            e, st = prom.query(q_e), prom.query(q_s)
            if e and st and e[0][1] == gets and st[0][1] == gets:
                break
            time.sleep(0.5)
        assert prom.targets_up() == {"storaged": "up", "ecfs": "up"}
        assert e and e[0][1] == gets, (e, gets)
        assert st and st[0][1] == gets, (st, gets)
        q = ('sum(ecfs_block_cache_hits_total) / (sum(ecfs_block_cache_'
             'hits_total) + sum(ecfs_block_cache_misses_total))')
        (_, ratio), = prom.query(q)
        assert 0 < ratio < 1
    finally:
        if prom:
            prom.stop()
        rx.stop()


def test_ecfs_directory_prefetch_series(storaged, ecfs_mount):
    """Directory prefetch (dir_prefetch=2): after two small files of a
    directory were read the others are fetched ahead; the series show the
    bytes issued and used, none wasted, and fewer reader GETs than files."""
    srv = storaged()
    c, bucket = client_bucket(srv)
    for i in range(12):
        c.put_object(Bucket=bucket, Key="d/f%02d" % i, Body=b"p" * 8192)
    mport = free_port()
    m = mount_of(srv, ecfs_mount, bucket, opts=[
        "ro", "metrics=127.0.0.1:%d" % mport, "dir_prefetch=2"])
    d = os.path.join(m.path, "d")
    for n in sorted(os.listdir(d)):
        assert read_file(os.path.join(d, n))[0] == b"p" * 8192
        time.sleep(0.02)  # as a training loop would, between samples
    s = scrape(mport)
    issued = v(s, "ecfs_prefetch_issued_bytes_total", kind="dir")
    used = v(s, "ecfs_prefetch_used_bytes_total", kind="dir")
    assert 0 < used <= issued <= 10 * 8192, (used, issued)
    assert v(s, "ecfs_prefetch_wasted_bytes_total", kind="dir") == 0
    assert v(s, "ecfs_prefetch_unread_bytes", kind="dir") == issued - used
    assert v(s, "ecfs_block_cache_misses_total") < 12


RA_OPTS = ["dir_prefetch=0", "list_prefetch=0", "block_size=1M",
           "whole_max=0", "readahead_init=1M", "readahead_max=2M",
           "part_size=1M"]


def ra_series(s):
    return tuple(v(s, "ecfs_prefetch_%s_bytes_total" % k, kind="readahead")
                 for k in ("issued", "used", "wasted"))


def ra_stats(m):
    st = m.stats()
    return (st["readahead_bytes"], st["readahead_used_bytes"],
            st["readahead_wasted_bytes"])


@pytest.mark.parametrize("ro", [True, False])
def test_ecfs_readahead_series(storaged, ecfs_mount, ro):
    """Readahead used and wasted: a whole sequential read of a file six
    readahead windows long (readahead_max=2M) with the default 1 GiB cache
    uses every block readahead fetched (used == issued > 0, none wasted),
    on ro and rw mounts alike; .ecfs-stats has the same figures."""
    srv = storaged()
    c, bucket = client_bucket(srv)
    body = os.urandom(12 << 20)
    c.put_object(Bucket=bucket, Key="seq.bin", Body=body)
    mport = free_port()
    m = mount_of(srv, ecfs_mount, bucket, opts=(["ro"] if ro else []) + [
        "metrics=127.0.0.1:%d" % mport] + RA_OPTS)
    assert read_file(os.path.join(m.path, "seq.bin"))[0] == body
    issued, used, wasted = ra_series(scrape(mport))
    assert (1 << 20) <= issued <= len(body), issued
    assert used == issued and wasted == 0, (issued, used, wasted)
    assert ra_stats(m) == (issued, used, wasted)


def test_ecfs_readahead_wasted(storaged, ecfs_mount):
    """Readahead wasted: the first 3 MiB of a 16 MiB file read in order
    (readahead runs ahead of the last read, which is not at EOF), then 4 KiB
    at each MiB of a 12 MiB file opened for random reads, through an 8 MiB
    cache: the twelve blocks of those, read only in part, evict the first
    file's (blocks read whole went to the page cache and would leave first,
    fc_cache_handed), and those readahead fetched and nobody read count as
    wasted; used + wasted <= issued."""
    srv = storaged()
    c, bucket = client_bucket(srv)
    a, b = os.urandom(16 << 20), os.urandom(12 << 20)
    c.put_object(Bucket=bucket, Key="a.bin", Body=a)
    c.put_object(Bucket=bucket, Key="b.bin", Body=b)
    mport = free_port()
    m = mount_of(srv, ecfs_mount, bucket, opts=[
        "ro", "metrics=127.0.0.1:%d" % mport, "cache_size=8M"] + RA_OPTS)
    with open(os.path.join(m.path, "a.bin"), "rb") as f:
        for i in range(3):
            assert f.read(1 << 20) == a[i << 20:(i + 1) << 20]
    assert ra_series(scrape(mport))[0] > 0
    fd = os.open(os.path.join(m.path, "b.bin"), os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        for i in range(12):
            assert os.pread(fd, 4096, i << 20) == b[i << 20:(i << 20) + 4096]
    finally:
        os.close(fd)
    issued, used, wasted = ra_series(scrape(mport))
    assert wasted > 0 and used > 0, (issued, used, wasted)
    assert used + wasted <= issued, (issued, used, wasted)
    assert ra_stats(m) == (issued, used, wasted)


def test_ecfs_metrics_bad_options(storaged, tmp_path):
    srv = storaged()
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    env = dict(os.environ, AWS_ACCESS_KEY_ID=srv.access_key,
               AWS_SECRET_ACCESS_KEY=srv.secret_key)
    try:
        for opt, msg in (("metrics=nohostport", "bad -o metrics=nohostport"),
                         ("metrics=127.0.0.1:%d" % busy.getsockname()[1],
                          "cannot listen on"),
                         ("otlp_endpoint=localhost:4318",
                          "bad -o otlp_endpoint="),
                         ("otlp_interval=-1", "bad otlp_interval")):
            p = subprocess.run([ECFS, "b", str(mnt), "-o",
                                "endpoint=%s,%s" % (srv.endpoint, opt)],
                               capture_output=True, text=True, env=env,
                               timeout=20)
            assert p.returncode != 0 and msg in p.stderr, (opt, p.stderr)
            assert not os.path.ismount(str(mnt))
    finally:
        busy.close()
