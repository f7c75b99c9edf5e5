"""Multipart, listing (v1/v2, paging, delimiters, encoding), presigned URLs
and metadata endpoints against a real storaged, with boto3 and urllib.
Also: a versionId that is not the current version never reads or deletes
current data, concurrent Completes of one upload (one wins, the object is
whole), a failed Complete leaves its upload whole for a retry, an
abort (client or lifecycle) during a Complete answers NoSuchUpload,
DeleteBucket of a bucket holding only incomplete uploads, and
UploadPartCopy ranges that must lie inside the source."""

import hashlib
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request

import botocore
import pytest

import s3util

MiB = 1024 * 1024


def err_code(excinfo):
    return excinfo.value.response["Error"]["Code"]


def test_multipart_roundtrip_and_etag(s3, bucket):
    parts_data = [os.urandom(5 * MiB), os.urandom(5 * MiB), os.urandom(1234)]
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp", ContentType="a/b",
                                    Metadata={"m": "v"})
    uid = up["UploadId"]
    ups = s3.list_multipart_uploads(Bucket=bucket)["Uploads"]
    assert [(u["Key"], u["UploadId"]) for u in ups] == [("mp", uid)]
    parts = []
    for i, d in enumerate(parts_data, 1):
        r = s3.upload_part(Bucket=bucket, Key="mp", UploadId=uid, PartNumber=i,
                           Body=d)
        assert r["ETag"] == '"%s"' % hashlib.md5(d).hexdigest()
        parts.append({"PartNumber": i, "ETag": r["ETag"]})
    lp = s3.list_parts(Bucket=bucket, Key="mp", UploadId=uid)
    assert [p["PartNumber"] for p in lp["Parts"]] == [1, 2, 3]
    assert [p["Size"] for p in lp["Parts"]] == [len(d) for d in parts_data]
    r = s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=uid,
                                     MultipartUpload={"Parts": parts})
    md5s = b"".join(hashlib.md5(d).digest() for d in parts_data)
    expect = '"%s-3"' % hashlib.md5(md5s).hexdigest()
    assert r["ETag"] == expect
    whole = b"".join(parts_data)
    g = s3.get_object(Bucket=bucket, Key="mp")
    assert g["ETag"] == expect and g["ContentType"] == "a/b"
    assert g["Metadata"] == {"m": "v"}
    assert g["Body"].read() == whole
    # range across the part boundary
    lo, hi = 5 * MiB - 10, 5 * MiB + 10
    g = s3.get_object(Bucket=bucket, Key="mp", Range="bytes=%d-%d" % (lo, hi))
    assert g["Body"].read() == whole[lo:hi + 1]
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_multipart_errors(s3, bucket):
    uid = s3.create_multipart_upload(Bucket=bucket, Key="e")["UploadId"]
    e1 = s3.upload_part(Bucket=bucket, Key="e", UploadId=uid, PartNumber=1,
                        Body=b"small")["ETag"]
    e2 = s3.upload_part(Bucket=bucket, Key="e", UploadId=uid, PartNumber=2,
                        Body=b"tail")["ETag"]
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.complete_multipart_upload(
            Bucket=bucket, Key="e", UploadId=uid,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1},
                                       {"PartNumber": 2, "ETag": e2}]})
    assert err_code(e) == "EntityTooSmall"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.complete_multipart_upload(
            Bucket=bucket, Key="e", UploadId=uid,
            MultipartUpload={"Parts": [{"PartNumber": 2, "ETag": e2},
                                       {"PartNumber": 1, "ETag": e1}]})
    assert err_code(e) == "InvalidPartOrder"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.complete_multipart_upload(
            Bucket=bucket, Key="e", UploadId=uid,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": '"%s"' % ("0" * 32)}]})
    assert err_code(e) == "InvalidPart"
    s3.abort_multipart_upload(Bucket=bucket, Key="e", UploadId=uid)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.upload_part(Bucket=bucket, Key="e", UploadId=uid, PartNumber=1,
                       Body=b"x")
    assert err_code(e) == "NoSuchUpload"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.list_parts(Bucket=bucket, Key="e", UploadId="bogus")
    assert err_code(e) == "NoSuchUpload"
    with pytest.raises(botocore.exceptions.ClientError):
        s3.head_object(Bucket=bucket, Key="e")


def test_upload_part_copy(s3, bucket):
    src = os.urandom(7 * MiB)
    s3.put_object(Bucket=bucket, Key="src", Body=src)
    uid = s3.create_multipart_upload(Bucket=bucket, Key="dst")["UploadId"]
    p1 = s3.upload_part_copy(Bucket=bucket, Key="dst", UploadId=uid,
                             PartNumber=1, CopySource="%s/src" % bucket,
                             CopySourceRange="bytes=0-%d" % (5 * MiB - 1))
    p2 = s3.upload_part_copy(Bucket=bucket, Key="dst", UploadId=uid,
                             PartNumber=2, CopySource="%s/src" % bucket,
                             CopySourceRange="bytes=%d-%d" % (5 * MiB, 7 * MiB - 1))
    s3.complete_multipart_upload(
        Bucket=bucket, Key="dst", UploadId=uid,
        MultipartUpload={"Parts": [
            {"PartNumber": 1, "ETag": p1["CopyPartResult"]["ETag"]},
            {"PartNumber": 2, "ETag": p2["CopyPartResult"]["ETag"]}]})
    assert s3.get_object(Bucket=bucket, Key="dst")["Body"].read() == src


def test_upload_file_multipart_transfer(s3, bucket, tmp_path):
    from boto3.s3.transfer import TransferConfig
    f = tmp_path / "f.bin"
    data = os.urandom(17 * MiB + 5)
    f.write_bytes(data)
    cfg = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB,
                         max_concurrency=4)
    s3.upload_file(str(f), bucket, "up/f.bin", Config=cfg)
    h = s3.head_object(Bucket=bucket, Key="up/f.bin")
    assert h["ContentLength"] == len(data) and h["ETag"].endswith('-4"')
    out = tmp_path / "g.bin"
    s3.download_file(bucket, "up/f.bin", str(out), Config=cfg)
    assert out.read_bytes() == data


KEYS = ["a", "a/", "a/b", "a/b/c", "a/c", "a+b", "a b", "a%20b", "b/x",
        "b/y/z", "c", "\u00e9t\u00e9", "z\u4e2d", "~tilde", "a.b", "a-b"]


def test_list_v2_exact_order_and_paging(s3, bucket):
    for k in KEYS:
        s3.put_object(Bucket=bucket, Key=k, Body=k.encode())
    expect = sorted(KEYS, key=lambda k: k.encode("utf-8"))
    got = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert got == expect
    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, PaginationConfig={"PageSize": 3})
    keys, npages = [], 0
    for p in pages:
        npages += 1
        assert p["KeyCount"] <= 3
        keys += [o["Key"] for o in p.get("Contents", [])]
    assert keys == expect and npages == (len(KEYS) + 2) // 3
    r = s3.list_objects_v2(Bucket=bucket, StartAfter="a/c")
    assert [o["Key"] for o in r["Contents"]] == [k for k in expect if k.encode() > b"a/c"]
    r = s3.list_objects_v2(Bucket=bucket, MaxKeys=0)
    assert r["KeyCount"] == 0 and not r["IsTruncated"]


def test_list_delimiter_and_prefix(s3, bucket):
    for k in KEYS:
        s3.put_object(Bucket=bucket, Key=k, Body=b"1")
    r = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/", "b/"]
    assert "a/b" not in [o["Key"] for o in r["Contents"]]
    r = s3.list_objects_v2(Bucket=bucket, Prefix="a/", Delimiter="/")
    assert [o["Key"] for o in r["Contents"]] == ["a/", "a/b", "a/c"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/b/"]
    # prefixes count towards max-keys and page correctly
    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Delimiter="/", PaginationConfig={"PageSize": 1})
    seen = []
    for p in pages:
        seen += [o["Key"] for o in p.get("Contents", [])]
        seen += [c["Prefix"] for c in p.get("CommonPrefixes", [])]
    r_all = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    full = [o["Key"] for o in r_all["Contents"]] + [c["Prefix"] for c in r_all["CommonPrefixes"]]
    assert sorted(seen) == sorted(full) and len(seen) == len(full)


def test_list_v1_markers(s3, bucket):
    for k in KEYS:
        s3.put_object(Bucket=bucket, Key=k, Body=b"1")
    expect = sorted(KEYS, key=lambda k: k.encode("utf-8"))
    keys = []
    for p in s3.get_paginator("list_objects").paginate(
            Bucket=bucket, PaginationConfig={"PageSize": 4}):
        keys += [o["Key"] for o in p.get("Contents", [])]
    assert keys == expect
    r = s3.list_objects(Bucket=bucket, Delimiter="/", MaxKeys=2)
    assert r["IsTruncated"] and r["NextMarker"]
    r2 = s3.list_objects(Bucket=bucket, Marker="b/")
    assert [o["Key"] for o in r2["Contents"]] == [k for k in expect if k.encode() > b"b/"]


def test_list_encoding_url(s3, bucket):
    weird = ["sp ace", "plus+sign", "pct%41", "nl\nline", "amp&lt"]
    for k in weird:
        s3.put_object(Bucket=bucket, Key=k, Body=b"1")
    # boto3 asks for encoding-type=url and decodes transparently
    got = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert got == sorted(weird, key=lambda k: k.encode())
    got = [o["Key"] for o in s3.list_objects(Bucket=bucket)["Contents"]]
    assert got == sorted(weird, key=lambda k: k.encode())


def test_long_keys(s3, bucket):
    k = "k" * 1024
    s3.put_object(Bucket=bucket, Key=k, Body=b"x")
    assert s3.get_object(Bucket=bucket, Key=k)["Body"].read() == b"x"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.put_object(Bucket=bucket, Key="k" * 1025, Body=b"x")
    assert err_code(e) == "KeyTooLongError"


def test_presigned_get_put(s3, bucket):
    put_url = s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "p/x"},
                                        ExpiresIn=300)
    req = urllib.request.Request(put_url, data=b"presigned body", method="PUT")
    with urllib.request.urlopen(req) as r:
        assert r.status == 200
    get_url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p/x"},
                                        ExpiresIn=300)
    with urllib.request.urlopen(get_url) as r:
        assert r.read() == b"presigned body"
    # tampered query
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(get_url.replace("p/x", "p/y"))
    assert e.value.code == 403
    assert b"SignatureDoesNotMatch" in e.value.read()
    bad = get_url.replace("X-Amz-Expires=300", "X-Amz-Expires=301")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(bad)
    assert e.value.code == 403


def test_presigned_expired_and_limits(s3_server, bucket):
    s3 = s3_server.client()
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "k"},
                                    ExpiresIn=1)
    s3.put_object(Bucket=bucket, Key="k", Body=b"v")
    time.sleep(2.1)
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url)
    assert e.value.code == 403 and b"expired" in e.value.read()
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "k"},
                                    ExpiresIn=604801)
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url)
    assert e.value.code == 400


def test_health_and_metrics(s3, bucket):
    srv = s3.ecfs_server
    s3.put_object(Bucket=bucket, Key="m", Body=b"123")
    s3.get_object(Bucket=bucket, Key="m")["Body"].read()
    for p in ("/health/live", "/health/ready"):
        with urllib.request.urlopen(srv.endpoint + p) as r:
            assert r.status == 200
    with urllib.request.urlopen(srv.endpoint + "/metrics") as r:
        text = r.read().decode()
    assert 'storaged_requests_total{api="PutObject",status="200"} 1' in text
    assert 'storaged_requests_total{api="GetObject",status="200"} 1' in text
    assert "storaged_request_duration_seconds_bucket" in text
    assert "storaged_connections " in text
    assert "storaged_drive_online{drive=" in text
    assert 'storaged_request_bytes_total{api="PutObject"} 3' in text


def test_foreign_version_id_never_reads_or_deletes_current_data(s3, bucket):
    """In an unversioned bucket the only version id is "null". A GET, HEAD,
    DELETE, DeleteObjects entry or copy source naming another version used
    to act on the current object (wrong bytes, or deleting the data the
    client did not name). As S3: a malformed id is 400 InvalidArgument, a
    well-formed id of no version is NoSuchVersion for reads and a no-op
    for deletes; the current object is never touched."""
    s3.put_object(Bucket=bucket, Key="k", Body=b"current")

    def code(fn, **kw):
        with pytest.raises(botocore.exceptions.ClientError) as ei:
            fn(Bucket=bucket, **kw)
        return (ei.value.response["Error"]["Code"],
                ei.value.response["ResponseMetadata"]["HTTPStatusCode"])

    other = "0123456789abcdef"
    assert code(s3.get_object, Key="k", VersionId="abc") == (
        "InvalidArgument", 400)
    assert code(s3.get_object, Key="k", VersionId=other) == (
        "NoSuchVersion", 404)
    assert code(s3.head_object, Key="k", VersionId=other)[1] == 404
    assert code(s3.delete_object, Key="k", VersionId="abc") == (
        "InvalidArgument", 400)
    s3.delete_object(Bucket=bucket, Key="k", VersionId=other)
    assert code(s3.copy_object, Key="c",
                CopySource={"Bucket": bucket, "Key": "k",
                            "VersionId": other}) == ("NoSuchVersion", 404)
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [
        {"Key": "k", "VersionId": "abc"}]})
    assert [e["Code"] for e in r.get("Errors", [])] == ["InvalidArgument"]
    assert "Deleted" not in r
    s3.delete_objects(Bucket=bucket, Delete={"Objects": [
        {"Key": "k", "VersionId": other}]})
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"current"
    # "null" is the version every object has
    assert s3.get_object(Bucket=bucket, Key="k",
                         VersionId="null")["Body"].read() == b"current"
    s3.copy_object(Bucket=bucket, Key="c",
                   CopySource={"Bucket": bucket, "Key": "k",
                               "VersionId": "null"})
    assert s3.get_object(Bucket=bucket, Key="c")["Body"].read() == b"current"
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [
        {"Key": "c", "VersionId": "null"}]})
    assert [d["Key"] for d in r["Deleted"]] == ["c"]
    s3.delete_object(Bucket=bucket, Key="k", VersionId="null")
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)


def test_concurrent_completes_of_one_upload(s3_server, bucket):
    """Two Completes of the same upload (a client retrying on a timeout)
    used to rename the same part files at the same time, so often none
    of them kept a quorum: every one answered 503 ServiceUnavailable and
    the upload's data was scattered (no object, and no retry could
    complete it). Now the first claims the upload; the others answer
    NoSuchUpload (while it runs) or its result (after) and touch
    nothing."""
    import os
    import threading

    clients = [s3util.client_with_read_timeout(s3_server, read_timeout=30)
               for _ in range(5)]
    parts = [os.urandom(5 * 1024 * 1024) for _ in range(3)] + [b"tail"]
    for trial in range(4):
        key = "cc%d" % trial
        c0 = clients[0]
        u = c0.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        ps = [{"PartNumber": i + 1,
               "ETag": c0.upload_part(Bucket=bucket, Key=key, UploadId=u,
                                      PartNumber=i + 1, Body=p)["ETag"]}
              for i, p in enumerate(parts)]
        res = [None] * len(clients)
        go = threading.Barrier(len(clients))
        for c in clients:  # warm connections: the Completes really overlap
            c.head_bucket(Bucket=bucket)

        def complete(i):
            go.wait()
            try:
                res[i] = clients[i].complete_multipart_upload(
                    Bucket=bucket, Key=key, UploadId=u,
                    MultipartUpload={"Parts": ps})["ETag"]
            except botocore.exceptions.ClientError as e:
                res[i] = e.response["Error"]["Code"]

        ts = [threading.Thread(target=complete, args=(i,))
              for i in range(len(clients))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        # one claims the upload; a Complete that comes while it runs
        # answers NoSuchUpload, one that comes after it is a repeat and
        # gets the same result (issue 18)
        wins = [r for r in res if r.endswith('-4"')]
        assert len(wins) >= 1 and len(set(wins)) == 1, res
        assert sorted(r for r in res if r not in wins) == [
            "NoSuchUpload"] * (len(clients) - len(wins)), res
        got = c0.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert got == b"".join(parts)


@pytest.mark.slow
def test_failed_complete_leaves_the_upload_whole(storaged):
    """A Complete that fails (here: 2 of 4 drives away, under the write
    quorum: 503) must leave the upload as it was, so that a retry (S3
    clients retry a 503) completes it once the drives are back. It used to
    rename the parts' shard files into the object directory before the
    commit and leave them there (or remove them) when the commit failed:
    every later Complete of the upload answered 503 and its data was lost
    (s3-tests' test_set_multipart_tagging in full runs)."""
    srv = storaged(ndrives=4)
    c = srv.client()
    c.create_bucket(Bucket="mpufail")
    parts = [os.urandom(5 * MiB), b"tail"]
    u = c.create_multipart_upload(Bucket="mpufail", Key="k")["UploadId"]
    ps = [{"PartNumber": i + 1,
           "ETag": c.upload_part(Bucket="mpufail", Key="k", UploadId=u,
                                 PartNumber=i + 1, Body=p)["ETag"]}
          for i, p in enumerate(parts)]
    for d in srv.drives[:2]:
        os.rename(d, d + ".away")
    time.sleep(2.2)  # the drive probe runs once a second
    try:
        with pytest.raises(botocore.exceptions.ClientError) as ei:
            c.complete_multipart_upload(Bucket="mpufail", Key="k", UploadId=u,
                                        MultipartUpload={"Parts": ps})
        assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    finally:
        for d in srv.drives[:2]:
            os.rename(d + ".away", d)
    time.sleep(2.2)
    listed = c.list_parts(Bucket="mpufail", Key="k", UploadId=u)["Parts"]
    assert [p["PartNumber"] for p in listed] == [1, 2]
    r = c.complete_multipart_upload(Bucket="mpufail", Key="k", UploadId=u,
                                    MultipartUpload={"Parts": ps})
    assert r["ETag"].endswith('-2"')
    got = c.get_object(Bucket="mpufail", Key="k")["Body"].read()
    assert got == b"".join(parts)
    assert "Uploads" not in c.list_multipart_uploads(Bucket="mpufail")
    # all 4 drives hold both parts' shard files (HEX.DATAID) in the object
    # directory, and the upload's directory is gone
    for d in srv.drives:
        names = [f for _, _, fs in os.walk(os.path.join(d, "b", "mpufail"))
                 for f in fs if re.fullmatch(r"[0-9a-f]{32}\.[0-9a-f]{16}", f)]
        assert len(names) == 2, (d, names)
        assert not os.path.exists(
            os.path.join(d, ".ecfs.sys", "mpu", "mpufail", u))


def _wait_claimed(c, bucket, key, upload_id, timeout=20.0):
    """Waits until a Complete has claimed the upload: an UploadPart to it
    then answers NoSuchUpload (a part sent before is never listed in the
    Complete, and goes with the upload)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            c.upload_part(Bucket=bucket, Key=key, UploadId=upload_id,
                          PartNumber=10000, Body=b"probe")
        except botocore.exceptions.ClientError as e:
            assert err_code_of(e) == "NoSuchUpload", e.response
            return
        assert time.monotonic() < deadline, "no Complete claimed the upload"
        time.sleep(0.05)


def err_code_of(e):
    return e.response["Error"]["Code"]


def _wait_no_uploads(c, bucket, timeout=20.0):
    """Waits until @bucket lists no multipart upload (an abort by lifecycle
    or by the scanner); asserts it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and c.list_multipart_uploads(
            Bucket=bucket).get("Uploads"):
        time.sleep(0.2)
    assert "Uploads" not in c.list_multipart_uploads(Bucket=bucket)


@pytest.mark.slow
def test_abort_during_complete_answers_no_such_upload(storaged):
    """While a Complete runs, an abort of its upload (a client's
    AbortMultipartUpload, lifecycle's AbortIncompleteMultipartUpload)
    answers NoSuchUpload and touches nothing, as UploadPart already did.
    The abort used to remove the upload's directory under the Complete,
    which then found no part to link and answered 503 (and the scanner's
    expiry did the same). STORAGED_TEST_COMPLETE_DELAY_MS (tests only)
    holds each Complete after it claims its upload, so the abort lands
    inside it every time."""
    import threading

    from test_s3_lifecycle import _metric

    srv = storaged(ndrives=4, env={
        "STORAGED_TEST_COMPLETE_DELAY_MS": "4000",
        "STORAGED_TEST_LIFECYCLE_DAY_S": "1",
        "STORAGED_TEST_LIFECYCLE_INTERVAL_S": "0.3"})
    c = s3util.client_with_read_timeout(srv, read_timeout=30)
    body = [os.urandom(5 * MiB), b"tail"]

    def start(bucket, key):
        u = c.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        ps = [{"PartNumber": i + 1,
               "ETag": c.upload_part(Bucket=bucket, Key=key, UploadId=u,
                                     PartNumber=i + 1, Body=p)["ETag"]}
              for i, p in enumerate(body)]
        res = {}

        def complete():
            try:
                res["r"] = c.complete_multipart_upload(
                    Bucket=bucket, Key=key, UploadId=u,
                    MultipartUpload={"Parts": ps})
            except botocore.exceptions.ClientError as e:
                res["e"] = e.response
        th = threading.Thread(target=complete)
        th.start()
        return u, th, res

    def done(bucket, key, th, res):
        th.join(30)
        assert not th.is_alive()
        assert "r" in res, res.get("e")
        assert res["r"]["ETag"].endswith('-2"')
        got = c.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert got == b"".join(body)
        assert "Uploads" not in c.list_multipart_uploads(Bucket=bucket)

    # a client's abort (and an UploadPart) while the Complete waits
    c.create_bucket(Bucket="abc")
    u, th, res = start("abc", "k")
    _wait_claimed(c, "abc", "k", u)  # UploadPart: NoSuchUpload
    assert th.is_alive()
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        c.abort_multipart_upload(Bucket="abc", Key="k", UploadId=u)
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert err_code(ei) == "NoSuchUpload"
    done("abc", "k", th, res)

    # lifecycle's AbortIncompleteMultipartUpload, due while the Complete
    # waits: its passes (every 0.3 s) leave the upload to the Complete
    c.create_bucket(Bucket="abclc")
    t0 = time.monotonic()
    u, th, res = start("abclc", "k")
    _wait_claimed(c, "abclc", "k", u)  # before the rule exists
    time.sleep(max(0.0, 1.2 - (time.monotonic() - t0)))  # the upload due
    c.put_bucket_lifecycle_configuration(
        Bucket="abclc", LifecycleConfiguration={"Rules": [
            {"ID": "mp", "Status": "Enabled", "Filter": {"Prefix": ""},
             "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}]})
    time.sleep(1.0)  # three passes or more, the upload due in each
    assert th.is_alive()
    done("abclc", "k", th, res)
    act = 'storaged_lifecycle_actions_total{action="abort_multipart"}'
    assert _metric(srv, act) == 0
    # the rule does abort an upload no Complete runs on
    c.create_multipart_upload(Bucket="abclc", Key="left")
    _wait_no_uploads(c, "abclc")
    assert _metric(srv, act) == 1


@pytest.mark.slow
def test_scanner_expiry_leaves_an_upload_a_complete_runs_on(storaged):
    """The scanner's expiry of abandoned uploads (STORAGED_MPU_EXPIRY)
    aborts through the same call: an upload a Complete runs on is skipped
    (it used to be removed under the Complete: 503), and an upload left
    alone is still aborted."""
    import threading

    srv = storaged(ndrives=4, env={"STORAGED_TEST_COMPLETE_DELAY_MS": "6000",
                                   "STORAGED_MPU_EXPIRY": "3",
                                   "STORAGED_SCAN_INTERVAL": "1"})
    c = s3util.client_with_read_timeout(srv, read_timeout=30)
    c.create_bucket(Bucket="exp")
    t0 = time.monotonic()
    u = c.create_multipart_upload(Bucket="exp", Key="k")["UploadId"]
    e = c.upload_part(Bucket="exp", Key="k", UploadId=u, PartNumber=1,
                      Body=b"part")["ETag"]
    res = {}

    def complete():
        try:
            res["r"] = c.complete_multipart_upload(
                Bucket="exp", Key="k", UploadId=u,
                MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]})
        except botocore.exceptions.ClientError as ex:
            res["e"] = ex.response
    th = threading.Thread(target=complete)
    th.start()
    _wait_claimed(c, "exp", "k", u)
    if time.monotonic() - t0 > 2.5:  # the scanner may expire it first
        th.join(30)
        pytest.skip("the Complete did not claim the upload within the "
                    "expiry (load)")
    th.join(30)
    assert "r" in res, res.get("e")
    assert time.monotonic() - t0 > 5.0  # scanner cycles ran meanwhile
    assert c.get_object(Bucket="exp", Key="k")["Body"].read() == b"part"
    left = c.create_multipart_upload(Bucket="exp", Key="left")["UploadId"]
    _wait_no_uploads(c, "exp")
    assert "abandoned upload %s removed" % left in srv.log_text()
    assert "abandoned upload %s removed" % u not in srv.log_text()


def test_delete_bucket_with_only_incomplete_uploads(s3_server):
    """S3 deletes a bucket whose only content is multipart uploads in
    progress (and the uploads with it). storaged answered BucketNotEmpty,
    so `aws s3 rb --force` after an interrupted upload failed on a bucket
    that lists as empty."""
    s3 = s3_server.client()
    s3.create_bucket(Bucket="mpu-left")
    u = s3.create_multipart_upload(Bucket="mpu-left", Key="big")["UploadId"]
    s3.upload_part(Bucket="mpu-left", Key="big", UploadId=u, PartNumber=1,
                   Body=b"x" * 1000)
    s3.put_object(Bucket="mpu-left", Key="obj", Body=b"1")
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.delete_bucket(Bucket="mpu-left")
    assert ei.value.response["Error"]["Code"] == "BucketNotEmpty"
    s3.delete_object(Bucket="mpu-left", Key="obj")
    s3.delete_bucket(Bucket="mpu-left")
    assert "mpu-left" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.list_parts(Bucket="mpu-left", Key="big", UploadId=u)
    assert ei.value.response["Error"]["Code"] == "NoSuchBucket"
    s3.create_bucket(Bucket="mpu-left")
    assert not s3.list_multipart_uploads(Bucket="mpu-left").get("Uploads")
    s3_server.restart()
    s3 = s3_server.client()
    assert not s3.list_multipart_uploads(Bucket="mpu-left").get("Uploads")
    assert "Contents" not in s3.list_objects_v2(Bucket="mpu-left")


def test_upload_part_copy_range_must_lie_inside_the_source(s3, bucket):
    """x-amz-copy-source-range past the end of the source (or in a form
    other than bytes=FIRST-LAST) was clamped like a GET Range, so a part
    silently came out shorter than asked. S3 answers 416 InvalidRange for a
    range outside the source and 400 InvalidArgument for one that is not
    bytes=FIRST-LAST with FIRST <= LAST (issue 18)."""
    import os

    s3.put_object(Bucket=bucket, Key="src", Body=b"0123456789a")
    u = s3.create_multipart_upload(Bucket=bucket, Key="dst")["UploadId"]
    for rg, code, st in (
            [(g, "InvalidRange", 416) for g in ("bytes=2-40", "bytes=11-12")] +
            [(g, "InvalidArgument", 400) for g in (
                "bytes=5-2", "bytes=-3", "bytes=0-", "bytes 0-3",
                "bytes=a-b", "bytes=1-2-3", "0-3")]):
        with pytest.raises(botocore.exceptions.ClientError) as ei:
            s3.upload_part_copy(Bucket=bucket, Key="dst", UploadId=u,
                                PartNumber=1, CopySourceRange=rg,
                                CopySource={"Bucket": bucket, "Key": "src"})
        assert ei.value.response["Error"]["Code"] == code, rg
        assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == st
    r = s3.upload_part_copy(Bucket=bucket, Key="dst", UploadId=u,
                            PartNumber=1, CopySourceRange="bytes=3-10",
                            CopySource={"Bucket": bucket, "Key": "src"})
    s3.complete_multipart_upload(
        Bucket=bucket, Key="dst", UploadId=u,
        MultipartUpload={"Parts": [{"PartNumber": 1,
                                    "ETag": r["CopyPartResult"]["ETag"]}]})
    assert s3.get_object(Bucket=bucket, Key="dst")["Body"].read() == \
        b"3456789a"
    # a managed multipart copy (exact ranges up to the last byte) works
    from boto3.s3.transfer import TransferConfig
    big = os.urandom(12 * 1024 * 1024 + 5)
    s3.put_object(Bucket=bucket, Key="big", Body=big)
    s3.copy({"Bucket": bucket, "Key": "big"}, bucket, "big2",
            Config=TransferConfig(multipart_threshold=5 * 1024 * 1024,
                                  multipart_chunksize=5 * 1024 * 1024))
    assert s3.head_object(Bucket=bucket, Key="big2")["ETag"].endswith('-3"')
    assert s3.get_object(Bucket=bucket, Key="big2")["Body"].read() == big


def test_list_buckets_paged(s3):
    """ListBuckets with max-buckets / continuation-token / prefix, as AWS
    pages it (ceph/s3-tests test_list_buckets_paginated)."""
    for name in ("pg-a", "pg-b", "pg-c", "other"):
        s3.create_bucket(Bucket=name)
    ep = s3.meta.endpoint_url

    def page(**q):
        url = ep + "/?" + urllib.parse.urlencode(q)
        st, body = s3util_get(s3, url)
        assert st == 200, body
        names = re.findall(rb"<Name>([^<]*)</Name>", body)
        tok = re.findall(rb"<ContinuationToken>([^<]*)</ContinuationToken>",
                         body)
        return [n.decode() for n in names], tok[0].decode() if tok else None, \
            body
    names, tok, _ = page(**{"max-buckets": 2})
    assert names == ["other", "pg-a"] and tok == "pg-a"
    names, tok, _ = page(**{"max-buckets": 2, "continuation-token": tok})
    assert names == ["pg-b", "pg-c"] and tok is None
    names, tok, body = page(**{"max-buckets": 1, "prefix": "pg-"})
    assert names == ["pg-a"] and tok == "pg-a"
    assert b"<Prefix>pg-</Prefix>" in body
    names, tok, _ = page()
    assert names == ["other", "pg-a", "pg-b", "pg-c"] and tok is None
    for bad in ("0", "10001", "x"):
        url = ep + "/?max-buckets=" + bad
        st, body = s3util_get(s3, url)
        assert st == 400 and b"InvalidArgument" in body, bad


def s3util_get(s3, url):
    """A GET of @url signed with @s3's credentials (SigV4 in headers)."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    req = AWSRequest(method="GET", url=url)
    S3SigV4Auth(s3._request_signer._credentials, "s3",
                "us-east-1").add_auth(req)
    r = urllib.request.Request(url, headers=dict(req.headers.items()))
    try:
        with urllib.request.urlopen(r, timeout=10) as f:
            return f.status, f.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
