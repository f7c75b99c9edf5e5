"""The meta journal's files keep their zeroed length across a clean stop and
a start (storaged/FORMAT.md "The meta journal", "Two files per host";
session 16).

- A clean stop leaves a host's two files with no record and zeros to their
  end, flagged JNL_HDR_ZEROED (header byte 55), their length kept; the
  start keeps that length, so a commit right after it writes into
  allocated blocks and the file neither grows nor gets new blocks. Until
  session 16 both were cut back to their header at the stop and at every
  start, and every commit's fdatasync of the first seconds after a start
  appended past the end of the file (a filesystem journal commit each).
- After a kill -9 the start cuts the files back as before: no record of
  the last run is left in them.
- Records of an older generation left past the tail of a journal are never
  replayed after a power cut: a deleted key's old records spliced there do
  not bring it back."""

import hashlib
import os
import random
import time

from botocore.exceptions import ClientError

from test_object_journal import (JENV, JHDR, as_after_reboot, journal_records,
                                 journals, journals2, take_metas_away)
from test_object_new_dirs import check_burst

ZEROED = 1  # header byte 55


def jstat(p):
    st = os.stat(p)
    return st.st_size, st.st_blocks


def host_files(srv):
    """The host's two files (16 drive directories of one filesystem: the
    first drive is the host)."""
    j1 = journals2(srv)
    assert j1 == [j1[0]] and j1[0].startswith(srv.drives[0]), j1
    return [journals(srv)[0], j1[0]]


def test_clean_restart_keeps_the_journals_zeroed_length(storaged):
    srv = storaged(ndrives=16,
                   env=dict(JENV, STORAGED_TEST_JOURNAL_CP_SECS="1"))
    c = srv.client()
    c.create_bucket(Bucket="burst")
    rng = random.Random(23)
    bodies = {}
    # PUTs until the checkpoints have zeroed and grown both files (each
    # went idle once: a quarter longer than its records, in MiB)
    files = host_files(srv)
    deadline = time.monotonic() + 60
    while min(os.path.getsize(p) for p in files) < (1 << 20):
        assert time.monotonic() < deadline, [jstat(p) for p in files]
        v = rng.randbytes(12 * 1024)
        k = "a/%05d" % len(bodies)
        c.put_object(Bucket="burst", Key=k, Body=v)
        bodies[k] = v
    srv.stop()
    kept = {p: jstat(p) for p in files}
    for p in files:
        with open(p, "rb") as f:
            data = f.read()
        assert len(data) >= 1 << 20, (p, len(data))
        assert data[55] & ZEROED, p
        assert data[JHDR:].count(0) == len(data) - JHDR, p  # no record
    # no checkpoint from here on: the records below stay in the file their
    # commits wrote, however slow the machine (with 1 s, a second between
    # a PUT and the look at its file let a checkpoint switch and zero it)
    srv.extra_env["STORAGED_TEST_JOURNAL_CP_SECS"] = "600"
    srv.start()
    # the start kept both lengths and blocks
    assert {p: jstat(p) for p in files} == kept
    for p in files:
        with open(p, "rb") as f:
            assert not f.read(JHDR)[55] & ZEROED, p  # records come now
    # a commit right after the start: written over allocated blocks
    v = rng.randbytes(12 * 1024)
    c.put_object(Bucket="burst", Key="b/0", Body=v)
    bodies["b/0"] = v
    assert journal_records(files[0]) > 0  # the active file at a start
    assert {p: jstat(p) for p in files} == kept
    for k in ("a/00000", "b/0"):
        assert c.get_object(Bucket="burst", Key=k)["Body"].read() == bodies[k]

    # a kill -9: the start cuts both back to their header (no flag), and
    # no body of the last run is left in them
    last = {}
    for i in range(10):
        v = rng.randbytes(12 * 1024)
        c.put_object(Bucket="burst", Key="c/%02d" % i, Body=v)
        last["c/%02d" % i] = v
    srv.kill9()
    assert journal_records(files[0]) > 0
    srv.start()
    for p in files:
        assert os.path.getsize(p) == JHDR, p
    for k, v in last.items():
        assert c.get_object(Bucket="burst", Key=k)["Body"].read() == v


def test_stale_records_past_the_tail_are_not_replayed(storaged):
    srv = storaged(ndrives=16, env=JENV)  # no checkpoint within the test
    c = srv.client()
    c.create_bucket(Bucket="burst")
    rng = random.Random(29)
    old = {}
    for i in range(24):
        v = rng.randbytes(rng.choice([100, 4096, 12 * 1024]))
        c.put_object(Bucket="burst", Key="k/%02d" % i, Body=v)
        old["k/%02d" % i] = v
    j0 = journals(srv)[0]
    srv.kill9()
    assert journal_records(j0) >= 24
    with open(j0, "rb") as f:
        stale = f.read()[JHDR:]  # generation G's records
    srv.start()  # the same boot: made durable, generation G + 2
    gone, kept = sorted(old)[:12], sorted(old)[12:]
    for k in gone:
        c.delete_object(Bucket="burst", Key=k)
    state = {"acked": {}, "inflight": {}}
    for k in kept:  # overwrites, journaled in the new generation
        v = rng.randbytes(5000)
        c.put_object(Bucket="burst", Key=k, Body=v)
        state["acked"][k] = hashlib.md5(v).hexdigest()
    srv.kill9()
    n_new = journal_records(j0)
    assert n_new > 0
    # generation G's records past the new tail, whole and CRC-valid
    with open(j0, "r+b") as f:
        end = f.seek(0, os.SEEK_END)
        f.seek((end + 63) // 64 * 64 + 64 * 16)
        f.write(stale)
    assert journal_records(j0) == n_new  # not of the header's generation
    # a power cut: the overwrites' metas gone or torn
    take_metas_away(srv, state, rng)
    as_after_reboot(srv)
    srv.start()
    assert "replayed after a restart of the machine" in srv.log_text()
    check_burst(c, state)
    listed = set()
    for page in c.get_paginator("list_objects_v2").paginate(Bucket="burst"):
        listed.update(o["Key"] for o in page.get("Contents", []))
    for k in gone:
        assert k not in listed, k
        try:
            c.get_object(Bucket="burst", Key=k)
            raise AssertionError("%s came back from a stale record" % k)
        except ClientError as e:
            assert e.response["Error"]["Code"] == "NoSuchKey", (k, e)


def test_a_fresh_store_switches_to_a_longer_zeroed_file(storaged):
    """A fresh store's files start at their header. Once the records went
    1 MiB past the active file's length, the journal thread zeroes the idle
    file out to four times the records, fdatasyncs it and switches to it
    (a checkpoint): the commits after it write over allocated blocks,
    instead of appending until the 3 s checkpoints have grown the files. A
    power cut after that switch: the replay reads the longer file."""
    srv = storaged(ndrives=16, env={"STORAGED_SYNC_MODE": "file"})
    c = srv.client()
    c.create_bucket(Bucket="burst")
    j0, j1 = host_files(srv)
    assert os.path.getsize(j0) == JHDR and os.path.getsize(j1) == JHDR
    rng = random.Random(31)
    state = {"acked": {}, "inflight": {}}

    def put(k):
        v = rng.randbytes(12 * 1024)
        c.put_object(Bucket="burst", Key=k, Body=v)
        state["acked"][k] = hashlib.md5(v).hexdigest()

    # PUTs until journal.1 is made longer, before it takes a record
    deadline = time.monotonic() + 60
    while os.path.getsize(j1) < (1 << 20):
        assert time.monotonic() < deadline, (jstat(j0), jstat(j1))
        put("a/%05d" % len(state["acked"]))
    # the switch: journal.1 active, journal's records zeroed in place and
    # the file made as long
    while journal_records(j0) > 0 or os.path.getsize(j0) < (4 << 20):
        assert time.monotonic() < deadline, (jstat(j0), jstat(j1))
        time.sleep(0.05)
    assert os.path.getsize(j1) >= 4 << 20
    before = {p: jstat(p) for p in (j0, j1)}
    put("b/0")
    assert journal_records(j0) + journal_records(j1) > 0
    assert {p: jstat(p) for p in (j0, j1)} == before  # nothing appended
    # a power cut right after more records
    for i in range(10):
        put("c/%02d" % i)
    srv.kill9()
    take_metas_away(srv, {"acked": {k: h for k, h in state["acked"].items()
                                    if k[0] in "bc"}, "inflight": {}}, rng)
    as_after_reboot(srv)
    srv.start()
    assert "replayed after a restart of the machine" in srv.log_text()
    check_burst(c, state)
