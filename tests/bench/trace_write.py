#!/usr/bin/python3
"""tests/bench/trace_write.py - where one copied small file's time goes:
cp -r of the dataset into each peer's mount (ecfs, s3fs, rclone; all on
one storaged) under `perf record -a` of the kernel's FUSE tracepoints
(fuse:fuse_request_send/_end, Linux 6.14 and later) and of the client's
socket calls. Figures, not pass/fail; the tracepoints cost a few
microseconds per event, so rates here are below bench_write's.

Per peer it prints:
  - the FUSE requests per copied file by operation, and the round trip of
    each (median [p10-p90] microseconds from the kernel sending it, in
    cp's context, to the client's reply): what one file costs in FUSE;
  - the time cp spends between one reply and its next request (its own
    work: the source file's open/read/close, its 1 MiB buffer);
  - for ecfs (and ecfs-base with --base-bin), FLUSH split at the client's
    first sendto/sendmsg of the PUT and its last recvfrom before the
    reply: arrival -> the PUT's first byte, the PUT on the wire (the
    server), the answer -> the reply (the commit's bookkeeping);
  - each process's on-CPU time per file (sched_switch).
The server's own requests per file are in bench_write's figures.

Usage: tests/bench/trace_write.py [--peers ecfs,s3fs,rclone] [--files N]
       [--workdir DIR] [--base-bin DIR] [--keep-trace]
Needs root (mounts, perf), perf, and a kernel with the fuse tracepoints.
"""

import argparse
import atexit
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_loader as bl  # noqa: E402
import bench_write as bw  # noqa: E402

EVENTS = ["fuse:fuse_request_send", "fuse:fuse_request_end",
          "syscalls:sys_enter_sendto", "syscalls:sys_enter_sendmsg",
          "syscalls:sys_exit_recvfrom", "syscalls:sys_exit_read",
          "sched:sched_switch"]
LINE = re.compile(r"^\s*(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+"
                  r"(\S+):\s*(.*)$")


def pct(v):
    """'median [p10-p90]' of @v (not empty), microseconds."""
    v = sorted(v)
    return "%.0f [%.0f-%.0f]" % (v[len(v) // 2], v[len(v) // 10],
                                 v[len(v) * 9 // 10])


def parse(path):
    """The events of a perf script dump as tuples (time, comm, pid, tid,
    cpu, event, args)."""
    ev = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                ev.append((float(m.group(5)), m.group(1), int(m.group(2)),
                           int(m.group(3)), int(m.group(4)),
                           m.group(6).split(":", 1)[1], m.group(7)))
    return ev


def analyse(ev, nfiles, out):
    """Prints the per-file figures of one peer's trace."""
    req = {}  # unique -> [send time, op, end time, sender pid, replier tid]
    cp_pid = None
    for t, comm, pid, tid, _cpu, e, a in ev:
        if e == "fuse_request_send":
            m = re.search(r"req (\d+) opcode \d+ \((\w+)\)", a)
            if m is None:
                continue
            if cp_pid is None and comm == "cp":
                cp_pid = pid
            req[int(m.group(1))] = [t, m.group(2)[5:], None, pid, None]
        elif e == "fuse_request_end":
            m = re.search(r"req (\d+)", a)
            r = req.get(int(m.group(1))) if m else None
            if r is not None:
                r[2], r[4] = t, (pid, tid)
    mine = [r for r in req.values() if r[3] == cp_pid and r[2] is not None]
    if not mine:
        out("  no FUSE request of cp traced (no fuse tracepoints?)")
        return
    daemon = collections.Counter(r[4][0] for r in mine).most_common(1)[0][0]
    byop = collections.defaultdict(list)
    for r in mine:
        byop[r[1]].append((r[2] - r[0]) * 1e6)
    out("  FUSE requests per file (round trip, us, median [p10-p90]):")
    for op, v in sorted(byop.items(), key=lambda kv: -len(kv[1])):
        out("    %-12s %6.3f  %s" % (op, len(v) / nfiles, pct(v)))
    seq = sorted((r[0], r[1], r[2]) for r in mine if r[1] != "RELEASE")
    gaps = collections.defaultdict(list)
    for a, b in zip(seq, seq[1:]):
        gaps["%s -> %s" % (a[1], b[1])].append((b[0] - a[2]) * 1e6)
    out("  cp between a reply and its next request (us):")
    for k, v in sorted(gaps.items(), key=lambda kv: -len(kv[1])):
        if len(v) >= nfiles // 2:
            out("    %-22s %s" % (k, pct(v)))
    # FLUSH phases from the replying thread's socket calls
    by_tid = collections.defaultdict(list)
    for x in ev:
        if x[2] == daemon and x[5] in ("sys_exit_read", "sys_enter_sendto",
                                        "sys_enter_sendmsg",
                                        "sys_exit_recvfrom"):
            by_tid[x[3]].append(x)
    ph = collections.defaultdict(list)
    for r in mine:
        if r[1] != "FLUSH":
            continue
        rd = snd = rcv = None
        for t, _c, _p, _tid, _cpu, e, a in by_tid.get(r[4][1], []):
            if t < r[0]:
                continue
            if t > r[2]:
                break
            if rd is None and e == "sys_exit_read":
                rd = t
            elif rd is not None and snd is None and e in (
                    "sys_enter_sendto", "sys_enter_sendmsg"):
                snd = t
            elif snd is not None and e == "sys_exit_recvfrom" and \
                    not a.startswith("0xfffffff"):
                rcv = t
        if rd and snd and rcv:
            ph["kernel -> client read"].append((rd - r[0]) * 1e6)
            ph["read -> PUT first byte"].append((snd - rd) * 1e6)
            ph["PUT on the wire"].append((rcv - snd) * 1e6)
            ph["answer -> FLUSH reply"].append((r[2] - rcv) * 1e6)
    if ph:
        out("  FLUSH of %d files, split at the PUT's socket calls (us):"
            % len(ph["PUT on the wire"]))
        for k in ("kernel -> client read", "read -> PUT first byte",
                  "PUT on the wire", "answer -> FLUSH reply"):
            out("    %-24s %s" % (k, pct(ph[k])))
    flushes = sorted(r[0] for r in mine if r[1] == "FLUSH")
    if len(flushes) > 1:
        cyc = [(b - a) * 1e6 for a, b in zip(flushes, flushes[1:])]
        out("  one file (FLUSH to FLUSH): %s us" % pct(cyc))
    # on-CPU time by command: each CPU's time between its switches
    last, cpu = {}, collections.Counter()
    for t, _comm, _pid, _tid, c, e, a in ev:
        if e != "sched_switch":
            continue
        m = re.search(r"prev_comm=(.*?) prev_pid=", a)
        if m and c in last:
            cpu[m.group(1)] += t - last[c]
        last[c] = t
    if cpu:
        out("  on-CPU us per file: " + ", ".join(
            "%s %.0f" % (k, v * 1e6 / nfiles) for k, v in cpu.most_common(7)))


def trace_peer(peer, r, data, nfiles, srv, s3, work, keep):
    """cp -r of @data into a fresh mount of @peer under perf; prints its
    figures."""
    root = os.path.join(work, "mnt-" + peer)
    prefix = "%s-t%d" % (peer, r)
    s3.put_object(Bucket=bw.BUCKET, Key=prefix + "/", Body=b"")
    m = bw.WMount(peer, root, srv, work, prefix)
    m.mount()
    try:
        # a first copy warms the client (and the server's journal files)
        bw.run_work(["cp", "-r", data, os.path.join(root, "warm")])
        pdata = os.path.join(work, "trace-%s.data" % peer)
        # perf and its cp in a process group of their own: a stop kills
        # both (cleanup)
        bw.run_work(["perf", "record", "-q", "-a", "-o", pdata] +
                    [x for e in EVENTS for x in ("-e", e)] +
                    ["--", "cp", "-r", data, os.path.join(root, "t")])
    finally:
        m.unmount()
    txt = pdata + ".txt"
    with open(txt, "w") as f:
        subprocess.run(["perf", "script", "-i", pdata, "-F",
                        "comm,pid,tid,cpu,time,event,trace"], stdout=f,
                       stderr=subprocess.DEVNULL, check=True)
    ev = parse(txt)
    print("== %s: cp -r of %d files" % (peer, nfiles), flush=True)
    analyse(ev, nfiles, lambda s: print(s, flush=True))
    if not keep:
        os.remove(pdata)
        os.remove(txt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peers", default="ecfs,s3fs,rclone")
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--base-bin", default=None,
                    help="folder of another build's ecfs: peer ecfs-base")
    ap.add_argument("--keep-trace", action="store_true",
                    help="leave the perf data and dumps in the work folder "
                    "(printed)")
    a = ap.parse_args()
    for sig in bw.STOP_SIGNALS:
        signal.signal(sig, bw.on_signal)
    atexit.register(bw.cleanup)
    if shutil.which("perf") is None:
        sys.exit("trace_write: needs perf")
    if a.base_bin:
        bl.BASE_BIN = os.path.abspath(a.base_bin)
    peers = [p for p in a.peers.split(",") if p]
    data = os.path.join(bl.REPO, "var", "bench", "dataset-w%d" % a.files)
    if not os.path.isdir(data):
        subprocess.run([bl.PY, os.path.join(bl.REPO, "scripts",
                                            "gen-dataset"), data,
                        "--preset", "default", "--files", str(a.files),
                        "--quiet"], check=True)
    nfiles = bw.count_files(data)
    work = tempfile.mkdtemp(prefix="trace-write-", dir=a.workdir)
    srv = bl.Storaged(os.path.join(work, "drives"))
    bw.LIVE["srv"] = srv
    srv.start()
    try:
        import boto3
        from botocore.config import Config
        s3 = boto3.client("s3", endpoint_url=srv.endpoint,
                          aws_access_key_id=bl.ACCESS,
                          aws_secret_access_key=bl.SECRET,
                          region_name="us-east-1",
                          config=Config(s3={"addressing_style": "path"}))
        s3.create_bucket(Bucket=bw.BUCKET)
        bw.warm_bucket(s3)
        for r, peer in enumerate(peers):
            trace_peer(peer, r, data, nfiles, srv, s3, work, a.keep_trace)
    finally:
        left = bw.cleanup()
        if a.keep_trace:
            print("trace files in %s" % work)
        elif not left:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
