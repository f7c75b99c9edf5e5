#!/usr/bin/python3
"""tests/bench/bench_monitoring.py - what monitoring costs (issue 19),
figures side by side, not pass/fail.

  * storaged, 4 KiB GETs (wrk, 64 keep-alive connections, presigned SigV4
    URLs over N objects): "off" (no --otlp-endpoint, no --console) against
    "on" (--otlp-endpoint to a local OTLP receiver with --otlp-interval 1,
    and --console with the page fetched once a second, as an open browser
    tab does with its 1 s refresh). Both servers run on their own drive
    directories with the same data; while one is measured the other is
    stopped with SIGSTOP (its receiver and page fetcher, processes of
    their own, pause too), so neither steals CPU from the other.
    --variant otlp|console isolates one side service; --variant none runs
    two identical servers: the A/A noise floor of this machine. Rounds alternate off/on; medians,
    ranges, the on/off ratio, and server CPU microseconds per request.
  * ecfs, a cold epoch: F small files (4..16 KiB) read once each by T
    threads (like DataLoader workers) from a fresh ro mount, with and
    without -o metrics=127.0.0.1:PORT (scraped once a second during the
    epoch, as Prometheus would); rounds alternate; files/s, ecfs CPU per
    file, on/off ratio.

  * the side services' own CPU: an idle storaged (16 drives) pushing and
    serving the page 10 times a second against one with both off: CPU
    microseconds per push or page load (steadier than req/s on a busy
    machine; at 1/s each, divide by the server's CPU per second of load).

Goal (issue 19): both ratios >= 0.98.

Usage: tests/bench/bench_monitoring.py [--seconds S] [--objects N]
       [--files F] [--threads T] [--rounds R] [--only get,epoch,idle]
       [--variant both,otlp,console,none]
Environment: ECFS_BIN_DIR (default <repo>/bin).
"""

import argparse
import base64
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "integration"))
import bench_s3_server as bs  # noqa: E402
from otlp_util import OtlpReceiver  # noqa: E402

BIN = bs.BIN
AK, SK = bs.AK, bs.SK


def start_storaged(work, name, extra):
    return start_storaged_n(work, name, extra, 4)


def start_storaged_n(work, name, extra, ndrives):
    drives = [os.path.join(work, name, "d%d" % i) for i in range(ndrives)]
    for d in drives:
        os.makedirs(d)
    port = bs.free_port()
    env = dict(os.environ, STORAGED_ROOT_USER=AK, STORAGED_ROOT_PASSWORD=SK)
    log = open(os.path.join(work, name + ".log"), "wb")
    p = subprocess.Popen([os.path.join(BIN, "storaged"), "serve", "--address",
                          "127.0.0.1:%d" % port] + extra + drives, env=env,
                         stdout=log, stderr=log)
    ep = "http://127.0.0.1:%d" % port
    bs.wait_http(ep + "/health/ready")
    return p, ep


def spread(v, fmt="%.0f"):
    return (fmt + " [" + fmt + "-" + fmt + "]") % (bs.median(v), min(v),
                                                  max(v))


RECEIVER = """
import signal, sys
sys.path.insert(0, %r)
from otlp_util import OtlpReceiver
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])  # all threads
rx = OtlpReceiver(int(sys.argv[1]))
print("ready", flush=True)
signal.sigwait([signal.SIGTERM])
print(rx.count("storaged"), len(rx.errors), flush=True)
""" % os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                   "integration")

PAGER = """
import sys, time, urllib.request
url, auth = sys.argv[1], sys.argv[2]
while True:
    try:
        rq = urllib.request.Request(url, headers={"Authorization": auth})
        urllib.request.urlopen(rq, timeout=5).read()
    except OSError:
        pass
    time.sleep(1.0)
"""

# What the "on" server runs with, per --variant: "both" is the issue's
# setting; "none" is an A/A calibration (two identical servers), which
# shows how far apart two equal servers land on this machine.
VARIANTS = ("both", "otlp", "console", "none")


def bench_get(a, work, variant="both", run=0):
    """The OTLP collector and the console tab run as processes of their own
    (as they would on another machine), stopped with the "on" server while
    "off" is measured, so the bench process's own work never lands in one
    side only; their CPU is reported apart."""
    rport, cport = bs.free_port(), bs.free_port()
    auth = "Basic " + base64.b64encode(("%s:%s" % (AK, SK)).encode()).decode()
    extra = []
    if variant in ("both", "otlp"):
        extra += ["--otlp-endpoint", "http://127.0.0.1:%d" % rport,
                  "--otlp-interval", "1"]
    if variant in ("both", "console"):
        extra += ["--console", "127.0.0.1:%d" % cport]
    procs = []
    try:
        rx = subprocess.Popen([sys.executable, "-c", RECEIVER, str(rport)],
                              stdout=subprocess.PIPE, text=True)
        procs.append(rx)
        assert rx.stdout.readline().strip() == "ready"
        off, ep_off = start_storaged(work, "off-%s-%d" % (variant, run), [])
        procs.append(off)
        on, ep_on = start_storaged(work, "on-%s-%d" % (variant, run), extra)
        procs.append(on)
        pager = None
        if "--console" in extra:
            pager = subprocess.Popen([sys.executable, "-c", PAGER,
                                      "http://127.0.0.1:%d/" % cport, auth])
            procs.append(pager)
        on_side = [on] + ([pager] if pager else [])
        side_pids = [rx.pid] + ([pager.pid] if pager else [])
        scripts = {}
        for name, ep in (("off", ep_off), ("on", ep_on)):
            s3 = bs.client(ep)
            s3.create_bucket(Bucket="bench")
            keys = ["obj/%05d.bin" % i for i in range(a.objects)]
            with concurrent.futures.ThreadPoolExecutor(16) as ex:
                list(ex.map(lambda k: s3.put_object(Bucket="bench", Key=k,
                                                    Body=os.urandom(4096)),
                            keys))
            urls = ["/" + s3.generate_presigned_url(
                "get_object", Params={"Bucket": "bench", "Key": k},
                ExpiresIn=3600).split("://", 1)[1].split("/", 1)[1]
                for k in keys]
            scripts[name] = os.path.join(work, "get_%s_%s_%d.lua"
                                         % (name, variant, run))
            bs.lua_rotate(scripts[name], "GET", urls)
        res = {"off": [], "on": []}
        side_cpu = 0.0
        for r in range(a.rounds):
            for name in (("off", "on") if r % 2 == 0 else ("on", "off")):
                if name == "off":
                    for p in on_side:
                        os.kill(p.pid, signal.SIGSTOP)
                    os.kill(off.pid, signal.SIGCONT)
                else:
                    os.kill(off.pid, signal.SIGSTOP)
                    for p in on_side:
                        os.kill(p.pid, signal.SIGCONT)
                me = off if name == "off" else on
                ep = ep_off if name == "off" else ep_on
                bs.wrk(ep, scripts[name], 1)  # warm
                s0 = bs.cpu_ticks(side_pids)
                res[name].append(bs.wrk_cpu(ep, scripts[name], a.seconds,
                                            [me.pid]))
                if name == "on":
                    side_cpu += bs.cpu_ticks(side_pids) - s0
        for p in (off, on) + ((pager,) if pager else ()):
            os.kill(p.pid, signal.SIGCONT)
        rps = {k: [x["rps"] for x in v] for k, v in res.items()}
        cpu = {k: [x["cpu_us_per_req"] for x in v] for k, v in res.items()}
        bad = sum(x["non2xx"] for v in res.values() for x in v)
        rx.terminate()
        out = rx.communicate(timeout=30)[0].split()
        pushes, rx_err = int(out[0]), int(out[1])
        side_s = side_cpu / os.sysconf("SC_CLK_TCK") / (a.rounds * a.seconds)
        print("GET 4 KiB, wrk -c64 %d s x %d rounds, %d objects, on = %s"
              % (a.seconds, a.rounds, a.objects, " ".join(extra) or
                 "no flags (A/A calibration)"))
        print("  off: %s req/s, %.1f us CPU/req" % (spread(rps["off"]),
                                                   bs.median(cpu["off"])))
        print("  on : %s req/s, %.1f us CPU/req  (%d pushes received, %d "
              "bad; collector + page fetcher used %.1f ms CPU per s)"
              % (spread(rps["on"]), bs.median(cpu["on"]), pushes, rx_err,
                 side_s * 1e3))
        print("  on/off: %.3f req/s (median of per-round ratios %.3f), "
              "CPU/req %.3f (per-round %s); non-2xx %d"
              % (bs.median(rps["on"]) / bs.median(rps["off"]),
                 bs.median([x / y for x, y in zip(rps["on"], rps["off"])]),
                 bs.median(cpu["on"]) / bs.median(cpu["off"]),
                 spread([x / y for x, y in zip(cpu["on"], cpu["off"])],
                        "%.3f"),
                 bad))
        k = "%s_%d" % (variant, run)
        return {"get_off_" + k: res["off"], "get_on_" + k: res["on"],
                "pushes_" + k: pushes}
    finally:
        for p in procs:
            try:
                os.kill(p.pid, signal.SIGCONT)
            except OSError:
                pass
            p.terminate()
            p.wait(30)


def bench_idle(a, work):
    """storaged's own CPU for one push and one page: 16 drives, pushes and
    page loads 10 times a second for --seconds*2, against the same server
    with both off; the difference divided by the count (steadier on a busy
    machine than a req/s ratio)."""
    rx = OtlpReceiver()
    cport = bs.free_port()
    auth = "Basic " + base64.b64encode(("%s:%s" % (AK, SK)).encode()).decode()
    out = {}
    for name, extra in (("off", []), ("on", [
            "--otlp-endpoint", rx.url, "--otlp-interval", "0.1",
            "--console", "127.0.0.1:%d" % cport])):
        p, ep = None, None
        try:
            p, ep = start_storaged_n(work, "idle-" + name, extra, 16)
            time.sleep(1)
            n0 = rx.count("storaged")
            c0 = bs.cpu_ticks([p.pid])
            t_end = time.time() + 2 * a.seconds
            pages = 0
            while time.time() < t_end:
                if name == "on":
                    rq = urllib.request.Request(
                        "http://127.0.0.1:%d/" % cport,
                        headers={"Authorization": auth})
                    urllib.request.urlopen(rq, timeout=5).read()
                    pages += 1
                time.sleep(0.1)
            cpu = (bs.cpu_ticks([p.pid]) - c0) / os.sysconf("SC_CLK_TCK")
            out[name] = (cpu, rx.count("storaged") - n0, pages)
        finally:
            if p:
                p.terminate()
                p.wait(30)
    rx.stop()
    extra_cpu = out["on"][0] - out["off"][0]
    events = out["on"][1] + out["on"][2]
    print("side services, idle storaged with 16 drives, %d s: off %.3f s CPU;"
          " on %.3f s CPU for %d pushes + %d page loads -> %.0f us per push or"
          " page" % (2 * a.seconds, out["off"][0], out["on"][0], out["on"][1],
                     out["on"][2], extra_cpu * 1e6 / max(1, events)))
    return {"idle": out}


def read_all(root, files, threads):
    def one(p):
        with open(os.path.join(root, p), "rb") as f:
            return len(f.read())
    with concurrent.futures.ThreadPoolExecutor(threads) as ex:
        return sum(ex.map(one, files))


def proc_cpu_s(pid):
    return bs.cpu_ticks([pid]) / os.sysconf("SC_CLK_TCK")


def ecfs_pid(mnt):
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"ecfs") and mnt.encode() in argv:
                return int(d)
    raise RuntimeError("no ecfs process for %s" % mnt)


def bench_epoch(a, work):
    sp, ep = start_storaged(work, "epoch", [])
    try:
        s3 = bs.client(ep)
        s3.create_bucket(Bucket="dset")
        files = ["c%02d/f%05d.bin" % (i % 10, i) for i in range(a.files)]
        sizes = {f: 4096 * (1 + i % 4) for i, f in enumerate(files)}
        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            list(ex.map(lambda f: s3.put_object(Bucket="dset", Key=f,
                                                Body=os.urandom(sizes[f])),
                        files))
        total = sum(sizes.values())
        env = dict(os.environ, AWS_ACCESS_KEY_ID=AK, AWS_SECRET_ACCESS_KEY=SK)
        res = {"off": [], "on": []}
        cpu = {"off": [], "on": []}
        for r in range(a.rounds + 1):  # round 0 warms storaged's page cache
            for name in (("off", "on") if r % 2 == 0 else ("on", "off")):
                mnt = tempfile.mkdtemp(dir=work)
                opts = "endpoint=%s,ro" % ep
                mport = None
                if name == "on":
                    mport = bs.free_port()
                    opts += ",metrics=127.0.0.1:%d" % mport
                subprocess.run([os.path.join(BIN, "ecfs"), "dset", mnt, "-o",
                                opts], env=env, check=True, timeout=30)
                stop = threading.Event()

                def scraper():  # Prometheus scraping every second
                    while not stop.wait(1.0):
                        try:
                            urllib.request.urlopen(
                                "http://127.0.0.1:%d/metrics" % mport,
                                timeout=5).read()
                        except OSError:
                            pass
                th = None
                if mport:
                    th = threading.Thread(target=scraper, daemon=True)
                    th.start()
                try:
                    pid = ecfs_pid(mnt)
                    c0 = proc_cpu_s(pid)
                    t0 = time.perf_counter()
                    got = read_all(mnt, files, a.threads)
                    dt = time.perf_counter() - t0
                    c1 = proc_cpu_s(pid)
                    assert got == total, (got, total)
                    if r > 0:
                        res[name].append(len(files) / dt)
                        cpu[name].append((c1 - c0) * 1e6 / len(files))
                finally:
                    stop.set()
                    if th:
                        th.join()
                    subprocess.run(["fusermount3", "-u", mnt], timeout=30)
                    os.rmdir(mnt)
        print("ecfs cold epoch, %d files of 4-16 KiB, %d reader threads, "
              "%d rounds (fresh ro mount each)" % (a.files, a.threads,
                                                    a.rounds))
        print("  without -o metrics: %s files/s, %.0f us ecfs CPU/file"
              % (spread(res["off"]), bs.median(cpu["off"])))
        print("  with    -o metrics: %s files/s, %.0f us ecfs CPU/file "
              "(scraped every 1 s)" % (spread(res["on"]),
                                       bs.median(cpu["on"])))
        print("  with/without: %.3f files/s (median of per-round ratios "
              "%.3f), CPU/file %.3f"
              % (bs.median(res["on"]) / bs.median(res["off"]),
                 bs.median([x / y for x, y in zip(res["on"], res["off"])]),
                 bs.median(cpu["on"]) / bs.median(cpu["off"])))
        return {"epoch_off": res["off"], "epoch_on": res["on"],
                "cpu_off": cpu["off"], "cpu_on": cpu["on"]}
    finally:
        sp.terminate()
        sp.wait(30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--objects", type=int, default=1000)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="get,epoch,idle")
    ap.add_argument("--variant", default="both",
                    help="GET bench: what 'on' runs with, comma-separated "
                    "of %s (none = two identical servers, the noise floor)"
                    % ",".join(VARIANTS))
    a = ap.parse_args()
    if any(v not in VARIANTS for v in a.variant.split(",")):
        ap.error("--variant: one or more of %s" % ",".join(VARIANTS))
    out = {}
    with tempfile.TemporaryDirectory(prefix="bench-mon-") as work:
        if "get" in a.only:
            for i, v in enumerate(a.variant.split(",")):
                out.update(bench_get(a, work, v, i))
        if "epoch" in a.only:
            out.update(bench_epoch(a, work))
        if "idle" in a.only:
            out.update(bench_idle(a, work))
    if os.environ.get("RESULTS_DIR"):
        with open(os.path.join(os.environ["RESULTS_DIR"], "monitoring.json"),
                  "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
