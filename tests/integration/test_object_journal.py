"""The per-drive meta journal (storaged/FORMAT.md "The meta journal").

A brand-new inline name on drives in file mode commits with its metas
appended to DRIVE/.ecfs.sys/journal and one shared fsync of that file per
drive; the metas are renamed into place unsynced.
- kill -9 under concurrent new-key PUTs (the same boot: the page cache kept
  every write): every acknowledged object reads back exact after the
  restart, nothing unacknowledged shows half-made, and the start made the
  files durable and reset the journals.
- A simulated power cut (another boot id in the journals and the index
  pointer): every meta the journals hold is taken away from its drives (none
  was fsynced) or torn; the start replays the journals and every
  acknowledged object reads back exact.
- A replay never brings back a version older than one acknowledged later.
- A journal of an unknown format version stops the start with a clear
  message, never read as something else."""

import glob
import hashlib
import os
import random
import re
import struct
import subprocess
import threading
import time
import urllib.request

import pytest
from botocore.exceptions import ClientError

from meta_util import crc64_xz
from test_object_medium import sync_counts
from test_object_new_dirs import as_after_reboot as index_after_reboot
from test_object_new_dirs import check_burst, metas_of, tear

JHDR = 64


def journals(srv):
    return [os.path.join(d, ".ecfs.sys", "journal") for d in srv.drives]


def journals2(srv):
    """The hosts' second files (format version 2: a checkpoint starts the
    next generation in the other file)."""
    return [p for p in (os.path.join(d, ".ecfs.sys", "journal.1")
                        for d in srv.drives) if os.path.exists(p)]


def as_after_reboot(srv):
    """Another boot id in the index pointer and in every journal header: the
    start trusts nothing of the last run's page cache (a power cut)."""
    index_after_reboot(srv)
    for p in journals(srv) + journals2(srv):
        with open(p, "r+b") as f:
            h = bytearray(f.read(JHDR))
            assert h[:8] == b"ECFSJNL1"
            h[16:56] = b"another-boot".ljust(40, b"\0")
            h[56:64] = struct.pack("<Q", crc64(bytes(h[:56])))
            f.seek(0)
            f.write(h)


def versioned_store(storaged, bucket, seed, ndrives=16, env=None,
                    args=None):
    """A storaged of @ndrives drives (@env: JENV when None, @args), its
    client and a versioned bucket @bucket in it, and random.Random(@seed):
    (srv, client, rng)."""
    srv = storaged(ndrives=ndrives, env=JENV if env is None else env,
                   args=args)
    c = srv.client()
    c.create_bucket(Bucket=bucket)
    c.put_bucket_versioning(Bucket=bucket,
                            VersioningConfiguration={"Status": "Enabled"})
    return srv, c, random.Random(seed)


def crc64(data):
    """CRC-64 as storaged's stor_crc64 (isa-l crc64_ecma_refl, seed 0)."""
    return crc64_xz(data)


# file mode (the journal's), and no checkpoint within a test: a simulated
# power cut takes away every meta of the run, which a checkpoint (every 3 s
# by default) would have made durable
JENV = {"STORAGED_SYNC_MODE": "file", "STORAGED_TEST_JOURNAL_CP_SECS": "600"}


def journal_records(path):
    """Number of record heads ("EJNL", version 1) of the header's
    generation in a journal file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < JHDR:
        return 0
    gen = struct.unpack_from("<I", data, 12)[0]
    n = 0
    for off in range(JHDR, len(data) - 48, 64):
        if data[off:off + 4] == b"EJNL" and \
                struct.unpack_from("<I", data, off + 12)[0] == gen:
            n += 1
    return n


def writer(c, bucket, t, state, stop, seed, sizes):
    rng = random.Random(seed)
    i = 0
    while not stop.is_set():
        key = "t%d/%s/%05d" % (t, seed, i)
        i += 1
        v = rng.randbytes(rng.choice(sizes))
        state["inflight"][key] = hashlib.md5(v).hexdigest()
        try:
            c.put_object(Bucket=bucket, Key=key, Body=v)
        except Exception:
            continue  # the server died under us: outcome unknown
        state["acked"][key] = state["inflight"].pop(key)


def kill9_under(srv, target, argss, secs):
    """Runs target(*args, stop) in a thread per @argss, kills the server
    with SIGKILL after @secs, then waits for the threads."""
    stop = threading.Event()
    ths = [threading.Thread(target=target, args=tuple(a) + (stop,))
           for a in argss]
    for t in ths:
        t.start()
    time.sleep(secs)
    srv.kill9()
    stop.set()
    for t in ths:
        t.join(30)


def burst(srv, bucket, state, seed, secs, sizes, threads=6):
    kill9_under(srv, lambda c, t, stop: writer(c, bucket, t, state, stop,
                                               seed * 10 + t, sizes),
                [(srv.client(), t) for t in range(threads)], secs)


# the sizes of cp -r and of issue 14's rows: 0 B .. 320 KiB, all inline
SIZES = [0, 1, 4096, 12 * 1024, 64 * 1024, 320 * 1024]


def test_kill9_under_concurrent_puts_loses_no_acked_object(storaged):
    srv = storaged(ndrives=16, env=JENV)
    c = srv.client()
    c.create_bucket(Bucket="burst")
    state = {"acked": {}, "inflight": {}}
    rng = random.Random(5)
    for rnd in range(3):
        burst(srv, "burst", state, rnd, rng.uniform(0.8, 1.6), SIZES)
        recs = sum(journal_records(p) for p in journals(srv))
        srv.start()
        check_burst(c, state)
        if rnd == 0:
            assert recs > 0, "no record in the journals: not journaled?"
        # the start made every file durable and began a new generation
        assert sum(journal_records(p) for p in journals(srv)) == 0
    assert len(state["acked"]) >= 20, len(state["acked"])


def test_replay_after_a_power_cut_restores_every_acked_object(storaged):
    srv = storaged(ndrives=16, env=JENV)
    c = srv.client()
    c.create_bucket(Bucket="burst")
    state = {"acked": {}, "inflight": {}}
    rng = random.Random(11)
    burst(srv, "burst", state, 1, 1.5, SIZES)
    assert len(state["acked"]) >= 10, len(state["acked"])
    # the power cut: no meta of this run was fsynced (each is in the
    # journal), so any of them may be gone or torn; take every one of the
    # acknowledged keys away or tear it, and tear unacknowledged ones
    take_metas_away(srv, state, rng)
    as_after_reboot(srv)
    srv.start()
    assert "replayed after a restart of the machine" in srv.log_text()
    check_burst(c, state)
    # and their metas are whole on their drives again, not only readable
    # (a torn or missing meta would be a lost shard, healed later): every
    # shard's meta parses, one per drive of its placement
    every = metas_of(srv, "burst")
    for k in state["acked"]:
        ms = every.get(k, [])
        assert ms and len(ms) == ms[0][1][1] + ms[0][1][2], (k, len(ms))
    # they stay after a clean restart of the same boot (no replay needed)
    srv.stop()
    srv.start()
    check_burst(c, state)


def test_replay_never_brings_back_an_older_version(storaged):
    srv = storaged(ndrives=16, env=JENV)
    c = srv.client()
    c.create_bucket(Bucket="vvv")
    v1, v2 = os.urandom(5000), os.urandom(7000)
    c.put_object(Bucket="vvv", Key="k", Body=v1)  # new: journaled
    before = sync_counts(srv)
    c.put_object(Bucket="vvv", Key="k", Body=v2)  # overwrite: journaled too
    d = {k: v - before.get(k, 0) for k, v in sync_counts(srv).items()}
    assert d["barriers"] == 1, d
    # a shard-file object (over 1 MiB) is not journaled: its metas are
    # synced as before, then appended to the journals (the key has records)
    big = os.urandom(1100 * 1024)
    before = sync_counts(srv)
    c.put_object(Bucket="vvv", Key="k", Body=big)
    d = {k: v - before.get(k, 0) for k, v in sync_counts(srv).items()}
    # the current metas (journaled, unsynced) made durable before they are
    # saved as HEX.p (jnl_settle), shard files, temp metas, renames, journal
    assert d["barriers"] == 5, d
    c.put_object(Bucket="vvv", Key="other", Body=b"x")
    c.delete_object(Bucket="vvv", Key="k")
    srv.kill9()
    # the power cut made the delete's unlinks durable, and nothing else of
    # the run: the journals still hold v1's records and v2's after them
    as_after_reboot(srv)
    srv.start()
    try:
        got = c.get_object(Bucket="vvv", Key="k")["Body"].read()
    except ClientError as e:
        assert e.response["Error"]["Code"] == "NoSuchKey"
        got = None
    # an unversioned DELETE is not synced (FORMAT.md): after a power cut the
    # key may be back, but only as the last version acknowledged before it
    assert got in (None, big), "a replay brought back an older version"
    assert c.get_object(Bucket="vvv", Key="other")["Body"].read() == b"x"


def test_unknown_journal_version_is_refused(storaged):
    srv = storaged(ndrives=4, env=JENV)
    c = srv.client()
    c.create_bucket(Bucket="fff")
    c.put_object(Bucket="fff", Key="a", Body=b"a" * 100)
    srv.stop()
    # a store without journals (the format before them) starts and gets them
    for p in journals(srv):
        os.unlink(p)
    srv.start()
    assert c.get_object(Bucket="fff", Key="a")["Body"].read() == b"a" * 100
    assert all(os.path.getsize(p) == JHDR for p in journals(srv))
    srv.stop()
    p = journals(srv)[2]
    with open(p, "r+b") as f:
        h = bytearray(f.read(JHDR))
        h[8:12] = struct.pack("<I", 3)
        h[56:64] = struct.pack("<Q", crc64(bytes(h[:56])))
        f.seek(0)
        f.write(h)
    with pytest.raises(RuntimeError):
        srv.start()
    log = srv.log_text()
    assert "journal format version 3" in log, log[-2000:]
    assert "this storaged reads versions 1 and 2" in log
    # not rewritten by the refused start
    with open(p, "rb") as f:
        assert struct.unpack_from("<I", f.read(JHDR), 8)[0] == 3
    os.unlink(p)
    srv.start()
    assert c.get_object(Bucket="fff", Key="a")["Body"].read() == b"a" * 100


def owner(c, t, keys, state, stop, seed):
    """Overwrites its own keys one after the other: per key, what was
    acknowledged last and what is in flight."""
    rng = random.Random(seed)
    while not stop.is_set():
        k = rng.choice(keys)
        v = rng.randbytes(rng.choice(SIZES[1:]))
        h = hashlib.md5(v).hexdigest()
        state["inflight"][k] = h
        state["touched"].add(k)
        try:
            c.put_object(Bucket="owr", Key=k, Body=v)
        except Exception:
            continue
        state["acked"][k] = h
        state["inflight"].pop(k, None)


def test_power_cut_during_overwrites_keeps_the_last_acked_version(storaged):
    srv = storaged(ndrives=16, env=JENV)
    c = srv.client()
    c.create_bucket(Bucket="owr")
    rng = random.Random(23)
    state = {"acked": {}, "inflight": {}, "touched": set()}
    threads = 6
    keys = {t: ["o%d/%02d" % (t, i) for i in range(6)] for t in range(threads)}
    for rnd in range(2):
        state["touched"] = set()
        kill9_under(srv, lambda c, t, stop: owner(c, t, keys[t], state, stop,
                                                  rnd * 10 + t),
                    [(srv.client(), t) for t in range(threads)],
                    rng.uniform(1.0, 2.0))
        if rnd == 1:
            # the cut: every meta this run wrote may be gone or torn (none
            # was fsynced: the journals hold them); the metas of keys it did
            # not write were made durable by the last start
            every = metas_of(srv, "owr")
            # the bytes of each drive's metas as they are now, by drive
            drive_of = {}
            for k in every:
                for p, _ in every[k]:
                    d = next(x for x in srv.drives if p.startswith(x + "/"))
                    with open(p, "rb") as f:
                        drive_of.setdefault(d, []).append((k, f.read()))
            for k in every:
                if k not in state["touched"]:
                    continue
                for p, _ in every[k]:
                    r = rng.random()
                    if r < 0.3:
                        os.unlink(p)
                    elif r < 0.6:
                        tear(p, rng)
                    elif r < 0.75:
                        # a reused spare inode whose new bytes were lost:
                        # another key's meta at this name
                        d = next(x for x in srv.drives
                                 if p.startswith(x + "/"))
                        other = [b for k2, b in drive_of[d] if k2 != k]
                        if other:
                            with open(p, "wb") as f:
                                f.write(rng.choice(other))
            as_after_reboot(srv)
        srv.start()
        for k, h in state["acked"].items():
            got = hashlib.md5(c.get_object(Bucket="owr", Key=k)["Body"]
                              .read()).hexdigest()
            assert got in (h, state["inflight"].get(k)), (rnd, k)
        # whatever was in flight has settled one way or the other
        for k in list(state["inflight"]):
            try:
                got = hashlib.md5(c.get_object(Bucket="owr", Key=k)["Body"]
                                  .read()).hexdigest()
            except ClientError as e:
                # only a key never acknowledged may be absent
                assert e.response["Error"]["Code"] == "NoSuchKey", (k, e)
                assert k not in state["acked"], (rnd, k)
                continue
            assert got in (state["inflight"][k], state["acked"].get(k)), k
            state["acked"][k] = got
        state["inflight"].clear()
    assert len(state["acked"]) >= 20, len(state["acked"])


def test_versioned_delete_keeps_its_version_through_the_journal(storaged):
    """A versioned DELETE's links (HEX.vVERSION-SINCE) are made good by
    records in the journals, not by directory fsyncs: after a simulated
    power cut that took every kept file away or tore it, the replay puts
    each back and the version reads back by its id."""
    srv, c, rng = versioned_store(storaged, "verj", 31)
    bodies = {"k%d" % i: rng.randbytes(rng.choice([10, 5000, 70000, 330000]))
              for i in range(8)}
    vids = {k: c.put_object(Bucket="verj", Key=k, Body=v)["VersionId"]
            for k, v in bodies.items()}
    before = sync_counts(srv)
    for k in bodies:
        r = c.delete_object(Bucket="verj", Key=k)
        assert r["DeleteMarker"] is True
    # the keys' metas go after the answers (FORMAT.md "Versions"): the
    # queue's barriers, shared by the DELETEs queued together
    end = time.monotonic() + 20
    while any(metas_of(srv, "verj", k) for k in bodies) and \
            time.monotonic() < end:
        time.sleep(0.05)
    assert not any(metas_of(srv, "verj", k) for k in bodies)
    d = {k: v - before.get(k, 0) for k, v in sync_counts(srv).items()}
    # at most one barrier per DELETE, of journal fsyncs only
    assert 1 <= d["barriers"] <= len(bodies), d
    assert d["rounds"] == 0, d
    srv.kill9()
    kept = [p for drv in srv.drives
            for p in glob.glob(os.path.join(drv, "b", "verj", "*", "*.v*"))]
    assert kept
    for p in kept:
        if rng.random() < 0.5:
            os.unlink(p)
        else:
            tear(p, rng)
    as_after_reboot(srv)
    srv.start()
    for k, v in bodies.items():
        got = c.get_object(Bucket="verj", Key=k, VersionId=vids[k])
        assert got["Body"].read() == v, k


def spares(srv):
    """storaged_meta_spares_total by event, from /metrics."""
    import re
    import urllib.request
    with urllib.request.urlopen(srv.endpoint + "/metrics", timeout=5) as r:
        text = r.read().decode()
    return {m.group(1): int(m.group(2)) for m in re.finditer(
        r'^storaged_meta_spares_total\{event="(\w+)"\} (\d+)', text, re.M)}


def spare_files(srv):
    return [p for d in srv.drives
            for p in glob.glob(os.path.join(d, ".ecfs.sys", "tmp", "s*"))]


def test_overwrites_reuse_meta_inodes_and_leave_no_bytes(storaged):
    """FORMAT.md "What a PUT costs": an inline overwrite keeps the old
    metas' inodes as spares and a later commit writes its temp metas into
    them (no inode freed or created on a journal-less ext4); a spare's
    bytes still leave the drive within 5 s, and every version reads back
    exact."""
    from test_s3_header_audit import drives_clear_of, drives_hold
    srv = storaged(ndrives=16, env={"STORAGED_SYNC_MODE": "file"})
    c = srv.client()
    c.create_bucket(Bucket="spr")
    rng = random.Random(31)
    sizes = [320 * 1024, 320 * 1024, 64 * 1024, 4096, 320 * 1024 + 7]
    last, small = None, {}
    for i in range(12):
        last = rng.randbytes(sizes[i % len(sizes)])
        c.put_object(Bucket="spr", Key="k", Body=last)
        assert c.get_object(Bucket="spr", Key="k")["Body"].read() == last
        small["n%02d" % i] = rng.randbytes(5000)  # new names take spares too
        c.put_object(Bucket="spr", Key="n%02d" % i, Body=small["n%02d" % i])
        time.sleep(0.25)  # spares are reused once 200 ms old
    sp = spares(srv)
    # 11 overwrites kept n metas each (n = 16 for 12+4, 5 for a 4 KiB 1+4)
    assert sp["kept"] >= 11 * 5, sp
    # most later commits (overwrites and new keys) wrote into spares
    assert sp["reused"] >= 8 * 5, sp
    for k, v in small.items():
        assert c.get_object(Bucket="spr", Key=k)["Body"].read() == v, k
    # an overwritten version's bytes: gone from the drives within 5 s
    old = last[1000:1400]
    assert drives_hold(srv, old)
    c.put_object(Bucket="spr", Key="k", Body=rng.randbytes(len(last)))
    assert drives_clear_of(srv, old), "an overwritten version's bytes stayed"
    # a deleted one's too; a spare nobody reused is cut to 0 bytes after
    # 2 s (+ the 1 s tick) and stays a spare for later new names
    cur = c.get_object(Bucket="spr", Key="k")["Body"].read()
    c.delete_object(Bucket="spr", Key="k")
    assert drives_clear_of(srv, cur[2000:2400]), "a deleted object stayed"

    def full():
        return [p for p in spare_files(srv) if os.path.getsize(p) > 0]
    deadline = time.monotonic() + 5
    while full() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert full() == [], full()[:3]
    assert spare_files(srv) and spares(srv)["emptied"] > 0
    reused = spares(srv)["reused"]
    c.put_object(Bucket="spr", Key="fresh", Body=b"y" * 9000)
    assert spares(srv)["reused"] > reused  # a new name took emptied ones
    assert c.get_object(Bucket="spr", Key="fresh")["Body"].read() == \
        b"y" * 9000
    # a clean stop leaves none either; the objects are all there after it
    c.put_object(Bucket="spr", Key="k", Body=last)
    c.put_object(Bucket="spr", Key="k", Body=cur)
    srv.stop()
    assert spare_files(srv) == []
    srv.start()
    assert c.get_object(Bucket="spr", Key="k")["Body"].read() == cur


def spare_inodes(srv):
    """{inode: path} of the spare files (sNUM) on every drive."""
    out = {}
    for p in spare_files(srv):
        try:
            out[os.stat(p).st_ino] = p
        except FileNotFoundError:
            pass
    return out


def full_pool(srv, pool):
    """Waits until every drive's pool of @pool spares made ahead is full;
    (storaged_meta_spares_total, {inode: path} of the spare files) then."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        sp = spares(srv)
        have = sp.get("made", 0) - sp.get("taken", 0)
        files = spare_inodes(srv)
        if have == pool * len(srv.drives) and len(files) >= have:
            return sp, files
        time.sleep(0.1)
    raise AssertionError("the pool did not fill: %r" % spares(srv))


def test_new_names_take_spares_made_ahead_and_overwrites_swap(storaged):
    """FORMAT.md "What a PUT costs", session 12: a thread makes empty
    spares ahead (STORAGED_SPARE_POOL per drive), so a new name's commit
    opens them instead of creating its temp metas; a temp meta keeps its
    spare's name and an overwrite exchanges it with HEX.m, so the old meta's
    inode becomes the next spare with no rename of its own. Every key reads
    back exact, no HEX.p is left, the old version's bytes leave the drives,
    and a clean stop leaves no spare."""
    from test_s3_header_audit import drives_clear_of
    pool = 6
    srv = storaged(ndrives=16, env={"STORAGED_SYNC_MODE": "file",
                                    "STORAGED_SPARE_POOL": str(pool)})
    c = srv.client()
    c.create_bucket(Bucket="pool")

    def full_pool_here():
        sp, files = full_pool(srv, pool)
        assert len(files) == pool * 16, files  # no kept spare here
        return sp, files
    # an idle store makes none; the first commit that creates files
    # starts the pool
    time.sleep(0.5)
    assert spares(srv).get("made", 0) == 0, spares(srv)
    c.put_object(Bucket="pool", Key="first", Body=b"f" * 5000)
    sp, made = full_pool_here()
    assert all(os.path.getsize(p) == 0 for p in made.values())
    made0 = sp["made"]
    # new names: their metas are the inodes made ahead, not new files
    rng = random.Random(12)
    bodies = {"a": rng.randbytes(320 * 1024), "b": rng.randbytes(5000)}
    for k, v in bodies.items():
        sp, made = full_pool_here()
        c.put_object(Bucket="pool", Key=k, Body=v)
        n = 16 if k == "a" else 5  # 12+4 and 1+4 metas
        assert spares(srv)["taken"] - sp["taken"] == n, spares(srv)
        inos = {os.stat(p).st_ino for p, _ in metas_of(srv, "pool", k)}
        assert len(inos) == n and inos <= set(made), "a meta was created"
    # the pool fills up again (made only what was taken)
    sp, _ = full_pool_here()
    assert sp["made"] == made0 + 21, sp
    # an overwrite: the old metas' inodes are now spares (exchanged)
    time.sleep(0.25)
    old = {os.stat(p).st_ino for p, _ in metas_of(srv, "pool", "a")}
    kept = spares(srv)["kept"]
    v2 = rng.randbytes(320 * 1024)
    c.put_object(Bucket="pool", Key="a", Body=v2)
    assert spares(srv)["kept"] - kept == 16, spares(srv)
    assert old <= set(spare_inodes(srv)), "the old metas were not kept"
    assert not [p for d in srv.drives
                for p in glob.glob(os.path.join(d, "b", "pool", "*", "*.p"))]
    assert c.get_object(Bucket="pool", Key="a")["Body"].read() == v2
    assert c.get_object(Bucket="pool", Key="b")["Body"].read() == bodies["b"]
    # ... and their bytes leave the drives (emptied within 3 s)
    assert drives_clear_of(srv, bodies["a"][5000:5400])
    # overwrites in a row take the exchanged spares back: no create
    for i in range(4):
        time.sleep(0.25)
        before = spares(srv)
        v2 = rng.randbytes(320 * 1024)
        c.put_object(Bucket="pool", Key="a", Body=v2)
        after = spares(srv)
        assert after["reused"] + after["taken"] - before["reused"] - \
            before["taken"] == 16, (before, after)
        assert c.get_object(Bucket="pool", Key="a")["Body"].read() == v2
    srv.stop()
    assert spare_files(srv) == []
    srv.start()
    assert c.get_object(Bucket="pool", Key="a")["Body"].read() == v2
    assert c.get_object(Bucket="pool", Key="b")["Body"].read() == bodies["b"]


def test_delete_markers_take_spares(storaged):
    """FORMAT.md "Versions", delete markers: a versioned DELETE writes its
    marker's metas into spare inodes (a kept spare, else one made ahead)
    and renames them to their brand-new names with RENAME_NOREPLACE,
    instead of creating them (on a journal-less ext4 each create walks the
    recently freed inodes). Every marker meta is a spare's inode, the
    counters say so, the markers and the versions they hide read back as
    S3 says, and so they do after a kill -9 and a rebuild from the
    drives."""
    pool = 6
    srv, c, rng = versioned_store(storaged, "mkr", 77,
                                  env=dict(JENV, STORAGED_SPARE_POOL=str(pool)))
    bodies = {"k%d" % i: rng.randbytes(rng.choice([0, 100, 5000, 70000]))
              for i in range(6)}
    vids = {k: c.put_object(Bucket="mkr", Key=k, Body=v)["VersionId"]
            for k, v in bodies.items()}
    mids = {}
    for i, k in enumerate(bodies):
        if i == 3:
            # kept spares too: an unversioned bucket's deletes leave them
            c.create_bucket(Bucket="plain")
            for j in range(40):
                c.put_object(Bucket="plain", Key="p%d" % j, Body=b"p" * 50)
                c.delete_object(Bucket="plain", Key="p%d" % j)
            time.sleep(0.3)  # a spare is reused once 200 ms old
        sp, files = full_pool(srv, pool)
        before = {p for ms in metas_of(srv, "mkr..v").values() for p, _ in ms}
        r = c.delete_object(Bucket="mkr", Key=k)
        assert r["DeleteMarker"] is True
        mids[k] = r["VersionId"]
        new = [p for ms in metas_of(srv, "mkr..v").values() for p, _ in ms
               if p not in before]
        after = spares(srv)
        # the marker's metas (an empty object: 1+4 on 16 drives), no
        # other meta of the companion
        assert len(new) == 5, new
        used = (after["taken"] - sp["taken"]) + \
            (after["reused"] - sp["reused"])
        assert used == len(new), (sp, after)
        inos = {os.stat(p).st_ino for p in new}
        assert len(inos) == len(new) and inos <= set(files), \
            "a marker meta was created, not taken from the spares"
        if i >= 3:  # every drive holds some: kept spares first
            assert after["reused"] - sp["reused"] == len(new), (sp, after)

    def check():
        got = _versions(c, "mkr")
        for k, v in bodies.items():
            vs, ms = got[k]
            assert vs == [(vids[k], False)], (k, got[k])
            assert ms == [(mids[k], True)], (k, got[k])
            with pytest.raises(ClientError) as ei:
                c.get_object(Bucket="mkr", Key=k)
            assert ei.value.response["Error"]["Code"] == "NoSuchKey"
            assert c.get_object(Bucket="mkr", Key=k, VersionId=vids[k])[
                "Body"].read() == v
    check()
    # kill -9 (the page cache keeps the renamed spares), then a start that
    # trusts nothing of the index: the rebuild reads the markers' metas
    srv.kill9()
    index_after_reboot(srv)
    srv.start()
    check()
    srv.stop_and_check_index()


def _versions(c, bucket):
    """{key: (versions [(id, latest)], markers [(id, latest)])}."""
    out = {}
    for page in c.get_paginator("list_object_versions").paginate(
            Bucket=bucket):
        for v in page.get("Versions", []):
            out.setdefault(v["Key"], ([], []))[0].append(
                (v["VersionId"], v["IsLatest"]))
        for m in page.get("DeleteMarkers", []):
            out.setdefault(m["Key"], ([], []))[1].append(
                (m["VersionId"], m["IsLatest"]))
    return out


def _deleter(c, bucket, keys, state, stop):
    for k in keys:
        if stop.is_set():
            return
        state["tried"].add(k)
        try:
            r = c.delete_object(Bucket=bucket, Key=k)
        except Exception:
            continue  # the server died under us: outcome unknown
        assert r["DeleteMarker"] is True
        state["acked"][k] = r["VersionId"]


def _check_versions(c, bucket, bodies, vids, state, exact):
    """Every version reads back by its id; the listing holds it once, and
    a marker only where a DELETE was tried, at most one; an acknowledged
    DELETE's marker is latest where @exact (no power cut since)."""
    got = _versions(c, bucket)
    for k, body in bodies.items():
        vs, ms = got.get(k, ([], []))
        assert [v for v, _ in vs] == [vids[k]], (k, vs)
        assert len(ms) <= (1 if k in state["tried"] else 0), (k, ms)
        r = c.get_object(Bucket=bucket, Key=k, VersionId=vids[k])
        assert r["Body"].read() == body, k
        deleted = bool(ms) and ms[0][1]
        if exact and k in state["acked"]:
            assert ms == [(state["acked"][k], True)], (k, ms)
        if deleted:
            assert not vs[0][1], (k, vs)
            try:
                c.get_object(Bucket=bucket, Key=k)
                raise AssertionError("a deleted key reads: " + k)
            except ClientError as e:
                assert e.response["Error"]["Code"] == "NoSuchKey", (k, e)
        else:
            assert vs[0][1] or not ms, (k, vs, ms)
    return got


def test_power_cut_during_versioned_deletes_loses_no_version(storaged):
    """A versioned DELETE is answered before the key's metas go: they are
    unlinked by a background queue after a later barrier (FORMAT.md
    "Versions"; STORAGED_TEST_VDEL_MS holds each batch back so the kills
    find some queued). kill -9 under a burst of DELETEs, then a simulated
    power cut under another (unlinks undone, links and markers lost or
    torn): every version reads back by its id, the listing holds each
    version once and no marker no DELETE tried, an acknowledged DELETE
    survives kill -9 exactly, and the keys the kill left queued have no
    current meta after the start."""
    env = dict(JENV, STORAGED_TEST_VDEL_MS="300")
    srv, c, rng = versioned_store(storaged, "vdel", 41,
                                  env=env, args=["--no-extents"])
    nthreads = 6
    keys = {t: ["t%d/%03d" % (t, i) for i in range(40)]
            for t in range(nthreads)}
    bodies = {k: rng.randbytes(rng.choice([0, 10, 3000, 70000]))
              for ks in keys.values() for k in ks}
    vids = {k: c.put_object(Bucket="vdel", Key=k, Body=b)["VersionId"]
            for k, b in bodies.items()}
    srv.stop()  # a clean stop: everything durable, the journals empty
    # round 0's kill must find acknowledged DELETEs still queued however
    # slow the machine: each batch held 3 s there (with 300 ms, a stall of
    # this process between the 30th answer and the kill let the queue
    # drain first); round 1 wants some batches done before its kill: 300
    srv.extra_env["STORAGED_TEST_VDEL_MS"] = "3000"
    srv.start()
    saved = {p: open(p, "rb").read()
             for ms in metas_of(srv, "vdel").values() for p, _ in ms}
    state = {"acked": {}, "tried": set()}
    for rnd in range(2):
        left = {t: ks[rnd * 20:rnd * 20 + 20] for t, ks in keys.items()}
        before = set(glob.glob(os.path.join(srv.workdir, "d*", "b", "vdel*",
                                            "*", "*")))
        n0 = len(state["acked"])
        stop = threading.Event()
        ths = [threading.Thread(target=_deleter,
                                args=(srv.client(), "vdel", left[t], state,
                                      stop))
               for t in range(nthreads)]
        for t in ths:
            t.start()
        end = time.monotonic() + 40
        while len(state["acked"]) < n0 + 30 and time.monotonic() < end:
            time.sleep(0.02)
        # the first kill while the last DELETEs are queued; the second
        # once some batches have unlinked their keys' metas too
        time.sleep(rng.uniform(0, 0.3) if rnd == 0 else
                   rng.uniform(0.5, 0.9))
        srv.kill9()
        stop.set()
        for t in ths:
            t.join(30)
        assert len(state["acked"]) >= n0 + 30
        if rnd == 0:
            # acknowledged, their metas still there: queued at the kill
            cur = metas_of(srv, "vdel")
            assert any(k in cur for k in state["acked"])
            srv.extra_env["STORAGED_TEST_VDEL_MS"] = "300"
        if rnd == 1:
            # the cut: what this burst did to the drives was not fsynced
            # but through the journals (the links' records): any unlink
            # of a key's meta is undone or not, any new link or marker
            # meta lost or torn; the last start made the rest durable
            now = set(glob.glob(os.path.join(srv.workdir, "d*", "b",
                                             "vdel*", "*", "*")))
            undone = lost = 0
            for p, b in saved.items():
                # unlinked in this burst (the last start kept the others)
                if not os.path.exists(p) and p in before and \
                        rng.random() < 0.5:
                    with open(p, "wb") as f:
                        f.write(b)
                    undone += 1
            others = sorted(saved.values())
            spared = 0
            for p in sorted(now - before):
                r = rng.random()
                if r < 0.3:
                    os.unlink(p)
                    lost += 1
                elif r < 0.5 and ".v" not in os.path.basename(p):
                    # a new marker's meta torn; a link is a name only (its
                    # inode, the version's meta, was durable before)
                    tear(p, rng)
                    lost += 1
                elif r < 0.65 and ".v" not in os.path.basename(p):
                    # a marker's meta is a spare renamed to its name: the
                    # rename reached the disk, its new bytes did not (the
                    # spare's old ones: another key's meta)
                    with open(p, "wb") as f:
                        f.write(rng.choice(others))
                    spared += 1
            assert undone and lost and spared, (undone, lost, spared)
            as_after_reboot(srv)
        srv.start()
        if rnd == 1:
            assert "replayed after a restart of the machine" in \
                srv.log_text()
        got = _check_versions(c, "vdel", bodies, vids, state, rnd == 0)
        if rnd == 0:
            # no key the kill left in the queue kept a current meta
            cur = metas_of(srv, "vdel")
            for k, (vs, ms) in got.items():
                if ms and ms[0][1]:
                    assert k not in cur, k
    srv.stop_and_check_index()


def records_v2(path):
    """The records of the header's generation in a journal of format
    version 2, whole (CRC not checked here: storaged's replay does)."""
    with open(path, "rb") as f:
        data = f.read()
    out = []
    if len(data) < JHDR:
        return out
    gen = struct.unpack_from("<I", data, 12)[0]
    off = JHDR
    while off + 72 <= len(data):
        if data[off:off + 4] == b"EJNL" and \
                struct.unpack_from("<H", data, off + 4)[0] == 2 and \
                struct.unpack_from("<I", data, off + 12)[0] == gen:
            ln = struct.unpack_from("<I", data, off + 8)[0]
            if off + ln <= len(data):
                out.append(data[off:off + ln])
                off += (ln + 63) // 64 * 64
                continue
        off += 64
    return out


def take_metas_away(srv, state, rng):
    """A power cut before any checkpoint: every meta of the run may be
    gone or torn (none was fsynced: the journal holds them)."""
    every = metas_of(srv, "burst")  # {key: [(path, info)]}, one walk
    gone = torn = 0
    for k in state["acked"]:
        for p, _ in every.get(k, []):
            if rng.random() < 0.5:
                os.unlink(p)
                gone += 1
            else:
                tear(p, rng)
                torn += 1
    for k in state["inflight"]:
        for p, _ in every.get(k, []):
            if rng.random() < 0.6:
                tear(p, rng)
    assert gone and torn


def test_one_journal_per_filesystem_names_each_drive_and_replays(storaged):
    """Format version 2: the 16 drives of one filesystem append to the
    first drive's journal, each record naming its drive; one fdatasync of
    it per barrier. A power cut (every meta of the run gone or torn) with a
    drive missing at the start: the replay puts each record back on the
    drive it names, skips the missing drive's, and every acknowledged
    object reads back; with the drive back, it still does."""
    srv = storaged(ndrives=16, env=JENV)
    c = srv.client()
    c.create_bucket(Bucket="burst")
    # one new 12 KiB key (3+4 on 16 drives: 7 metas, 7 records): one
    # barrier, one fdatasync of the one journal, none of its own per drive
    c.put_object(Bucket="burst", Key="warm", Body=b"w" * 100)
    before = sync_counts(srv)
    body = os.urandom(12 * 1024)
    c.put_object(Bucket="burst", Key="one", Body=body)
    d = {k: v - before.get(k, 0) for k, v in sync_counts(srv).items()}
    assert d["barriers"] == 1 and d["fsyncs"] + d.get("shared", 0) == 1, d
    state = {"acked": {"one": hashlib.md5(body).hexdigest(),
                       "warm": hashlib.md5(b"w" * 100).hexdigest()},
             "inflight": {}}
    burst(srv, "burst", state, 3, 1.5, SIZES)
    assert len(state["acked"]) >= 10, len(state["acked"])
    js = journals(srv)
    recs = records_v2(js[0])
    assert [journal_records(p) for p in js[1:]] == [0] * 15
    drives = {struct.unpack_from("<I", r, 56)[0] for r in recs}
    assert drives == set(range(16)), sorted(drives)
    take_metas_away(srv, state, random.Random(13))
    as_after_reboot(srv)
    away = srv.drives[5] + ".away"
    os.rename(srv.drives[5], away)
    try:
        srv.start()
        log = srv.log_text()
        assert "replayed after a restart of the machine" in log
        check_burst(c, state)
        # nothing was written where the missing drive was
        assert not os.path.exists(srv.drives[5])
        every = metas_of(srv, "burst")
        for k in state["acked"]:
            ms = every.get(k, [])
            assert ms and len(ms) >= ms[0][1][1] + ms[0][1][2] - 1, (k, ms)
        srv.stop()
    finally:
        if not os.path.exists(srv.drives[5]):
            os.rename(away, srv.drives[5])
    srv.start()
    check_burst(c, state)


def test_a_version_1_journal_is_replayed_after_a_power_cut(storaged):
    """After a power cut under the build before (one journal per drive,
    format version 1, records without a drive), this build replays those
    journals, each record to the drive whose journal holds it, and then
    writes version 2."""
    srv = storaged(ndrives=16, env=JENV)
    c = srv.client()
    c.create_bucket(Bucket="burst")
    rng = random.Random(17)
    state = {"acked": {}, "inflight": {}}
    for i in range(24):
        v = rng.randbytes(rng.choice([1, 4096, 12 * 1024]))
        c.put_object(Bucket="burst", Key="v1/%02d" % i, Body=v)
        state["acked"]["v1/%02d" % i] = hashlib.md5(v).hexdigest()
    srv.kill9()
    js = journals(srv)
    with open(js[0], "rb") as f:
        gen = struct.unpack_from("<I", f.read(JHDR), 12)[0]
    per = {i: [] for i in range(16)}
    for r in records_v2(js[0]):
        ln = struct.unpack_from("<I", r, 8)[0]
        body = r[64:ln - 8]
        head = bytearray(r[:56])
        head[4:6] = struct.pack("<H", 1)
        head[8:12] = struct.pack("<I", 56 + len(body) + 8)
        r1 = bytes(head) + body
        r1 += struct.pack("<Q", crc64(r1))
        per[struct.unpack_from("<I", r, 56)[0]].append(
            r1 + b"\0" * (-len(r1) % 64))
    assert sum(len(v) for v in per.values()) >= 24 * 5
    for i, p in enumerate(js):
        h = bytearray(JHDR)
        h[:8] = b"ECFSJNL1"
        h[8:12] = struct.pack("<I", 1)
        h[12:16] = struct.pack("<I", gen)
        h[16:56] = b"another-boot".ljust(40, b"\0")
        h[56:64] = struct.pack("<Q", crc64(bytes(h[:56])))
        with open(p, "wb") as f:
            f.write(bytes(h) + b"".join(per[i]))
    take_metas_away(srv, state, rng)
    index_after_reboot(srv)
    srv.start()
    assert "replayed after a restart of the machine" in srv.log_text()
    check_burst(c, state)
    for p in js:
        with open(p, "rb") as f:
            assert struct.unpack_from("<I", f.read(JHDR), 8)[0] == 2


def test_versioned_overwrite_keeps_its_version_through_the_journal(storaged):
    """A versioned overwrite of an inline object journals (FORMAT.md "The
    meta journal"): a KEPT record of the version it keeps beside each new
    meta's record, one barrier of journal fsyncs and no directory fsync.
    After a simulated power cut that took away or tore every file those
    overwrites made (new metas, links, and the kept metas' own bytes, which
    were journaled, never fsynced), the replay puts both back: every
    version reads back by its id, and each key's last one is current. A
    new meta's record whose KEPT record was lost counts for nothing (its
    overwrite died in its barrier): the version before it stays current,
    never lost."""
    srv, c, rng = versioned_store(storaged, "verov", 37, args=["--no-extents"])
    keys = ["k%d" % i for i in range(8)]
    size = {k: rng.choice([10, 5000, 70000]) for k in keys}
    vids = {k: [] for k in keys}
    bodies = {}

    def put(k):
        b = rng.randbytes(size[k])  # the same size: the same geometry
        v = c.put_object(Bucket="verov", Key=k, Body=b)["VersionId"]
        vids[k].append(v)
        bodies[v] = b

    for k in keys:
        put(k)
    srv.stop()  # a clean stop: the first versions durable, journals empty
    srv.start()
    before = {p: os.stat(p).st_ino for drv in srv.drives for p in
              glob.glob(os.path.join(drv, "b", "verov", "*", "*"))}
    s0 = sync_counts(srv)
    for _ in range(3):
        for k in keys:
            put(k)
    d = {k: v - s0.get(k, 0) for k, v in sync_counts(srv).items()}
    # one barrier per overwrite, of journal fsyncs only (no directory: the
    # records stand for the links and the renames), no syncfs round
    assert d["barriers"] == 3 * len(keys), d
    assert d["rounds"] == 0, d
    assert d["fsyncs"] <= 3 * len(keys) * 16, d
    srv.kill9()
    # k0's last overwrite died in its barrier: its new metas' records
    # reached the journals, the KEPT records of the version it replaced did
    # not (one submission, one fsync: either may be lost). Its new version
    # was never acknowledged, and the replay must not make it current
    # without the one it keeps
    hx = os.path.basename(metas_of(srv, "verov", "k0")[0][0])[:-2]
    kept = []  # (version, journal, offset) of k0's KEPT records
    for p in journals(srv):
        with open(p, "rb") as f:
            data = f.read()
        for off in range(JHDR, len(data) - 64, 64):
            if data[off:off + 4] == b"EJNL" and data[off + 6] == 2 and \
                    data[off + 24:off + 40].hex() == hx:
                kept.append((struct.unpack_from("<Q", data, off + 16)[0],
                             p, off))
    last = max(v for v, _, _ in kept)
    hit = 0
    for v, p, off in kept:
        if v == last:
            with open(p, "r+b") as f:
                f.seek(off)
                f.write(b"XXXX")
            hit += 1
    assert hit >= 2, hit
    gone = vids["k0"].pop()
    # the cut: whatever these overwrites wrote is gone or torn, and an old
    # name may point at its old inode again (the rename not durable)
    lost = 0
    for drv in srv.drives:
        for p in glob.glob(os.path.join(drv, "b", "verov", "*", "*")):
            if before.get(p) == os.stat(p).st_ino:
                continue
            r = rng.random()
            if r < 0.4:
                os.unlink(p)
            else:
                tear(p, rng)
            lost += 1
    assert lost
    as_after_reboot(srv)
    srv.start()
    assert "replayed after a restart of the machine" in srv.log_text()
    for k in keys:
        for v in vids[k]:
            got = c.get_object(Bucket="verov", Key=k, VersionId=v)
            assert got["Body"].read() == bodies[v], (k, v)
        assert c.get_object(Bucket="verov", Key=k)["VersionId"] == vids[k][-1]
        listed = [v for v, _ in _versions(c, "verov")[k][0]]
        assert sorted(listed) == sorted(vids[k]), (k, listed)
    assert gone not in [v for v, _ in _versions(c, "verov")["k0"][0]]


def _vowner(c, bucket, keys, state, stop, seed):
    """Overwrites its own keys in a versioned bucket: every acknowledged
    version (id, body), and the body in flight per key."""
    rng = random.Random(seed)
    while not stop.is_set():
        k = rng.choice(keys)
        # one size per key (the journaled path); with "mix", sometimes
        # another (another geometry: the old way, fsyncs and two barriers)
        n = state["size"][k] if not state["mix"] or rng.random() < 0.8 \
            else rng.choice([10, 3000, 70000])
        b = rng.randbytes(n)
        state["inflight"][k] = b
        state["touched"].add(k)
        try:
            v = c.put_object(Bucket=bucket, Key=k, Body=b)["VersionId"]
        except Exception:
            continue  # the server died under us: outcome unknown
        state["acked"].setdefault(k, []).append((v, b))
        state["inflight"].pop(k, None)


def test_power_cut_during_versioned_overwrites_loses_no_version(storaged):
    """kill -9 under concurrent versioned overwrites (journaled, one
    barrier: no fsync of the kept or new metas, their links or their
    directories; some of another size, which take the old way), then a
    simulated power cut under another burst of journaled ones only (every
    file the burst made lost or torn, an overwritten name back at its old
    inode): every acknowledged version reads back by its id and is listed
    once, each key's current version is its last acknowledged one or the
    one in flight, and `storaged index check` is clean."""
    srv, c, rng = versioned_store(storaged, "vown", 43, args=["--no-extents"])
    nthreads = 6
    keys = {t: ["o%d/%02d" % (t, i) for i in range(5)]
            for t in range(nthreads)}
    state = {"acked": {}, "inflight": {}, "touched": set(),
             "size": {k: rng.choice([0, 10, 3000, 70000])
                      for ks in keys.values() for k in ks}}
    for ks in keys.values():
        for k in ks:
            b = rng.randbytes(state["size"][k])
            v = c.put_object(Bucket="vown", Key=k, Body=b)["VersionId"]
            state["acked"][k] = [(v, b)]
    srv.stop()
    srv.start()
    for rnd in range(2):
        state["touched"] = set()
        # the cut's round journals only: no file but the journals is
        # fsynced, so any other file it made may be lost or torn
        state["mix"] = rnd == 0
        pat = os.path.join(srv.workdir, "d*", "b", "vown", "*", "*")
        before = {}
        for p in glob.glob(pat):
            with open(p, "rb") as f:
                before[p] = (os.stat(p).st_ino, f.read())
        kill9_under(srv, lambda c, t, stop: _vowner(
            c, "vown", keys[t], state, stop, rnd * 10 + t),
            [(srv.client(), t) for t in range(nthreads)],
            rng.uniform(1.5, 2.5))
        if rnd == 1:
            lost = undone = 0
            for p in glob.glob(pat):
                old = before.get(p)
                if old and old[0] == os.stat(p).st_ino:
                    continue  # durable since the last start
                r = rng.random()
                if old and r < 0.3:
                    # the rename over it did not reach the disk
                    os.unlink(p)
                    with open(p, "wb") as f:
                        f.write(old[1])
                    undone += 1
                elif r < 0.55:
                    os.unlink(p)
                    lost += 1
                elif r < 0.8:
                    tear(p, rng)
                    lost += 1
            assert lost and undone, (lost, undone)
            as_after_reboot(srv)
        srv.start()
        if rnd == 1:
            assert "replayed after a restart of the machine" in \
                srv.log_text()
        listed = _versions(c, "vown")
        for k, acked in state["acked"].items():
            vs = listed.get(k, ([], []))[0]
            ids = [v for v, _ in vs]
            for v, b in acked:
                assert ids.count(v) == 1, (rnd, k, v, ids)
                got = c.get_object(Bucket="vown", Key=k, VersionId=v)
                assert got["Body"].read() == b, (rnd, k, v)
            extra = [v for v in ids if v not in {a for a, _ in acked}]
            cur = c.get_object(Bucket="vown", Key=k)
            body = cur["Body"].read()
            if extra:
                # only the PUT in flight at the kill, whole, and latest
                assert len(extra) == 1 and k in state["inflight"], \
                    (rnd, k, extra)
                assert cur["VersionId"] == extra[0], (rnd, k)
                assert body == state["inflight"][k], (rnd, k)
                state["acked"][k].append((extra[0], body))
            else:
                assert cur["VersionId"] == acked[-1][0], (rnd, k)
                assert body == acked[-1][1], (rnd, k)
        state["inflight"].clear()
        if rnd == 0:
            # a key whose current version has another size: one more of
            # its own, so the cut's round takes the journaled path only
            # (another geometry fsyncs, which the cut below ignores);
            # then a clean stop makes all of it durable
            for k, acked in state["acked"].items():
                if len(acked[-1][1]) != state["size"][k]:
                    b = rng.randbytes(state["size"][k])
                    v = c.put_object(Bucket="vown", Key=k,
                                     Body=b)["VersionId"]
                    acked.append((v, b))
            srv.stop()
            srv.start()
    assert sum(len(a) for a in state["acked"].values()) >= 60
    srv.stop_and_check_index()


def test_checkpoints_alternate_two_files_zeroed_in_place(storaged):
    """A host journal's checkpoint starts the next generation in its other
    file (journal.1) and zeroes the old records in place (kept allocated
    for the generation after, not cut): no body of a checkpointed object is
    left in either file. A power cut after that switch, with the new
    records only in journal.1 and every unsynced meta gone or torn: the
    replay reads journal.1 (the higher generation) and every acknowledged
    object reads back, the checkpointed ones too."""
    srv = storaged(ndrives=16, env=dict(JENV, STORAGED_TEST_JOURNAL_CP_SECS="2"))
    c = srv.client()
    c.create_bucket(Bucket="burst")
    rng = random.Random(19)
    state = {"acked": {}, "inflight": {}}
    first = {}
    for i in range(20):
        v = rng.randbytes(12 * 1024)
        c.put_object(Bucket="burst", Key="a/%02d" % i, Body=v)
        state["acked"]["a/%02d" % i] = hashlib.md5(v).hexdigest()
        first["a/%02d" % i] = v
    j0 = journals(srv)[0]
    assert journal_records(j0) > 0
    size_before = os.path.getsize(j0)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and journal_records(j0) > 0:
        time.sleep(0.2)
    time.sleep(0.5)  # the zeroing runs right after the switch
    assert journal_records(j0) == 0, "no checkpoint"
    j1 = journals2(srv)
    assert j1 == [j1[0]] and j1[0].startswith(srv.drives[0]), j1
    # kept at its length, records zeroed: no byte of a body left
    assert os.path.getsize(j0) >= size_before
    for p in (j0, j1[0]):
        with open(p, "rb") as f:
            data = f.read()
        for k, v in first.items():
            assert v[:64] not in data, (p, k)
    with open(j0, "rb") as f:
        assert f.read()[JHDR:size_before].count(0) == size_before - JHDR
    # the next records go to journal.1; a power cut right after them
    for i in range(10):
        v = rng.randbytes(rng.choice([100, 4096, 12 * 1024]))
        c.put_object(Bucket="burst", Key="b/%02d" % i, Body=v)
        state["acked"]["b/%02d" % i] = hashlib.md5(v).hexdigest()
    srv.kill9()
    assert journal_records(j1[0]) > 0 and journal_records(j0) == 0
    # only the b/ metas were not synced (a/ ones: by the checkpoint)
    take_metas_away(srv, {"acked": {k: h for k, h in state["acked"].items()
                                    if k.startswith("b/")},
                          "inflight": {}}, rng)
    as_after_reboot(srv)
    srv.start()
    assert "replayed after a restart of the machine" in srv.log_text()
    check_burst(c, state)


def test_versioned_overwrite_cut_between_renames_keeps_the_old_one(storaged):
    """A versioned overwrite through the journal saves no HEX.p: its links
    HEX.vVERSION-SINCE (SINCE even) are its copies of the version it
    replaces (FORMAT.md "Versions"). Cut between its renames (kill -9, the
    same boot: no replay), with the new meta at HEX.m on k - 1 drives and
    the old one on the rest (fewer than k), a rebuild counts the links as
    copies: the old version is current again, whole, on every drive, and
    the new one (never acknowledged) is gone. A version that only links
    hold (overwritten, then deleted with a marker) never becomes current
    again that way."""
    srv, c, rng = versioned_store(storaged, "vcut", 53, args=["--no-extents"])
    body = {n: rng.randbytes(70000) for n in ("a1", "a2", "b1", "b2")}
    va1 = c.put_object(Bucket="vcut", Key="a", Body=body["a1"])["VersionId"]
    vb1 = c.put_object(Bucket="vcut", Key="b", Body=body["b1"])["VersionId"]
    srv.stop()  # a clean stop: the first versions durable
    srv.start()
    vb2 = c.put_object(Bucket="vcut", Key="b", Body=body["b2"])["VersionId"]
    mb = c.delete_object(Bucket="vcut", Key="b")["VersionId"]
    va2 = c.put_object(Bucket="vcut", Key="a", Body=body["a2"])["VersionId"]
    ms = metas_of(srv, "vcut", "a")
    assert len(ms) == 16 and {i[1] for _, i in ms} == {12}, ms
    # no HEX.p was made: nothing but HEX.m and the kept links is there
    hx = os.path.basename(ms[0][0])[:-2]
    for drv in srv.drives:
        names = [os.path.basename(p) for p in
                 glob.glob(os.path.join(drv, "b", "vcut", hx[:2], hx + ".*"))]
        assert hx + ".p" not in names, names
        assert len([n for n in names if n.startswith(hx + ".v")]) == 1, names
    srv.kill9()
    # the cut: the renames reached 11 drives (k - 1); on the other 5 the
    # old meta is still HEX.m (the same inode as its link)
    put_back = 0
    for p, _ in sorted(ms)[:5]:
        links = glob.glob(os.path.join(os.path.dirname(p), hx + ".v*"))
        assert len(links) == 1, links
        tmp = p + ".t"
        os.link(links[0], tmp)
        os.rename(tmp, p)
        put_back += 1
    assert put_back == 5
    index_after_reboot(srv)  # a rebuild from the drives, no replay
    srv.start()
    got = c.get_object(Bucket="vcut", Key="a")
    assert got["VersionId"] == va1
    assert got["Body"].read() == body["a1"]
    vs = _versions(c, "vcut")
    assert vs["a"][0] == [(va1, True)], vs["a"]
    with pytest.raises(ClientError):
        c.get_object(Bucket="vcut", Key="a", VersionId=va2)
    # every drive has the old version back at HEX.m; no link is left
    ms = metas_of(srv, "vcut", "a")
    assert len(ms) == 16, ms
    for drv in srv.drives:
        assert not glob.glob(os.path.join(drv, "b", "vcut", hx[:2],
                                          hx + ".v*"))
        assert not glob.glob(os.path.join(drv, "b", "vcut", hx[:2],
                                          hx + ".p"))
    # b: overwritten, then deleted: its first version's links stay a kept
    # version, never a current one
    with pytest.raises(ClientError) as ei:
        c.get_object(Bucket="vcut", Key="b")
    assert ei.value.response["Error"]["Code"] == "NoSuchKey"
    assert sorted(vs["b"][0]) == sorted([(vb1, False), (vb2, False)]), vs
    assert vs["b"][1] == [(mb, True)], vs
    for v, n in ((vb1, "b1"), (vb2, "b2")):
        got = c.get_object(Bucket="vcut", Key="b", VersionId=v)
        assert got["Body"].read() == body[n]
    srv.stop_and_check_index()


@pytest.mark.parametrize("restore_fails", [False, True],
                         ids=["rename", "link-fallback"])
def test_versioned_overwrite_failed_after_renames_puts_the_old_one_back(
        storaged, restore_fails):
    """A versioned overwrite through the journal whose renames reach fewer
    drives than the write quorum answers 503, and its failure path
    (obj_io.c drop_kept_swapped) puts the old version's meta back at HEX.m
    where the new one had replaced it (RENAME_EXCHANGE left the old inode
    at the spare's name sNUM). The renames fail on 2 of 4 drives (2+2,
    write quorum 3) for real: their DRIVE/.ecfs.sys/tmp (the temp metas,
    spares) is bind-mounted onto itself, so a rename from there into the
    object directory is EXDEV, while the temp metas, the kept links, the
    journal (drive 1's) and barrier 1 all succeed. Then, and again after
    kill -9 and a start: the old version is current and whole, the
    versions listed are exactly those before the failed PUT, and every
    drive's HEX.m is the old version's meta (same inode, same bytes).
    link-fallback: the rename of sNUM back to HEX.m fails
    (STORAGED_TEST_RESTORE_FAIL): the kept link, the same inode, goes back
    instead (session 15's review, suspicion 6: that drive lost the old
    version's meta)."""
    env = dict(JENV, STORAGED_TEST_RESTORE_FAIL="1") if restore_fails \
        else None
    srv, c, rng = versioned_store(storaged, "vfail", 59, ndrives=4,
                                  env=env, args=["--no-extents"])
    body = {n: rng.randbytes(70000) for n in ("v1", "v2", "v3")}
    v1 = c.put_object(Bucket="vfail", Key="k", Body=body["v1"])["VersionId"]
    v2 = c.put_object(Bucket="vfail", Key="k", Body=body["v2"])["VersionId"]
    ms = metas_of(srv, "vfail", "k")
    assert len(ms) == 4 and {i[1:3] for _, i in ms} == {(2, 2)}, ms
    hx = os.path.basename(ms[0][0])[:-2]
    before, names = {}, {}
    for p, _ in ms:
        with open(p, "rb") as f:
            before[p] = (os.stat(p).st_ino, f.read())
        names[p] = sorted(n for n in os.listdir(os.path.dirname(p))
                          if n.startswith(hx))
        # HEX.m and v1 kept in place (its link HEX.vV1-SINCE)
        assert len(names[p]) == 2, names[p]
    assert len(before) == 4
    want = {"k": ([(v2, True), (v1, False)], [])}

    def check(when):
        got = c.get_object(Bucket="vfail", Key="k")
        assert got["VersionId"] == v2, when
        assert got["Body"].read() == body["v2"], when
        for v, n in ((v1, "v1"), (v2, "v2")):
            assert c.get_object(Bucket="vfail", Key="k", VersionId=v)[
                "Body"].read() == body[n], when
        assert _versions(c, "vfail") == want, when

    def check_files(when):
        for p, (ino, data) in before.items():
            assert os.path.exists(p), (when, p)
            with open(p, "rb") as f:
                assert (os.stat(p).st_ino, f.read()) == (ino, data), (when, p)
            # no link of v2 kept, no HEX.p: the names there before
            assert sorted(n for n in os.listdir(os.path.dirname(p))
                          if n.startswith(hx)) == names[p], (when, p)

    binds = [os.path.join(d, ".ecfs.sys", "tmp") for d in srv.drives[2:]]
    mounted = []
    try:
        for b in binds:
            r = subprocess.run(["mount", "--bind", b, b], capture_output=True)
            if r.returncode != 0:
                pytest.fail("cannot bind-mount %s: %s" % (b, r.stderr))
            mounted.append(b)
        with pytest.raises(ClientError) as ei:
            c.put_object(Bucket="vfail", Key="k", Body=body["v3"])
        assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
        log = srv.log_text()
        assert "commit: meta rename" in log, log[-3000:]
        check_files("after the 503")
        check("after the 503")
    finally:
        # lazy: storaged may hold files open under it (a plain umount can
        # be EBUSY and leave the mount in the test's directory)
        left = [b for b in mounted
                if subprocess.run(["umount", "-l", b],
                                  capture_output=True).returncode != 0]
    assert left == [], left
    srv.kill9()
    srv.start()
    check("after kill -9 and a start")
    check_files("after kill -9 and a start")


def _read_meta_version(path):
    """The version of the meta file at @path (bytes 32-39: meta.c), or
    None when there is none."""
    try:
        with open(path, "rb") as f:
            h = f.read(40)
    except FileNotFoundError:
        return None
    return struct.unpack("<Q", h[32:40])[0] if len(h) == 40 else None


def test_rebuild_with_drives_away_never_rolls_back_an_acked_overwrite(
        storaged):
    """A versioned overwrite's links HEX.vVERSION-SINCE count as copies of
    the version it replaced only while that overwrite may have been cut
    (FORMAT.md "Versions", obj_load.c kept_as_copies). After an overwrite
    that was acknowledged while a drive was away (which kept its old
    HEX.m, a stale drive), a rebuild that starts with two other drives
    away (more than the code tolerates, but drives that only come back
    late after a power cut) must not count the links: the newer version
    may be whole on the drives away. It is not rolled back to the old
    one, and its meta on the drive that is online is not renamed over;
    once the drives are back, the rebuild finds it current and whole,
    and the old one kept."""
    srv, c, rng = versioned_store(storaged, "vstale", 61, ndrives=4,
                                  args=["--no-extents"])
    b1, b2 = rng.randbytes(70000), rng.randbytes(70000)
    v1 = c.put_object(Bucket="vstale", Key="k", Body=b1)["VersionId"]
    srv.stop()  # a clean stop: the first version durable
    srv.start()
    d1, d2, d3, d4 = srv.drives
    os.rename(d4, d4 + ".away")
    time.sleep(2.2)  # the probe (every second) marks it offline
    v2 = c.put_object(Bucket="vstale", Key="k", Body=b2)["VersionId"]
    assert c.get_object(Bucket="vstale", Key="k")["VersionId"] == v2
    srv.stop()
    os.rename(d4 + ".away", d4)
    ms = dict(metas_of(srv, "vstale", "k"))
    m3 = [p for p in ms if p.startswith(d3 + os.sep)]
    m4 = [p for p in ms if p.startswith(d4 + os.sep)]
    assert len(m3) == 1 and len(m4) == 1, ms
    assert {i[1] for i in ms.values()} == {2}, ms  # k = 2: 2+2
    ver2 = _read_meta_version(m3[0])
    ver1 = _read_meta_version(m4[0])  # d4 missed the overwrite
    assert ver1 is not None and ver2 is not None and ver1 < ver2
    index_after_reboot(srv)  # a power cut: the start rebuilds the index
    os.rename(d1, d1 + ".away")
    os.rename(d2, d2 + ".away")
    srv.start()
    try:
        cur = c.get_object(Bucket="vstale", Key="k")["VersionId"]
    except ClientError as e:
        cur = e.response["Error"]["Code"]  # (NoSuchKey until they are back)
    assert cur != v1, "rolled back to the version the overwrite replaced"
    # d3's copy of the newer version is still there
    assert _read_meta_version(m3[0]) == ver2
    srv.kill9()  # (a clean stop would make this index trusted)
    os.rename(d1 + ".away", d1)
    os.rename(d2 + ".away", d2)
    index_after_reboot(srv)
    srv.start()
    got = c.get_object(Bucket="vstale", Key="k")
    assert got["VersionId"] == v2
    assert got["Body"].read() == b2
    got = c.get_object(Bucket="vstale", Key="k", VersionId=v1)
    assert got["Body"].read() == b1
    vs = _versions(c, "vstale")
    assert sorted(vs["k"][0]) == sorted([(v1, False), (v2, True)]), vs
    srv.stop_and_check_index()


def test_cut_versioned_overwrite_with_a_drive_away_keeps_the_old_one(
        storaged):
    """The other side of the rule above: an overwrite cut between its
    renames (kill -9) whose new version could not have been acknowledged
    even with a meta on every drive away still has its links counted as
    copies of the old version when the start rebuilds with a drive away.
    16 drives (12+4, write quorum 12): the new meta at HEX.m on 10, the old
    one on 6, one of those 6 away at the rebuild (10 + 1 < 12): the old
    version is current and whole (its HEX.m alone, 5, would not do)."""
    srv, c, rng = versioned_store(storaged, "vcut2", 59, args=["--no-extents"])
    b1, b2 = rng.randbytes(70000), rng.randbytes(70000)
    v1 = c.put_object(Bucket="vcut2", Key="a", Body=b1)["VersionId"]
    srv.stop()  # a clean stop: the first version durable
    srv.start()
    v2 = c.put_object(Bucket="vcut2", Key="a", Body=b2)["VersionId"]
    ms = sorted(metas_of(srv, "vcut2", "a"))
    assert len(ms) == 16 and {i[1] for _, i in ms} == {12}, ms
    hx = os.path.basename(ms[0][0])[:-2]
    srv.kill9()
    # the cut: the renames reached 10 drives, the old meta is still HEX.m
    # (the same inode as its link) on the other 6
    for p, _ in ms[:6]:
        links = glob.glob(os.path.join(os.path.dirname(p), hx + ".v*"))
        assert len(links) == 1, links
        os.link(links[0], p + ".t")
        os.rename(p + ".t", p)
    gone = [d for d in srv.drives if ms[0][0].startswith(d + os.sep)]
    assert len(gone) == 1
    index_after_reboot(srv)  # a rebuild from the drives, no replay
    os.rename(gone[0], gone[0] + ".away")
    srv.start()
    got = c.get_object(Bucket="vcut2", Key="a")
    assert got["VersionId"] == v1
    assert got["Body"].read() == b1
    with pytest.raises(ClientError):
        c.get_object(Bucket="vcut2", Key="a", VersionId=v2)
    srv.stop()
    os.rename(gone[0] + ".away", gone[0])


def _rebuilds(srv):
    """storaged_index_rebuilds_total of the running server."""
    with urllib.request.urlopen(srv.endpoint + "/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(r"^storaged_index_rebuilds_total (\S+)$", text, re.M)
    assert m, text[:2000]
    return int(float(m.group(1)))


def _get_or_code(c, bucket, key):
    """The body of @key, or the error code of its GET."""
    try:
        return c.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as e:
        return e.response["Error"]["Code"]


def _left_out_by_a_rebuild(storaged):
    """3 drives, one 2+1 set (write quorum 2), one drive away at a time:
    keys PUT while d3 was away have their two copies on d1 and d2; a
    rebuild with d1 (the index drive) away sees one, and leaves them out.
    Then "gone" is deleted and "over" overwritten. Returns (srv, client,
    check): check(when) asserts what every start (or merge) with d1 back
    must show."""
    srv = storaged(ndrives=3, env=JENV, args=["--no-extents"])
    c = srv.client()
    c.create_bucket(Bucket="away")
    rng = random.Random(67)
    body = {k: rng.randbytes(70000) for k in ("base", "k", "gone", "over")}
    c.put_object(Bucket="away", Key="base", Body=body["base"])
    srv.stop()
    d1, d2, d3 = srv.drives
    os.rename(d3, d3 + ".away")
    srv.start()  # d3 offline from the start
    for k in ("k", "gone", "over"):
        c.put_object(Bucket="away", Key=k, Body=body[k])  # acknowledged
    srv.stop()
    os.rename(d3 + ".away", d3)
    for k in ("k", "gone", "over"):
        ms = metas_of(srv, "away", k)
        assert sorted(os.path.dirname(p).split(os.sep)[-4] for p, _ in ms) \
            == ["d1", "d2"], ms
    os.rename(d1, d1 + ".away")  # the drive holding the index
    srv.start()
    assert _rebuilds(srv) == 1
    assert _get_or_code(c, "away", "base") == body["base"]
    for k in ("k", "gone", "over"):  # one copy of two here: left out
        assert _get_or_code(c, "away", k) == "NoSuchKey", k
    c.delete_object(Bucket="away", Key="gone")
    over2 = rng.randbytes(50000)
    c.put_object(Bucket="away", Key="over", Body=over2)

    def check(when):
        assert _get_or_code(c, "away", "base") == body["base"], when
        assert _get_or_code(c, "away", "k") == body["k"], when
        assert _get_or_code(c, "away", "gone") == "NoSuchKey", when
        assert _get_or_code(c, "away", "over") == over2, when
        keys = [o["Key"] for o in
                c.list_objects_v2(Bucket="away").get("Contents", [])]
        assert keys == ["base", "k", "over"], (when, keys)

    return srv, c, check


def _check_after_restart(srv, check):
    srv.stop()
    srv.start()
    assert _rebuilds(srv) == 0  # every drive was there: trusted
    check("after a clean restart")
    srv.stop_and_check_index()


def test_rebuild_with_drives_away_loses_no_key_once_they_are_back(storaged):
    """An index rebuilt while a drive is away leaves out the keys whose
    copies are on it (FORMAT.md "Rebuilt with drives away"). A clean stop
    makes that index trusted; the first start with the drive back must not
    trust it but rebuild: every acknowledged object reads back, a key
    deleted while it was away stays deleted (tombstones on the drives
    there), one overwritten meanwhile reads its new bytes, and the next
    start trusts the index again."""
    srv, c, check = _left_out_by_a_rebuild(storaged)
    srv.stop()  # a clean close: that index would be trusted
    d1 = srv.drives[0]
    os.rename(d1 + ".away", d1)
    srv.start()
    check("after the start with d1 back")
    assert _rebuilds(srv) == 1, "an index rebuilt with d1 away was trusted"
    _check_after_restart(srv, check)


def test_drive_back_while_serving_puts_its_keys_back(storaged):
    """The same, with the drive back while serving: the probe finds it,
    and the scanner puts the keys the rebuild left out back from the metas
    (obj_load_merge) without a restart; the index then no longer records
    a drive away, so the next start trusts it."""
    srv, c, check = _left_out_by_a_rebuild(storaged)
    d1 = srv.drives[0]
    os.rename(d1 + ".away", d1)
    deadline = time.monotonic() + 60
    while "put back from the drive(s) back" not in srv.log_text():
        assert time.monotonic() < deadline, srv.log_text()[-3000:]
        time.sleep(0.1)
    assert "1 key(s) put back from the drive(s) back" in srv.log_text()
    check("after the merge")
    _check_after_restart(srv, check)


def test_drive_back_while_serving_leaves_kept_versions_to_the_next_start(
        storaged):
    """The merge puts current keys back, not kept versions (their
    companion keys are not locked there): when a readable kept version is
    missing from the index, the record of drives away stays and the next
    start rebuilds, so the version is not lost for good. 3 drives (2+1),
    versioned: v1 and v2 of a key PUT while d3 was away (v1 kept at its
    base's files on d1, d2), a rebuild with d1 away, d1 back while
    serving."""
    srv, c, rng = versioned_store(storaged, "vaway", 73, ndrives=3,
                                  args=["--no-extents"])
    b1, b2 = rng.randbytes(70000), rng.randbytes(70000)
    srv.stop()
    d1, d2, d3 = srv.drives
    os.rename(d3, d3 + ".away")
    srv.start()
    v1 = c.put_object(Bucket="vaway", Key="kv", Body=b1)["VersionId"]
    v2 = c.put_object(Bucket="vaway", Key="kv", Body=b2)["VersionId"]
    srv.stop()
    os.rename(d3 + ".away", d3)
    os.rename(d1, d1 + ".away")
    srv.start()  # rebuilt: v2 and v1 have one copy each here
    assert _get_or_code(c, "vaway", "kv") == "NoSuchKey"
    os.rename(d1 + ".away", d1)
    deadline = time.monotonic() + 60
    while "put back from the drive(s) back" not in srv.log_text():
        assert time.monotonic() < deadline, srv.log_text()[-3000:]
        time.sleep(0.1)
    assert _get_or_code(c, "vaway", "kv") == b2
    srv.stop()
    srv.start()
    got = c.get_object(Bucket="vaway", Key="kv", VersionId=v1)
    assert got["Body"].read() == b1
    vs = _versions(c, "vaway")
    assert sorted(vs["kv"][0]) == sorted([(v1, False), (v2, True)]), vs
    assert _rebuilds(srv) == 1  # the record stayed: rebuilt
    assert "kept versions on the drive(s) back are not in it" in \
        srv.log_text()
    srv.stop()
    srv.start()
    assert _rebuilds(srv) == 0
    srv.stop_and_check_index()


def test_rebuild_with_drives_away_never_settles_a_saved_prev_over_an_acked_overwrite(  # noqa: E501
        storaged):
    """HEX.p (an inline overwrite's saved previous meta, obj_load.c
    settle_prev) counts as a copy of the old version at a start. After an
    acknowledged overwrite whose unlinks of HEX.p a power cut undid, a
    rebuild with drives away, where the new version is short of k but may
    be whole with them, must not make the old version current from its
    HEX.p copies, nor rename them over the new version's metas
    (FORMAT.md "Rebuilt with drives away"). 4 drives, 2+2 (write quorum
    3): v1 everywhere; v2 acknowledged with d4 away (d4 keeps v1's
    HEX.m); v1's metas put back as HEX.p on d1-d3; a rebuild with d1, d2
    away sees v2 once, v1 twice (d3's HEX.p, d4's HEX.m)."""
    srv = storaged(ndrives=4, env=JENV, args=["--no-extents"])
    c = srv.client()
    c.create_bucket(Bucket="prev")
    rng = random.Random(71)
    b1, b2 = rng.randbytes(70000), rng.randbytes(70000)
    c.put_object(Bucket="prev", Key="k", Body=b1)
    srv.stop()
    saved = {}
    for p, _ in metas_of(srv, "prev", "k"):
        with open(p, "rb") as f:
            saved[p] = f.read()
    assert len(saved) == 4, saved.keys()
    d1, d2, d3, d4 = srv.drives
    os.rename(d4, d4 + ".away")
    srv.start()
    c.put_object(Bucket="prev", Key="k", Body=b2)  # acknowledged
    srv.stop()
    os.rename(d4 + ".away", d4)
    ver = {p: _read_meta_version(p) for p in saved}
    m3 = [p for p in saved if p.startswith(d3 + os.sep)][0]
    m4 = [p for p in saved if p.startswith(d4 + os.sep)][0]
    ver1 = ver[m4]  # d4 missed the overwrite
    ver2 = ver[m3]
    assert ver1 < ver2 and sorted(ver.values()) == [ver1] + [ver2] * 3
    for p, data in saved.items():  # the power cut undid drop_prev's unlinks
        if p != m4:
            with open(p[:-1] + "p", "wb") as f:
                f.write(data)
    os.rename(d1, d1 + ".away")
    os.rename(d2, d2 + ".away")
    srv.start()  # the index was on d1: rebuilt
    got = _get_or_code(c, "prev", "k")
    assert got != b1, "rolled back to the version the overwrite replaced"
    assert _read_meta_version(m3) == ver2, "v1's HEX.p renamed over v2"
    srv.stop()
    os.rename(d1 + ".away", d1)
    os.rename(d2 + ".away", d2)
    srv.start()
    assert _get_or_code(c, "prev", "k") == b2
    srv.stop_and_check_index()
    assert glob.glob(os.path.join(srv.workdir, "d*", "b", "prev", "*",
                                  "*.p")) == []
