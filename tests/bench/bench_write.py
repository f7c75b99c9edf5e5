#!/usr/bin/python3
"""tests/bench/bench_write.py - write throughput into a mount: local disk,
ecfs, s3fs-fuse and rclone mount, each on the same storaged, side by side
in one run; and the server's own single-stream PUT rate (boto3) as the
ceiling of the big-file figure. Figures, not pass/fail.

Workloads (each peer writes into a fresh folder every round):
  cp      cp -r of the ImageFolder dataset (scripts/gen-dataset, the
          3000-file default preset, cached under var/bench/), files/s
  big     cp of one 1 GiB file (random bytes), MiB/s
  rsync   rsync -a of the dataset (temp file + rename per file), files/s
  put     boto3 put_object of the same 1 GiB file (one PUT, one stream):
          the server's single-stream PUT rate, MiB/s
The bucket is warmed first (1500 PUT+DELETE of 64 KiB objects): a new
bucket's first PUTs also make its object directories on the drives, which
would slow whichever peer ran first.
Beside each small-file figure: for ecfs, its own S3 and FUSE requests
per file (.ecfs-stats: put, head, list..., fuse_requests); the server's
requests per file and the
share of the wall time the server spent inside PutObject (its own
request-duration histogram from /metrics). A client that waits for one
PUT per file in close() cannot go faster than that PUT: a share near
100% means the client is at the server's floor and only the server's PUT
latency (fsync at commit) is left.
With --base-bin DIR, peer ecfs-base is the ecfs of another build (DIR/ecfs;
name it in --peers) on the same storaged: an A/B of two client builds in
one run, rounds rotating as for the other peers (the ratio ecfs/ecfs-base
is printed).
Every figure includes the uploads: ecfs, s3fs and rclone (VFS cache off)
finish a file's upload in close(); ecfs-kperm (ecfs -o
default_permissions: the kernel checks permissions, one GETATTR more per
created file; only when named in --peers) too; ecfs-async (ecfs -o
async_close, not the default) lets close() of a small new file return before its PUT and
waits for the last ones at unmount; its figures include those (the clock
stops when .ecfs-stats shows async_queued 0); for local disk
the big file's figure includes its fsync (else it measures the page
cache). Rounds rotate the
peer order; tables give medians and [min-max]; ratios are against s3fs
and rclone (small files) and against boto3's PUT (big file).

Usage: tests/bench/bench_write.py [--repeat N] [--peers local,ecfs,...]
       [--tests cp,big,rsync,put] [--big-mib N] [--files N] [--results DIR]
       [--no-fsync] [--warm N] [--workdir DIR] [--base-bin DIR]
Needs root (mounts).

Stopped by SIGTERM (`timeout`), SIGINT (^C) or SIGHUP, or by an error, it
still unmounts every peer's mount, ends every client and workload process
it started (cp and rsync run in their own process groups, killed whole)
and stops its storaged before it exits (cleanup(); also at exit), and
leaves its work folder only when a mount could not be removed.
"""

import argparse
import atexit
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_loader as bl  # noqa: E402  (Storaged, Mount, helpers)

PEERS = ["local", "ecfs", "ecfs-async", "s3fs", "rclone"]
# ecfs-async: ecfs -o async_close (close() of a small new file does not
# wait for its PUT; an upload error is only logged): not the default.
# ecfs-kperm (not run unless named): ecfs -o default_permissions, the
# kernel's permission checks (one GETATTR of the parent per created file),
# the default before ecfs checked permissions itself
EXTRA = {"ecfs-async": "async_close", "ecfs-kperm": "default_permissions"}
TESTS = ["cp", "big", "rsync", "put"]
BUCKET = "wbench"


# Everything this run started that must not outlive it: the peers'
# mounts (registered before their client starts), the workload running
# now (cp or rsync, a process group of its own) and the storaged.
LIVE = {"mounts": [], "work": None, "srv": None}
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def on_signal(sig, _frame):
    """Unwinds the run (finally blocks, then cleanup at exit)."""
    raise SystemExit(128 + sig)


def kill_group(p):
    """SIGKILLs the process group of @p (started with start_new_session)
    and reaps @p."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    p.wait()


def cleanup():
    """Ends the workload, unmounts every peer still mounted (ending its
    client), stops the storaged. Idempotent. The stop signals are blocked
    meanwhile, so a second ^C or SIGTERM cannot cut it short. Returns the
    mount points that could not be unmounted."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    left = []
    try:
        if LIVE["work"] is not None:
            kill_group(LIVE["work"])
            LIVE["work"] = None
        for m in list(LIVE["mounts"]):
            try:
                m.unmount()
            except Exception as e:  # go on with the others
                log("unmount of %s: %r" % (m.mnt, e))
            if bl.is_mounted(m.mnt):
                left.append(m.mnt)
                log("still mounted: %s" % m.mnt)
            elif m in LIVE["mounts"]:
                LIVE["mounts"].remove(m)
        if LIVE["srv"] is not None:
            LIVE["srv"].stop()
            LIVE["srv"] = None
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    return left


class WMount(bl.Mount):
    """A writable mount of BUCKET:prefix (bench_loader's are ro), known to
    cleanup() from before its client starts until it is unmounted."""

    def mount(self, timeout=30):
        LIVE["mounts"].append(self)
        super().mount(timeout)

    def unmount(self):
        super().unmount()
        if self.proc is None and not bl.is_mounted(self.mnt) and \
                self in LIVE["mounts"]:
            LIVE["mounts"].remove(self)

    def argv_env(self):
        argv, env = super().argv_env()
        src = {"ecfs": "%s:%s" % (bl.BUCKET, self.prefix),
               "ecfs-base": "%s:%s" % (bl.BUCKET, self.prefix),
               "s3fs": "%s:/%s" % (bl.BUCKET, self.prefix),
               "rclone": "bench:%s/%s" % (bl.BUCKET, self.prefix)}[self.kind]
        dst = src.replace(bl.BUCKET, BUCKET, 1) if self.kind != "rclone" \
            else "bench:%s/%s" % (BUCKET, self.prefix)
        argv = [dst if x == src else x for x in argv]
        if self.kind in ("ecfs", "ecfs-base"):
            argv[-1] = argv[-1].replace(",ro", "")
        elif self.kind == "s3fs":
            argv[-1] = argv[-1].replace(",ro,", ",")
        elif self.kind == "rclone":
            argv.remove("--read-only")
        return argv, env


def log(msg):
    print("[bench_write %6.1fs] %s" % (time.monotonic() - T0, msg),
          flush=True)


T0 = time.monotonic()


def count_files(root):
    return sum(len(f) for _, _, f in os.walk(root))


def server_counters(srv):
    """{api: (count, duration_sum_s)} from storaged's /metrics."""
    out = {}
    with urllib.request.urlopen(srv.endpoint + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            for kind in ("count", "sum"):
                pre = "storaged_request_duration_seconds_%s{api=\"" % kind
                if line.startswith(pre):
                    api = line[len(pre):line.index('"', len(pre))]
                    c, t = out.get(api, (0, 0.0))
                    v = float(line.rsplit(" ", 1)[1])
                    out[api] = (v, t) if kind == "count" else (c, v)
    return out


def server_delta(before, after, nfiles, wall):
    """'N PUT/file, HEAD ..., PUT share of wall X%' for one run."""
    parts = []
    put_s = 0.0
    for api in sorted(after):
        n = after[api][0] - before.get(api, (0, 0.0))[0]
        if n <= 0:
            continue
        if api == "PutObject":
            put_s = after[api][1] - before.get(api, (0, 0.0))[1]
        parts.append("%s %.2f" % (api, n / nfiles))
    return "%s per file; server in PutObject %.0f%% of the wall time" % (
        ", ".join(parts), 100.0 * put_s / wall), 100.0 * put_s / wall


CLIENT_REQ = ("put", "head", "list", "get", "copy", "del", "mpu", "parts")


def ecfs_counters(m, root):
    """An ecfs mount's own counters (.ecfs-stats), or None for the other
    peers."""
    if m is None or m.kind not in ("ecfs", "ecfs-base"):
        return None
    out = {}
    with open(os.path.join(root, ".ecfs-stats")) as f:
        for line in f:
            k, _, v = line.partition(" ")
            try:
                out[k] = int(v)
            except ValueError:
                pass
    return out


def client_note(res, peer, t, before, after, nfiles):
    """Records and describes an ecfs peer's S3 requests (all and by kind)
    and FUSE requests per file, from its .ecfs-stats."""
    if before is None or after is None:
        return ""
    d = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    req = sum(d.get(k, 0) for k in CLIENT_REQ)
    fuse = d.get("fuse_requests", 0)
    res.setdefault(("req", peer, t), []).append(req / nfiles)
    res.setdefault(("fuse", peer, t), []).append(fuse / nfiles)
    kinds = ", ".join("%s %.3f" % (k.upper(), d[k] / nfiles)
                      for k in CLIENT_REQ if d.get(k))
    return "; client S3 requests %.3f/file (%s), FUSE requests %.2f/file" % (
        req / nfiles, kinds or "none", fuse / nfiles)


def run_work(argv):
    """Runs the workload @argv in a process group of its own (so neither
    it nor a child of it, rsync's receiver, keeps a mount busy after a
    stop: cleanup() kills the group). Raises CalledProcessError."""
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                         start_new_session=True)
    LIVE["work"] = p
    try:
        rc = p.wait()
    except BaseException:
        kill_group(p)
        raise
    finally:
        LIVE["work"] = None
    if rc != 0:
        raise subprocess.CalledProcessError(rc, argv)


def timed(argv, mnt=None):
    """Seconds @argv ran; with @mnt (an ecfs -o async_close mount), until
    its last upload after close is done too (.ecfs-stats async_queued)."""
    t = time.perf_counter()
    run_work(argv)
    while mnt is not None:
        with open(os.path.join(mnt, ".ecfs-stats")) as f:
            if "async_queued 0\n" in f.read():
                break
        time.sleep(0.001)
    return time.perf_counter() - t


def main():
    # `timeout` sends SIGTERM, ^C SIGINT: unwind through the finally
    # blocks and cleanup(), so every mount is unmounted and every process
    # ended (an s3fs mount outlived a run cut by `timeout` before)
    for sig in STOP_SIGNALS:
        signal.signal(sig, on_signal)
    atexit.register(cleanup)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--tests", default=",".join(TESTS))
    ap.add_argument("--big-mib", type=int, default=1024)
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--warm", type=int, default=1500,
                    help="PUT+DELETEs that warm the bucket first")
    ap.add_argument("--results", default=None,
                    help="also write write.md into this folder")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--no-fsync", action="store_true",
                    help="storaged --no-fsync: PUTs no longer wait for the "
                    "disk, so the figures show the clients' own costs")
    ap.add_argument("--base-bin", default=None,
                    help="folder of another build's ecfs: the ecfs-base "
                    "peer (name it in --peers), an A/B in one run")
    a = ap.parse_args()
    if a.base_bin:
        bl.BASE_BIN = os.path.abspath(a.base_bin)
    peers = [p for p in a.peers.split(",") if p]
    if "ecfs-base" in peers and not a.base_bin:
        ap.error("peer ecfs-base needs --base-bin")
    tests = [t for t in a.tests.split(",") if t]

    work = tempfile.mkdtemp(prefix="bench-write-", dir=a.workdir)
    cache = os.path.join(bl.REPO, "var", "bench")
    data = os.path.join(cache, "dataset-w%d" % a.files)
    if not os.path.isdir(data):
        subprocess.run([bl.PY, os.path.join(bl.REPO, "scripts", "gen-dataset"),
                        data, "--preset", "default", "--files",
                        str(a.files), "--quiet"], check=True)
    nfiles = count_files(data)
    big = os.path.join(work, "big.bin")
    # only when a test reads it: its writeback (1 GiB into --workdir) went
    # on under the first peer's small-file run and cut that round by half
    # (session 14: ecfs cp -r 215 files/s in round 0, 469-567 after)
    if "big" in tests or "put" in tests:
        with open(big, "wb") as f:
            chunk = os.urandom(1 << 20)
            for i in range(a.big_mib):
                f.write(chunk[i % 7:] + chunk[:i % 7])  # not dedupable
    srv = bl.Storaged(os.path.join(work, "drives"),
                      args=["--no-fsync"] if a.no_fsync else [])
    LIVE["srv"] = srv
    srv.start()
    if True:
        import boto3
        from botocore.config import Config
        s3 = boto3.client("s3", endpoint_url=srv.endpoint,
                          aws_access_key_id=bl.ACCESS,
                          aws_secret_access_key=bl.SECRET,
                          region_name="us-east-1",
                          config=Config(s3={"addressing_style": "path"}))
    s3.create_bucket(Bucket=BUCKET)
    warm_bucket(s3, a.warm)
    log("storaged %s, %d files (%.0f MiB), big file %s"
        % (srv.endpoint, nfiles,
           sum(os.path.getsize(os.path.join(d, n))
               for d, _, fs in os.walk(data) for n in fs) / 2**20,
           "%d MiB" % a.big_mib if os.path.exists(big) else "none"))
    res = {(p, t): [] for p in peers + ["boto3"] for t in tests}
    res["srv"] = {}
    try:
        for r in range(a.repeat):
            order = peers[r % len(peers):] + peers[:r % len(peers)]
            for peer in order:
                run_peer(peer, r, tests, data, nfiles, big, a.big_mib, srv,
                         s3, work, res)
            if "put" in tests:
                t = time.perf_counter()
                with open(big, "rb") as f:
                    s3.put_object(Bucket=BUCKET, Key="put/r%d" % r, Body=f)
                res[("boto3", "put")].append(a.big_mib /
                                             (time.perf_counter() - t))
                s3.delete_object(Bucket=BUCKET, Key="put/r%d" % r)
                log("boto3 put: %.0f MiB/s" % res[("boto3", "put")][-1])
    finally:
        left = cleanup()
        if left:  # never remove files through a mount still there
            log("work folder %s kept: %s still mounted" % (work, left))
        else:
            shutil.rmtree(work, ignore_errors=True)
    md = table(res, peers, tests, a, nfiles)
    print(md)
    if a.results:
        os.makedirs(a.results, exist_ok=True)
        with open(os.path.join(a.results, "write.md"), "w") as f:
            f.write(md)
    return 0


def warm_bucket(s3, n=1500):
    """PUTs (8 at once) and deletes @n 64 KiB objects, so the server has
    made the bucket's object directories on every drive (hh/: 256 per
    drive, a new bucket makes them on its first PUTs): otherwise the first
    peer of the first round pays for making them."""
    from concurrent.futures import ThreadPoolExecutor
    body = os.urandom(64 << 10)
    t = time.perf_counter()

    def one(i):
        s3.put_object(Bucket=BUCKET, Key="warm/%05d" % i, Body=body)
        s3.delete_object(Bucket=BUCKET, Key="warm/%05d" % i)
    with ThreadPoolExecutor(8) as ex:
        list(ex.map(one, range(n)))
    log("bucket warmed: %d PUT+DELETE of 64 KiB in %.1f s"
        % (n, time.perf_counter() - t))


def run_peer(peer, r, tests, data, nfiles, big, big_mib, srv, s3, work, res):
    root = os.path.join(work, "local-out") if peer == "local" else \
        os.path.join(work, "mnt-" + peer)
    m = None
    if peer == "local":
        os.makedirs(root, exist_ok=True)
    else:
        prefix = "%s-r%d" % (peer, r)
        # the prefix must exist for s3fs/rclone to mount it
        s3.put_object(Bucket=BUCKET, Key=prefix + "/", Body=b"")
        if peer in EXTRA:
            m = WMount("ecfs", root, srv, work, prefix, extra=EXTRA[peer])
        else:
            m = WMount(peer, root, srv, work, prefix)
        try:
            m.mount()
        except RuntimeError:
            with open(m.log, errors="replace") as f:
                log("%s failed to mount:\n%s" % (peer, f.read()[-2000:]))
            raise
    try:
        if "cp" in tests:
            dst = os.path.join(root, "cp")
            before = server_counters(srv)
            e0 = ecfs_counters(m, root)
            c0 = cpu_now(m, srv)
            s = timed(["cp", "-r", data, dst],
                      root if peer == "ecfs-async" else None)
            res[(peer, "cp")].append(nfiles / s)
            cpu_note(res, peer, "cp", c0, cpu_now(m, srv), nfiles)
            line, share = server_delta(before, server_counters(srv), nfiles, s)
            res["srv"].setdefault((peer, "cp"), []).append(share)
            cl = client_note(res, peer, "cp", e0, ecfs_counters(m, root),
                             nfiles)
            log("%s cp -r: %.0f files/s (%s; %s%s)" % (
                peer, nfiles / s, line, cpu_line(res, peer, "cp"), cl))
        if "big" in tests:
            dst = os.path.join(root, "big.bin")
            t = time.perf_counter()
            run_work(["cp", big, dst])
            if peer == "local":
                fd = os.open(dst, os.O_RDONLY)
                os.fsync(fd)
                os.close(fd)
            s = time.perf_counter() - t
            res[(peer, "big")].append(big_mib / s)
            log("%s big: %.0f MiB/s" % (peer, big_mib / s))
            os.remove(dst)  # not timed: keeps the drives' use to one copy
        if "rsync" in tests:
            dst = os.path.join(root, "rs")
            before = server_counters(srv)
            e0 = ecfs_counters(m, root)
            c0 = cpu_now(m, srv)
            s = timed(["rsync", "-a", data + "/", dst + "/"],
                      root if peer == "ecfs-async" else None)
            res[(peer, "rsync")].append(nfiles / s)
            cpu_note(res, peer, "rsync", c0, cpu_now(m, srv), nfiles)
            line, share = server_delta(before, server_counters(srv), nfiles, s)
            res["srv"].setdefault((peer, "rsync"), []).append(share)
            cl = client_note(res, peer, "rsync", e0,
                             ecfs_counters(m, root), nfiles)
            log("%s rsync -a: %.0f files/s (%s; %s%s)" % (
                peer, nfiles / s, line, cpu_line(res, peer, "rsync"), cl))
    finally:
        if m is not None:
            m.unmount()
        if peer == "local":
            shutil.rmtree(root, ignore_errors=True)


def cpu_now(m, srv):
    """(client, server) CPU seconds so far; the client's is None for local
    disk."""
    return (m.cpu() if m is not None else None, srv.cpu())


def cpu_note(res, peer, t, c0, c1, nfiles):
    """Records CPU microseconds per file of the client and the server."""
    for i, who in enumerate(("client", "server")):
        if c0[i] is not None and c1[i] is not None:
            res.setdefault(("cpu", who, peer, t), []).append(
                (c1[i] - c0[i]) * 1e6 / nfiles)


def cpu_line(res, peer, t):
    xs = [(w, res.get(("cpu", w, peer, t))) for w in ("client", "server")]
    return ", ".join("%s CPU %.0f us/file" % (w, v[-1]) for w, v in xs if v)


def fmt(xs):
    if not xs:
        return "-"
    return "%.0f [%.0f-%.0f]" % (statistics.median(xs), min(xs), max(xs))


def fmt3(xs):
    if not xs:
        return "-"
    return "%.3f [%.3f-%.3f]" % (statistics.median(xs), min(xs), max(xs))


def med(xs):
    return statistics.median(xs) if xs else None


def table(res, peers, tests, a, nfiles):
    out = ["## Write throughput into the mount (tests/bench/bench_write.py)",
           "",
           "%d files (gen-dataset default preset), %d MiB big file, %d "
           "round(s); median [min-max]; storaged %s." % (
               nfiles, a.big_mib, a.repeat,
               "--no-fsync (PUTs do not wait for the disk)" if a.no_fsync
               else "with its default fsync at commit"),
           "",
           "| peer | cp -r files/s | 1 GiB cp MiB/s | rsync -a files/s |",
           "|---|---|---|---|"]
    for p in peers:
        out.append("| %s | %s | %s | %s |" % (
            p, fmt(res.get((p, "cp"))), fmt(res.get((p, "big"))),
            fmt(res.get((p, "rsync")))))
    if "put" in tests:
        out.append("| boto3 put_object (server, one stream) | - | %s | - |"
                   % fmt(res.get(("boto3", "put"))))
    out.append("")
    e = {t: med(res.get(("ecfs", t), [])) for t in ("cp", "big", "rsync")}
    ea = {t: med(res.get(("ecfs-async", t), [])) for t in ("cp", "rsync")}
    ek = {t: med(res.get(("ecfs-kperm", t), [])) for t in ("cp", "rsync")}
    eb = {t: med(res.get(("ecfs-base", t), [])) for t in ("cp", "rsync")}
    lines = []
    for t in ("cp", "rsync"):
        if e[t] and eb[t]:
            lines.append("ecfs/ecfs-base %s: %.2fx" % (t, e[t] / eb[t]))
    for t in ("cp", "rsync"):
        if e[t] and ek[t]:
            lines.append("ecfs/ecfs-kperm %s: %.2fx" % (t, e[t] / ek[t]))
    for peer in ("s3fs", "rclone"):
        for t in ("cp", "rsync"):
            o = med(res.get((peer, t), []))
            if e[t] and o:
                lines.append("ecfs/%s %s: %.2fx" % (peer, t, e[t] / o))
            if ea[t] and o:
                lines.append("ecfs-async/%s %s: %.2fx" % (peer, t, ea[t] / o))
            if ek[t] and o:
                lines.append("ecfs-kperm/%s %s: %.2fx" % (peer, t, ek[t] / o))
            if eb[t] and o:
                lines.append("ecfs-base/%s %s: %.2fx" % (peer, t, eb[t] / o))
    put = med(res.get(("boto3", "put"), []))
    if e["big"] and put:
        lines.append("ecfs big / boto3 PUT: %.2fx" % (e["big"] / put))
    out.append("Ratios (medians): " + "; ".join(lines) + ".")
    out.append("")
    srv = res.get("srv", {})
    shares = ["%s %s %s%%" % (p, t, fmt(srv[(p, t)]))
              for p in peers for t in ("cp", "rsync") if (p, t) in srv]
    if shares:
        out.append("Server time in PutObject, share of the wall time "
                   "(median [min-max]): " + "; ".join(shares) + ".")
        out.append("")
    cpus = ["%s %s: client %s, server %s" % (
        p, t, fmt(res.get(("cpu", "client", p, t))),
        fmt(res.get(("cpu", "server", p, t))))
        for p in peers for t in ("cp", "rsync")
        if res.get(("cpu", "server", p, t))]
    if cpus:
        out.append("CPU microseconds per file (median [min-max]): " +
                   "; ".join(cpus) + ".")
        out.append("")
    reqs = ["%s %s: S3 %s, FUSE %s" % (
        p, t, fmt3(res.get(("req", p, t))), fmt3(res.get(("fuse", p, t))))
        for p in peers for t in ("cp", "rsync") if res.get(("req", p, t))]
    if reqs:
        out.append("ecfs's own requests per file, from .ecfs-stats (S3: "
                   "all it sent, the directories' markers and lookups "
                   "included; FUSE: all the kernel sent it): " +
                   "; ".join(reqs) + ".")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
