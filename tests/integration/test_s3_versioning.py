"""Bucket versioning against a real storaged, through boto3 and awscli:
Put/GetBucketVersioning, version ids, GET/HEAD/DELETE by versionId, delete
markers, CopyObject from a version, ListObjectVersions and its paging,
the "null" version of unversioned and suspended buckets (as S3 documents
them), conditional requests on versions, multipart, DeleteObjects, bucket
deletion and restarts (storaged/s3/versioning.c)."""
import json
import os
import subprocess

import pytest
from botocore.exceptions import ClientError


def _err(exc_info):
    e = exc_info.value.response
    return e["ResponseMetadata"]["HTTPStatusCode"], e["Error"]["Code"]


def _enable(s3, bucket, status="Enabled"):
    s3.put_bucket_versioning(Bucket=bucket,
                             VersioningConfiguration={"Status": status})


def _versions(s3, bucket, **kw):
    r = s3.list_object_versions(Bucket=bucket, **kw)
    v = [(x["Key"], x["VersionId"], x["IsLatest"], False)
         for x in r.get("Versions", [])]
    d = [(x["Key"], x["VersionId"], x["IsLatest"], True)
         for x in r.get("DeleteMarkers", [])]
    return r, v, d


def _body(s3, bucket, key, vid=None):
    kw = {"VersionId": vid} if vid else {}
    return s3.get_object(Bucket=bucket, Key=key, **kw)["Body"].read()


def test_versioning_state_round_trip(s3, bucket):
    assert "Status" not in s3.get_bucket_versioning(Bucket=bucket)
    _enable(s3, bucket)
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    _enable(s3, bucket, "Suspended")
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Suspended"
    with pytest.raises(ClientError) as ei:
        _enable(s3, bucket, "Sometimes")
    assert _err(ei) == (400, "MalformedXML")
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Suspended"
    with pytest.raises(ClientError) as ei:
        s3.get_bucket_versioning(Bucket="no-such-bucket-x")
    assert _err(ei) == (404, "NoSuchBucket")
    # the companion bucket is never listed
    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert names == [bucket]


def test_versions_overwrite_get_head_by_id(s3, bucket):
    _enable(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="k", Body=b"one")["VersionId"]
    v2 = s3.put_object(Bucket=bucket, Key="k", Body=b"two!")["VersionId"]
    assert v1 and v2 and v1 != v2 and v1 != "null"
    assert _body(s3, bucket, "k") == b"two!"
    g = s3.get_object(Bucket=bucket, Key="k")
    assert g["VersionId"] == v2
    assert _body(s3, bucket, "k", v1) == b"one"
    h = s3.head_object(Bucket=bucket, Key="k", VersionId=v1)
    assert h["ContentLength"] == 3 and h["VersionId"] == v1
    # Last-Modified of the old version is when it was written, kept
    # across the move into the companion bucket
    assert h["LastModified"] <= g["LastModified"]
    # listings show the current version only
    keys = [o["Key"] for o in
            s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert keys == ["k"]
    _, v, d = _versions(s3, bucket)
    assert v == [("k", v2, True, False), ("k", v1, False, False)] and d == []
    # a malformed id is refused, an unknown one is NoSuchVersion
    with pytest.raises(ClientError) as ei:
        s3.get_object(Bucket=bucket, Key="k", VersionId="nope")
    assert _err(ei) == (400, "InvalidArgument")
    with pytest.raises(ClientError) as ei:
        s3.get_object(Bucket=bucket, Key="k", VersionId="0" * 16)
    assert _err(ei) == (404, "NoSuchVersion")


def test_delete_marker_and_undelete(s3, bucket):
    _enable(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="d/x", Body=b"data")["VersionId"]
    r = s3.delete_object(Bucket=bucket, Key="d/x")
    assert r["DeleteMarker"] is True
    dm = r["VersionId"]
    assert dm and dm != v1
    with pytest.raises(ClientError) as ei:
        s3.get_object(Bucket=bucket, Key="d/x")
    assert _err(ei) == (404, "NoSuchKey")
    hdrs = ei.value.response["ResponseMetadata"]["HTTPHeaders"]
    assert hdrs["x-amz-delete-marker"] == "true"
    assert hdrs["x-amz-version-id"] == dm
    with pytest.raises(ClientError) as ei:
        s3.get_object(Bucket=bucket, Key="d/x", VersionId=dm)
    assert _err(ei) == (405, "MethodNotAllowed")
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    _, v, d = _versions(s3, bucket)
    assert v == [("d/x", v1, False, False)]
    assert d == [("d/x", dm, True, True)]
    # the old version is still readable by id
    assert _body(s3, bucket, "d/x", v1) == b"data"
    # deleting the marker makes the object current again
    r = s3.delete_object(Bucket=bucket, Key="d/x", VersionId=dm)
    assert r["DeleteMarker"] is True and r["VersionId"] == dm
    assert _body(s3, bucket, "d/x") == b"data"
    assert s3.get_object(Bucket=bucket, Key="d/x")["VersionId"] == v1
    _, v, d = _versions(s3, bucket)
    assert v == [("d/x", v1, True, False)] and d == []


def test_delete_current_version_promotes_previous(s3, bucket):
    _enable(s3, bucket)
    e1 = s3.put_object(Bucket=bucket, Key="p", Body=b"first")
    e2 = s3.put_object(Bucket=bucket, Key="p", Body=b"second")
    lm1 = s3.head_object(Bucket=bucket, Key="p",
                         VersionId=e1["VersionId"])["LastModified"]
    s3.delete_object(Bucket=bucket, Key="p", VersionId=e2["VersionId"])
    g = s3.get_object(Bucket=bucket, Key="p")
    assert g["Body"].read() == b"first"
    assert g["VersionId"] == e1["VersionId"] and g["ETag"] == e1["ETag"]
    assert g["LastModified"] == lm1
    # delete of a non-current version leaves the current one alone
    e3 = s3.put_object(Bucket=bucket, Key="p", Body=b"third")
    s3.delete_object(Bucket=bucket, Key="p", VersionId=e1["VersionId"])
    assert _body(s3, bucket, "p") == b"third"
    _, v, _ = _versions(s3, bucket)
    assert v == [("p", e3["VersionId"], True, False)]
    # a version that does not exist (any more): 204, as S3
    s3.delete_object(Bucket=bucket, Key="p", VersionId=e1["VersionId"])


def test_null_version_unversioned_then_enabled(s3, bucket):
    s3.put_object(Bucket=bucket, Key="n", Body=b"old")
    _, v, _ = _versions(s3, bucket)
    assert v == [("n", "null", True, False)]
    _enable(s3, bucket)
    assert s3.get_object(Bucket=bucket, Key="n")["VersionId"] == "null"
    v2 = s3.put_object(Bucket=bucket, Key="n", Body=b"new")["VersionId"]
    assert _body(s3, bucket, "n", "null") == b"old"
    _, v, _ = _versions(s3, bucket)
    assert v == [("n", v2, True, False), ("n", "null", False, False)]
    s3.delete_object(Bucket=bucket, Key="n", VersionId="null")
    _, v, _ = _versions(s3, bucket)
    assert v == [("n", v2, True, False)]


def test_suspended_null_version_semantics(s3, bucket):
    _enable(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="s", Body=b"v1")["VersionId"]
    _enable(s3, bucket, "Suspended")
    r = s3.put_object(Bucket=bucket, Key="s", Body=b"null-a")
    assert "VersionId" not in r  # as S3: none when suspended
    # a second write replaces the null version, keeps v1
    s3.put_object(Bucket=bucket, Key="s", Body=b"null-b")
    _, v, _ = _versions(s3, bucket)
    assert v == [("s", "null", True, False), ("s", v1, False, False)]
    assert _body(s3, bucket, "s") == b"null-b"
    # a delete makes a null delete marker, which replaces the null version
    r = s3.delete_object(Bucket=bucket, Key="s")
    assert r["DeleteMarker"] is True and r["VersionId"] == "null"
    _, v, d = _versions(s3, bucket)
    assert v == [("s", v1, False, False)]
    assert d == [("s", "null", True, True)]
    # enabled again: new ids, the null marker stays a version
    _enable(s3, bucket)
    v3 = s3.put_object(Bucket=bucket, Key="s", Body=b"v3")["VersionId"]
    _, v, d = _versions(s3, bucket)
    assert v == [("s", v3, True, False), ("s", v1, False, False)]
    assert d == [("s", "null", False, True)]


def test_copy_from_version_and_conditionals(s3, bucket):
    _enable(s3, bucket)
    e1 = s3.put_object(Bucket=bucket, Key="src", Body=b"version one",
                       Metadata={"m": "1"})
    s3.put_object(Bucket=bucket, Key="src", Body=b"version two")
    r = s3.copy_object(Bucket=bucket, Key="dst",
                       CopySource={"Bucket": bucket, "Key": "src",
                                   "VersionId": e1["VersionId"]})
    assert r["CopySourceVersionId"] == e1["VersionId"]
    assert r["VersionId"] and r["VersionId"] != e1["VersionId"]
    g = s3.get_object(Bucket=bucket, Key="dst")
    assert g["Body"].read() == b"version one" and g["Metadata"] == {"m": "1"}
    with pytest.raises(ClientError) as ei:
        s3.copy_object(Bucket=bucket, Key="dst2",
                       CopySource={"Bucket": bucket, "Key": "src",
                                   "VersionId": "f" * 16})
    assert _err(ei) == (404, "NoSuchVersion")
    # conditionals apply to the version asked for
    vid = e1["VersionId"]
    assert s3.get_object(Bucket=bucket, Key="src", VersionId=vid,
                         IfMatch=e1["ETag"])["Body"].read() == b"version one"
    with pytest.raises(ClientError) as ei:
        s3.get_object(Bucket=bucket, Key="src", VersionId=vid,
                      IfMatch='"0123"')
    assert _err(ei)[0] == 412
    with pytest.raises(ClientError) as ei:
        s3.head_object(Bucket=bucket, Key="src", VersionId=vid,
                       IfNoneMatch=e1["ETag"])
    assert _err(ei)[0] == 304


def test_list_versions_paging(s3, bucket):
    _enable(s3, bucket)
    want = []
    for k in ["a", "b/1", "b/2", "c"]:
        ids = [s3.put_object(Bucket=bucket, Key=k, Body=k.encode() * i)
               ["VersionId"] for i in range(1, 4)]
        want += [(k, i) for i in reversed(ids)]
    s3.delete_object(Bucket=bucket, Key="c")
    _, v, d = _versions(s3, bucket)
    assert len(v) == 12 and len(d) == 1
    full = [(x[0], x[1]) for x in sorted(
        v + d, key=lambda x: (x[0], [y[1] for y in v + d if y[0] == x[0]]
                              .index(x[1])))]
    got, km, vm = [], None, None
    while True:
        kw = {"MaxKeys": 2}
        if km:
            kw["KeyMarker"] = km
            if vm:
                kw["VersionIdMarker"] = vm
        r = s3.list_object_versions(Bucket=bucket, **kw)
        page = sorted([(x["Key"], x["VersionId"], x["LastModified"])
                       for x in r.get("Versions", []) +
                       r.get("DeleteMarkers", [])])
        assert len(page) <= 2
        got += [(p[0], p[1]) for p in page]
        if not r["IsTruncated"]:
            break
        km, vm = r["NextKeyMarker"], r.get("NextVersionIdMarker")
    assert sorted(got) == sorted(full) and len(got) == 13
    # the paginator agrees, and with a delimiter b/ rolls up once
    pages = s3.get_paginator("list_object_versions").paginate(
        Bucket=bucket, Delimiter="/", PaginationConfig={"PageSize": 3})
    prefixes, keys = [], set()
    for p in pages:
        prefixes += [c["Prefix"] for c in p.get("CommonPrefixes", [])]
        keys |= {x["Key"] for x in p.get("Versions", [])}
    assert prefixes == ["b/"] and keys == {"a", "c"}
    r = s3.list_object_versions(Bucket=bucket, Prefix="b/")
    assert [x["Key"] for x in r["Versions"]] == ["b/1"] * 3 + ["b/2"] * 3
    assert [x["IsLatest"] for x in r["Versions"]] == [True, False, False] * 2
    with pytest.raises(ClientError) as ei:
        s3.list_object_versions(Bucket=bucket, VersionIdMarker="null")
    assert _err(ei) == (400, "InvalidArgument")


def test_multipart_and_delete_objects(s3, bucket):
    _enable(s3, bucket)
    part = os.urandom(5 * 1024 * 1024)
    u = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    p1 = s3.upload_part(Bucket=bucket, Key="mp", UploadId=u, PartNumber=1,
                        Body=part)
    p2 = s3.upload_part(Bucket=bucket, Key="mp", UploadId=u, PartNumber=2,
                        Body=b"tail")
    c = s3.complete_multipart_upload(
        Bucket=bucket, Key="mp", UploadId=u,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": p1["ETag"]},
                                   {"PartNumber": 2, "ETag": p2["ETag"]}]})
    assert c["VersionId"] and c["ETag"].endswith('-2"')
    v2 = s3.put_object(Bucket=bucket, Key="mp", Body=b"small")["VersionId"]
    h = s3.head_object(Bucket=bucket, Key="mp", VersionId=c["VersionId"])
    assert h["ETag"] == c["ETag"] and h["ContentLength"] == len(part) + 4
    r = s3.list_object_versions(Bucket=bucket)
    assert [x["ETag"] for x in r["Versions"]][1] == c["ETag"]
    # DeleteObjects: by id, and without one (a marker)
    s3.put_object(Bucket=bucket, Key="other", Body=b"o")
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [
        {"Key": "mp", "VersionId": c["VersionId"]}, {"Key": "other"}]})
    got = {d["Key"]: d for d in r["Deleted"]}
    assert got["mp"]["VersionId"] == c["VersionId"]
    assert got["other"]["DeleteMarker"] is True
    assert got["other"]["DeleteMarkerVersionId"]
    _, v, d = _versions(s3, bucket)
    assert ("mp", v2, True, False) in v and len(v) == 2
    assert [x[0] for x in d] == ["other"]
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [
        {"Key": "mp", "VersionId": "bad"}]})
    assert r["Errors"][0]["Code"] == "InvalidArgument"


def test_bucket_delete_needs_no_versions(s3, bucket):
    _enable(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="x", Body=b"1")["VersionId"]
    dm = s3.delete_object(Bucket=bucket, Key="x")["VersionId"]
    with pytest.raises(ClientError) as ei:
        s3.delete_bucket(Bucket=bucket)
    assert _err(ei) == (409, "BucketNotEmpty")
    s3.delete_object(Bucket=bucket, Key="x", VersionId=v1)
    s3.delete_object(Bucket=bucket, Key="x", VersionId=dm)
    s3.delete_bucket(Bucket=bucket)
    # the same name again starts unversioned
    s3.create_bucket(Bucket=bucket)
    assert "Status" not in s3.get_bucket_versioning(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="x", Body=b"2")
    _, v, d = _versions(s3, bucket)
    assert v == [("x", "null", True, False)] and d == []


def test_versions_survive_restart(s3, bucket):
    _enable(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="r", Body=b"keep me")["VersionId"]
    s3.put_object(Bucket=bucket, Key="r", Body=b"current")
    s3.ecfs_server.restart()
    c = s3.ecfs_server.client()
    assert c.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    assert _body(c, bucket, "r", v1) == b"keep me"
    v3 = c.put_object(Bucket=bucket, Key="r", Body=b"third")["VersionId"]
    assert len(c.list_object_versions(Bucket=bucket)["Versions"]) == 3
    assert v3 != v1


def _aws(srv, *args):
    env = dict(os.environ, AWS_ACCESS_KEY_ID=srv.access_key,
               AWS_SECRET_ACCESS_KEY=srv.secret_key,
               AWS_DEFAULT_REGION="us-east-1")
    env.pop("AWS_CA_BUNDLE", None)
    out = subprocess.run(["/usr/bin/aws", "--endpoint-url", srv.endpoint]
                         + list(args), env=env, capture_output=True,
                         timeout=60, check=True)
    return json.loads(out.stdout) if out.stdout.strip() else None


def test_awscli_versioning(s3, bucket, tmp_path):
    """Two awscli calls (each costs seconds of Python start-up): the
    versioning state, and a GET of an old version by id."""
    srv = s3.ecfs_server
    _aws(srv, "s3api", "put-bucket-versioning", "--bucket", bucket,
         "--versioning-configuration", "Status=Enabled")
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    v1 = s3.put_object(Bucket=bucket, Key="c", Body=b"cli one")["VersionId"]
    s3.put_object(Bucket=bucket, Key="c", Body=b"cli two")
    out = tmp_path / "out"
    r = _aws(srv, "s3api", "get-object", "--bucket", bucket, "--key", "c",
             "--version-id", v1, str(out))
    assert out.read_bytes() == b"cli one" and r["VersionId"] == v1


def test_scanner_heals_noncurrent_versions(storaged):
    """Old versions (objects of the companion bucket, or kept in place
    beside the current object): the scanner rebuilds their lost shards by
    itself, and afterwards two other drives can go and every old version
    still reads back exactly."""
    import re
    import time
    import urllib.request

    from test_object_fault import away

    def metric(name):
        text = urllib.request.urlopen(srv.endpoint + "/metrics").read()
        m = re.search(r"^%s ([0-9.e+]+)$" % re.escape(name), text.decode(),
                      re.M)
        return float(m.group(1)) if m else 0.0

    srv = storaged(ndrives=4, env={"STORAGED_SCAN_INTERVAL": "1"})
    c = srv.client()
    c.create_bucket(Bucket="vheal")
    _enable(c, "vheal")
    old = {}
    for n in (100, 5000, 70000, 2 * 1024 * 1024 + 7):
        k = "o/%d" % n
        body = os.urandom(n)
        old[k] = (c.put_object(Bucket="vheal", Key=k, Body=body)["VersionId"],
                  body)
        c.put_object(Bucket="vheal", Key=k, Body=b"new")
    # every file of the old versions on two drives (M = 2) is lost: the
    # companion's, and the metas of versions kept in place (HEX.v*, beside
    # the current objects; obj_ver.c)
    kept = 0
    for d in srv.drives[:2]:
        comp = os.path.join(d, "b", "vheal..v")
        for root, _, files in os.walk(comp):
            for f in files:
                if f != "bucket":
                    os.unlink(os.path.join(root, f))
        for root, _, files in os.walk(os.path.join(d, "b", "vheal")):
            for f in files:
                if f[32:34] == ".v":
                    os.unlink(os.path.join(root, f))
                    kept += 1
    assert kept > 0  # the small versions were kept in place
    # Lost shards: the 2 MiB version has the full 2+2 geometry, a shard on
    # every drive, so 2; a small kept version has k = 1 + M = 2 shards on 3
    # of the 4 drives (its placement, which moves with the version), so 1 or
    # 2: exactly the HEX.v files removed above, one per shard.
    lost = 2 + kept
    c0 = metric("storaged_scan_cycles_total")
    deadline = time.monotonic() + 60
    while (metric("storaged_scan_cycles_total") < c0 + 2 or
           metric("storaged_shards_healed_total") < lost):
        assert time.monotonic() < deadline, (
            "scanner healed %d of %d lost shards in 60 s" %
            (metric("storaged_shards_healed_total"), lost))
        time.sleep(0.3)
    for d in srv.drives[2:]:
        away(d)
    try:
        for k, (vid, body) in old.items():
            assert _body(c, "vheal", k, vid) == body, k
    finally:
        for d in srv.drives[2:]:
            away(d, False)
