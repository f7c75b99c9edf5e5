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
import time

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


def lua_slices(path, method, targets, body_len=0, threads=2, once=False):
    """A wrk script in which wrk thread t cycles through its own slice
    [t*n/threads, (t+1)*n/threads) of @targets, from its start; `done`
    prints "WRAPS w" (how often a thread came back to its slice's start),
    so a run of "new" keys can tell whether it reused any.

    With @once (for DELETEs, whose answer is 204) each target is sent at
    most once (a key deleted twice costs less the second time): a thread
    that has sent its whole slice sends `GET /health/live` (its 200s are
    not counted) until its last answer is in, then stops; `done` prints
    "ONCE n t0 t1", the answers to the slices' requests and the first send
    and last answer
    (CLOCK_MONOTONIC through LuaJIT's ffi), so the rate is n / (t1 - t0)
    whether the run ended with its keys or with wrk's -d."""
    if once:
        _lua_once(path, method, targets, body_len, threads)
        return
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


def _lua_once(path, method, targets, body_len, threads):
    with open(path, "w") as f:
        f.write("local t = {\n")
        for u in targets:
            f.write("  %s,\n" % _lua_str(u))
        f.write("}\n")
        f.write("local nthreads = %d\n" % threads)
        f.write("local made, threads = 0, {}\n")
        f.write('local ffi = require("ffi")\n'
                "ffi.cdef[[\n"
                "typedef struct { long sec; long nsec; } ecfs_ts;\n"
                "int clock_gettime(int clk, ecfs_ts *ts);\n"
                "]]\n"
                'local ts = ffi.new("ecfs_ts")\n'
                "local function now()\n"
                "  ffi.C.clock_gettime(1, ts)\n"
                "  return tonumber(ts.sec) + tonumber(ts.nsec) * 1e-9\n"
                "end\n")
        if body_len:
            f.write('local body = string.rep("x", %d)\n' % body_len)
        f.write("setup = function(thread)\n"
                "  thread:set(\"tid\", made)\n"
                "  made = made + 1\n"
                "  table.insert(threads, thread)\n"
                "end\n")
        f.write("init = function(args)\n"
                "  lo = math.floor(tid * #t / nthreads) + 1\n"
                "  hi = math.floor((tid + 1) * #t / nthreads)\n"
                "  i = lo - 1\n"
                "  got, t0, t1 = 0, 0, 0\n"
                "end\n")
        f.write("request = function()\n"
                "  if t0 == 0 then t0 = now() end\n"
                "  i = i + 1\n"
                "  if i > hi then\n"
                '    return wrk.format("GET", "/health/live")\n'
                "  end\n")
        if body_len:
            f.write('  return wrk.format("%s", t[i], {["Content-Length"] = '
                    '"%d"}, body)\n' % (method, body_len))
        else:
            f.write('  return wrk.format("%s", t[i])\n' % method)
        f.write("end\n")
        # the fillers' answers are 200s; a DELETE's is 204 (or an error)
        f.write("response = function(status, headers, body)\n"
                "  if status ~= 200 and got < hi - lo + 1 then\n"
                "    got = got + 1\n"
                "    t1 = now()\n"
                "    if got == hi - lo + 1 then wrk.thread:stop() end\n"
                "  end\n"
                "end\n")
        f.write("done = function(summary, latency, requests)\n"
                "  local n, a, b = 0, nil, nil\n"
                "  for _, th in ipairs(threads) do\n"
                "    n = n + th:get(\"got\")\n"
                "    local x, y = th:get(\"t0\"), th:get(\"t1\")\n"
                "    if x > 0 and (a == nil or x < a) then a = x end\n"
                "    if b == nil or y > b then b = y end\n"
                "  end\n"
                "  io.write(string.format(\"ONCE %d %.6f %.6f\\n\", n,"
                " a or 0, b or 0))\n"
                "end\n")


def _lua_str(s):
    # presigned paths are ASCII without quotes or backslashes; be safe anyway
    return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"')


def wrk_cpu(ep, script, seconds, pids, conns=64, threads=2, tail=0.0):
    """wrk() plus storaged's CPU microseconds per request
    ("cpu_us_per_req", utime+stime of @pids from /proc) and, for a
    lua_slices script, "wraps" (None for other scripts). With @tail > 0
    the CPU @pids spend after wrk ends is counted too, until a quarter
    second with at most one clock tick of it (or @tail seconds): work a
    request leaves behind (a queued versioned DELETE's unlinks, the spare
    pool's refill) belongs to it; "tail_cpu_us_per_req" says how much."""
    hz = os.sysconf("SC_CLK_TCK")
    t0 = cpu_ticks(pids)
    r = wrk(ep, script, seconds, conns=conns, threads=threads,
            keep_stdout=True)
    t1 = tw = cpu_ticks(pids)
    end = time.monotonic() + tail
    while tail > 0 and time.monotonic() < end:
        time.sleep(0.25)
        t2 = cpu_ticks(pids)
        done = t2 - t1 <= 1
        t1 = t2
        if done:
            break
    n = r["rps"] * seconds
    r["cpu_us_per_req"] = (t1 - t0) * 1e6 / hz / n if n else float("nan")
    m = re.search(r"^WRAPS (\d+)$", r.get("stdout", ""), re.M)
    r["wraps"] = int(m.group(1)) if m else None
    m = re.search(r"^ONCE (\d+) ([\d.]+) ([\d.]+)$", r.get("stdout", ""),
                  re.M)
    if m:  # a lua_slices(once) script: its own count and time
        n, span = int(m.group(1)), float(m.group(3)) - float(m.group(2))
        r["wraps"] = 0  # never: each target at most once
        r["done"] = n
        r["seconds"] = span
        r["rps"] = n / span if n and span > 0 else 0.0
        r["cpu_us_per_req"] = ((t1 - t0) * 1e6 / hz / n if n
                               else float("nan"))
    if tail > 0:
        nn = r.get("done") or r["rps"] * seconds
        r["tail_cpu_us_per_req"] = ((t1 - tw) * 1e6 / hz / nn if nn
                                    else float("nan"))
    del r["stdout"]
    return r


def summary(v):
    """Median, min and max of @v."""
    return {"median": median(v), "min": min(v), "max": max(v)}
