#!/usr/bin/python3
"""tests/bench/bench_scale.py - does storaged's cost grow with the number of
objects in a bucket? (figures, not pass/fail)

One bucket is filled in steps (default 10^3, 10^5, 10^6 objects) through
the object layer itself (tests/bench/bench_fill.c: fsync off, a clean
close), which is far faster than S3. At each size, through S3 on a real
storaged:
  * start-up time to /health/ready, warm (page cache hot) and cold (the
    index file evicted from the page cache with posix_fadvise DONTNEED;
    a trusted start reads nothing per object), and the server's own
    storaged_index_open_seconds;
  * the background content check of the index after a trusted start
    (storaged_index_verify_seconds): it walks the whole index once, which
    also brings its pages into memory; the rates below are taken after it;
  * the idle server's CPU over --idle-s seconds (no request), as a share
    of one core: it must not grow with the index;
  * RSS after start and after the rate runs (VmRSS, and RssAnon = heap,
    RssFile = mapped files such as the index, which the kernel may drop);
  * (the server runs without its background scanner and drive probe,
    STORAGED_NO_BACKGROUND=1, so their work is not counted per request)
  * PUT (new keys), HEAD and GET of random existing keys over the whole
    bucket ("any": the index plus, at 10^6, a working set of 10^6 records
    and bodies that no longer sits in the CPU caches and TLB), HEAD and
    GET of the same 1000 keys at every size ("hot": obj/000000000..999,
    read once unmeasured first; the cost of the index itself as the
    bucket grows, the working set kept equal), DELETE (the keys just put,
    so the bucket stays at its size) and LIST (ListObjectsV2 pages of
    1000 keys from random start-after markers: "any"; and the page after
    obj/000000000 at every size: "hot"), each --repeat rounds of
    --ops requests with CLIENTS threads, and the server's CPU time per
    request (its threads' on-CPU time from /proc/PID/task/*/schedstat, in
    ns), which is steadier than the rate on a shared machine; beside it,
    the same without the index residency thread ("stor-resident", paced to
    ~0.1 % of a core, whose pass over the whole index file costs ~20 ms at
    10^6 and lands in a short round now and then), whose share per
    request the conditions table gives per round.
Each figure gets a ratio against the first (smallest) row (medians over
the rounds, with the range). A second table gives, per round, what it ran
under: the server's page faults and block reads per request, the kernel's
reclaim scans, the machine's dirty pages, the other cores' load and the
steal, and the index file's page-cache residency (fincore) before and after
the rates. Each fill is followed by a sync (outside the lock), so its
writeback does not run beneath the rounds. The tables are
Markdown; --out FILE also writes them there.

Usage: tests/bench/bench_scale.py [--sizes 1000,100000,1000000]
       [--obj-size BYTES] [--drives N] [--ops N] [--pages N] [--repeat R]
       [--clients N] [--dir DIR] [--keep] [--out FILE] [--no-build]
       [--lock FILE] [--json FILE] [--reuse DIR[,DIR...]] [--fill-only]
       [--idle-s S]
       tests/bench/bench_scale.py --from-json A.json B.json ... [--get-small]
--json writes the rows as JSON; --from-json prints the table of several such
files (ratios against the smallest size), so each size can be its own run
(own --dir), all filled at once and measured one after another.
Last comes a verdict per goal of issue 12, at the largest size against the
smallest: each of PUT, GET (any, hot), DELETE and LIST (any, hot) rate
>= 0.9x (with the CPU per request's ratio, <= 1.11x, beside it), warm
start-up <= 2 s, heap <= 64 MiB, and with --get-small the server CPU per
4 KiB GET of tests/bench/bench_get_small.py (its own server and wrk
clients, --get-small-rounds rounds of 3 s, under --lock) <= 12 us.
--reuse A,B --sizes NA,NB serves several kept stores at once and measures
them side by side: start-up and idle one after the other, then each rate's
rounds alternate between the servers (one round of A, one of B, ...), so a
change in the machine's load falls on both sizes alike (the way to compare
10^3 with 10^6 on a shared machine).
--keep prints where the store stays; --reuse DIR --sizes N measures it
again without a fill (so a second run of the same sizes costs minutes,
not the 10^6 fill). --fill-only fills (and syncs) to the last of --sizes
and keeps the store, measuring nothing: fill while another benchmark holds
the lock, or before a build to be measured exists.
--lock FILE (e.g. /tmp/ecfs-bench.lock on a shared machine) holds an
exclusive flock on FILE during each measurement but not during the fills,
which take minutes at 10^6.
Environment: ECFS_BIN_DIR (default <repo>/bin), BENCH_FILL (the filler
binary; default build/rel/bench/bench_fill, built from the release
libraries), BENCH_DIR (default /tmp).
Disk: about 3 files of one 4 KiB block per object with 4 drives
(2+2; a small object is 1+2), so 10^6 objects take about 12 GB and
3 million inodes under --dir (default /tmp).
"""

import argparse
import concurrent.futures
import contextlib
import fcntl
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import boto3
from botocore.config import Config

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("ECFS_BIN_DIR", os.path.join(REPO, "bin"))
FILL = os.environ.get("BENCH_FILL",
                      os.path.join(REPO, "build", "rel", "bench", "bench_fill"))
AK, SK = "benchroot", "bench-secret-key-0123456789"
BUCKET = "scale"


def build_fill():
    subprocess.run(["make", "-s", "-j2", "build/rel/libstoraged.a",
                    "build/rel/libcommon.a", os.path.join(BIN, "storaged")],
                   cwd=REPO, check=True)
    os.makedirs(os.path.dirname(FILL), exist_ok=True)
    libs = subprocess.run(["pkg-config", "--libs", "libcurl", "openssl",
                           "expat", "liburing"], capture_output=True,
                          text=True, check=True).stdout.split()
    subprocess.run(["cc", "-O2", "-g", "-std=c11", "-D_GNU_SOURCE", "-I.",
                    "-pthread", "-o", FILL, "tests/bench/bench_fill.c",
                    "build/rel/libstoraged.a", "build/rel/libcommon.a"]
                   + libs + ["-lisal", "-llmdb", "-lm"],
                   cwd=REPO, check=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ready(url):
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return r.status == 200
    except Exception:
        return False


def metrics(url):
    """The server's /metrics as {name: float} (unlabelled series)."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and not line.startswith("#") and "{" not in line:
            out[parts[0]] = float(parts[1])
    return out


def wait_index_check(url, timeout=1200):
    """Waits for the background content check of the index (which also
    brings its pages into memory) to finish; the /metrics figures."""
    deadline = time.monotonic() + timeout
    while True:
        m = metrics(url)
        if m.get("storaged_index_verify_done") == 1 or \
                time.monotonic() > deadline:
            return m
        time.sleep(0.05)


def cpu_ns(pid):
    """{thread id: on-CPU ns} of the server's threads, from
    /proc/PID/task/*/schedstat (utime+stime in 10 ms ticks is too coarse
    for a few hundred requests of ~50 µs)."""
    out = {}
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                out[t] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that just ended
    return out


def res_tids(pid):
    """The ids of the server's index residency thread ("stor-resident"): a
    background thread paced to ~0.1 % of a core whose pass walks the whole
    index file, so a short round that a pass overlaps is charged up to a
    pass's CPU (~20 ms at 10^6). Its share is shown apart from the
    requests' own CPU."""
    out = set()
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, t)) as f:
                if f.read().strip() == "stor-resident":
                    out.add(t)
        except OSError:
            pass
    return out


def cpu_delta_s(before, after):
    """CPU seconds between two cpu_ns() snapshots: per thread, so a thread
    that ended meanwhile (e.g. the index check) takes nothing away."""
    return sum(v - before.get(t, 0) for t, v in after.items()) / 1e9


def rss_kib(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile"):
                out[k] = int(v.split()[0])
    return out


def evict(drives):
    """Drops the index (and format/pointer) files from the page cache."""
    for d in drives:
        for root, _, files in os.walk(os.path.join(d, ".ecfs.sys")):
            for f in files:
                p = os.path.join(root, f)
                try:
                    fd = os.open(p, os.O_RDONLY)
                except OSError:
                    continue
                try:
                    os.fdatasync(fd)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)


class Server:
    def __init__(self, drives, log):
        self.drives, self.log = drives, log
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.proc = None

    def start(self):
        # no scanner: its walk of every object would be counted in the
        # server's CPU per request (and grows with the bucket by design)
        env = dict(os.environ, STORAGED_ROOT_USER=AK,
                   STORAGED_ROOT_PASSWORD=SK, STORAGED_NO_BACKGROUND="1")
        t0 = time.monotonic()
        with open(self.log, "ab") as lf:
            self.proc = subprocess.Popen(
                [os.path.join(BIN, "storaged"), "serve", "--address",
                 "127.0.0.1:%d" % self.port] + self.drives,
                stdout=lf, stderr=lf, env=env, start_new_session=True)
        while not ready(self.url + "/health/ready"):
            if self.proc.poll() is not None:
                raise RuntimeError("storaged exited; see " + self.log)
            time.sleep(0.005)
        return time.monotonic() - t0

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(120)
        self.proc = None

    def client(self):
        return boto3.client(
            "s3", endpoint_url=self.url, aws_access_key_id=AK,
            aws_secret_access_key=SK, region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"},
                          retries={"max_attempts": 0},
                          max_pool_connections=64))


def proc_faults(pid):
    """(minor, major) page faults of the whole process so far."""
    with open("/proc/%d/stat" % pid) as f:
        st = f.read().rsplit(")", 1)[1].split()
    return int(st[7]), int(st[9])  # fields 10 and 12 of proc(5)


def proc_read_bytes(pid):
    """Bytes the process made the block layer read (/proc/PID/io)."""
    with open("/proc/%d/io" % pid) as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    return 0


def vm_dirty_mib():
    """Dirty plus under-writeback page cache of the whole machine, MiB."""
    v = {}
    with open("/proc/vmstat") as f:
        for line in f:
            k, _, n = line.partition(" ")
            if k in ("nr_dirty", "nr_writeback"):
                v[k] = int(n)
    return sum(v.values()) * os.sysconf("SC_PAGE_SIZE") / 2**20


def busy_jiffies():
    """(busy, total, steal) jiffies of all CPUs (/proc/stat), for the share
    of the machine the rest of it (and the hypervisor) used in a round."""
    with open("/proc/stat") as f:
        cols = [int(x) for x in f.readline().split()[1:]]
    idle = cols[3] + cols[4]  # idle + iowait
    return sum(cols[:8]) - idle, sum(cols[:8]), cols[7]


def vm_scanned():
    """Pages the kernel's reclaim has scanned so far (kswapd and direct):
    a round that runs under memory pressure shows it."""
    n = 0
    with open("/proc/vmstat") as f:
        for line in f:
            k, _, v = line.partition(" ")
            if k.startswith("pgscan_"):
                n += int(v)
    return n


def resident_mib(paths):
    """Page-cache residency of @paths in MiB (util-linux fincore), or NaN
    when fincore is missing."""
    paths = [p for p in paths if os.path.exists(p)]
    if not paths:
        return 0.0
    try:
        out = subprocess.run(["fincore", "--bytes", "--noheadings",
                              "--output", "RES"] + paths,
                             capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return float("nan")
    return sum(int(x) for x in out.stdout.split()) / 2**20


def settle(srv, idle_s=0.25, timeout=15):
    """Waits until the server is idle (under 2 % of a core over @idle_s):
    work a PUT round leaves behind (commits, syncs) must not be counted
    against the next round's requests."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        c0 = cpu_ns(srv.proc.pid)
        time.sleep(idle_s)
        if cpu_delta_s(c0, cpu_ns(srv.proc.pid)) < 0.02 * idle_s:
            return


def run_ops(srv, clients, items, fn, cond=None):
    """Runs fn(client, item) over items with len(clients) threads; returns
    (ops/s, server CPU µs per op). With @cond (a dict), also what the
    round ran under: the server's minor and major page faults and block
    reads per op, the machine's dirty + writeback MiB at the start, and
    how busy the CPUs were apart from the server (cores)."""
    settle(srv)
    pid = srv.proc.pid
    f0, r0, j0 = proc_faults(pid), proc_read_bytes(pid), busy_jiffies()
    dirty, sc0 = vm_dirty_mib(), vm_scanned()
    c0, t0 = cpu_ns(pid), time.monotonic()
    chunks = [items[i::len(clients)] for i in range(len(clients))]

    def work(i):
        for it in chunks[i]:
            fn(clients[i], it)
    with concurrent.futures.ThreadPoolExecutor(len(clients)) as ex:
        list(ex.map(work, range(len(clients))))
    c1 = cpu_ns(pid)
    dt, dc = time.monotonic() - t0, cpu_delta_s(c0, c1)
    res = sum(c1[t] - c0.get(t, 0) for t in res_tids(pid) if t in c1) / 1e9
    if cond is not None:
        cond["res_us"] = res / len(items) * 1e6
        f1, j1, n = proc_faults(pid), busy_jiffies(), len(items)
        cores = os.cpu_count() or 1
        busy = (j1[0] - j0[0]) / max(1, j1[1] - j0[1]) * cores
        cond.update(minflt=(f1[0] - f0[0]) / n, majflt=(f1[1] - f0[1]) / n,
                    rd_kib=(proc_read_bytes(pid) - r0) / n / 1024,
                    dirty_mib=dirty, other_cores=max(0.0, busy - dc / dt),
                    steal=(j1[2] - j0[2]) / max(1, j1[1] - j0[1]),
                    scanned=(vm_scanned() - sc0) / n)
    return len(items) / dt, dc / len(items) * 1e6


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def repeat_ops(srv, clients, repeat, make_items, fn):
    """run_ops @repeat times (fresh items from make_items() each time);
    returns {"rate": [..], "cpu": [..]} with one figure per round."""
    out = {"rate": [], "cpu": [], "cpu_req": [], "cond": []}
    for _ in range(repeat):
        cond = {}
        rate, cpu = run_ops(srv, clients, make_items(), fn, cond)
        out["rate"].append(rate)
        out["cpu"].append(cpu)
        out["cpu_req"].append(cpu - cond["res_us"])
        out["cond"].append(cond)
    return out


@contextlib.contextmanager
def bench_lock(path):
    """Holds an exclusive flock on @path (nothing when empty), so the
    measurements never overlap other benchmarks while the long fills do
    not keep them waiting."""
    if not path:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def prepare(srv, n, args):
    """Start-up (cold, then warm), the index check, RSS and the idle CPU of
    the server on a store of @n objects; leaves it running. The row."""
    row = {"objects": n}
    # start-up: cold (index evicted) then warm (twice, the better one)
    evict(srv.drives)
    row["start_cold_s"] = srv.start()
    srv.stop()
    warm = []
    for _ in range(2):
        warm.append(srv.start())
        if len(warm) < 2:
            srv.stop()
    row["start_warm_s"] = min(warm)
    # the rates are taken once the background index check is done: it walks
    # (and so maps) the whole index once after every trusted start
    m = wait_index_check(srv.url)
    row["open_s"] = m.get("storaged_index_open_seconds", float("nan"))
    row["check_s"] = m.get("storaged_index_verify_seconds", float("nan"))
    rs = rss_kib(srv.proc.pid)
    row["rss_start_mib"] = rs["VmRSS"] / 1024
    row["index_res_mib"] = resident_mib(index_files(srv))  # page cache now
    # an idle server must stay idle whatever the index's size (the
    # residency thread is paced by its own cost): its CPU over --idle-s
    # seconds with no request, as a share of one core
    c0, t0 = cpu_ns(srv.proc.pid), time.monotonic()
    time.sleep(args.idle_s)
    row["idle_cpu_pct"] = 100 * cpu_delta_s(c0, cpu_ns(srv.proc.pid)) / \
        (time.monotonic() - t0)
    return row


def index_files(srv):
    return [os.path.join(d, ".ecfs.sys", "index", "data.mdb")
            for d in srv.drives]


def steps(srv, n, args, rng):
    """The rate measurements on the running server of @n objects, in
    order: (row key or None for an unmeasured warm-up, make_items, fn) and
    the clients they share."""
    cl = [srv.client() for _ in range(args.clients)]
    body = os.urandom(args.obj_size)
    rounds = [0]

    def newkeys():
        rounds[0] += 1
        return ["new/%d/%d/%06d" % (n, rounds[0], i) for i in range(args.ops)]

    def anykeys():
        return ["obj/%09d" % rng.randrange(n) for _ in range(args.ops)]

    # the hot set: the same 1000 keys (obj/000000000..999) at every size,
    # so the cost of the index itself is seen apart from the working set
    hot = ["obj/%09d" % i for i in range(min(n, 1000))]

    def hotkeys():
        return [rng.choice(hot) for _ in range(args.ops)]

    def put(c, k):
        c.put_object(Bucket=BUCKET, Key=k, Body=body)

    def head(c, k):
        c.head_object(Bucket=BUCKET, Key=k)

    def get(c, k):
        c.get_object(Bucket=BUCKET, Key=k)["Body"].read()

    def delete(c, k):
        c.delete_object(Bucket=BUCKET, Key=k)

    def marks():
        return ["obj/%09d" % rng.randrange(max(1, n - 1000))
                for _ in range(args.pages)]

    def page(c, m):
        r = c.list_objects_v2(Bucket=BUCKET, StartAfter=m, MaxKeys=1000)
        assert r["KeyCount"] == min(1000, n - 1 - int(m[4:])), r["KeyCount"]

    put_keys = []

    def put_items():
        put_keys.append(newkeys())
        return put_keys[-1]

    def del_items():
        return put_keys.pop(0)

    return cl, [
        ("put", put_items, put),
        ("head", anykeys, head),
        ("get", anykeys, get),
        (None, lambda: hot, get),  # the hot set once, unmeasured: in memory
        ("head_hot", hotkeys, head),
        ("get_hot", hotkeys, get),
        # DELETE the keys just put, so the bucket stays at its size
        ("delete", del_items, delete),
        ("list", marks, page),
        # the same page at every size: the first 1000 keys (999 at 10^3)
        ("list_hot", lambda: ["obj/000000000"] * args.pages, page)]


def finish(srv, row):
    """RSS and index residency after the rates; stops the server."""
    rs = rss_kib(srv.proc.pid)
    row["rss_mib"] = rs["VmRSS"] / 1024
    row["anon_mib"] = rs.get("RssAnon", 0) / 1024
    row["file_mib"] = rs.get("RssFile", 0) / 1024
    idx = index_files(srv)
    row["index_res_end_mib"] = resident_mib(idx)
    srv.stop()
    row["index_mib"] = sum(os.path.getsize(p) for p in idx
                           if os.path.exists(p)) / 2**20
    return row


def measure(srv, n, args, rng):
    """One size on its own: start-up, then each rate's rounds in turn."""
    row = prepare(srv, n, args)
    cl, todo = steps(srv, n, args, rng)
    for key, make, fn in todo:
        if key is None:
            run_ops(srv, cl, make(), fn)
        else:
            row[key] = repeat_ops(srv, cl, args.repeat, make, fn)
    return finish(srv, row)


def measure_side_by_side(srvs, sizes, args, rng):
    """Several kept stores (one per size) served at once: start-up and idle
    figures one size after the other, then every rate's rounds alternate
    between the servers (round 1 of each size, round 2 of each, ...), so a
    change in the machine's load falls on every size alike and the ratios
    compare rounds taken seconds apart."""
    rows = [prepare(srv, n, args) for srv, n in zip(srvs, sizes)]
    plans = [steps(srv, n, args, rng) for srv, n in zip(srvs, sizes)]
    for i in range(len(plans[0][1])):
        key = plans[0][1][i][0]
        for r in range(1 if key is None else args.repeat):
            for srv, row, (cl, todo) in zip(srvs, rows, plans):
                _, make, fn = todo[i]
                if key is None:
                    run_ops(srv, cl, make(), fn)
                    continue
                cond = {}
                rate, cpu = run_ops(srv, cl, make(), fn, cond)
                d = row.setdefault(key, {"rate": [], "cpu": [], "cpu_req": [],
                                         "cond": []})
                d["rate"].append(rate)
                d["cpu"].append(cpu)
                d["cpu_req"].append(cpu - cond["res_us"])
                d["cond"].append(cond)
    return [finish(srv, row) for srv, row in zip(srvs, rows)]


OPS = (("put", "PUT"), ("head", "HEAD any"), ("head_hot", "HEAD hot"),
       ("get", "GET any"), ("get_hot", "GET hot"), ("delete", "DELETE"),
       ("list", "LIST 1000 any"), ("list_hot", "LIST 1000 hot"))


def cpu_req(d):
    """A rate's CPU per request without the residency thread's (rows of
    runs before that figure existed: all of it)."""
    return d.get("cpu_req") or d["cpu"]


def table(rows):
    """Two Markdown tables: start-up/memory, then per request the server's
    CPU µs (median [range] over the rounds) and the rate, each with its
    ratio to the first row's median (for CPU, <= 1.11 is a rate >= 0.9x)."""
    base = rows[0]

    def ratio(v, b):
        return "%.2f" % (v / b) if b else "-"
    out = ["| objects | start warm s (x) | start cold s (x) | index open s "
           "| index check s | RSS MiB (heap + files) | index MiB "
           "| idle CPU % of a core |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(
            "| %d | %.3f (%s) | %.3f (%s) | %.3f | %.3f | %.0f (%.0f + %.0f) "
            "| %.1f | %.2f |" % (
                r["objects"], r["start_warm_s"],
                ratio(r["start_warm_s"], base["start_warm_s"]),
                r["start_cold_s"],
                ratio(r["start_cold_s"], base["start_cold_s"]),
                r["open_s"], r["check_s"], r["rss_mib"], r["anon_mib"],
                r["file_mib"], r["index_mib"],
                r.get("idle_cpu_pct", float("nan"))))
    out += ["", "| objects | request | server CPU µs/req median [range] (x) "
            "| without the residency thread (x) "
            "| req/s median [range] (x) |", "|---|---|---|---|---|"]
    for r in rows:
        for k, name in OPS:
            cpu, rate, req = r[k]["cpu"], r[k]["rate"], cpu_req(r[k])
            bc, br = median(base[k]["cpu"]), median(base[k]["rate"])
            bq = median(cpu_req(base[k]))
            out.append("| %d | %s | %.0f [%.0f-%.0f] (%s) | %.0f [%.0f-%.0f] "
                       "(%s) | %.0f [%.0f-%.0f] (%s) |" % (
                           r["objects"], name, median(cpu), min(cpu),
                           max(cpu), ratio(median(cpu), bc), median(req),
                           min(req), max(req), ratio(median(req), bq),
                           median(rate), min(rate), max(rate),
                           ratio(median(rate), br)))
    return "\n".join(out)


def conditions(rows):
    """A Markdown table of what each round ran under (run_ops' @cond), one
    figure per round: a slow round shows here whether it faulted pages in,
    read the disk, or shared the machine with writeback or other work."""
    out = ["| objects | request | CPU µs | residency thread µs/op "
           "| minflt/op | majflt/op "
           "| read KiB/op | reclaim scanned/op | dirty MiB | other cores | steal % |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]

    def per(xs, fmt):
        return "/".join(fmt % x for x in xs)
    for r in rows:
        out.append("| %d | index resident MiB | %.0f of %.0f at the start, "
                   "%.0f at the end |%s" % (
                       r["objects"], r.get("index_res_mib", float("nan")),
                       r["index_mib"], r.get("index_res_end_mib",
                                             float("nan")), " |" * 8))
        for k, name in OPS:
            cs = r[k].get("cond") or []
            if not cs:
                continue
            out.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s "
                       "| %s |"
                       % (r["objects"], name, per(r[k]["cpu"], "%.0f"),
                          per([c.get("res_us", float("nan")) for c in cs],
                              "%.1f"),
                          per([c["minflt"] for c in cs], "%.2f"),
                          per([c["majflt"] for c in cs], "%.2f"),
                          per([c["rd_kib"] for c in cs], "%.1f"),
                          per([c.get("scanned", 0) for c in cs], "%.0f"),
                          per([c["dirty_mib"] for c in cs], "%.0f"),
                          per([c["other_cores"] for c in cs], "%.2f"),
                          per([100 * c.get("steal", 0) for c in cs], "%.1f")))
    return "\n".join(out)


# the goals (#12 "Cost must not grow with size", "Memory", and
# the GET 4 KiB CPU of bench_get_small.py)
RATE_GOAL, CPU_GOAL = 0.9, 1 / 0.9  # a rate >= 0.9x is a CPU <= 1.11x
START_GOAL_S, HEAP_GOAL_MIB, GET4K_GOAL_US = 2.0, 64.0, 12.0
GOAL_OPS = (("put", "PUT"), ("get", "GET any"), ("get_hot", "GET hot"),
            ("delete", "DELETE"), ("list", "LIST 1000 any"),
            ("list_hot", "LIST 1000 hot"))


def verdict(rows, get4k=None):
    """A Markdown table with one line per goal of issue 12 at the largest
    size against the smallest: each rate (median) >= 0.9x, with the CPU
    per request's ratio beside it (<= 1.11x, the same goal in CPU, steadier
    on a shared machine); warm start-up <= 2 s; heap (RssAnon) <= 64 MiB
    (the configured caches are off here; the mapped index is page cache,
    which the issue allows); and with @get4k (bench_get_small's median
    server CPU per 4 KiB GET) <= 12 us."""
    def ok(good):
        return "met" if good else "**NOT met**"
    base, top = rows[0], rows[-1]
    out = ["| goal (issue 12) | figure at %d objects (against %d) "
           "| verdict |" % (top["objects"], base["objects"]), "|---|---|---|"]
    if len(rows) < 2 or top["objects"] == base["objects"]:
        out.append("| rates >= 0.9x | needs two sizes | - |")
    else:
        for k, name in GOAL_OPS:
            rr = median(top[k]["rate"]) / median(base[k]["rate"])
            cr = median(top[k]["cpu"]) / median(base[k]["cpu"])
            qr = median(cpu_req(top[k])) / median(cpu_req(base[k]))
            out.append("| %s rate >= %.1fx | rate %.2fx; CPU/req %.3fx "
                       "(<= %.3fx: %s), without the residency thread %.3fx "
                       "(%s) | %s |" % (
                           name, RATE_GOAL, rr, cr, CPU_GOAL,
                           ok(cr <= CPU_GOAL), qr, ok(qr <= CPU_GOAL),
                           ok(rr >= RATE_GOAL)))
    out.append("| start-up warm <= %.0f s | %.3f s | %s |" % (
        START_GOAL_S, top["start_warm_s"],
        ok(top["start_warm_s"] <= START_GOAL_S)))
    out.append("| RSS <= 64 MiB + caches | heap %.1f MiB (+ %.0f MiB of "
               "mapped index, page cache) | %s |" % (
                   top["anon_mib"], top["file_mib"],
                   ok(top["anon_mib"] <= HEAP_GOAL_MIB)))
    if get4k is None:
        out.append("| GET 4 KiB CPU <= %.0f us | not run (--get-small) "
                   "| - |" % GET4K_GOAL_US)
    else:
        out.append("| GET 4 KiB CPU <= %.0f us | %.2f us [%.2f-%.2f] "
                   "(bench_get_small.py, median of %d rounds) | %s |" % (
                       GET4K_GOAL_US, median(get4k), min(get4k), max(get4k),
                       len(get4k), ok(median(get4k) <= GET4K_GOAL_US)))
    return "\n".join(out)


def get_small(args):
    """bench_get_small.py's CPU per 4 KiB GET of this build (its "index"
    side: the defaults), one figure per round, under the lock."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f, \
            bench_lock(args.lock):
        subprocess.run([sys.executable,
                        os.path.join(os.path.dirname(__file__),
                                     "bench_get_small.py"),
                        "--rounds", str(args.get_small_rounds), "--seconds",
                        "3", "--json", f.name], check=True,
                       stdout=subprocess.DEVNULL)
        with open(f.name) as j:
            return [cpu for _, cpu in json.load(j)["index"]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,100000,1000000")
    ap.add_argument("--obj-size", type=int, default=1024)
    ap.add_argument("--drives", type=int, default=4)
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--pages", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3,
                    help="rounds of each rate (median and range)")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--fill-threads", type=int, default=2)
    ap.add_argument("--dir", default=os.environ.get("BENCH_DIR", "/tmp"))
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--fill-only", action="store_true",
                    help="fill (and sync) to the last of --sizes, measure "
                         "nothing, keep the store: --reuse measures it later "
                         "(e.g. with another build)")
    ap.add_argument("--reuse", metavar="DIR",
                    help="measure the store a --keep run (or a killed one) "
                         "left in DIR, filled to the first of --sizes; it "
                         "is kept. Several stores, DIR_A,DIR_B with --sizes "
                         "NA,NB: all served at once and measured side by "
                         "side, each rate's rounds alternating between "
                         "them")
    ap.add_argument("--out")
    ap.add_argument("--json", help="also write the rows as JSON to this file")
    ap.add_argument("--from-json", nargs="+", metavar="FILE",
                    help="print the table of the rows in these --json files "
                         "(e.g. one run per size, filled in parallel) and exit")
    ap.add_argument("--lock", default="",
                    help="hold an exclusive flock on this file while measuring "
                         "(not while filling): e.g. /tmp/ecfs-bench.lock")
    ap.add_argument("--no-build", action="store_true",
                    help="use $ECFS_BIN_DIR/storaged and $BENCH_FILL as they are")
    ap.add_argument("--get-small", action="store_true",
                    help="also run bench_get_small.py (under --lock) for the "
                         "GET 4 KiB CPU goal of the verdict")
    ap.add_argument("--get-small-rounds", type=int, default=3)
    ap.add_argument("--idle-s", type=float, default=5.0,
                    help="seconds of the idle server's CPU figure per size")
    args = ap.parse_args()
    if args.from_json:
        rows = []
        for path in args.from_json:
            with open(path) as f:
                rows += json.load(f)
        rows.sort(key=lambda r: r["objects"])
        print(table(rows))
        print("\n" + conditions(rows))
        print("\n" + verdict(rows, get_small(args) if args.get_small
                              else None))
        return
    sizes = [int(x) for x in args.sizes.split(",")]
    if not args.no_build:
        build_fill()
    rows, have = [], 0
    if args.fill_only:
        args.keep = True
    if args.reuse and "," in args.reuse:
        side_by_side(args, sizes)
        return
    if args.reuse:
        root, have, args.keep = args.reuse, sizes[0], True
        drives = [os.path.join(root, "d%d" % i) for i in range(args.drives)]
    else:
        root = tempfile.mkdtemp(prefix="bench_scale.", dir=args.dir)
        drives = [os.path.join(root, "d%d" % i) for i in range(args.drives)]
        for d in drives:
            os.makedirs(d)
    srv = Server(drives, os.path.join(root, "storaged.log"))
    rng = random.Random(1)
    try:
        for n in sizes:
            t0 = time.monotonic()
            if n > have:
                subprocess.run([FILL, BUCKET, str(have), str(n - have),
                                str(args.obj_size), str(args.fill_threads)]
                               + drives, check=True,
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
            have = n
            t1 = time.monotonic()
            if args.fill_only and n != sizes[-1]:
                continue
            # the filler runs with fsync off: its writeback (GBs at 10^6)
            # must not run beneath the measured rounds, so it is done here,
            # outside the lock
            os.sync()
            print("filled to %d objects in %.0f s, synced in %.0f s"
                  % (n, t1 - t0, time.monotonic() - t1), file=sys.stderr,
                  flush=True)
            if args.fill_only:
                continue
            with bench_lock(args.lock):
                print("measuring %d objects" % n, file=sys.stderr, flush=True)
                rows.append(measure(srv, n, args, rng))
            print(table(rows) + "\n\n" + conditions(rows), file=sys.stderr,
                  flush=True)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(rows, f)
    finally:
        srv.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print("store kept in %s (--reuse %s --sizes %d measures it "
                  "again)" % (root, root, have), file=sys.stderr, flush=True)
    if args.fill_only:
        return
    report(args, rows)


def side_by_side(args, sizes):
    """--reuse A,B,... --sizes NA,NB,...: every kept store served at once,
    measured side by side (measure_side_by_side) under one hold of --lock."""
    roots = args.reuse.split(",")
    if len(roots) != len(sizes):
        sys.exit("--reuse with several stores needs one --sizes per store")
    srvs = [Server([os.path.join(root, "d%d" % i)
                    for i in range(args.drives)],
                   os.path.join(root, "storaged.log")) for root in roots]
    rng = random.Random(1)
    try:
        with bench_lock(args.lock):
            print("measuring %s side by side" % args.sizes, file=sys.stderr,
                  flush=True)
            rows = measure_side_by_side(srvs, sizes, args, rng)
    finally:
        for srv in srvs:
            srv.stop()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f)
    report(args, rows)


def report(args, rows):
    """Prints (and with --out writes) the tables and the verdict."""
    get4k = get_small(args) if args.get_small else None
    text = ("storaged scale benchmark: %d drives, %d-byte objects, %d "
            "clients, %d ops per rate, %d LIST pages, %d rounds\n\n%s\n"
            % (args.drives, args.obj_size, args.clients, args.ops,
               args.pages, args.repeat,
               table(rows) + "\n\n" + conditions(rows) + "\n\n" +
               verdict(rows, get4k)))
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
