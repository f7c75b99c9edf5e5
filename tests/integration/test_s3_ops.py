"""Multipart, listing (v1/v2, paging, delimiters, encoding), presigned URLs
and metadata endpoints against a real storaged, with boto3 and urllib."""

import hashlib
import os
import time
import urllib.error
import urllib.request

import botocore
import pytest

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
