#!/usr/bin/python3
"""tests/bench/bench_s3_server.py - storaged's HTTP/S3 server against nginx
serving the same bytes from local disk (figures, not pass/fail).

What it measures, each side by side with nginx under the same load:
  * 4 KiB GETs: wrk, 64 keep-alive connections, rotating over N objects
    (storaged: presigned SigV4 URLs, so every request is authenticated;
    nginx: the same files under its root).
  * 4 KiB PUTs: wrk, 64 connections (storaged: presigned PUT URLs, full
    commit path with fsync; nginx: WebDAV PUT into its root, no fsync).
  * one 1 GiB object: a single-stream GET with curl (storaged presigned
    URL vs nginx static file), plus storaged's single-stream PUT and its
    peak resident memory (VmHWM) as a check on bounded buffering.
  * 4 KiB PUTs again on a second storaged started with --no-fsync.
  * policy: 4 KiB GETs presigned by a user whose policy has 10 statements
    (tests/bench/policy10.json: the GetObject Allow last, four Denies and
    an aws:SourceIp condition before it) against the same GETs presigned
    by root (no policy), alternating, on the same server: req/s and CPU
    per request (goal: the user at >= 0.97x of root).
  * medium objects (320 KiB and 1 MiB by default, --medium-sizes): GET with
    a warm page cache (wrk, 64 connections, --repeat runs alternating),
    GET with a cold page cache (every file of both sides evicted with
    posix_fadvise DONTNEED, then one pass over all objects with curl -Z,
    64 in parallel), and PUT (wrk, 64 connections; storaged syncs, nginx
    does not). Every row gives req/s and the server's CPU per request.
  * tls: a second storaged serving HTTPS (--tls-cert/--tls-key, a test CA
    made here with openssl) and nginx serving the same files over TLS
    (same certificate, its default TLS settings): GET 4 KiB and GET 1 MiB
    with wrk (64 keep-alive connections, so handshakes are amortised),
    alternating storaged-https / nginx-https / storaged-http, --repeat
    runs, medians and ranges of req/s and CPU per request; then one
    --big-mib object over TLS with curl --cacert, storaged vs nginx.

Usage: tests/bench/bench_s3_server.py [--seconds S] [--objects N]
       [--big-mib M] [--drives D] [--threads T] [--repeat R]
       [--only get,put,big,nofsync,policy,medium,tls] [--medium-sizes B,B]
       [--medium-objects N] [--loopfs MIB] [--storaged-args ARGS] [--keep]
--loopfs MIB puts each storaged drive on its own ext4 filesystem (a sparse
MIB MiB image on a loop device, mounted at the drive directory; root only),
the production layout in which storaged's group commit syncs each drive
with one shared syncfs; without it the drives are directories on one
shared filesystem and each file is fsynced (storaged/FORMAT.md "Writes").
--repeat R runs each GET figure R times, alternating storaged and nginx,
and reports the median (and the range). Every wrk row also gives the
server's CPU time per request (utime+stime from /proc, all of nginx's
workers summed), which is far less sensitive to other load than req/s.
Environment: ECFS_BIN_DIR (default <repo>/bin), BENCH_SIZE (tiny|small|
default|large, from scripts/bench: tiny shortens everything), RESULTS_DIR
(a server.json with every number is written there when set).
"""

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("ECFS_BIN_DIR", os.path.join(REPO, "bin"))
AK, SK = "benchroot", "bench-secret-key-0123456789"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except Exception:
            time.sleep(0.05)
    raise RuntimeError("no answer from %s" % url)


def client(endpoint):
    import boto3
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=AK,
                        aws_secret_access_key=SK, region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"},
                                      signature_version="s3v4",
                                      max_pool_connections=32))


def wrk(url, script, seconds, conns=64, threads=2, keep_stdout=False):
    """Runs wrk; returns (requests/s, non-2xx count, p50 ms, p99 ms), and
    with @keep_stdout wrk's output too ("stdout": what a script's done()
    printed)."""
    p = subprocess.run(["wrk", "-t%d" % threads, "-c%d" % conns, "-d%ds" % seconds,
                        "--latency", "-s", script, url],
                       capture_output=True, text=True, timeout=seconds + 60)
    out = p.stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errs = re.search(r"Socket errors:.*", out)

    def pct(label):
        m = re.search(r"^\s+%s%%\s+([\d.]+)(us|ms|s)" % label, out, re.M)
        if not m:
            return float("nan")
        v = float(m.group(1))
        return v / 1000 if m.group(2) == "us" else v * 1000 if m.group(2) == "s" else v
    return {"rps": rps, "non2xx": int(bad.group(1)) if bad else 0,
            "socket_errors": errs.group(0) if errs else "",
            "p50_ms": pct("50"), "p99_ms": pct("99"),
            **({"stdout": out} if keep_stdout else {})}


def cpu_ticks(pids):
    """utime+stime (clock ticks) of @pids and their threads."""
    t = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            t += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return t


def nginx_pids(master):
    """The nginx master and its worker processes."""
    out = [master]
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == master:
                        out.append(int(d))
            except OSError:
                pass
    return out


def wrk_cpu(url, script, seconds, pids):
    """wrk() plus the servers' CPU microseconds per request."""
    hz = os.sysconf("SC_CLK_TCK")
    t0 = cpu_ticks(pids)
    r = wrk(url, script, seconds)
    t1 = cpu_ticks(pids)
    nreq = r["rps"] * seconds
    r["cpu_us_per_req"] = (t1 - t0) * 1e6 / hz / nreq if nreq else float("nan")
    return r


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def lua_rotate(path, method, targets, body_len=0):
    """A wrk script that cycles through @targets (path+query strings)."""
    with open(path, "w") as f:
        f.write("local t = {\n")
        for u in targets:
            f.write("  %s,\n" % json.dumps(u))
        f.write("}\n")
        f.write("local i = 0\n")
        if body_len:
            f.write('local body = string.rep("x", %d)\n' % body_len)
        f.write("setup = function(thread) end\n")
        f.write("init = function(args) i = math.random(#t) end\n")
        f.write("request = function()\n  i = i + 1\n  if i > #t then i = 1 end\n")
        if body_len:
            f.write('  return wrk.format("%s", t[i], {["Content-Length"] = "%d"}, body)\n'
                    % (method, body_len))
        else:
            f.write('  return wrk.format("%s", t[i])\n' % method)
        f.write("end\n")


def curl_speed(url, out="/dev/null", method=None, upload=None, cacert=None):
    argv = ["curl", "-s", "-f", "-o", out, "-w", "%{http_code} %{speed_download} %{speed_upload}"]
    if cacert:
        argv += ["--cacert", cacert]
    if upload:
        argv += ["-T", upload]
    argv.append(url)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError("curl %s failed: %s %s" % (url[:80], p.stdout, p.stderr))
    code, down, up = p.stdout.split()
    return float(up if upload else down) / (1024 * 1024)


def evict(paths):
    """Drops the page cache of every file under @paths (clean pages only:
    both sides' files are synced before)."""
    for top in paths:
        for d, _, files in os.walk(top):
            for f in files:
                try:
                    fd = os.open(os.path.join(d, f), os.O_RDONLY)
                except OSError:
                    continue
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)


def curl_pass(base, targets, work, pids, par=64):
    """One pass over @targets with curl -Z (@par in parallel): req/s and the
    servers' CPU us per request."""
    cfg = os.path.join(work, "pass.cfg")
    with open(cfg, "w") as f:
        for t in targets:
            f.write('url = "%s%s"\noutput = "/dev/null"\n' % (base, t))
    hz = os.sysconf("SC_CLK_TCK")
    t0, w0 = cpu_ticks(pids), time.time()
    p = subprocess.run(["curl", "-s", "-f", "-Z", "--parallel-max", str(par), "-K", cfg],
                       capture_output=True, text=True, timeout=600)
    w1, t1 = time.time(), cpu_ticks(pids)
    if p.returncode != 0:
        raise RuntimeError("curl pass failed: %s" % p.stderr[:300])
    return {"rps": len(targets) / (w1 - w0),
            "cpu_us_per_req": (t1 - t0) * 1e6 / hz / len(targets)}


# what the GET rows' requests took in storaged (/metrics, before and after):
# which path answered them, and the body cache's own counters
GET_PATHS = ("storaged_get_loop_total", "storaged_get_zero_copy_total",
             "storaged_zcache_hits_total", "storaged_zcache_puts_total",
             "storaged_zcache_failed_total", "storaged_zcache_evictions_total",
             "storaged_zcache_bytes", "storaged_zcache_max_bytes",
             "storaged_index_resident", "storaged_index_cold_lookups_total",
             "storaged_index_residency_lost_total")


def get_paths(sep):
    """{sample: value} of the GET_PATHS samples on storaged's /metrics."""
    try:
        with urllib.request.urlopen(sep + "/metrics", timeout=10) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        if line.startswith(GET_PATHS):
            name, _, v = line.rpartition(" ")
            try:
                out[name] = float(v)
            except ValueError:
                pass
    return out


def paths_delta(a, b):
    """The GET_PATHS counters that moved from @a to @b (gauges as in @b)."""
    gauge = ("_bytes", "_resident")
    return {k: (v if k.endswith(gauge) else v - a.get(k, 0))
            for k, v in b.items() if k.endswith(gauge) or v != a.get(k, 0)}


def medium_phase(s3, sep, nep, root, drives, work, size, nobj, seconds, repeat,
                 spids, npids, do_get=True, do_put=True):
    """GET warm, GET cold and PUT rows for @nobj objects of @size bytes."""
    keys = ["med%d/%05d.bin" % (size, i) for i in range(nobj)]

    def up(k):
        v = os.urandom(size)
        s3.put_object(Bucket="bench", Key=k, Body=v)
        p = os.path.join(root, "bench", k)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(v)
            os.fsync(f.fileno())
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(up, keys))

    def rel(url):
        return "/" + url.split("://", 1)[1].split("/", 1)[1]
    get_s = [rel(s3.generate_presigned_url(
        "get_object", Params={"Bucket": "bench", "Key": k}, ExpiresIn=3600)) for k in keys]
    put_s = [rel(s3.generate_presigned_url(
        "put_object", Params={"Bucket": "bench", "Key": "putm/" + k}, ExpiresIn=3600))
        for k in keys]
    get_n = ["/bench/" + k for k in keys]
    put_n = ["/put/" + k for k in keys]
    sc = {}
    for name, method, targets, blen in [("get_s", "GET", get_s, 0), ("get_n", "GET", get_n, 0),
                                        ("put_s", "PUT", put_s, size),
                                        ("put_n", "PUT", put_n, size)]:
        sc[name] = os.path.join(work, "m%d_%s.lua" % (size, name))
        lua_rotate(sc[name], method, targets, blen)
    r = {"size": size, "objects": nobj}
    r["warm_s"], r["warm_n"], r["cold_s"], r["cold_n"] = [], [], [], []
    r["put_s"], r["put_n"] = [], []
    if do_get:
        wrk(sep, sc["get_s"], 1)
        wrk(nep, sc["get_n"], 1)
    m0 = get_paths(sep)
    for _ in range(repeat if do_get else 0):
        r["warm_s"].append(wrk_cpu(sep, sc["get_s"], seconds, spids))
        r["warm_n"].append(wrk_cpu(nep, sc["get_n"], seconds, npids))
    m1 = get_paths(sep)
    os.sync()
    for _ in range(repeat if do_get else 0):
        evict(drives + [os.path.dirname(drives[0])])  # + loop images
        r["cold_s"].append(curl_pass(sep, get_s, work, spids))
        evict([os.path.join(root, "bench")])
        r["cold_n"].append(curl_pass(nep, get_n, work, npids))
    if do_get:
        r["warm_paths"] = paths_delta(m0, m1)
        r["cold_paths"] = paths_delta(m1, get_paths(sep))
    for _ in range(repeat if do_put else 0):
        r["put_s"].append(wrk_cpu(sep, sc["put_s"], seconds, spids))
        r["put_n"].append(wrk_cpu(nep, sc["put_n"], seconds, npids))
    return r


def vm_hwm_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


NGINX_CONF = """
%(user)s
worker_processes %(workers)d;
daemon off;
pid %(dir)s/nginx.pid;
error_log %(dir)s/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    keepalive_timeout 60;
    client_body_temp_path %(dir)s/body;
    client_max_body_size 2g;
    server {
        listen 127.0.0.1:%(port)d;
        root %(root)s;
        location /put/ {
            dav_methods PUT;
            create_full_put_path on;
        }
    }
%(tls_server)s
}
"""

NGINX_TLS_SERVER = """
    server {
        listen 127.0.0.1:%(port)d ssl;
        ssl_certificate %(crt)s;
        ssl_certificate_key %(key)s;
        root %(root)s;
    }
"""


def big_get_runs(surl, nurl, spids, npids, mib, runs, cacert=None):
    """One-stream GETs of the big object, alternating storaged (@surl) and
    nginx (@nurl): MiB/s of each and server CPU ms per GiB of each."""
    sg, ng, scpu, ncpu = [], [], [], []
    hz = os.sysconf("SC_CLK_TCK")
    for _ in range(runs):
        for url, pids, speed, cpu in ((surl, spids, sg, scpu),
                                      (nurl, npids, ng, ncpu)):
            t0 = cpu_ticks(pids)
            speed.append(curl_speed(url, cacert=cacert))
            cpu.append((cpu_ticks(pids) - t0) * 1000 / hz / (mib / 1024))
    return sg, ng, scpu, ncpu


def make_certs(d):
    """A test CA and a certificate for 127.0.0.1 signed by it, made with
    openssl in @d: (CA cert, server cert, server key)."""
    def ossl(*args):
        subprocess.run(["openssl"] + list(args), check=True,
                       capture_output=True)
    ca, cak = os.path.join(d, "ca.crt"), os.path.join(d, "ca.key")
    crt, key = os.path.join(d, "srv.crt"), os.path.join(d, "srv.key")
    csr, ext = os.path.join(d, "srv.csr"), os.path.join(d, "srv.ext")
    ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", cak,
         "-out", ca, "-days", "2", "-subj", "/CN=bench-ca",
         "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    ossl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
         "-subj", "/CN=127.0.0.1")
    ossl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", cak,
         "-CAcreateserial", "-out", crt, "-days", "2", "-extfile", ext)
    return ca, crt, key


def tls_phase(a, work, env, root, keys, blobs, sep, spids, tnep, npids, ca,
              crt, key):
    """storaged over TLS (a second server on its own drives) against nginx
    over TLS on the same files, and against storaged over plain HTTP: GET
    4 KiB and 1 MiB (wrk), one big GET (curl). Returns a dict of runs."""
    import boto3
    from botocore.config import Config

    drives = [os.path.join(work, "t%d" % (i + 1)) for i in range(a.drives)]
    for d in drives:
        os.makedirs(d)
    port = free_port()
    argv = [os.path.join(BIN, "storaged"), "serve", "--address",
            "127.0.0.1:%d" % port, "--log-level", "warn",
            "--tls-cert", crt, "--tls-key", key]
    if a.threads:
        argv += ["--threads", str(a.threads)]
    argv += a.storaged_args.split()
    log = open(os.path.join(work, "storaged-tls.log"), "wb")
    tp = subprocess.Popen(argv + drives, env=env, stdout=log, stderr=log)
    out = {"proc": tp}
    tsep = "https://127.0.0.1:%d" % port
    ctx = __import__("ssl").create_default_context(cafile=ca)
    deadline = time.time() + 20
    while True:
        try:
            with urllib.request.urlopen(tsep + "/health/ready", timeout=1,
                                        context=ctx) as r:
                if r.status == 200:
                    break
        except Exception:
            if time.time() > deadline:
                raise
            time.sleep(0.05)
    ts3 = boto3.client("s3", endpoint_url=tsep, aws_access_key_id=AK,
                       aws_secret_access_key=SK, region_name="us-east-1",
                       verify=ca, config=Config(s3={"addressing_style": "path"},
                                                signature_version="s3v4",
                                                max_pool_connections=32))
    ts3.create_bucket(Bucket="bench")
    mib_keys = ["mib/%03d.bin" % i for i in range(a.tls_mib_objects)]
    mib = {k: os.urandom(1 << 20) for k in mib_keys}

    def up(kv):
        ts3.put_object(Bucket="bench", Key=kv[0], Body=kv[1])
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(up, blobs.items()))
        list(ex.map(up, mib.items()))
    for k, v in mib.items():
        p = os.path.join(root, "bench", k)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(v)
    # the plain-HTTP storaged gets the 1 MiB objects too
    s3 = client(sep)
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda kv: s3.put_object(Bucket="bench", Key=kv[0],
                                             Body=kv[1]), mib.items()))

    def rel(url):
        return "/" + url.split("://", 1)[1].split("/", 1)[1]

    def presigned(c, ks):
        return [rel(c.generate_presigned_url(
            "get_object", Params={"Bucket": "bench", "Key": k},
            ExpiresIn=3600)) for k in ks]
    tpids = [tp.pid]
    for size, ks in (("4k", keys), ("1m", mib_keys)):
        sc = {}
        for name, targets in (("tls_s", presigned(ts3, ks)),
                              ("http_s", presigned(s3, ks)),
                              ("tls_n", ["/bench/" + k for k in ks])):
            sc[name] = os.path.join(work, "%s_%s.lua" % (name, size))
            lua_rotate(sc[name], "GET", targets)
        wrk(tsep, sc["tls_s"], 1)
        wrk(tnep, sc["tls_n"], 1)
        wrk(sep, sc["http_s"], 1)
        runs = {"tls_s": [], "tls_n": [], "http_s": []}
        for _ in range(a.repeat):
            runs["tls_s"].append(wrk_cpu(tsep, sc["tls_s"], a.seconds, tpids))
            runs["tls_n"].append(wrk_cpu(tnep, sc["tls_n"], a.seconds, npids))
            runs["http_s"].append(wrk_cpu(sep, sc["http_s"], a.seconds, spids))
        out[size] = runs
    if "big" in a.only.split(",") or "tls_big" in a.only.split(","):
        big = os.path.join(root, "bench", "tbig.bin")
        chunk = os.urandom(1024 * 1024)
        with open(big, "wb") as f:
            for i in range(a.big_mib):
                f.write(chunk[i % 7:] + chunk[:i % 7])
        put_url = ts3.generate_presigned_url(
            "put_object", Params={"Bucket": "bench", "Key": "tbig.bin"},
            ExpiresIn=3600)
        out["bigput_mibs"] = curl_speed(put_url, upload=big, cacert=ca)
        get_url = ts3.generate_presigned_url(
            "get_object", Params={"Bucket": "bench", "Key": "tbig.bin"},
            ExpiresIn=3600)
        sg, ng, scpu, ncpu_ = big_get_runs(
            get_url, tnep + "/bench/tbig.bin", tpids, npids, a.big_mib,
            max(2, a.repeat), cacert=ca)
        back = os.path.join(work, "tbig.back")
        curl_speed(get_url, out=back, cacert=ca)
        out["big_identical"] = subprocess.run(["cmp", "-s", big, back]).returncode == 0
        os.unlink(back)
        os.unlink(big)
        out.update(big_s=sg, big_n=ng, big_s_cpu=scpu, big_n_cpu=ncpu_)
    return out


def main():
    size = os.environ.get("BENCH_SIZE", "default")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=3 if size == "tiny" else 10)
    ap.add_argument("--objects", type=int, default=200 if size == "tiny" else 1000)
    ap.add_argument("--big-mib", type=int, default=128 if size == "tiny" else 1024)
    ap.add_argument("--drives", type=int, default=16)
    ap.add_argument("--threads", type=int, default=0, help="storaged --threads")
    ap.add_argument("--repeat", type=int, default=1,
                    help="GET figures: runs per side (median reported)")
    ap.add_argument("--only", default="get,put,big,nofsync,policy,medium,tls",
                    help="comma list of phases: get,put,big,nofsync,policy,medium,tls "
                         "(medium = medium_get,medium_put; tls with big or tls_big "
                         "adds the big GET over TLS)")
    ap.add_argument("--tls-mib-objects", type=int, default=16 if size == "tiny" else 64,
                    help="1 MiB objects of the TLS GET row")
    ap.add_argument("--medium-sizes", default="327680,1048576",
                    help="object sizes in bytes of the medium GET/PUT rows")
    ap.add_argument("--medium-objects", type=int, default=100 if size == "tiny" else 300,
                    help="objects per medium size")
    ap.add_argument("--storaged-args", default="",
                    help="extra storaged serve options, e.g. '--cache-mem 256'")
    ap.add_argument("--loopfs", type=int, default=0,
                    help="MiB: each drive its own ext4 on a loop device (root)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    a = ap.parse_args()
    only = set(a.only.split(","))

    ncpu = os.cpu_count() or 1
    work = tempfile.mkdtemp(prefix="bench-s3-")
    procs = []
    mounts = []
    res = {"objects": a.objects, "seconds": a.seconds, "drives": a.drives,
           "cpus": ncpu, "big_mib": a.big_mib, "loopfs_mib": a.loopfs}
    try:
        # ---- storaged
        drives = [os.path.join(work, "d%d" % (i + 1)) for i in range(a.drives)]
        for d in drives:
            os.makedirs(d)
            if a.loopfs:
                img = d + ".img"
                with open(img, "wb") as f:
                    f.truncate(a.loopfs << 20)
                subprocess.run(["mkfs.ext4", "-q", "-F", img], check=True)
                subprocess.run(["mount", "-o", "loop", img, d], check=True)
                mounts.append(d)
        sport = free_port()
        env = dict(os.environ, STORAGED_ROOT_USER=AK, STORAGED_ROOT_PASSWORD=SK)
        argv = [os.path.join(BIN, "storaged"), "serve", "--address",
                "127.0.0.1:%d" % sport, "--log-level", "warn"]
        if a.threads:
            argv += ["--threads", str(a.threads)]
        argv += a.storaged_args.split()
        slog = open(os.path.join(work, "storaged.log"), "wb")
        sp = subprocess.Popen(argv + drives, env=env, stdout=slog, stderr=slog)
        procs.append(sp)
        sep = "http://127.0.0.1:%d" % sport
        wait_http(sep + "/health/ready")
        # ---- nginx
        root = os.path.join(work, "www")
        os.makedirs(os.path.join(root, "bench"))
        os.makedirs(os.path.join(root, "put"))
        os.makedirs(os.path.join(work, "ngx"))
        nport = free_port()
        conf = os.path.join(work, "ngx", "nginx.conf")
        tls_server, tnport = "", 0
        if "tls" in only:
            os.makedirs(os.path.join(work, "pki"))
            ca, crt, key = make_certs(os.path.join(work, "pki"))
            tnport = free_port()
            tls_server = NGINX_TLS_SERVER % {"port": tnport, "crt": crt,
                                             "key": key, "root": root}
        with open(conf, "w") as f:
            f.write(NGINX_CONF % {"user": "user root;" if os.geteuid() == 0 else "",
                                  "workers": ncpu, "dir": os.path.join(work, "ngx"),
                                  "port": nport, "root": root,
                                  "tls_server": tls_server})
        nlog = open(os.path.join(work, "ngx", "stdout.log"), "wb")
        np_ = subprocess.Popen(["nginx", "-c", conf, "-p", os.path.join(work, "ngx")],
                               stdout=nlog, stderr=nlog)
        procs.append(np_)
        nep = "http://127.0.0.1:%d" % nport

        # ---- data: the same 4 KiB objects on both sides
        s3 = client(sep)
        s3.create_bucket(Bucket="bench")
        keys = ["obj/%05d.bin" % i for i in range(a.objects)]
        blobs = {k: os.urandom(4096) for k in keys}

        def up(k):
            s3.put_object(Bucket="bench", Key=k, Body=blobs[k])
            p = os.path.join(root, "bench", k)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(blobs[k])
        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            list(ex.map(up, keys))
        wait_http(nep + "/bench/" + keys[0])

        def rel(url):
            return url.split("://", 1)[1].split("/", 1)[1]
        get_s = ["/" + rel(s3.generate_presigned_url(
            "get_object", Params={"Bucket": "bench", "Key": k}, ExpiresIn=3600))
            for k in keys]
        put_s = ["/" + rel(s3.generate_presigned_url(
            "put_object", Params={"Bucket": "bench", "Key": "put/" + k}, ExpiresIn=3600))
            for k in keys]
        get_n = ["/bench/" + k for k in keys]
        put_n = ["/put/" + k for k in keys]
        scripts = {}
        for name, method, targets, blen in [("get_s", "GET", get_s, 0),
                                            ("get_n", "GET", get_n, 0),
                                            ("put_s", "PUT", put_s, 4096),
                                            ("put_n", "PUT", put_n, 4096)]:
            scripts[name] = os.path.join(work, name + ".lua")
            lua_rotate(scripts[name], method, targets, blen)

        # warm both once, then measure alternately
        spids, npids = [sp.pid], nginx_pids(np_.pid)
        if "get" in only:
            wrk(sep, scripts["get_s"], 1)
            wrk(nep, scripts["get_n"], 1)
            gs, gn = [], []
            for _ in range(a.repeat):
                gs.append(wrk_cpu(sep, scripts["get_s"], a.seconds, spids))
                gn.append(wrk_cpu(nep, scripts["get_n"], a.seconds, npids))
            res["get4k_storaged_runs"], res["get4k_nginx_runs"] = gs, gn
            res["get4k_ratio_runs"] = [x["rps"] / y["rps"] for x, y in zip(gs, gn)]
            mid = sorted(range(len(gs)), key=lambda i: res["get4k_ratio_runs"][i])[len(gs) // 2]
            res["get4k_storaged"], res["get4k_nginx"] = gs[mid], gn[mid]
        if "policy" in only:
            # ---- a user with a 10-statement policy against root
            adm = subprocess.run(
                [os.path.join(BIN, "storaged"), "admin", "--endpoint", sep,
                 "user", "add", "bench", "--policy",
                 os.path.join(REPO, "tests", "bench", "policy10.json")],
                env=env, capture_output=True, text=True, timeout=60)
            if adm.returncode != 0:
                raise RuntimeError("storaged admin: " + adm.stderr)
            u = json.loads(adm.stdout)
            import boto3
            from botocore.config import Config
            us3 = boto3.client("s3", endpoint_url=sep,
                               aws_access_key_id=u["access_key"],
                               aws_secret_access_key=u["secret_key"],
                               region_name="us-east-1",
                               config=Config(s3={"addressing_style": "path"},
                                             signature_version="s3v4"))
            get_u = ["/" + rel(us3.generate_presigned_url(
                "get_object", Params={"Bucket": "bench", "Key": k}, ExpiresIn=3600))
                for k in keys]
            scripts["get_u"] = os.path.join(work, "get_u.lua")
            lua_rotate(scripts["get_u"], "GET", get_u, 0)
            wrk(sep, scripts["get_u"], 1)
            wrk(sep, scripts["get_s"], 1)
            pu, pr = [], []
            for _ in range(max(3, a.repeat)):
                pu.append(wrk_cpu(sep, scripts["get_u"], a.seconds, spids))
                pr.append(wrk_cpu(sep, scripts["get_s"], a.seconds, spids))
            res["policy_user_runs"], res["policy_root_runs"] = pu, pr
            res["policy_ratio_runs"] = [x["rps"] / y["rps"] for x, y in zip(pu, pr)]
            res["policy_cpu_ratio_runs"] = [x["cpu_us_per_req"] / y["cpu_us_per_req"]
                                            for x, y in zip(pu, pr)]
        if "put" in only:
            res["put4k_storaged"] = wrk_cpu(sep, scripts["put_s"], a.seconds, spids)
            res["put4k_nginx"] = wrk_cpu(nep, scripts["put_n"], a.seconds, npids)

        if "tls" in only:
            t = tls_phase(a, work, env, root, keys, blobs, sep, spids,
                          "https://127.0.0.1:%d" % tnport, npids, ca, crt, key)
            procs.append(t.pop("proc"))
            res["tls"] = t

        mg = "medium" in only or "medium_get" in only
        mp = "medium" in only or "medium_put" in only
        if mg or mp:
            res["medium"] = [
                medium_phase(s3, sep, nep, root, drives, work, int(z), a.medium_objects,
                             a.seconds, a.repeat, spids, npids, mg, mp)
                for z in a.medium_sizes.split(",")]

        if "big" in only:
            # ---- one big object, single stream
            big = os.path.join(root, "bench", "big.bin")
            chunk = os.urandom(1024 * 1024)
            with open(big, "wb") as f:
                for i in range(a.big_mib):
                    f.write(chunk[i % 7:] + chunk[:i % 7])
            put_url = s3.generate_presigned_url(
                "put_object", Params={"Bucket": "bench", "Key": "big.bin"}, ExpiresIn=3600)
            res["bigput_storaged_mibs"] = curl_speed(put_url, upload=big)
            get_url = s3.generate_presigned_url(
                "get_object", Params={"Bucket": "bench", "Key": "big.bin"}, ExpiresIn=3600)
            sg, ng, scpu, ncpu_ = big_get_runs(
                get_url, nep + "/bench/big.bin", spids, npids, a.big_mib,
                max(2, a.repeat))
            res["bigget_storaged_runs"], res["bigget_nginx_runs"] = sg, ng
            res["bigget_storaged_cpu_ms_per_gib"] = scpu
            res["bigget_nginx_cpu_ms_per_gib"] = ncpu_
            res["bigget_storaged_mibs"] = max(sg)
            res["bigget_nginx_mibs"] = max(ng)
            # correctness of the big object (sha of what storaged returns)
            out = os.path.join(work, "big.back")
            curl_speed(get_url, out=out)
            res["bigget_identical"] = subprocess.run(["cmp", "-s", big, out]).returncode == 0
            os.unlink(out)
            res["storaged_vmhwm_mib"] = vm_hwm_kib(sp.pid) / 1024

        if "nofsync" in only:
            # ---- PUT again with storaged --no-fsync (nginx does not sync
            # either), on a second server with fresh drives
            sp.send_signal(signal.SIGTERM)
            sp.wait(30)
            drives2 = [os.path.join(work, "nf%d" % (i + 1)) for i in range(a.drives)]
            for d in drives2:
                os.makedirs(d)
            sport2 = free_port()
            argv2 = [os.path.join(BIN, "storaged"), "serve", "--address",
                     "127.0.0.1:%d" % sport2, "--log-level", "warn", "--no-fsync"]
            if a.threads:
                argv2 += ["--threads", str(a.threads)]
            sp2 = subprocess.Popen(argv2 + drives2, env=env, stdout=slog, stderr=slog)
            procs.append(sp2)
            sep2 = "http://127.0.0.1:%d" % sport2
            wait_http(sep2 + "/health/ready")
            s3b = client(sep2)
            s3b.create_bucket(Bucket="bench")
            put_s2 = ["/" + rel(s3b.generate_presigned_url(
                "put_object", Params={"Bucket": "bench", "Key": "put/" + k}, ExpiresIn=3600))
                for k in keys]
            scripts["put_s2"] = os.path.join(work, "put_s2.lua")
            lua_rotate(scripts["put_s2"], "PUT", put_s2, 4096)
            res["put4k_storaged_nofsync"] = wrk(sep2, scripts["put_s2"], a.seconds)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
        for d in mounts:  # mount -o loop detaches its loop device here
            subprocess.run(["umount", d])
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("kept", work)

    def row(label, s, n, unit):
        ratio = s / n if n else float("nan")
        return "| %-40s | %12.1f | %12.1f | %6.2f |" % (label + " (" + unit + ")", s, n, ratio)
    print("storaged vs nginx, 127.0.0.1, %d CPUs, %d drives (one disk%s), %d objects, "
          "wrk -c64 %ds, %d run(s) per GET figure%s" % (
              ncpu, a.drives, ", each its own %d MiB ext4 on a loop device" % a.loopfs
              if a.loopfs else "", a.objects, a.seconds, a.repeat,
              ", storaged " + a.storaged_args if a.storaged_args else ""))
    print()
    print("| %-40s | %12s | %12s | %6s |" % ("test", "storaged", "nginx", "ratio"))
    print("|%s|%s|%s|%s|" % ("-" * 42, "-" * 14, "-" * 14, "-" * 8))
    if "get4k_storaged" in res:
        g, gn = res["get4k_storaged"], res["get4k_nginx"]
        print(row("GET 4 KiB, 64 conns", g["rps"], gn["rps"], "req/s"))
        print(row("GET 4 KiB p99", g["p99_ms"], gn["p99_ms"], "ms"))
        print(row("GET 4 KiB server CPU per request", g["cpu_us_per_req"],
                  gn["cpu_us_per_req"], "us"))
    if "put4k_storaged" in res:
        p, pn = res["put4k_storaged"], res["put4k_nginx"]
        print(row("PUT 4 KiB, 64 conns", p["rps"], pn["rps"], "req/s"))
        print(row("PUT 4 KiB p99", p["p99_ms"], pn["p99_ms"], "ms"))
        if "put4k_storaged_nofsync" in res:
            pf = res["put4k_storaged_nofsync"]
            print(row("PUT 4 KiB --no-fsync, 64 conns", pf["rps"], pn["rps"], "req/s"))
    if "bigget_storaged_mibs" in res:
        print(row("GET %d MiB, one stream" % a.big_mib, res["bigget_storaged_mibs"],
                  res["bigget_nginx_mibs"], "MiB/s"))
        print("| %-40s | %12.1f | %12s | %6s |" % ("PUT %d MiB, one stream (MiB/s)" % a.big_mib,
                                                    res["bigput_storaged_mibs"], "-", "-"))
    for m in res.get("medium", []):
        lab = ("%d KiB" % (m["size"] // 1024)) if m["size"] < 1 << 20 else \
              ("%g MiB" % (m["size"] / (1 << 20)))
        for what, ks, kn in (("GET %s warm, 64 conns" % lab, "warm_s", "warm_n"),
                             ("GET %s cold, one pass, 64 par" % lab, "cold_s", "cold_n"),
                             ("PUT %s, 64 conns" % lab, "put_s", "put_n")):
            if not m[ks]:
                continue
            srps = median([x["rps"] for x in m[ks]])
            nrps = median([x["rps"] for x in m[kn]])
            print(row(what, srps, nrps, "req/s"))
            print(row(what.split(",")[0] + " server CPU per request",
                      median([x["cpu_us_per_req"] for x in m[ks]]),
                      median([x["cpu_us_per_req"] for x in m[kn]]), "us"))
    print()
    for m in res.get("medium", []):
        for ks, kn in (("warm_s", "warm_n"), ("cold_s", "cold_n"), ("put_s", "put_n")):
            if not m[ks]:
                continue
            print("%d B %s runs: storaged req/s %s CPU us %s; nginx req/s %s CPU us %s" % (
                m["size"], ks[:-2], [round(x["rps"]) for x in m[ks]],
                [round(x["cpu_us_per_req"]) for x in m[ks]],
                [round(x["rps"]) for x in m[kn]],
                [round(x["cpu_us_per_req"]) for x in m[kn]]))
            if m.get(ks[:-2] + "_paths"):
                print("  %d B %s GETs in storaged (/metrics): %s" % (
                    m["size"], ks[:-2], ", ".join(
                        "%s %d" % (k.replace("storaged_", ""), v)
                        for k, v in sorted(m[ks[:-2] + "_paths"].items()))))
            bad = [x for x in m[ks] + m[kn] if x.get("non2xx") or x.get("socket_errors")]
            if bad:
                print("note: %d B %s: non-2xx or socket errors %s" % (
                    m["size"], ks[:-2], [(x.get("non2xx"), x.get("socket_errors")) for x in bad]))
    if a.repeat > 1 and "get4k_ratio_runs" in res:
        r = res["get4k_ratio_runs"]
        print("GET 4 KiB ratio over %d runs: median %.2f, range %.2f-%.2f; storaged req/s %s; "
              "nginx req/s %s" % (len(r), median(r), min(r), max(r),
                                  [round(x["rps"]) for x in res["get4k_storaged_runs"]],
                                  [round(x["rps"]) for x in res["get4k_nginx_runs"]]))
        print("GET 4 KiB CPU us/req: storaged %s nginx %s" % (
            [round(x["cpu_us_per_req"], 1) for x in res["get4k_storaged_runs"]],
            [round(x["cpu_us_per_req"], 1) for x in res["get4k_nginx_runs"]]))
    if "policy_ratio_runs" in res:
        r, c = res["policy_ratio_runs"], res["policy_cpu_ratio_runs"]
        print("GET 4 KiB, user with a 10-statement policy vs root (no policy), "
              "%d alternating runs: req/s ratio median %.3f (range %.3f-%.3f); "
              "user req/s %s, root req/s %s" % (
                  len(r), median(r), min(r), max(r),
                  [round(x["rps"]) for x in res["policy_user_runs"]],
                  [round(x["rps"]) for x in res["policy_root_runs"]]))
        print("  server CPU us/req: user %s, root %s; CPU ratio median %.3f "
              "(range %.3f-%.3f)" % (
                  [round(x["cpu_us_per_req"], 1) for x in res["policy_user_runs"]],
                  [round(x["cpu_us_per_req"], 1) for x in res["policy_root_runs"]],
                  median(c), min(c), max(c)))
    if "bigget_storaged_runs" in res:
        print("GET %d MiB runs (MiB/s): storaged %s nginx %s" % (
            a.big_mib, [round(x) for x in res["bigget_storaged_runs"]],
            [round(x) for x in res["bigget_nginx_runs"]]))
        print("GET %d MiB server CPU ms per GiB: storaged %s nginx %s" % (
            a.big_mib, [round(x) for x in res["bigget_storaged_cpu_ms_per_gib"]],
            [round(x) for x in res["bigget_nginx_cpu_ms_per_gib"]]))
        print("storaged peak RSS (VmHWM) over the whole run: %.1f MiB; big GET bytes "
              "identical: %s" % (res["storaged_vmhwm_mib"], res["bigget_identical"]))
    if "tls" in res:
        t = res["tls"]
        print()
        print("TLS (storaged --tls-cert vs nginx ssl, same certificate and files; "
              "and storaged https vs http), wrk -c64 %ds, %d alternating run(s):"
              % (a.seconds, a.repeat))
        for size, lab in (("4k", "GET 4 KiB"), ("1m", "GET 1 MiB")):
            r = t[size]
            s_rps = [x["rps"] for x in r["tls_s"]]
            n_rps = [x["rps"] for x in r["tls_n"]]
            h_rps = [x["rps"] for x in r["http_s"]]
            vs_n = [x / y for x, y in zip(s_rps, n_rps)]
            vs_h = [x / y for x, y in zip(s_rps, h_rps)]
            cpu = {k: [x["cpu_us_per_req"] for x in r[k]] for k in r}
            print("| %-40s | %12.1f | %12.1f | %6.2f |" % (
                lab + " https (req/s)", median(s_rps), median(n_rps),
                median(vs_n)))
            print("| %-40s | %12.1f | %12.1f | %6.2f |" % (
                lab + " https CPU per request (us)", median(cpu["tls_s"]),
                median(cpu["tls_n"]),
                median(cpu["tls_s"]) / median(cpu["tls_n"])))
            print("%s https: storaged/nginx req/s ratio median %.2f (range "
                  "%.2f-%.2f); storaged https/http median %.2f (range %.2f-%.2f)"
                  % (lab, median(vs_n), min(vs_n), max(vs_n), median(vs_h),
                     min(vs_h), max(vs_h)))
            print("  req/s: storaged https %s, nginx https %s, storaged http %s" % (
                [round(x) for x in s_rps], [round(x) for x in n_rps],
                [round(x) for x in h_rps]))
            print("  CPU us/req: storaged https %s, nginx https %s, storaged http %s" % (
                [round(x, 1) for x in cpu["tls_s"]], [round(x, 1) for x in cpu["tls_n"]],
                [round(x, 1) for x in cpu["http_s"]]))
            bad = [x for k in r for x in r[k] if x.get("non2xx") or x.get("socket_errors")]
            if bad:
                print("  note: non-2xx or socket errors %s" % [
                    (x.get("non2xx"), x.get("socket_errors")) for x in bad])
        if "big_s" in t:
            print("GET %d MiB one stream over TLS (curl): storaged %s MiB/s, nginx %s "
                  "MiB/s, ratio of medians %.2f; server CPU ms/GiB storaged %s nginx %s;"
                  " bytes identical: %s; PUT over TLS %.0f MiB/s" % (
                      a.big_mib, [round(x) for x in t["big_s"]],
                      [round(x) for x in t["big_n"]],
                      median(t["big_s"]) / median(t["big_n"]),
                      [round(x) for x in t["big_s_cpu"]],
                      [round(x) for x in t["big_n_cpu"]], t["big_identical"],
                      t["bigput_mibs"]))
    for k in ("get4k_storaged", "put4k_storaged", "get4k_nginx", "put4k_nginx",
              "put4k_storaged_nofsync"):
        if k in res and (res[k]["non2xx"] or res[k]["socket_errors"]):
            print("note: %s: non-2xx %d %s" % (k, res[k]["non2xx"], res[k]["socket_errors"]))
    if "put4k_storaged" in res:
        print("PUT: storaged syncs each object to disk before answering (default "
              "durability); nginx's DAV PUT does not fsync; the --no-fsync row "
              "compares like with like.")
    if os.environ.get("RESULTS_DIR"):
        with open(os.path.join(os.environ["RESULTS_DIR"], "server.json"), "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
