"""The persistent object index (storaged/FORMAT.md "The object index")
through the real server and `storaged index check|rebuild`:

- a clean restart trusts the index (no rebuild, nothing read per object);
- a deleted, corrupted, truncated or foreign index, or one whose pointer
  records are gone, is rebuilt from the metas at start, and the server then
  lists and serves exactly what it did before;
- kill -9 during bursts of concurrent PUT, overwrite and DELETE, repeated
  (the restart reconciles the keys in flight; once as after a reboot, which
  rebuilds): after each restart every acknowledged PUT is listed and reads back exactly,
  every acknowledged DELETE stays gone, no key is listed twice, and the
  listing equals what the metas on the drives say (`storaged index check`
  finds no difference);
- while a rebuild runs the server answers /metrics (progress) and 503s;
- `storaged index check` reports what differs, `rebuild` repairs it;
- losing the drive that holds the index (while serving, while stopped)
  loses no object and leaves no listing wrong."""

import hashlib
import os
import random
import re
import shutil
import subprocess
import threading
import time
import urllib.request

import pytest

from botocore.exceptions import ClientError

from conftest import STORAGED


def metric(srv, name):
    with urllib.request.urlopen(srv.endpoint + "/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    assert m, name + " not in /metrics"
    return float(m.group(1))


def list_all(c, bucket):
    keys, token = [], None
    while True:
        kw = {"Bucket": bucket, "MaxKeys": 37}
        if token:
            kw["ContinuationToken"] = token
        r = c.list_objects_v2(**kw)
        keys += [(o["Key"], o["ETag"], o["Size"]) for o in r.get("Contents", [])]
        if not r.get("IsTruncated"):
            return keys
        token = r["NextContinuationToken"]


def snapshot(c, bucket):
    """Everything a client sees: the listing and every body."""
    lst = list_all(c, bucket)
    bodies = {k: hashlib.md5(c.get_object(Bucket=bucket, Key=k)["Body"]
                             .read()).hexdigest() for k, _, _ in lst}
    return lst, bodies


def index_dirs(srv):
    return [os.path.join(d, ".ecfs.sys", "index") for d in srv.drives
            if os.path.isdir(os.path.join(d, ".ecfs.sys", "index"))]


def run_index(srv, cmd):
    return subprocess.run([STORAGED, "index", cmd] + srv.drives,
                          capture_output=True, text=True, timeout=120)


def fill(c, bucket, rng):
    c.create_bucket(Bucket=bucket)
    for i in range(60):
        n = rng.choice([0, 1, 100, 4096, 20000, 200 * 1024])
        c.put_object(Bucket=bucket, Key="d%d/k%03d" % (i % 3, i),
                     Body=rng.randbytes(n),
                     Metadata={"i": str(i)})
    long_a = "L" * 700 + "a"
    long_b = "L" * 700 + "b"  # shares its first 400+ bytes with long_a
    c.put_object(Bucket=bucket, Key=long_b, Body=b"b")
    c.put_object(Bucket=bucket, Key=long_a, Body=b"a")
    for i in range(0, 60, 7):
        c.delete_object(Bucket=bucket, Key="d%d/k%03d" % (i % 3, i))
    for i in range(1, 60, 11):
        c.put_object(Bucket=bucket, Key="d%d/k%03d" % (i % 3, i),
                     Body=b"over %d" % i)


def test_clean_restart_trusts_index_and_lost_index_is_rebuilt(storaged):
    srv = storaged(ndrives=4)
    c = srv.client()
    fill(c, "idx", random.Random(5))
    c.create_bucket(Bucket="empty")
    before = snapshot(c, "idx")
    assert len(before[0]) == len(set(k for k, _, _ in before[0]))
    assert metric(srv, "storaged_index_objects") == len(before[0])

    srv.restart()
    assert metric(srv, "storaged_index_rebuilds_total") == 0
    assert snapshot(c, "idx") == before
    assert "empty" in [b["Name"] for b in c.list_buckets()["Buckets"]]
    # the trusted index's content is checked while serving
    deadline = time.monotonic() + 20
    while metric(srv, "storaged_index_verify_done") != 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert metric(srv, "storaged_index_verified_objects") == len(before[0])
    assert metric(srv, "storaged_index_verify_damaged_buckets") == 0
    assert "index: content verified" in srv.log_text()
    assert len(index_dirs(srv)) == 1  # one copy; the drives point at it
    # the offline tool refuses to run under a server, and touches nothing
    for cmd in ("rebuild", "check"):
        r = run_index(srv, cmd)
        assert r.returncode == 2 and "stop it first" in r.stderr, r.stderr
    assert snapshot(c, "idx") == before


def test_clean_close_compacts_the_index(storaged):
    """A clean close compacts an index that is mostly free pages (FORMAT.md
    "Compaction at a clean close"): the next start trusts the compacted file
    (no rebuild), serves exactly the same, and its content check passes; a
    copy left half-written by a crash is never used and is removed."""
    # the test store is small: compact from 1 byte of free pages (still at
    # least a quarter of the file)
    srv = storaged(ndrives=4, env={"STORAGED_TEST_INDEX_COMPACT_MIN": "1"})
    c = srv.client()
    c.create_bucket(Bucket="cmp")
    rng = random.Random(12)
    # bodies of 6 KiB are kept in the index (two pages each): removing most
    # of them leaves LMDB's free pages behind
    for i in range(240):
        c.put_object(Bucket="cmp", Key="k%04d" % i, Body=rng.randbytes(6000))
    for i in range(240):
        if i % 6:
            c.delete_object(Bucket="cmp", Key="k%04d" % i)
    fill(c, "cmp2", random.Random(7))
    before = (snapshot(c, "cmp"), snapshot(c, "cmp2"))
    assert len(before[0][0]) == 40
    (ixd,) = index_dirs(srv)
    data = os.path.join(ixd, "data.mdb")
    size_open = os.path.getsize(data)
    ino_open = os.stat(data).st_ino

    srv.restart()
    log = srv.log_text()
    assert log.count("compacted copy written") == 1, log
    assert os.stat(data).st_ino != ino_open  # the copy took its place
    assert os.path.getsize(data) < size_open * 3 // 4
    assert not os.path.exists(os.path.join(ixd, "data.mdb.compact"))
    assert metric(srv, "storaged_index_rebuilds_total") == 0  # trusted
    assert "generation" in log.split("==== start 2")[1]
    assert "rebuil" not in log.split("==== start 2")[1]
    assert (snapshot(c, "cmp"), snapshot(c, "cmp2")) == before
    deadline = time.monotonic() + 20
    while metric(srv, "storaged_index_verify_done") != 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert metric(srv, "storaged_index_verify_damaged_buckets") == 0
    assert metric(srv, "storaged_index_verified_objects") == \
        len(before[0][0]) + len(before[1][0])
    # writes go on in the compacted file; a close with few free pages does
    # not copy it again
    c.put_object(Bucket="cmp", Key="after", Body=b"after")
    srv.restart()
    assert srv.log_text().count("compacted copy written") == 1
    assert c.get_object(Bucket="cmp", Key="after")["Body"].read() == b"after"

    # a crash in the middle of a close's copy leaves a partial copy beside
    # the index (the pointers then say clean=0, as a kill -9 leaves them):
    # it is never used and goes at the next start
    srv.kill9()
    with open(os.path.join(ixd, "data.mdb.compact"), "wb") as f:
        f.write(b"\0" * 8192)
    srv.start()
    assert not os.path.exists(os.path.join(ixd, "data.mdb.compact"))
    assert metric(srv, "storaged_index_rebuilds_total") == 0  # reconciled
    c.delete_object(Bucket="cmp", Key="after")
    assert (snapshot(c, "cmp"), snapshot(c, "cmp2")) == before


def damage_cases():
    def delete(srv):
        for d in index_dirs(srv):
            shutil.rmtree(d)

    def corrupt(srv):
        for d in index_dirs(srv):
            p = os.path.join(d, "data.mdb")
            with open(p, "r+b") as f:
                f.seek(os.path.getsize(p) // 2)
                f.write(b"\xde\xad\xbe\xef" * 64)

    def truncate(srv):
        for d in index_dirs(srv):
            os.truncate(os.path.join(d, "data.mdb"), 4096)

    def pointers_gone(srv):
        for d in srv.drives:
            p = os.path.join(d, ".ecfs.sys", "index.state")
            if os.path.exists(p):
                os.unlink(p)

    def foreign(srv):
        for d in srv.drives:
            p = os.path.join(d, ".ecfs.sys", "index.state")
            with open(p) as f:
                t = f.read()
            with open(p, "w") as f:
                f.write(re.sub(r"deployment=\w+", "deployment=" + "ab" * 16, t))

    return [delete, corrupt, truncate, pointers_gone, foreign]


def test_damaged_index_is_rebuilt_and_serves_the_same(storaged):
    srv = storaged(ndrives=4)
    c = srv.client()
    fill(c, "idx", random.Random(6))
    before = snapshot(c, "idx")
    for damage in damage_cases():
        srv.stop()
        damage(srv)
        srv.start()
        assert metric(srv, "storaged_index_rebuilds_total") == 1, damage.__name__
        assert metric(srv, "storaged_index_rebuild_objects") == len(before[0])
        assert snapshot(c, "idx") == before, damage.__name__
        assert "rebuilding it from the metas" in srv.log_text()
    # and writes after a rebuild go on being indexed
    c.put_object(Bucket="idx", Key="after", Body=b"x")
    srv.restart()
    assert metric(srv, "storaged_index_rebuilds_total") == 0
    assert ("after", '"%s"' % hashlib.md5(b"x").hexdigest(), 1) in \
        list_all(c, "idx")


def chattr(path, flag):
    subprocess.run(["chattr", flag, path], check=True)


def sanitized(binary):
    """True for an ASan or TSan build (they cannot run under RLIMIT_AS)."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True)
    return "libasan" in out.stdout or "libtsan" in out.stdout


def test_environment_error_is_not_taken_for_damage(storaged):
    """An index that cannot be opened for a reason of the process's
    environment (here: its lock file made immutable, so LMDB's open of it
    for writing fails with EPERM even for root; the data file is left
    alone, whose times the start compares with those kept at its close; and, on a build without a
    sanitizer, an address-space limit too low for its map: ENOMEM) is not
    damaged: the server does not throw it away and rebuild it (which would
    most likely fail the same way), it refuses to start and says why, and
    the file stays as it was. `storaged index check` says the same. Once
    the cause is gone the next start trusts the index as it is."""
    srv = storaged(ndrives=4)
    c = srv.client()
    fill(c, "idx", random.Random(9))
    before = snapshot(c, "idx")
    srv.stop()
    idir = index_dirs(srv)[0]
    files = [os.path.join(idir, f) for f in ("data.mdb", "lock.mdb")]

    def ident():  # the data file and the pointers (lock.mdb is scratch)
        st = os.stat(files[0])
        return [(st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)] + \
            [open(os.path.join(d, ".ecfs.sys", "index.state")).read()
             for d in srv.drives]
    was = ident()
    chattr(files[1], "+i")
    try:
        with pytest.raises(RuntimeError) as ei:
            srv.start()
        assert "not rebuilding it" in str(ei.value), str(ei.value)
        assert "Operation not permitted" in str(ei.value)
        this = srv.log_text().split("==== start %d:" % srv.starts)[1]
        assert "rebuilding it from the metas" not in this, this
        r = run_index(srv, "check")
        assert r.returncode == 2, r.stdout + r.stderr
        assert "not damage of the file" in r.stdout, r.stdout
    finally:
        chattr(files[1], "-i")
    assert ident() == was
    assert index_dirs(srv) == [idir]
    if not sanitized(STORAGED):
        import resource

        def low_as():
            resource.setrlimit(resource.RLIMIT_AS, (600 << 20, 600 << 20))
        env = dict(os.environ, STORAGED_ROOT_USER=srv.access_key,
                   STORAGED_ROOT_PASSWORD=srv.secret_key)
        r = subprocess.run(srv.argv(), env=env, capture_output=True,
                           text=True, timeout=60, preexec_fn=low_as)
        assert r.returncode != 0
        assert "not rebuilding it" in r.stderr, r.stderr
        assert "Cannot allocate memory" in r.stderr, r.stderr
        assert ident() == was
    srv.start()
    assert metric(srv, "storaged_index_rebuilds_total") == 0
    assert snapshot(c, "idx") == before


def test_index_check_reports_and_rebuild_repairs(storaged):
    srv = storaged(ndrives=4)
    c = srv.client()
    fill(c, "idx", random.Random(7))
    before = snapshot(c, "idx")
    srv.stop()
    r = run_index(srv, "check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 difference(s)" in r.stdout
    # an object whose metas vanish from every drive: in the index only
    victim = before[0][0][0]
    gone = 0
    for d in srv.drives:
        for root, _, files in os.walk(os.path.join(d, "b", "idx")):
            for f in files:
                if f.endswith(".m"):
                    p = os.path.join(root, f)
                    out = subprocess.run([STORAGED, "inspect", p],
                                         capture_output=True, text=True)
                    if "key: %s\n" % victim in out.stdout or \
                            ("key=%s" % victim) in out.stdout or \
                            (victim in out.stdout):
                        os.unlink(p)
                        gone += 1
    assert gone > 0
    r = run_index(srv, "check")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "in the index only" in r.stdout and victim in r.stdout
    r = run_index(srv, "rebuild")
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_index(srv, "check")
    assert r.returncode == 0, r.stdout + r.stderr
    srv.start()
    assert metric(srv, "storaged_index_rebuilds_total") == 0  # rebuilt clean
    assert snapshot(c, "idx")[0] == [e for e in before[0] if e[0] != victim]


def burst(c, keys, state, stop, seed):
    rng = random.Random(seed)
    while not stop.is_set():
        k = rng.choice(keys)
        st = state[k]
        if rng.random() < 0.3:
            st["inflight"].add(None)
            try:
                c.delete_object(Bucket="kbk", Key=k)
            except Exception:
                continue
            st["acked"] = None
        else:
            v = rng.randbytes(rng.choice([0, 50, 4096, 40000, 300 * 1024]))
            h = hashlib.md5(v).hexdigest()
            st["inflight"].add(h)
            try:
                c.put_object(Bucket="kbk", Key=k, Body=v)
            except Exception:
                continue
            st["acked"] = h
        st["inflight"] = set()
        st["ops"] += 1


def test_kill9_during_put_overwrite_delete_bursts(storaged):
    srv = storaged(ndrives=4)
    c = srv.client()
    c.create_bucket(Bucket="kbk")
    nthreads = 4
    keys = [["t%d/k%02d" % (t, i) for i in range(6)] for t in range(nthreads)]
    state = {k: {"acked": None, "inflight": set(), "ops": 0}
             for ks in keys for k in ks}
    rng = random.Random(12)
    for rnd in range(4):
        stop = threading.Event()
        cl = [srv.client() for _ in range(nthreads)]
        ths = [threading.Thread(target=burst,
                                args=(cl[t], keys[t], state, stop,
                                      rnd * 100 + t))
               for t in range(nthreads)]
        for t in ths:
            t.start()
        time.sleep(rng.uniform(0.4, 1.2))
        srv.kill9()
        stop.set()
        for t in ths:
            t.join(30)
        rebooted = rnd == 2
        if rebooted:
            # as after a power cut: another boot id, so nothing of the
            # dirty index is trusted and it is rebuilt from the metas
            for d in srv.drives:
                p = os.path.join(d, ".ecfs.sys", "index.state")
                with open(p) as f:
                    t = f.read()
                with open(p, "w") as f:
                    f.write(re.sub(r"boot=\S+", "boot=another-boot", t))
        srv.start()
        # a crash of the process: only the keys in flight are settled
        # from their metas; after a "reboot": a full rebuild
        assert metric(srv, "storaged_index_rebuilds_total") == \
            (1 if rebooted else 0)
        if not rebooted:
            assert "reconciled" in srv.log_text()
        listed = [k for k, _, _ in list_all(c, "kbk")]
        assert len(listed) == len(set(listed)), "a key listed twice"
        for k, st in state.items():
            ok = {st["acked"]} | st["inflight"]
            try:
                got = c.get_object(Bucket="kbk", Key=k)["Body"].read()
                h = hashlib.md5(got).hexdigest()
            except ClientError as e:
                assert e.response["Error"]["Code"] == "NoSuchKey", k
                h = None
            assert h in ok, "%s: %s not in %s" % (k, h, ok)
            assert (h is not None) == (k in listed), k
            st["acked"] = h
            st["inflight"] = set()
        # the listing is what the metas on the drives say
        srv.stop()
        r = run_index(srv, "check")
        assert r.returncode == 0, r.stdout + r.stderr
        srv.start()
    assert sum(st["ops"] for st in state.values()) >= 40


def test_losing_the_index_drive_loses_nothing(storaged):
    """The one index copy lives on the first drive: losing that drive while
    serving, and again while stopped, never loses an object or leaves the
    listing wrong (2+2: any two drives may go)."""
    srv = storaged(ndrives=4)
    c = srv.client()
    fill(c, "idx", random.Random(8))
    before = snapshot(c, "idx")
    holder = os.path.dirname(os.path.dirname(index_dirs(srv)[0]))
    assert holder == srv.drives[0]
    # lost while serving: the server goes on from its open index. The
    # drive goes at once, as a pulled disk does (a rename, then an empty
    # directory in its place): an rmtree of the live drive raced with the
    # server's own writes into it and failed the test once
    lost = srv.drives[0] + ".lost"
    os.rename(srv.drives[0], lost)
    os.makedirs(srv.drives[0])
    c.put_object(Bucket="idx", Key="during", Body=b"d")
    want = sorted(before[0] + [("during", '"%s"' %
                                hashlib.md5(b"d").hexdigest(), 1)])
    assert list_all(c, "idx") == want
    srv.stop()
    shutil.rmtree(lost)  # nothing writes into it any more
    # the next start rebuilds it (from the drives that hold metas)
    srv.start()
    assert metric(srv, "storaged_index_rebuilds_total") == 1
    assert list_all(c, "idx") == want
    lst, bodies = snapshot(c, "idx")
    assert {k: v for k, v in bodies.items() if k != "during"} == before[1]
    # lost while stopped, and not replaced: served without it
    srv.stop()
    holder = os.path.dirname(os.path.dirname(index_dirs(srv)[0]))
    shutil.rmtree(holder)
    srv.start()
    assert metric(srv, "storaged_index_rebuilds_total") == 1
    assert list_all(c, "idx") == want
    assert snapshot(c, "idx")[1] == bodies


def http_get(url):
    """(status, headers, body) of one unsigned GET."""
    req = urllib.request.Request(url)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def metrics_text(srv):
    st, _, body = http_get(srv.endpoint + "/metrics")
    assert st == 200
    return body.decode()


def mval(text, name):
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    assert m, name + " not in /metrics"
    return float(m.group(1))


def test_rebuild_serves_metrics_and_503_until_done(storaged):
    """While the index is rebuilt at start the server listens: /metrics
    shows the progress, /health/live is 200 and /health/ready 503, and every
    authenticated S3 request gets 503 ServiceUnavailable with Retry-After;
    a SIGTERM stops the rebuild, and the next start rebuilds and serves what
    it did before. STORAGED_TEST_REBUILD_DELAY_MS (a test-only knob,
    FORMAT.md) slows the rebuild down to 25 ms per object directory (256 per
    bucket, so >= 6.4 s) so it can be watched."""
    srv = storaged(ndrives=4, env={"STORAGED_TEST_REBUILD_DELAY_MS": "25"})
    c = srv.client()
    c.create_bucket(Bucket="rbk")
    for i in range(40):
        c.put_object(Bucket="rbk", Key="k%02d" % i, Body=b"v%d" % i * 50)
    before = snapshot(c, "rbk")

    for round_ in ("stopped", "finished"):
        srv.stop()
        for d in index_dirs(srv):
            shutil.rmtree(d)
        failed = []

        def start():
            try:
                srv.start()
            except RuntimeError as e:  # the "stopped" round: exited at once
                failed.append(e)

        starter = threading.Thread(target=start)
        starter.start()
        try:
            deadline = time.monotonic() + 20
            while True:  # listening before the rebuild is done
                try:
                    text = metrics_text(srv)
                    break
                except OSError:
                    assert time.monotonic() < deadline
                    time.sleep(0.02)
            assert mval(text, "storaged_index_ready") == 0
            assert mval(text, 'storaged_index_phase{phase="rebuilding"}') == 1
            assert mval(text, "storaged_index_rebuild_dirs_total") == 256
            if round_ == "stopped":
                assert srv.stop(timeout=10) == 0  # a SIGTERM ends it
                starter.join(timeout=30)
                assert failed, "the server became ready"
                assert "rebuild stopped by the close" in srv.log_text()
                continue
            done1 = mval(text, "storaged_index_rebuild_dirs_done")
            assert http_get(srv.endpoint + "/health/live")[0] == 200
            assert http_get(srv.endpoint + "/health/ready")[0] == 503
            calls = [lambda: c.get_object(Bucket="rbk", Key="k01"),
                     lambda: c.put_object(Bucket="rbk", Key="k01", Body=b"n"),
                     lambda: c.delete_object(Bucket="rbk", Key="k01"),
                     lambda: c.list_objects_v2(Bucket="rbk"),
                     lambda: c.list_buckets()]
            for call in calls:  # signed (the client does not retry)
                try:
                    call()
                    raise AssertionError("served during the rebuild")
                except ClientError as e:
                    r = e.response
                    assert r["ResponseMetadata"]["HTTPStatusCode"] == 503
                    assert r["Error"]["Code"] == "ServiceUnavailable"
                    assert "being rebuilt" in r["Error"]["Message"]
                    assert r["ResponseMetadata"]["HTTPHeaders"][
                        "retry-after"] == "5"
            # an unsigned request waits too: a bucket policy may allow it,
            # and the policies are read from the store (issue 17)
            assert http_get(srv.endpoint + "/rbk/k01")[0] == 503
            time.sleep(0.3)
            text = metrics_text(srv)
            assert mval(text, "storaged_index_rebuild_dirs_done") > done1
            scanned = mval(text, "storaged_index_rebuild_objects")
            est = mval(text, "storaged_index_rebuild_estimated_objects")
            assert 0 < scanned <= len(before[0]) and est >= scanned
        finally:
            starter.join(timeout=60)
        assert not failed and srv.alive()
        text = metrics_text(srv)
        assert mval(text, "storaged_index_ready") == 1
        assert mval(text, 'storaged_index_phase{phase="serving"}') == 1
        assert mval(text, "storaged_index_rebuild_dirs_done") == 256
        assert mval(text, "storaged_index_rebuild_estimated_objects") == \
            len(before[0])
        assert mval(text, "storaged_index_rebuild_objects") == len(before[0])
        assert snapshot(c, "rbk") == before


def drive_reads(srv):
    """Reads made on the drives so far (every drive, every kind)."""
    return sum(float(l.rsplit(" ", 1)[1])
               for l in metrics_text(srv).splitlines()
               if l.startswith("storaged_drive_reads_total"))


def test_small_bodies_served_from_the_index(storaged):
    """Objects up to --index-body-max (8 KiB) keep their body in the index:
    a GET of them reads no file, with exact bytes and headers; larger ones
    read the drives. Overwrites (small <-> large) and deletes never serve
    an old body. A body damaged inside the index file is not served: the
    GET reads the drives and the damage is counted. A clean restart keeps
    the bodies; a rebuilt index has none and still serves every object."""
    srv = storaged(ndrives=16)
    c = srv.client()
    c.create_bucket(Bucket="bodies")
    rng = random.Random(12)
    small = {"s/%d" % n: rng.randbytes(n) for n in (0, 1, 100, 4096, 8192)}
    large = {"l/%d" % n: rng.randbytes(n) for n in (8193, 20000)}
    for k, v in {**small, **large}.items():
        c.put_object(Bucket="bodies", Key=k, Body=v, ContentType="image/x-t",
                     Metadata={"who": k})
    assert metric(srv, "storaged_index_bodies") == len(small)

    def check(objs, from_index):
        n0, r0 = metric(srv, "storaged_get_index_body_total"), drive_reads(srv)
        for k, v in objs.items():
            r = c.get_object(Bucket="bodies", Key=k)
            assert r["Body"].read() == v, k
            assert r["ContentType"] == "image/x-t"
            assert r["Metadata"] == {"who": k}
            assert r["ETag"] == '"%s"' % hashlib.md5(v).hexdigest()
        n = metric(srv, "storaged_get_index_body_total") - n0
        reads = drive_reads(srv) - r0
        if from_index:
            assert n == len(objs) and reads == 0, (n, reads)
        else:
            assert n == 0 and reads >= len(objs), (n, reads)

    check(small, True)
    check(large, False)
    r = c.get_object(Bucket="bodies", Key="s/4096", Range="bytes=100-199")
    assert r["Body"].read() == small["s/4096"][100:200]
    # small -> large -> small, and a delete
    big = rng.randbytes(30000)
    c.put_object(Bucket="bodies", Key="s/100", Body=big, ContentType="image/x-t",
                 Metadata={"who": "s/100"})
    check({"s/100": big}, False)
    c.put_object(Bucket="bodies", Key="s/100", Body=small["s/100"],
                 ContentType="image/x-t", Metadata={"who": "s/100"})
    check({"s/100": small["s/100"]}, True)
    c.put_object(Bucket="bodies", Key="l/8193", Body=b"tiny",
                 ContentType="image/x-t", Metadata={"who": "l/8193"})
    check({"l/8193": b"tiny"}, True)
    c.put_object(Bucket="bodies", Key="l/8193", Body=large["l/8193"],
                 ContentType="image/x-t", Metadata={"who": "l/8193"})
    c.delete_object(Bucket="bodies", Key="s/1")
    with pytest.raises(ClientError) as ei:
        c.get_object(Bucket="bodies", Key="s/1")
    assert ei.value.response["Error"]["Code"] == "NoSuchKey"
    del small["s/1"]
    assert metric(srv, "storaged_index_bodies") == len(small)
    # damage one body inside the running server's index file: the bytes
    # are not served, the drives are read instead
    data = os.path.join(index_dirs(srv)[0], "data.mdb")
    victim = small["s/4096"]
    with open(data, "r+b") as f:
        raw = f.read()
        at = raw.find(victim[1000:1064])
        assert at > 0 and raw.count(victim[1000:1064]) == 1
        f.seek(at + 10)
        f.write(bytes([raw[at + 10] ^ 0x04]))
    check({"s/4096": victim}, False)
    assert metric(srv, "storaged_index_bodies_damaged_total") == 1
    others = {k: v for k, v in small.items() if k != "s/4096"}
    check(others, True)
    # a clean restart keeps them; a lost index is rebuilt from the metas,
    # which puts back the bodies of the one-shard (k = 1, < 8 KiB) objects
    # (the damaged copy too: the metas are intact); 8192 B is 2+4 shards
    srv.restart()
    check(others, True)
    check(large, False)
    srv.stop()
    for d in index_dirs(srv):
        shutil.rmtree(d)
    srv.start()
    k1 = {k: v for k, v in small.items() if len(v) < 8192}
    assert metric(srv, "storaged_index_bodies") == len(k1) == 3
    check(k1, True)
    check({k: v for k, v in {**small, **large}.items() if k not in k1}, False)


def resident_kib(path):
    """KiB of @path in the page cache (util-linux fincore)."""
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output",
                          "RES", path], capture_output=True, text=True,
                         check=True).stdout
    return int(out.split()[0]) // 1024


def wait_metric(srv, name, value, timeout=20):
    """Waits (with a deadline) until /metrics shows @name == @value."""
    deadline = time.monotonic() + timeout
    while metric(srv, name) != value:
        assert time.monotonic() < deadline, (name, metric(srv, name), value)
        time.sleep(0.05)


def evict_index(path):
    """Drops the index file's unmapped pages from the page cache (those a
    running storaged has mapped by its lookups stay)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)  # a dirty page would stay
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


@pytest.mark.slow
def test_cold_index_is_looked_up_on_the_workers(storaged):
    """A start whose index file is not in the page cache never looks it up
    on the event loop (a page fault there would stall every connection on
    the disk): GETs and HEADs go to the worker threads, which serve the
    index's own copy of a small body, byte for byte, reading no drive (and
    count it in storaged_get_index_body_total). The store's residency
    thread checks the file again and again, a bounded window per tick: once
    it is in the page cache again (here read by the test; after a real
    start, by the content check's walk, held back here) the loop serves
    the GETs and HEADs again, with no request needed to notice; evicted
    again while serving, the loop stops looking up."""
    # no scanner: its first cycle (5 s after the start) reads the drives
    srv = storaged(ndrives=4, env={"STORAGED_TEST_CHECK_DELAY_MS": "60000",
                                   "STORAGED_NO_BACKGROUND": "1"})
    c = srv.client()
    c.create_bucket(Bucket="cold")
    rng = random.Random(21)
    objs = {"c/%03d" % i: rng.randbytes(rng.choice([100, 3000, 8000]))
            for i in range(120)}
    for k, v in objs.items():
        c.put_object(Bucket="cold", Key=k, Body=v)
    srv.stop()
    data = os.path.join(index_dirs(srv)[0], "data.mdb")
    evict_index(data)
    assert resident_kib(data) == 0, "the page cache kept the index file"
    srv.start()
    assert metric(srv, "storaged_index_resident") == 0
    assert metric(srv, "storaged_index_verify_done") == 0

    # a bucket's first request after a start goes to a worker anyway (its
    # lifecycle rules are not cached yet); a missing key, to the worker too
    with pytest.raises(ClientError):
        c.head_object(Bucket="cold", Key="none")
    body0 = metric(srv, "storaged_get_index_body_total")
    cold0 = metric(srv, "storaged_index_cold_lookups_total")
    head0 = metric(srv, "storaged_head_loop_total")
    reads0 = drive_reads(srv)
    k0, v0 = "c/000", objs["c/000"]
    assert c.get_object(Bucket="cold", Key=k0)["Body"].read() == v0
    assert c.head_object(Bucket="cold", Key=k0)["ContentLength"] == len(v0)
    # both were turned away by the loop; the worker read no drive
    assert metric(srv, "storaged_index_cold_lookups_total") - cold0 == 2
    assert metric(srv, "storaged_get_index_body_total") - body0 == 1
    assert metric(srv, "storaged_head_loop_total") == head0
    # the workers' lookups fault pages in too; the rest is read here, and
    # the residency thread notices with no request needed
    for k, v in objs.items():
        assert c.get_object(Bucket="cold", Key=k)["Body"].read() == v, k
    assert metric(srv, "storaged_get_index_body_total") - body0 == \
        1 + len(objs)  # on the loop or on a worker: the index's copy
    assert drive_reads(srv) == reads0
    with open(data, "rb") as f:
        while f.read(1 << 20):
            pass
    wait_metric(srv, "storaged_index_resident", 1)
    body0 = metric(srv, "storaged_get_index_body_total")
    cold0 = metric(srv, "storaged_index_cold_lookups_total")
    head0 = metric(srv, "storaged_head_loop_total")
    for k, v in objs.items():
        assert c.get_object(Bucket="cold", Key=k)["Body"].read() == v, k
        assert c.head_object(Bucket="cold", Key=k)["ContentLength"] == len(v)
    assert metric(srv, "storaged_get_index_body_total") - body0 == len(objs)
    assert metric(srv, "storaged_head_loop_total") - head0 == len(objs)
    assert metric(srv, "storaged_index_cold_lookups_total") == cold0
    assert drive_reads(srv) == reads0
    # evicted while serving (a new process, which has looked nothing up
    # yet, so the page cache drops all but a few pages): the next pass of
    # the residency thread turns the loop's lookups away again
    srv.stop()
    evict_index(data)
    srv.start()
    with pytest.raises(ClientError):
        c.head_object(Bucket="cold", Key="none")  # caches the rules
    with open(data, "rb") as f:
        while f.read(1 << 20):
            pass
    wait_metric(srv, "storaged_index_resident", 1)
    lost0 = metric(srv, "storaged_index_residency_lost_total")
    evict_index(data)
    wait_metric(srv, "storaged_index_resident", 0)
    assert metric(srv, "storaged_index_residency_lost_total") == lost0 + 1
    assert metric(srv, "storaged_index_residency_passes_total") > 0
    cold0 = metric(srv, "storaged_index_cold_lookups_total")
    head0 = metric(srv, "storaged_head_loop_total")
    assert c.get_object(Bucket="cold", Key=k0)["Body"].read() == v0
    assert c.head_object(Bucket="cold", Key=k0)["ContentLength"] == len(v0)
    assert metric(srv, "storaged_index_cold_lookups_total") - cold0 == 2
    assert metric(srv, "storaged_head_loop_total") == head0


def test_head_is_answered_on_the_loop(storaged):
    """HeadObject of a current object is answered by the event loop from
    the index (storaged_head_loop_total; no worker round trip, whose
    wake-ups were most of a HEAD's CPU), with the headers a GET of it gets:
    a small object (body in the index), a large one (shards on the drives)
    and a multipart one; conditionals (304, 412) and partNumber too. A
    missing key, a delete marker and a version by id go to a worker, as
    before. So does a bucket whose lifecycle rules the server has not
    cached yet (its first request after a start), so x-amz-expiration is
    never left out, of a HEAD or of a GET the loop answers."""
    srv = storaged(ndrives=4)
    c = srv.client()
    c.create_bucket(Bucket="heads")
    rng = random.Random(33)
    objs = {"h/small": rng.randbytes(1000), "h/large": rng.randbytes(300000)}
    for k, v in objs.items():
        c.put_object(Bucket="heads", Key=k, Body=v, ContentType="image/x-h",
                     Metadata={"who": k})
    parts = [rng.randbytes(5 << 20), rng.randbytes(1000)]
    up = c.create_multipart_upload(Bucket="heads", Key="h/mpu",
                                   ContentType="image/x-m")["UploadId"]
    done = [{"PartNumber": i + 1,
             "ETag": c.upload_part(Bucket="heads", Key="h/mpu", UploadId=up,
                                   PartNumber=i + 1, Body=b)["ETag"]}
            for i, b in enumerate(parts)]
    c.complete_multipart_upload(Bucket="heads", Key="h/mpu", UploadId=up,
                                MultipartUpload={"Parts": done})
    keys = list(objs) + ["h/mpu"]
    h0 = metric(srv, "storaged_head_loop_total")
    for k in keys:
        h = c.head_object(Bucket="heads", Key=k)
        g = c.get_object(Bucket="heads", Key=k)
        g["Body"].read()
        for f in ("ETag", "ContentLength", "ContentType", "LastModified",
                  "Metadata"):
            assert h[f] == g[f], (k, f, h[f], g[f])
    assert metric(srv, "storaged_head_loop_total") - h0 == len(keys)
    etag = c.head_object(Bucket="heads", Key="h/small")["ETag"]
    for kw, code in (({"IfNoneMatch": etag}, "304"),
                     ({"IfMatch": '"0123"'}, "412")):
        with pytest.raises(ClientError) as ei:
            c.head_object(Bucket="heads", Key="h/small", **kw)
        assert ei.value.response["Error"]["Code"] == code
    h = c.head_object(Bucket="heads", Key="h/mpu", PartNumber=2)
    assert h["ContentLength"] == len(parts[1]) and h["PartsCount"] == 2
    assert metric(srv, "storaged_head_loop_total") - h0 == len(keys) + 4
    # the worker's answers
    with pytest.raises(ClientError) as ei:
        c.head_object(Bucket="heads", Key="h/none")
    assert ei.value.response["Error"]["Code"] == "404"
    c.put_bucket_versioning(Bucket="heads",
                            VersioningConfiguration={"Status": "Enabled"})
    v1 = c.put_object(Bucket="heads", Key="h/v", Body=b"v1")["VersionId"]
    c.delete_object(Bucket="heads", Key="h/v")
    with pytest.raises(ClientError) as ei:
        c.head_object(Bucket="heads", Key="h/v")
    hdrs = ei.value.response["ResponseMetadata"]["HTTPHeaders"]
    assert hdrs.get("x-amz-delete-marker") == "true"
    assert c.head_object(Bucket="heads", Key="h/v",
                         VersionId=v1)["ContentLength"] == 2
    assert metric(srv, "storaged_head_loop_total") - h0 == len(keys) + 4
    # lifecycle rules: after a restart the first HEAD and GET of the bucket
    # go to a worker, which caches the rules; x-amz-expiration every time
    c.put_bucket_lifecycle_configuration(
        Bucket="heads", LifecycleConfiguration={"Rules": [{
            "ID": "thirty", "Status": "Enabled", "Filter": {"Prefix": "h/"},
            "Expiration": {"Days": 30}}]})
    srv.restart()
    h0 = metric(srv, "storaged_head_loop_total")
    for _ in range(2):
        assert 'rule-id="thirty"' in c.head_object(Bucket="heads",
                                                   Key="h/small")["Expiration"]
        assert 'rule-id="thirty"' in c.get_object(Bucket="heads",
                                                  Key="h/small")["Expiration"]
    assert metric(srv, "storaged_head_loop_total") - h0 == 1


def test_evicted_index_is_read_back_in(storaged):
    """An index evicted from the page cache while serving (a cold read of
    a big dataset does that) is asked back in by the residency check
    itself (POSIX_FADV_WILLNEED of each window with pages out, a file of
    at most 1/8 of memory): a later pass finds it whole and the loop looks
    up again, with no request needed. Before, only the workers' lookups
    faulted it in, page by page, so a GET load over a few keys left the
    loop turned away for good (session 10's medium GET rows)."""
    srv = storaged(ndrives=4, env={"STORAGED_TEST_CHECK_DELAY_MS": "60000"})
    c = srv.client()
    c.create_bucket(Bucket="warm")
    rng = random.Random(22)
    objs = {"w/%03d" % i: rng.randbytes(rng.choice([100, 3000, 8000]))
            for i in range(120)}
    for k, v in objs.items():
        c.put_object(Bucket="warm", Key=k, Body=v)
    # a fresh process, which has mapped no page by a lookup yet, so the
    # eviction below drops the whole file
    srv.stop()
    srv.start()
    with pytest.raises(ClientError):
        c.head_object(Bucket="warm", Key="none")  # caches the rules
    data = os.path.join(index_dirs(srv)[0], "data.mdb")
    with open(data, "rb") as f:
        while f.read(1 << 20):
            pass
    wait_metric(srv, "storaged_index_resident", 1)
    lost0 = metric(srv, "storaged_index_residency_lost_total")
    warm0 = metric(srv, "storaged_index_rewarm_windows_total")
    cold0 = metric(srv, "storaged_index_cold_lookups_total")
    evict_index(data)
    deadline = time.monotonic() + 20
    while metric(srv, "storaged_index_residency_lost_total") == lost0:
        assert time.monotonic() < deadline, "the eviction was never seen"
        time.sleep(0.05)
    # no request in between: the check reads it back by itself
    wait_metric(srv, "storaged_index_resident", 1)
    assert metric(srv, "storaged_index_rewarm_windows_total") > warm0
    assert metric(srv, "storaged_index_cold_lookups_total") == cold0
    assert resident_kib(data) * 1024 >= os.path.getsize(data) // 2
    head0 = metric(srv, "storaged_head_loop_total")
    for k, v in objs.items():
        assert c.get_object(Bucket="warm", Key=k)["Body"].read() == v, k
        assert c.head_object(Bucket="warm", Key=k)["ContentLength"] == len(v)
    assert metric(srv, "storaged_head_loop_total") - head0 == len(objs)
    assert metric(srv, "storaged_index_cold_lookups_total") == cold0
