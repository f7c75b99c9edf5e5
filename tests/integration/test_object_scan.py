"""The background scanner through the real server: it verifies every
shard's checksums, rebuilds corrupt and missing shards by itself (no GET
needed), exports its progress in /metrics, and drops abandoned multipart
uploads. Proof of the rebuild: afterwards four *other* drives can be lost
and every object still reads back exactly."""

import os
import random
import re
import time
import urllib.request

from test_object_fault import SIZES, away, corrupt_drive, read_all, rnd


def metric(srv, name):
    text = urllib.request.urlopen(srv.endpoint + "/metrics").read().decode()
    m = re.search(r"^%s(?:\{[^}]*\})? ([0-9.e+]+)$" % re.escape(name), text,
                  re.M)
    return float(m.group(1)) if m else None


def wait_for(pred, timeout=30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.2)
    return False


def test_scanner_heals_corruption_by_itself(storaged):
    srv = storaged(ndrives=16, env={"STORAGED_SCAN_INTERVAL": "1"})
    c = srv.client()
    c.create_bucket(Bucket="scan")
    objs = {"s/%d" % n: rnd(n, n + 5) for n in SIZES}
    for k, v in objs.items():
        c.put_object(Bucket="scan", Key=k, Body=v)
    rng = random.Random(3)
    bad = srv.drives[:4]
    for d in bad:
        corrupt_drive(d, rng)
    # missing shard files too (on one of the same four drives: at most M=4
    # shards of any object are bad)
    for root, _, files in os.walk(os.path.join(srv.drives[3], "b", "scan")):
        for f in files:
            if "." in f and not f.endswith(".m"):
                os.unlink(os.path.join(root, f))
    # a whole cycle that started after the damage must complete
    c0 = metric(srv, "storaged_scan_cycles_total") or 0
    assert wait_for(lambda: metric(srv, "storaged_scan_cycles_total") >=
                    c0 + 2), "scanner does not move"
    # the four 12+4 objects (>= 48 KiB) span all 16 drives: 4 bad each;
    # smaller ones have fewer shards, some on the damaged drives
    assert metric(srv, "storaged_shards_healed_total") >= 16
    assert metric(srv, "storaged_corrupt_found_total") >= 8
    assert metric(srv, "storaged_scan_objects_total") >= len(objs)
    assert metric(srv, "storaged_scan_bytes_total") > 0
    # the corrupt drives now carry good shards: lose four others
    for d in srv.drives[12:16]:
        away(d)
    read_all(c, "scan", objs)
    for d in srv.drives[12:16]:
        away(d, False)


def test_scanner_drops_abandoned_uploads(storaged):
    srv = storaged(ndrives=4, env={"STORAGED_SCAN_INTERVAL": "1",
                                   "STORAGED_MPU_EXPIRY": "1"})
    c = srv.client()
    c.create_bucket(Bucket="mpu")
    up = c.create_multipart_upload(Bucket="mpu", Key="big")["UploadId"]
    c.upload_part(Bucket="mpu", Key="big", UploadId=up, PartNumber=1,
                  Body=b"x" * 1000)
    assert wait_for(lambda: not c.list_multipart_uploads(Bucket="mpu")
                    .get("Uploads"), 20)
    # the upload leaves the index first, then its directories go
    assert wait_for(lambda: all(
        os.listdir(os.path.join(d, ".ecfs.sys", "mpu", "mpu")) == []
        for d in srv.drives), 5)


def test_hot_replaced_drive_is_rebuilt(storaged):
    """A drive wiped while serving (rm -rf, then an empty directory in its
    place) is formatted into its slot by the probe and refilled by the
    scanner; then four other drives can go and every object still reads."""
    import shutil

    srv = storaged(ndrives=16, env={"STORAGED_SCAN_INTERVAL": "1"})
    c = srv.client()
    c.create_bucket(Bucket="hot")
    objs = {"h/%d" % n: rnd(n, n + 9) for n in SIZES}
    for k, v in objs.items():
        c.put_object(Bucket="hot", Key=k, Body=v)
    victim = srv.drives[6]
    shutil.rmtree(victim)
    assert wait_for(lambda: metric(srv, "storaged_drives_online") == 15, 10)
    read_all(c, "hot", objs)
    os.mkdir(victim)
    assert wait_for(lambda: metric(srv, "storaged_drives_online") == 16, 10)
    c0 = metric(srv, "storaged_scan_cycles_total")
    assert wait_for(lambda: metric(srv, "storaged_scan_cycles_total") >=
                    c0 + 2, 30)
    assert os.path.exists(os.path.join(victim, ".ecfs.sys", "format"))
    others = [d for d in srv.drives if d != victim][:4]
    for d in others:
        away(d)
    read_all(c, "hot", objs)
    for d in others:
        away(d, False)
