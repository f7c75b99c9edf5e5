"""The journal of a filesystem whose host drive goes away or fails
(storaged/FORMAT.md "The meta journal": one journal per filesystem, kept
by its first drive, the host).

- A versioned overwrite after the host drive went offline: the drives of
  its filesystem stop journaling, so the overwrite takes the old way; the
  version it keeps (a link to the current meta's inode) must be durable
  before the answer, although that meta was committed through the host's
  journal and never synced. A power cut then (every file of the key with
  pages not written back torn, the host back with its journal) loses no
  version.
- An overwrite that does not journal (the host went away) cut between its
  renames: the old version's copies saved as HEX.p must be durable.
- A checkpoint whose header write fails stops the host's journal; a
  versioned DELETE queued before it (its barrier runs outside the journal
  lock) still settles: its barrier never fdatasyncs a closed fd number.

Both look at what the kernel has not written back yet (/proc/kpageflags:
root, as every storaged test runs in CI) rather than guess it."""

import ctypes
import glob
import mmap
import os
import random
import re
import signal
import struct
import subprocess
import time
import urllib.request

from botocore.exceptions import ClientError

from test_object_journal import (JENV, as_after_reboot, journals,
                                 records_v2, versioned_store)
from test_object_new_dirs import metas_of, tear


def dirty_pages(path):
    """Pages of @path in the page cache that are dirty: written, not yet
    written back (a power cut may lose them). Reads /proc/self/pagemap and
    /proc/kpageflags (bit 4, DIRTY) for a private read mapping of it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return 0
        mm = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE,
                       prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    ps = mmap.PAGESIZE
    n = (size + ps - 1) // ps
    try:
        cbuf = ctypes.c_char.from_buffer(mm)
        base = ctypes.addressof(cbuf)
        for i in range(n):  # fault each page in, reading only
            ctypes.c_char.from_address(base + i * ps).value
        with open("/proc/self/pagemap", "rb") as pm, \
                open("/proc/kpageflags", "rb") as kf:
            pm.seek(base // ps * 8)
            ents = struct.unpack("<%dQ" % n, pm.read(8 * n))
            dirty = 0
            for e in ents:
                assert e >> 63 & 1, "page not present"
                pfn = e & ((1 << 55) - 1)
                assert pfn, "no page frame numbers (not root?)"
                kf.seek(pfn * 8)
                dirty += struct.unpack("<Q", kf.read(8))[0] >> 4 & 1
        return dirty
    finally:
        del cbuf
        mm.close()


def drives_online(srv):
    text = urllib.request.urlopen(srv.endpoint + "/metrics").read().decode()
    m = re.search(r"^storaged_drives_online ([0-9.]+)$", text, re.M)
    return float(m.group(1)) if m else None


def wait_for(pred, timeout=20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def key_files(srv, bucket, drives):
    """Every file (HEX.m, links) under @bucket on @drives."""
    return [p for d in drives
            for p in glob.glob(os.path.join(d, "b", bucket, "*", "*"))]


def test_kept_version_is_durable_after_the_journal_host_went_away(storaged):
    srv, c, rng = versioned_store(storaged, "hostv", 3, ndrives=4)
    b1, b2 = rng.randbytes(3000), rng.randbytes(4000)
    v1 = c.put_object(Bucket="hostv", Key="k", Body=b1)["VersionId"]
    # a new name: its metas (3 of the 4 drives: small objects use fewer)
    # went through the first drive's journal (the host of the one
    # filesystem), renamed into place unsynced
    on = [srv.drives.index(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.dirname(p))))) for p, _ in metas_of(srv, "hostv", "k")]
    recs = records_v2(journals(srv)[0])
    assert {struct.unpack_from("<I", r, 56)[0] for r in recs} >= set(on), \
        (len(recs), on)
    host = srv.drives[0]
    os.rename(host, host + ".away")
    try:
        assert wait_for(lambda: drives_online(srv) == 3)
        # the other drives no longer journal: the old way, with v1 kept
        # in place as links to its metas' inodes
        v2 = c.put_object(Bucket="hostv", Key="k", Body=b2)["VersionId"]
        kept = glob.glob(os.path.join(srv.workdir, "d*", "b", "hostv", "*",
                                      "*.v*"))
        assert len(kept) == len([d for d in on if d != 0]) >= 2, kept
        # what the kernel still has to write back: a power cut may lose it
        files = key_files(srv, "hostv", srv.drives[1:] + [host + ".away"])
        dirty = sorted(p for p in files if dirty_pages(p))
        srv.kill9()
        # the power cut: those files torn, the host back (with its journal,
        # which holds v1's records) and another boot id
        trng = random.Random(7)
        for p in dirty:
            tear(p, trng, cut_only=True)
    finally:
        if os.path.exists(host + ".away"):
            os.rename(host + ".away", host)
    as_after_reboot(srv)
    srv.start()
    assert c.get_object(Bucket="hostv", Key="k")["Body"].read() == b2
    assert c.get_object(Bucket="hostv", Key="k",
                        VersionId=v1)["Body"].read() == b1
    vs = c.list_object_versions(Bucket="hostv")["Versions"]
    assert [(v["VersionId"], v["IsLatest"]) for v in vs] == \
        [(v2, True), (v1, False)]
    assert not [p for p in kept if p in dirty], \
        "the kept version's meta was not durable when v2 was acknowledged"


def test_a_failed_checkpoint_leaves_a_queued_versioned_delete_its_journal(
        storaged):
    # a checkpoint once a record is 1 s old; each versioned DELETE's batch
    # held back 6 s (STORAGED_TEST_VDEL_MS), so the checkpoint runs while
    # the DELETE is queued
    env = dict(JENV, STORAGED_TEST_JOURNAL_CP_SECS="1",
               STORAGED_TEST_VDEL_MS="6000")
    srv, c, rng = versioned_store(storaged, "vdh", 5, ndrives=4, env=env)
    # the host's idle file (journal.1 at a start) refuses writes: the
    # checkpoint's header write fails (EPERM), as on a failing disk
    idle = os.path.join(srv.drives[0], ".ecfs.sys", "journal.1")
    subprocess.run(["chattr", "+i", idle], check=True)
    try:
        body = rng.randbytes(3000)
        v1 = c.put_object(Bucket="vdh", Key="k", Body=body)["VersionId"]
        cur = [p for p, _ in metas_of(srv, "vdh", "k")]
        assert len(cur) >= 3, cur
        mk = c.delete_object(Bucket="vdh", Key="k")
        assert mk["DeleteMarker"] is True
        assert wait_for(lambda: "header write failed" in srv.log_text())
        # the queue settles the DELETE: the key's metas go (or stay, with
        # a WARN, where its barrier failed)
        assert wait_for(lambda: not any(map(os.path.exists, cur)) or
                        "its metas stay" in srv.log_text(), 30)
        log = srv.log_text()
        assert "its metas stay" not in log, log[-3000:]
        assert "failed (errno 9" not in log, log[-3000:]
        assert not any(map(os.path.exists, cur))
        assert drives_online(srv) == 4
        # the drives commit without the journal now, and serve
        assert c.get_object(Bucket="vdh", Key="k",
                            VersionId=v1)["Body"].read() == body
        c.put_object(Bucket="vdh", Key="k2", Body=b"x" * 100)
        assert c.get_object(Bucket="vdh", Key="k2")["Body"].read() == \
            b"x" * 100
        srv.stop()
    finally:
        subprocess.run(["chattr", "-i", idle], check=True)


def test_overwrite_without_the_journal_cut_between_renames_keeps_the_old(
        storaged, tmp_path):
    """An overwrite that does not journal (its filesystem's host drive went
    away) saves the old metas as HEX.p before its renames: the old
    version's copies while the renames run. Their inode's bytes were only
    in the host's journal. A kill after some renames, then a power cut
    (every file of the name whose pages the kernel has not written back
    torn, the host back with its journal): the old version, which was
    acknowledged, must read back (the replay cannot put it back where the
    new meta was renamed in: it writes HEX.m only)."""
    cut = tmp_path / "cut"
    env = dict(JENV, STORAGED_TEST_CUT_FILE=str(cut))
    srv = storaged(ndrives=16, env=env, args=["--no-extents"])
    rng = random.Random(9)
    v1, v2 = rng.randbytes(70000), rng.randbytes(70000)
    c = srv.client()
    c.create_bucket(Bucket="owr")
    c.put_object(Bucket="owr", Key="k", Body=b"x")
    srv.stop()
    # its renames (shard by shard from the key's first drive) leave, after
    # r of them, the new version on r < k drives and the old one on
    # 16 - r < k
    srv.extra_env["STORAGED_TEST_CUT_RENAMES"] = "6"
    srv.start()
    c.put_object(Bucket="owr", Key="k", Body=v1)  # journaled (inline)
    ms = metas_of(srv, "owr", "k")
    assert len(ms) == 16 and ms[0][1][1] == 12, [i for _, i in ms]
    host = srv.drives[0]
    os.rename(host, host + ".away")
    try:
        assert wait_for(lambda: drives_online(srv) == 15)
        cut.write_bytes(b"")
        try:
            c.put_object(Bucket="owr", Key="k", Body=v2)
            raise AssertionError("the cut did not come")
        except Exception as e:
            if isinstance(e, AssertionError):
                raise
        srv.proc.wait(10)
        assert srv.proc.returncode == -signal.SIGKILL
        cut.unlink()
        files = key_files(srv, "owr", srv.drives[1:] + [host + ".away"])
        prev = [p for p in files if p.endswith(".p")]
        assert len(prev) == 15, prev  # the old version saved, each drive
        dirty = sorted(p for p in files if dirty_pages(p))
        trng = random.Random(5)
        for p in dirty:
            tear(p, trng, cut_only=True)
    finally:
        if os.path.exists(host + ".away"):
            os.rename(host + ".away", host)
    del srv.extra_env["STORAGED_TEST_CUT_RENAMES"]
    as_after_reboot(srv)
    srv.start()
    got = c.get_object(Bucket="owr", Key="k")["Body"].read()
    assert got == v1, "the acknowledged version was lost" \
        if got != v2 else "the cut overwrite won with fewer than k metas"
    assert not [p for p in prev if p in dirty], \
        "the old version's saved metas were not durable before the renames"


def test_a_failed_checkpoint_leaves_no_record_a_replay_puts_back(storaged):
    """A checkpoint whose header write fails stops its host's journal;
    the commits after it do not journal. The records of the file it stops
    in were made durable by that checkpoint's syncfs: a replay after a
    power cut must not put them back over what came later (here: v1's
    metas back after v2 was written and deleted, an older version than the
    last acknowledged one)."""
    env = dict(JENV, STORAGED_TEST_JOURNAL_CP_SECS="1")
    srv = storaged(ndrives=4, env=env)
    c = srv.client()
    c.create_bucket(Bucket="cpf")
    idle = os.path.join(srv.drives[0], ".ecfs.sys", "journal.1")
    subprocess.run(["chattr", "+i", idle], check=True)
    try:
        c.put_object(Bucket="cpf", Key="k", Body=b"1" * 3000)  # journaled
        assert wait_for(lambda: "header write failed" in srv.log_text())
        c.put_object(Bucket="cpf", Key="k", Body=b"2" * 3000)  # not
        c.delete_object(Bucket="cpf", Key="k")
        srv.kill9()
    finally:
        subprocess.run(["chattr", "-i", idle], check=True)
    # the power cut kept the DELETE's unlinks (and everything before)
    as_after_reboot(srv)
    srv.start()
    try:
        got = c.get_object(Bucket="cpf", Key="k")["Body"].read()
    except ClientError as e:
        assert e.response["Error"]["Code"] == "NoSuchKey"
        got = None
    assert got in (None, b"2" * 3000), "a replay brought back an older version"
