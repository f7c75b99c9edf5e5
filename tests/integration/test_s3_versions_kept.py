"""Versions kept in place (storaged/store/obj_ver.c, FORMAT.md "Versions"):
a versioned overwrite of an inline object links the old metas to
HEX.vVERSION-SINCE on their drives instead of copying the version into the
companion bucket, and writes its companion record in the same index
transaction as the new version. Through boto3 on a real storaged: every
version reads back by id, a delete by id removes its files, the offline
`storaged index check` agrees with the live index, a lost index is rebuilt
with every version, and kill -9 during versioned overwrites never loses an
acknowledged version. A DELETE that puts a delete marker over an inline
current version keeps that version in place the same way (its metas are
linked, then the key's metas go, then one index transaction)."""

import collections
import glob
import hashlib
import os
import random
import re
import shutil
import threading
import time
import urllib.request

import pytest
from botocore.exceptions import ClientError


# Keeping in place is for versions inline in their metas: these tests name
# that layout (their 9-100 KiB bodies would be extent objects by default,
# which are copied whole: test_versions_not_kept_in_place_are_copied_whole)
INLINE = ["--no-extents"]


def _enable(c, bucket):
    c.put_bucket_versioning(Bucket=bucket,
                            VersioningConfiguration={"Status": "Enabled"})


def _files(srv, bucket, pattern):
    return sorted(glob.glob(os.path.join(srv.drives[0], "..", "*", "b",
                                         bucket, "*", pattern)))


def _kept(srv, bucket):
    return [p for d in srv.drives
            for p in glob.glob(os.path.join(d, "b", bucket, "*", "*.v*"))]


def _companion_metas(srv, bucket):
    return [p for d in srv.drives
            for p in glob.glob(os.path.join(d, "b", bucket + "..v", "*",
                                            "*.m"))]


def _all_versions(c, bucket):
    """{key: [(vid, md5 of the bytes, is_latest)]}, every version read."""
    out = {}
    kw = {"Bucket": bucket}
    while True:
        r = c.list_object_versions(**kw)
        for v in r.get("Versions", []):
            b = c.get_object(Bucket=bucket, Key=v["Key"],
                             VersionId=v["VersionId"])["Body"].read()
            assert len(b) == v["Size"], v
            out.setdefault(v["Key"], []).append(
                (v["VersionId"], hashlib.md5(b).hexdigest(), v["IsLatest"]))
        if not r.get("IsTruncated"):
            return out
        kw["KeyMarker"] = r["NextKeyMarker"]
        kw["VersionIdMarker"] = r["NextVersionIdMarker"]


def _markers(c, bucket):
    """{key: number of delete markers}."""
    out = {}
    for page in c.get_paginator("list_object_versions").paginate(
            Bucket=bucket):
        for m in page.get("DeleteMarkers", []):
            out[m["Key"]] = out.get(m["Key"], 0) + 1
    return out


def _check_and_rebuild_index(srv):
    """Stops @srv, checks that the live index is what a rebuild would
    make (`storaged index check`), drops the index on every drive and
    starts again: the start rebuilds it from the metas."""
    srv.stop_and_check_index()
    for d in srv.drives:
        shutil.rmtree(os.path.join(d, ".ecfs.sys", "index"),
                      ignore_errors=True)
    srv.start()


def test_overwrite_keeps_version_in_place(storaged):
    srv = storaged(ndrives=4, args=INLINE)
    c = srv.client()
    c.create_bucket(Bucket="kept")
    c.put_object(Bucket="kept", Key="k", Body=b"written before versioning")
    _enable(c, "kept")
    config_metas = len(_companion_metas(srv, "kept"))
    bodies = [os.urandom(4096), os.urandom(100), os.urandom(20000), b""]
    vids = []
    for i, b in enumerate(bodies):
        r = c.put_object(Bucket="kept", Key="k", Body=b,
                         Metadata={"n": str(i)}, ContentType="text/x-%d" % i)
        vids.append(r["VersionId"])
        time.sleep(0.01)  # distinct Last-Modified (ms)
    # nothing was copied: the companion holds only its config record, the
    # old versions' metas are links beside the current one
    assert len(_companion_metas(srv, "kept")) == config_metas
    assert len(_kept(srv, "kept")) > 0
    vs = c.list_object_versions(Bucket="kept")["Versions"]
    assert [v["VersionId"] for v in vs] == vids[::-1] + ["null"]
    assert [v["IsLatest"] for v in vs] == [True] + [False] * 4
    mtimes = [v["LastModified"] for v in vs]
    assert mtimes == sorted(mtimes, reverse=True)
    assert len(set(mtimes)) == 5
    for i, (vid, b) in enumerate(zip(vids, bodies)):
        g = c.get_object(Bucket="kept", Key="k", VersionId=vid)
        assert g["Body"].read() == b
        assert g["Metadata"] == {"n": str(i)}
        assert g["ContentType"] == "text/x-%d" % i
        assert g["ETag"] == '"%s"' % hashlib.md5(b).hexdigest()
        h = c.head_object(Bucket="kept", Key="k", VersionId=vid)
        assert h["ContentLength"] == len(b)
    assert c.get_object(Bucket="kept", Key="k", VersionId="null")[
        "Body"].read() == b"written before versioning"
    # a delete by id removes that version's files on every drive
    before = len(_kept(srv, "kept"))
    c.delete_object(Bucket="kept", Key="k", VersionId=vids[1])
    assert len(_kept(srv, "kept")) < before
    try:
        c.get_object(Bucket="kept", Key="k", VersionId=vids[1])
        raise AssertionError("deleted version still readable")
    except ClientError as e:
        assert e.response["Error"]["Code"] == "NoSuchVersion"
    # deleting the current version makes the newest kept one current
    c.delete_object(Bucket="kept", Key="k", VersionId=vids[3])
    assert c.get_object(Bucket="kept", Key="k")["Body"].read() == bodies[2]
    want = _all_versions(c, "kept")
    srv.stop_and_check_index()  # the live index is what a rebuild would make
    for d in srv.drives:
        shutil.rmtree(os.path.join(d, ".ecfs.sys", "index"),
                      ignore_errors=True)
    srv.start()
    assert _all_versions(c, "kept") == want


def _writer(c, keys, sent, acked, stop, seed, dels=None):
    rng = random.Random(seed)
    while not stop.is_set():
        k = rng.choice(keys)
        if dels is not None and rng.random() < 0.4:
            dels[1].append(k)  # tried: its marker may be there or not
            try:  # a delete marker over the current version (or a marker)
                c.delete_object(Bucket="crashv", Key=k)
            except Exception:
                continue
            dels[0].append(k)
            continue
        b = rng.randbytes(rng.choice([0, 100, 4096, 9000, 30000]))
        h = hashlib.md5(b).hexdigest()
        sent[k][h] += 1
        try:
            c.put_object(Bucket="crashv", Key=k, Body=b)
        except Exception:
            continue  # the server died under us: outcome unknown
        acked[k].append(h)


def test_delete_marker_keeps_version_in_place(storaged):
    srv = storaged(ndrives=4, args=INLINE)
    c = srv.client()
    c.create_bucket(Bucket="keptdm")
    _enable(c, "keptdm")
    bodies = [os.urandom(3000), os.urandom(70000)]
    vids = [c.put_object(Bucket="keptdm", Key="k", Body=b,
                         Metadata={"n": str(i)})["VersionId"]
            for i, b in enumerate(bodies)]
    c.put_object(Bucket="keptdm", Key="other", Body=b"x")
    companion = set(_companion_metas(srv, "keptdm"))
    kept = set(_kept(srv, "keptdm"))
    cur = _files(srv, "keptdm", "*.m")
    b0 = _metric(srv, "storaged_sync_barriers_total")
    r = c.delete_object(Bucket="keptdm", Key="k")
    assert r["DeleteMarker"] is True
    dm = r["VersionId"]
    # the key's own metas go after the answer, after the barrier of the
    # background queue (FORMAT.md "Versions")
    assert _wait(lambda: len(_files(srv, "keptdm", "*.m")) < len(cur))
    # one operation: the kept version's links and the marker share one
    # barrier (two before: the links', then the marker's own commit)
    assert _metric(srv, "storaged_sync_barriers_total") - b0 == 1
    # the current version was not copied: the companion got only the
    # marker's metas (an empty object: at most k + m files, all new)
    new = set(_companion_metas(srv, "keptdm")) - companion
    assert 0 < len(new) <= 4
    assert all(os.path.getsize(p) < 2048 for p in new)
    # its metas are links now, and the key's own metas are gone
    assert len(set(_kept(srv, "keptdm")) - kept) > 0
    assert len(_files(srv, "keptdm", "*.m")) < len(cur)
    try:
        c.get_object(Bucket="keptdm", Key="k")
        raise AssertionError("a deleted key is still readable")
    except ClientError as e:
        assert e.response["Error"]["Code"] == "NoSuchKey"
        assert e.response["ResponseMetadata"]["HTTPHeaders"][
            "x-amz-delete-marker"] == "true"
    vs = c.list_object_versions(Bucket="keptdm", Prefix="k")
    assert [m["VersionId"] for m in vs["DeleteMarkers"]] == [dm]
    assert vs["DeleteMarkers"][0]["IsLatest"] is True
    assert [v["VersionId"] for v in vs["Versions"]] == vids[::-1]
    assert not any(v["IsLatest"] for v in vs["Versions"])
    for i, (vid, b) in enumerate(zip(vids, bodies)):
        g = c.get_object(Bucket="keptdm", Key="k", VersionId=vid)
        assert g["Body"].read() == b
        assert g["Metadata"] == {"n": str(i)}
        assert g["ETag"] == '"%s"' % hashlib.md5(b).hexdigest()
    assert [o["Key"] for o in c.list_objects_v2(Bucket="keptdm")[
        "Contents"]] == ["other"]
    # a suspended bucket keeps a non-null current version the same way
    # and puts a "null" marker over it
    c.put_object(Bucket="keptdm", Key="s", Body=b"enabled-era")
    c.put_bucket_versioning(Bucket="keptdm",
                            VersioningConfiguration={"Status": "Suspended"})
    companion = set(_companion_metas(srv, "keptdm"))
    r = c.delete_object(Bucket="keptdm", Key="s")
    assert r["DeleteMarker"] is True and r["VersionId"] == "null"
    assert len(set(_companion_metas(srv, "keptdm")) - companion) <= 4
    vs = c.list_object_versions(Bucket="keptdm", Prefix="s")
    assert [v["Key"] for v in vs["Versions"]] == ["s"]
    sv = vs["Versions"][0]["VersionId"]
    assert c.get_object(Bucket="keptdm", Key="s", VersionId=sv)[
        "Body"].read() == b"enabled-era"
    _enable(c, "keptdm")
    # removing the marker makes the newest version current again
    c.delete_object(Bucket="keptdm", Key="k", VersionId=dm)
    assert c.get_object(Bucket="keptdm", Key="k")["Body"].read() == bodies[1]
    assert c.delete_object(Bucket="keptdm", Key="k")["DeleteMarker"]
    # a kept version deleted by id leaves nothing of it
    c.delete_object(Bucket="keptdm", Key="k", VersionId=vids[0])
    try:
        c.get_object(Bucket="keptdm", Key="k", VersionId=vids[0])
        raise AssertionError("deleted version still readable")
    except ClientError as e:
        assert e.response["Error"]["Code"] == "NoSuchVersion"
    want = _all_versions(c, "keptdm")
    assert [v for v, _, _ in want["k"]] == [vids[1]]
    _check_and_rebuild_index(srv)
    assert _all_versions(c, "keptdm") == want
    vs = c.list_object_versions(Bucket="keptdm", Prefix="k")
    assert len(vs["DeleteMarkers"]) == 1 and vs["DeleteMarkers"][0][
        "IsLatest"]


def _kill9_rounds(srv, c, deletes):
    nthreads = 3
    keys = [["t%d/k%d" % (t, i) for i in range(3)] for t in range(nthreads)]
    allk = [k for ks in keys for k in ks]
    sent = {k: collections.Counter() for k in allk}  # PUTs sent per body
    acked = {k: [] for k in allk}
    rng = random.Random(18)
    dels = ([], [])  # acknowledged, tried
    for rnd in range(3):
        stop = threading.Event()
        ths = [threading.Thread(target=_writer,
                                args=(srv.client(), keys[t], sent, acked,
                                      stop, rnd * 10 + t,
                                      dels if deletes else None))
               for t in range(nthreads)]
        base = sum(len(v) for v in acked.values())
        for t in ths:
            t.start()
        # at least 10 acknowledged PUTs this round (however loaded the
        # machine), then a random moment
        end = time.monotonic() + 40
        while sum(len(v) for v in acked.values()) < base + 10 and \
                time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(rng.uniform(0, 0.6))
        srv.kill9()
        stop.set()
        for t in ths:
            t.join(30)
        if rnd == 2:  # the last time the index is lost too: a rebuild
            for d in srv.drives:
                shutil.rmtree(os.path.join(d, ".ecfs.sys", "index"),
                              ignore_errors=True)
        srv.start()
        got = _all_versions(c, "crashv")
        for k in allk:
            have = [h for _, h, _ in got.get(k, [])]
            # every acknowledged version is there; nothing else but what
            # was sent (an unacknowledged PUT: there whole, or not at all)
            missing = [h for h in acked[k] if h not in have]
            assert missing == [], "acknowledged version lost: %s" % k
            assert set(have) <= set(sent[k]), "a version nobody wrote: " + k
            # a body is there at most as often as it was sent (empty bodies
            # repeat: an acknowledged one and one in flight at the kill may
            # both be there)
            for h, n in collections.Counter(have).items():
                assert n <= sent[k][h], "a version twice: %s %s" % (k, h)
        if deletes:
            # every acknowledged DELETE left its marker (the marker is
            # written in the same operation as the kept version), and
            # no marker is there that no DELETE tried
            ms = _markers(c, "crashv")
            for k in allk:
                assert dels[0].count(k) <= ms.get(k, 0) <= \
                    dels[1].count(k), "markers of %s" % k
    assert sum(len(v) for v in acked.values()) >= 30
    if deletes:
        assert len(dels[0]) > 0
    srv.stop_and_check_index()


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_kill9_during_versioned_overwrites(storaged):
    srv = storaged(ndrives=4, args=INLINE)
    c = srv.client()
    c.create_bucket(Bucket="crashv")
    _enable(c, "crashv")
    _kill9_rounds(srv, c, False)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_kill9_during_versioned_deletes(storaged):
    """Delete markers over kept versions, between overwrites: kill -9 in
    the middle never loses an acknowledged version nor invents one, and the
    last round's rebuild agrees with `storaged index check`."""
    srv = storaged(ndrives=4, args=INLINE)
    c = srv.client()
    c.create_bucket(Bucket="crashv")
    _enable(c, "crashv")
    _kill9_rounds(srv, c, True)


def _metric(srv, name):
    text = urllib.request.urlopen(srv.endpoint + "/metrics").read().decode()
    m = re.search(r"^%s ([0-9.e+]+)$" % re.escape(name), text, re.M)
    assert m, name
    return float(m.group(1))


def _drives_online(srv):
    text = urllib.request.urlopen(srv.endpoint + "/metrics").read().decode()
    m = re.search(r"^storaged_drives_online ([0-9.]+)$", text, re.M)
    return float(m.group(1)) if m else None


def _wait(pred, timeout=20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return False


def test_kept_version_deleted_while_drive_offline(storaged):
    """A kept version deleted by id while a drive holding one of its copies
    is offline does not come back at a full rebuild: the online drives get
    a tombstone under its HEX.v name, and the start, with every drive
    back, removes the tombstones and the stale copy."""
    srv = storaged(ndrives=4, args=INLINE)
    c = srv.client()
    c.create_bucket(Bucket="keptoff")
    _enable(c, "keptoff")
    v1 = c.put_object(Bucket="keptoff", Key="k", Body=b"one" * 100)[
        "VersionId"]
    v2 = c.put_object(Bucket="keptoff", Key="k", Body=b"two" * 100)[
        "VersionId"]
    kept = _kept(srv, "keptoff")
    assert kept, "v1 was not kept in place"
    d = next(x for x in srv.drives if kept[0].startswith(x + os.sep))
    os.rename(d, d + ".away")
    try:
        assert _wait(lambda: _drives_online(srv) == 3)
        c.delete_object(Bucket="keptoff", Key="k", VersionId=v1)
        try:
            c.get_object(Bucket="keptoff", Key="k", VersionId=v1)
            raise AssertionError("deleted version still readable")
        except ClientError as e:
            assert e.response["Error"]["Code"] == "NoSuchVersion"
    finally:
        os.rename(d + ".away", d)
    srv.stop()
    # the offline drive still holds its copy of v1, the others tombstones
    assert any(p.startswith(d + os.sep) for p in _kept(srv, "keptoff"))
    for x in srv.drives:
        shutil.rmtree(os.path.join(x, ".ecfs.sys", "index"),
                      ignore_errors=True)
    srv.start()
    vs = c.list_object_versions(Bucket="keptoff")
    assert [v["VersionId"] for v in vs["Versions"]] == [v2]
    assert c.get_object(Bucket="keptoff", Key="k")["Body"].read() == \
        b"two" * 100
    assert _kept(srv, "keptoff") == []  # every drive was back: all gone
    srv.stop_and_check_index()


def _mpu(c, bucket, key, parts, **kw):
    u = c.create_multipart_upload(Bucket=bucket, Key=key, **kw)["UploadId"]
    done = [{"PartNumber": i,
             "ETag": c.upload_part(Bucket=bucket, Key=key, UploadId=u,
                                   PartNumber=i, Body=p)["ETag"]}
            for i, p in enumerate(parts, 1)]
    return c.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=u,
                                       MultipartUpload={"Parts": done})


def test_versions_not_kept_in_place_are_copied_whole(storaged):
    """Only an inline current version is kept in place (obj_ver_keepable);
    a shard-file object (> 1 MiB), an extent object (--extents, 8 KiB <
    size <= 1 MiB) and a multipart object are copied whole into the
    companion bucket at a versioned overwrite or a delete-marker DELETE
    (versioning.c demote). For each: every version reads back by id with
    its bytes, ETag (the multipart `-N` one), metadata and type, none of
    them as a HEX.v link; a delete by id removes exactly that version's
    companion copy; the offline index check agrees and a rebuilt index
    holds the same versions."""
    srv = storaged(ndrives=4, ec="2+2", args=["--extents"])
    c = srv.client()
    c.create_bucket(Bucket="vbig")
    _enable(c, "vbig")
    big = os.urandom(2 * 1024 * 1024 + 7)
    mid = os.urandom(100 * 1024)
    parts = [os.urandom(5 * 1024 * 1024), os.urandom(1000)]

    def put(key, kind, n):
        meta = {"Metadata": {"n": str(n)}, "ContentType": "x/%s-%d" % (kind, n)}
        if kind == "mpu":
            r = _mpu(c, "vbig", key, parts, **meta)
            return r["VersionId"], b"".join(parts), r["ETag"]
        body = big if kind == "big" else mid
        r = c.put_object(Bucket="vbig", Key=key, Body=body, **meta)
        return r["VersionId"], body, r["ETag"]

    want = {}
    for kind in ("big", "ext", "mpu"):
        key = "k-" + kind
        want[key] = [put(key, kind, 0)]
        comp = len(_companion_metas(srv, "vbig"))
        kept = len(_kept(srv, "vbig"))
        # an overwrite by a small object: the old one is copied, not linked
        r = c.put_object(Bucket="vbig", Key=key, Body=b"small")
        want[key].append((r["VersionId"], b"small", r["ETag"]))
        assert len(_companion_metas(srv, "vbig")) > comp, kind
        assert len(_kept(srv, "vbig")) == kept, kind
        # the same kind again (the small one, inline, is kept in place by a
        # PUT, copied by a CompleteMultipartUpload), then a delete marker
        # over it: copied too
        comp = len(_companion_metas(srv, "vbig"))
        want[key].append(put(key, kind, 2))
        if kind == "mpu":
            assert len(_companion_metas(srv, "vbig")) > comp
        else:
            assert len(_kept(srv, "vbig")) > kept, kind
        comp = len(_companion_metas(srv, "vbig"))
        kept = len(_kept(srv, "vbig"))
        dm = c.delete_object(Bucket="vbig", Key=key)
        assert dm["DeleteMarker"] is True
        assert len(_companion_metas(srv, "vbig")) > comp, kind
        assert len(_kept(srv, "vbig")) == kept, kind
    assert want["k-mpu"][0][2].endswith('-2"')

    def check():
        for key, vs in want.items():
            r = c.list_object_versions(Bucket="vbig", Prefix=key)
            assert [v["VersionId"] for v in r["Versions"]] == \
                [v[0] for v in vs[::-1]]
            assert r["DeleteMarkers"][0]["IsLatest"] is True
            for vid, body, etag in vs:
                g = c.get_object(Bucket="vbig", Key=key, VersionId=vid)
                assert g["Body"].read() == body, (key, vid)
                assert g["ETag"] == etag and g["ContentLength"] == len(body)
                if body != b"small":
                    assert g["Metadata"]["n"] in ("0", "2")
                    assert g["ContentType"] == "x/%s-%s" % (
                        key[2:], g["Metadata"]["n"])
                h = c.head_object(Bucket="vbig", Key=key, VersionId=vid)
                assert h["ETag"] == etag and h["ContentLength"] == len(body)
            # a range read of the oldest large version
            vid, body, _ = next(v for v in vs if len(v[1]) > 71000)
            g = c.get_object(Bucket="vbig", Key=key, VersionId=vid,
                             Range="bytes=1000-70999")
            assert g["Body"].read() == body[1000:71000]

    check()
    # a delete by id removes that version (its companion copy) only
    for key, vs in want.items():
        comp = len(_companion_metas(srv, "vbig"))
        c.delete_object(Bucket="vbig", Key=key, VersionId=vs[0][0])
        with pytest.raises(ClientError) as ei:
            c.get_object(Bucket="vbig", Key=key, VersionId=vs[0][0])
        assert ei.value.response["Error"]["Code"] == "NoSuchVersion"
        assert len(_companion_metas(srv, "vbig")) < comp, key
        vs.pop(0)
    check()
    _check_and_rebuild_index(srv)
    check()
