"""tests/bench/twobuckets.py - what the side-by-side bucket benchmarks share
(bench_versioning.py, bench_sse.py): one storaged with two buckets on
fresh drives, presigned wrk scripts, storaged's CPU time per request.

wrk keys: `lua_slices` gives each wrk thread its own slice of the targets.
A script that starts each thread at `math.random(#t)` (bench_s3_server's
lua_rotate) does not spread the threads: wrk runs LuaJIT, whose
math.random has the same fixed seed in every thread's Lua state, so all
threads start at the same target and send the same keys in lockstep. For
GETs that is harmless; for PUTs of "new" keys it makes about half of them
overwrites of a key the other thread has just written (measured with a
versioned bucket, 2 threads, 64 connections: 1378 PUTs, 773 distinct keys).
"""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_s3_server import (AK, BIN, SK, client, cpu_ticks,  # noqa: E402
                             free_port, median, wait_http, wrk)


def start_storaged(work, ndrives, args=()):
    """Starts storaged on @ndrives fresh drive directories under @work;
    returns (process, endpoint, boto3 client). Its log: @work/storaged.log."""
    drives = [os.path.join(work, "d%d" % i) for i in range(ndrives)]
    for d in drives:
        os.makedirs(d)
    port = free_port()
    env = dict(os.environ, STORAGED_ROOT_USER=AK, STORAGED_ROOT_PASSWORD=SK)
    log = open(os.path.join(work, "storaged.log"), "wb")
    sp = subprocess.Popen([os.path.join(BIN, "storaged"), "serve",
                           "--address", "127.0.0.1:%d" % port,
                           "--log-level", "warn"] + list(args) + drives,
                          env=env, stdout=log, stderr=log)
    log.close()
    ep = "http://127.0.0.1:%d" % port
    try:
        wait_http(ep + "/health/ready")
    except BaseException:
        stop_storaged(sp)
        raise
    return sp, ep, client(ep)


def stop_storaged(sp, timeout=30):
    if sp is None:
        return
    sp.terminate()
    try:
        sp.wait(timeout)
    except subprocess.TimeoutExpired:
        sp.kill()
        sp.wait()


def rel(url):
    """The path and query of a presigned URL (what wrk sends)."""
    return "/" + url.split("://", 1)[1].split("/", 1)[1]


def presign(s3, op, bucket, keys, expires=7200):
    return [rel(s3.generate_presigned_url(
        op, Params={"Bucket": bucket, "Key": k}, ExpiresIn=expires))
        for k in keys]


def lua_slices(path, method, targets, body_len=0, threads=2):
    """A wrk script in which wrk thread t cycles through its own slice
    [t*n/threads, (t+1)*n/threads) of @targets, from its start; `done`
    prints "WRAPS w" (how often a thread came back to its slice's start),
    so a run of "new" keys can tell whether it reused any."""
    with open(path, "w") as f:
        f.write("local t = {\n")
        for u in targets:
            f.write("  %s,\n" % _lua_str(u))
        f.write("}\n")
        f.write("local nthreads = %d\n" % threads)
        f.write("local made, threads = 0, {}\n")
        if body_len:
            f.write('local body = string.rep("x", %d)\n' % body_len)
        # setup runs in the main Lua state, once per thread, before init
        f.write("setup = function(thread)\n"
                "  thread:set(\"tid\", made)\n"
                "  made = made + 1\n"
                "  table.insert(threads, thread)\n"
                "end\n")
        f.write("init = function(args)\n"
                "  lo = math.floor(tid * #t / nthreads) + 1\n"
                "  hi = math.floor((tid + 1) * #t / nthreads)\n"
                "  i = lo - 1\n"
                "  wraps = 0\n"
                "end\n")
        f.write("request = function()\n"
                "  i = i + 1\n"
                "  if i > hi then i = lo; wraps = wraps + 1 end\n")
        if body_len:
            f.write('  return wrk.format("%s", t[i], {["Content-Length"] = '
                    '"%d"}, body)\n' % (method, body_len))
        else:
            f.write('  return wrk.format("%s", t[i])\n' % method)
        f.write("end\n")
        f.write("done = function(summary, latency, requests)\n"
                "  local w = 0\n"
                "  for _, th in ipairs(threads) do w = w + th:get(\"wraps\")"
                " end\n"
                "  io.write(string.format(\"WRAPS %d\\n\", w))\n"
                "end\n")


def _lua_str(s):
    # presigned paths are ASCII without quotes or backslashes; be safe anyway
    return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"')


def wrk_cpu(ep, script, seconds, pids, conns=64, threads=2):
    """wrk() plus storaged's CPU microseconds per request
    ("cpu_us_per_req", utime+stime of @pids from /proc) and, for a
    lua_slices script, "wraps" (None for other scripts)."""
    hz = os.sysconf("SC_CLK_TCK")
    t0 = cpu_ticks(pids)
    r = wrk(ep, script, seconds, conns=conns, threads=threads,
            keep_stdout=True)
    t1 = cpu_ticks(pids)
    n = r["rps"] * seconds
    r["cpu_us_per_req"] = (t1 - t0) * 1e6 / hz / n if n else float("nan")
    m = re.search(r"^WRAPS (\d+)$", r.get("stdout", ""), re.M)
    r["wraps"] = int(m.group(1)) if m else None
    del r["stdout"]
    return r


def summary(v):
    """Median, min and max of @v."""
    return {"median": median(v), "min": min(v), "max": max(v)}
