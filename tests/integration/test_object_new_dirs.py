"""The commit barriers of new names (storaged/FORMAT.md "Writes").

- A new bucket's first PUTs make the object directories DRIVE/b/BUCKET/hh/
  they are the first to use. The entry of each new directory in its parent
  must be as durable as the renames into it, so the commit's barrier covers
  it: in the same io_uring batch as the object directories' fsyncs (file
  mode) or by the same syncfs round (fs mode), never by a serial fsync per
  shard outside the barrier.
- A brand-new inline key (no current version, no meta of it on its drives)
  commits with ONE barrier: its metas are renamed in unsynced and a single
  barrier makes the metas and the directories durable. An overwrite, a name
  with tombstones, a shard-file object and an extent object keep the two.
- The crash rule of that order: kill -9 in the middle of bursts of new-key
  PUTs never loses an acknowledged PUT; after a simulated power cut, which
  may leave any meta of a PUT not yet acknowledged torn (cut at any length),
  every key is absent or whole, never half, and can be written again."""

import glob
import hashlib
import os
import random
import re
import signal
import threading
import time

import pytest
from botocore.exceptions import ClientError

from conftest import mpu_one_part
from test_object_medium import sync_counts

# under the index's body limit (8 KiB): an inline object that is never an
# extent record, even with ECFS_TEST_EXTENTS=1
SMALL = 6000


def meta_info(path):
    """(type, k, m, key) of the meta record at @path; None when it does not
    parse (FORMAT.md "The meta record")."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 57 or data[:8] != b"ECFSMET1":
        return None
    typ, k, m = data[24], data[25], data[26]
    off = 56
    off += 1 + data[off]  # the ETag
    klen = int.from_bytes(data[off:off + 2], "little")
    return typ, k, m, data[off + 2:off + 2 + klen].decode("utf-8", "replace")


def metas_of(srv, bucket, key=None):
    """Meta files of @bucket (of @key only, when given), by key."""
    out = {}
    for drv in srv.drives:
        for p in glob.glob(os.path.join(drv, "b", bucket, "*", "*.m")):
            try:
                info = meta_info(p)
            except FileNotFoundError:
                continue
            if info and (key is None or info[3] == key):
                out.setdefault(info[3], []).append((p, info))
    return out if key is None else out.get(key, [])


def hh_dirs(srv, bucket):
    return sum(len(glob.glob(os.path.join(d, "b", bucket, "*"))) for d in
               srv.drives)


MODES = ["fs", "file", "file-nojournal"]


def mode_env(mode):
    """storaged's environment for a sync mode of these tests: "file" (a
    drive per directory, fsyncs; new names through the meta journal, the
    default) or "file-nojournal" (STORAGED_META_JOURNAL=0: every meta and
    directory fsynced) or "fs" (syncfs rounds; no journal there)."""
    env = {"STORAGED_SYNC_MODE": mode.split("-")[0]}
    if mode == "file-nojournal":
        env["STORAGED_META_JOURNAL"] = "0"
    return env


def put_counted(srv, c, bucket, key, body):
    """PUTs @key; returns the change in the sync counters and in the number
    of object directories."""
    dirs = hh_dirs(srv, bucket)
    before = sync_counts(srv)
    c.put_object(Bucket=bucket, Key=key, Body=body)
    d = {k: v - before.get(k, 0) for k, v in sync_counts(srv).items()}
    d["new_dirs"] = hh_dirs(srv, bucket) - dirs
    return d


@pytest.mark.parametrize("mode", MODES)
def test_first_put_of_a_bucket_syncs_new_dirs_in_its_barrier(storaged, mode):
    srv = storaged(ndrives=16, env=mode_env(mode))
    c = srv.client()
    c.create_bucket(Bucket="newdirs")
    body = os.urandom(SMALL)  # inline, one meta per shard
    d = put_counted(srv, c, "newdirs", "first", body)
    metas = [p for p, _ in metas_of(srv, "newdirs", "first")]
    shards = len(metas)
    assert shards >= 2
    # one hh directory per drive, each new: the bucket had none
    assert len({os.path.dirname(m) for m in metas}) == shards
    assert d["new_dirs"] == shards
    # a new name: ONE barrier for the metas, their directories and the
    # new directories' entries in the bucket directories
    assert d["barriers"] == 1 and d["failures"] == 0, d
    if mode == "file-nojournal":
        assert d["rounds"] == 0, d
        assert d["fsyncs"] == 3 * shards, (d, shards)
    elif mode == "file":
        # each meta in its filesystem's journal (one for the 16 drive
        # directories here): one fdatasync of it, and neither the metas,
        # nor their directories, nor the new ones
        assert d["rounds"] == 0, d
        assert d["fsyncs"] == 1, (d, shards)
    else:
        assert d["fsyncs"] == 0 and d["rounds"] >= 1, d
    assert c.get_object(Bucket="newdirs", Key="first")["Body"].read() == body
    # a second PUT of the same key finds its directories: no new entries;
    # an overwrite keeps both barriers (barrier 1: the temp metas and the
    # old version's HEX.p links, before any rename replaces a meta)
    d = put_counted(srv, c, "newdirs", "first", body[::-1])
    if mode == "file":
        # an inline overwrite through the journal: its metas appended, ONE
        # barrier (the journals' fsyncs) before the renames, none after
        # (a replay after a power cut puts the renamed metas back)
        assert d["barriers"] == 1 and d["new_dirs"] == 0, d
        assert d["fsyncs"] == 1, (d, shards)
    else:
        assert d["barriers"] == 2 and d["new_dirs"] == 0, d
    if mode == "file-nojournal":
        # temp metas + the HEX.p links' directories, then the renames'
        assert d["fsyncs"] == 3 * shards, (d, shards)
    srv.kill9()
    srv.start()
    got = c.get_object(Bucket="newdirs", Key="first")["Body"].read()
    assert got == body[::-1]


@pytest.mark.parametrize("mode", MODES)
def test_which_commits_take_one_barrier(storaged, mode):
    srv = storaged(ndrives=16, env=mode_env(mode))
    c = srv.client()
    c.create_bucket(Bucket="one")
    rng = random.Random(3)
    objs = {}
    # new keys, inline: one barrier each; in file mode one fsync per meta,
    # per object directory and per new directory's parent, in that batch
    for i in range(6):
        key, body = "new/%d" % i, rng.randbytes(rng.choice([0, 1, 700, SMALL]))
        d = put_counted(srv, c, "one", key, body)
        objs[key] = body
        shards = len(metas_of(srv, "one", key))
        assert d["barriers"] == 1 and d["failures"] == 0, (key, d)
        if mode == "file-nojournal":
            assert d["fsyncs"] == 2 * shards + d["new_dirs"], (key, d)
        elif mode == "file":  # the filesystem's one journal only
            assert d["fsyncs"] == 1, (key, d)
    # a deleted name whose drives were all online: its metas are gone (no
    # tombstone), so it is a new name again; a name with a meta file left
    # on its drives is the power-cut test's (below)
    c.delete_object(Bucket="one", Key="new/0")
    del objs["new/0"]
    assert metas_of(srv, "one", "new/0") == []
    body = rng.randbytes(SMALL)
    d = put_counted(srv, c, "one", "new/0", body)
    assert d["barriers"] == 1, d
    objs["new/0"] = body
    # an overwrite: both barriers
    body = rng.randbytes(100)
    d = put_counted(srv, c, "one", "new/1", body)
    # (one with the journal: its records, then the renames)
    assert d["barriers"] == (1 if mode == "file" else 2), d
    objs["new/1"] = body
    # a new key of shard files (over 1 MiB): the shard files' own barrier
    # before the commit, then both: its shard files and temp metas are
    # durable before a meta names them
    body = rng.randbytes(2 * 1024 * 1024 + 5)
    d = put_counted(srv, c, "one", "big", body)
    assert d["barriers"] == 3, d
    objs["big"] = body
    srv.kill9()
    srv.start()
    for k, v in objs.items():
        assert c.get_object(Bucket="one", Key=k)["Body"].read() == v, k
    with pytest.raises(ClientError):
        c.head_object(Bucket="one", Key="nothing")


def test_new_extent_key_keeps_two_barriers(storaged):
    """--extents: barrier 1 makes an extent record durable before a meta
    naming it is renamed in, so a new extent key keeps both barriers."""
    srv = storaged(ndrives=16, args=["--extents"],
                   env={"STORAGED_SYNC_MODE": "file"})
    c = srv.client()
    c.create_bucket(Bucket="ext")
    body = os.urandom(64 * 1024)
    d = put_counted(srv, c, "ext", "medium", body)
    assert d["barriers"] == 2, d
    small = os.urandom(SMALL)  # under the body limit: inline, one barrier
    d = put_counted(srv, c, "ext", "small", small)
    assert d["barriers"] == 1, d
    srv.kill9()
    srv.start()
    assert c.get_object(Bucket="ext", Key="medium")["Body"].read() == body
    assert c.get_object(Bucket="ext", Key="small")["Body"].read() == small


def new_key_writer(c, t, state, stop, seed):
    rng = random.Random(seed)
    i = 0
    while not stop.is_set():
        key = "t%d/%s/%05d" % (t, seed, i)
        i += 1
        v = rng.randbytes(rng.choice([0, 1, 3000, SMALL, 40000, 300000]))
        state["inflight"][key] = hashlib.md5(v).hexdigest()
        try:
            c.put_object(Bucket="burst", Key=key, Body=v)
        except Exception:
            continue  # the server died under us: outcome unknown
        state["acked"][key] = state["inflight"].pop(key)


def tear(path, rng, cut_only=False):
    """What a power cut can leave of a file whose fsync had not finished:
    any prefix of it (0 bytes included), or the right length with its
    tail never written (zeros)."""
    size = os.path.getsize(path)
    if cut_only or rng.random() < 0.5:
        os.truncate(path, rng.randrange(size))
    else:
        cut = rng.randrange(size)
        with open(path, "r+b") as f:
            f.seek(cut)
            f.write(b"\0" * (size - cut))


def as_after_reboot(srv):
    """Another boot id: nothing of the dirty index is trusted; the start
    rebuilds it from the metas, as after a power cut."""
    for d in srv.drives:
        p = os.path.join(d, ".ecfs.sys", "index.state")
        with open(p) as f:
            t = f.read()
        with open(p, "w") as f:
            f.write(re.sub(r"boot=\S+", "boot=another-boot", t))


def check_burst(c, state):
    """Every acknowledged key reads back exactly; an unacknowledged one is
    absent or whole; every listed key reads back whole."""
    listed = set()
    for page in c.get_paginator("list_objects_v2").paginate(Bucket="burst"):
        listed.update(o["Key"] for o in page.get("Contents", []))
    for k, h in state["acked"].items():
        assert k in listed, k
        got = c.get_object(Bucket="burst", Key=k)["Body"].read()
        assert hashlib.md5(got).hexdigest() == h, k
    for k, h in state["inflight"].items():
        try:
            got = c.get_object(Bucket="burst", Key=k)["Body"].read()
        except ClientError as e:
            assert e.response["Error"]["Code"] == "NoSuchKey", (k, e)
            assert k not in listed, k
            continue
        assert hashlib.md5(got).hexdigest() == h, ("half object", k)
    for k in listed - set(state["acked"]) - set(state["inflight"]):
        raise AssertionError("listed but never written: %s" % k)
    return listed


@pytest.mark.slow
def test_kill9_and_power_cut_during_new_key_puts(storaged):
    srv = storaged(ndrives=8, env={"STORAGED_SYNC_MODE": "file"})
    c = srv.client()
    c.create_bucket(Bucket="burst")
    rng = random.Random(17)
    state = {"acked": {}, "inflight": {}}
    torn = 0
    for rnd in range(2):
        stop = threading.Event()
        ths = [threading.Thread(target=new_key_writer,
                                args=(srv.client(), t, state, stop,
                                      rnd * 10 + t))
               for t in range(4)]
        for t in ths:
            t.start()
        time.sleep(rng.uniform(0.4, 0.9))
        srv.kill9()
        stop.set()
        for t in ths:
            t.join(30)
        if rnd > 0:
            # a power cut before the single barrier of an unacknowledged
            # new key may leave any of its renamed metas torn
            for k in state["inflight"]:
                for p, _ in metas_of(srv, "burst", k):
                    if rng.random() < 0.6:
                        tear(p, rng)
                        torn += 1
            as_after_reboot(srv)
        srv.start()
        check_burst(c, state)
    assert len(state["acked"]) >= 8, len(state["acked"])
    # the same rule, deterministically: two committed keys stand in for
    # unacknowledged PUTs caught by the cut, one with fewer than k whole
    # metas (absent), one with a single torn meta (whole, healed)
    keys = sorted(state["acked"])[:2]
    srv.kill9()
    left = {}
    for key, keep in zip(keys, ("few", "all-but-one")):
        ms = metas_of(srv, "burst", key)
        k = ms[0][1][1]
        cut = len(ms) - k + 1 if keep == "few" else 1
        for p, _ in ms[:cut]:
            tear(p, rng, cut_only=True)
            torn += 1
        left[key] = [p for p, _ in ms[:cut]]
    as_after_reboot(srv)
    srv.start()
    lost = keys[0]
    state["inflight"][lost] = state["acked"].pop(lost)
    listed = check_burst(c, state)
    assert lost not in listed
    assert keys[1] in listed
    assert torn > 0
    # the lost key's torn metas are still on its drives: its next PUT
    # replaces files, so it takes both barriers (without the journal; with
    # it, one: its records before the renames)
    assert all(os.path.exists(p) for p in left[lost])
    v = rng.randbytes(SMALL)
    d = put_counted(srv, c, "burst", lost, v)
    assert d["barriers"] == 1, d
    assert c.get_object(Bucket="burst", Key=lost)["Body"].read() == v
    # every key absent after a cut can be written again, and reads back
    for k in [k for k in state["inflight"] if k not in listed and k != lost]:
        v = rng.randbytes(SMALL)
        c.put_object(Bucket="burst", Key=k, Body=v)
        assert c.get_object(Bucket="burst", Key=k)["Body"].read() == v, k


@pytest.mark.parametrize("journal", ["1", "0"])
def test_a_delete_marker_leaves_no_directory_to_a_later_commit(storaged,
                                                               journal):
    """A versioned DELETE's marker is created in place (no barrier: it is as
    durable as the DELETE), and its object directories may be new. Their
    parents used to stay in the worker thread's list of new directories,
    which the next commit with directories on that thread fsynced: by then
    the bucket could be gone (the s3-tests' cleanup removes every bucket),
    the open failed, and that unrelated commit lost the marker's drives (3
    of 4: a 0-byte marker is 1+2 shards): 503 "Too few drives", nothing
    logged but a counter (session 13's test_set_multipart_tagging, ~12
    minutes into the lifecycle areas). One write worker (--workers 1) puts
    the DELETE and the later commits on the same thread."""
    import boto3
    from botocore.config import Config

    srv = storaged(ndrives=4, args=["--workers", "1"],
                   env=dict(STORAGED_SYNC_MODE="file",
                            STORAGED_META_JOURNAL=journal))
    # one attempt: botocore's retry of a 503 PUT hid it before
    c = boto3.client(
        "s3", endpoint_url=srv.endpoint, region_name="us-east-1",
        aws_access_key_id=srv.access_key, aws_secret_access_key=srv.secret_key,
        config=Config(signature_version="s3v4",
                      s3={"addressing_style": "path"},
                      retries={"total_max_attempts": 1}))
    for rnd in range(2):
        vb = "vb%d" % rnd
        c.create_bucket(Bucket=vb)
        c.put_bucket_versioning(Bucket=vb, VersioningConfiguration={
            "Status": "Enabled"})
        c.put_object(Bucket=vb, Key="k", Body=b"v")
        c.delete_object(Bucket=vb, Key="k")  # a marker, in new directories
        vs = c.list_object_versions(Bucket=vb)
        assert len(vs.get("DeleteMarkers", [])) == 1
        for v in vs.get("Versions", []) + vs.get("DeleteMarkers", []):
            c.delete_object(Bucket=vb, Key=v["Key"], VersionId=v["VersionId"])
        c.delete_bucket(Bucket=vb)
        # commits with directories in their barriers, on the same thread:
        # a new key of shard files, then a multipart Complete
        b = "other%d" % rnd
        c.create_bucket(Bucket=b)
        body = os.urandom(2 * 1024 * 1024 + 5)
        c.put_object(Bucket=b, Key="big", Body=body)
        mpu_one_part(c, b, "mp", b"part")
        assert c.get_object(Bucket=b, Key="big")["Body"].read() == body
        assert c.get_object(Bucket=b, Key="mp")["Body"].read() == b"part"
    log = srv.log_text()
    assert "failed (errno" not in log and "lost its write quorum" not in log


def test_a_name_with_a_meta_left_renames_after_its_records(storaged,
                                                           tmp_path):
    """Through the journal, a name with no current version looks for a meta
    file of it on its drives (nothing_there) while its records' fdatasync
    runs, and renames its metas in during that barrier only when none is
    there. A name with one left after all (here: torn metas of a key lost
    in a power cut) renames after its records are durable, as an overwrite
    does (FORMAT.md "The meta journal"), so a power cut in that barrier
    finds every file of the name as it was. STORAGED_TEST_CUT_FILE kills
    the server inside the barrier, after the work it does there; without
    the late look's fallback the cut finds the old files replaced."""
    cut = tmp_path / "cut"
    srv = storaged(ndrives=8, env={"STORAGED_SYNC_MODE": "file",
                                   "STORAGED_TEST_CUT_FILE": str(cut)})
    c = srv.client()  # one attempt
    c.create_bucket(Bucket="cut")
    rng = random.Random(29)
    c.put_object(Bucket="cut", Key="lost", Body=rng.randbytes(SMALL))
    srv.kill9()
    ms = metas_of(srv, "cut", "lost")
    k = ms[0][1][1]
    for p, _ in ms[:len(ms) - k + 1]:  # fewer than k whole: lost
        tear(p, rng, cut_only=True)
    as_after_reboot(srv)
    srv.start()
    with pytest.raises(ClientError):
        c.head_object(Bucket="cut", Key="lost")
    left = {}
    for p, _ in ms:
        if os.path.exists(p):
            with open(p, "rb") as f:
                left[p] = f.read()
    assert len(left) == len(ms), "the lost key's metas stay on its drives"

    cut.touch()
    # a brand-new name: renamed in during its barrier (the cut finds them)
    with pytest.raises(Exception):
        c.put_object(Bucket="cut", Key="fresh", Body=rng.randbytes(SMALL))
    srv.proc.wait(10)
    assert srv.proc.returncode == -signal.SIGKILL
    assert len(metas_of(srv, "cut", "fresh")) == len(ms)
    srv.start()
    # the lost name: its metas wait for the records' fdatasync
    with pytest.raises(Exception):
        c.put_object(Bucket="cut", Key="lost", Body=rng.randbytes(SMALL))
    srv.proc.wait(10)
    assert srv.proc.returncode == -signal.SIGKILL
    for p, data in left.items():
        with open(p, "rb") as f:
            assert f.read() == data, ("replaced before its barrier", p)
    cut.unlink()
    srv.start()
    for key in ("fresh", "lost"):
        v = rng.randbytes(SMALL)
        c.put_object(Bucket="cut", Key=key, Body=v)
        assert c.get_object(Bucket="cut", Key=key)["Body"].read() == v, key
    srv.kill9()
    srv.start()
    for key in ("fresh", "lost"):
        assert c.head_object(Bucket="cut", Key=key)["ContentLength"] == SMALL
