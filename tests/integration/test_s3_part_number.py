"""GetObject/HeadObject ?partNumber=N against a real storaged: part N of a
multipart object comes back as 206 with its Content-Range and
x-amz-mp-parts-count; a simple object is one part (partNumber=1 -> 206 over
the whole object); past the last part -> 416 InvalidPartNumber; a bad number
-> 400 InvalidArgument; with a Range header -> 400 InvalidRequest. A GET
without partNumber carries no x-amz-mp-parts-count (as S3)."""

import hashlib
import http.client
import os

import botocore
import pytest

import s3util

MIB = 1024 * 1024


def signed_get(srv, method, path, query, headers=None):
    h = {"host": "127.0.0.1:%d" % srv.port}
    h.update(headers or {})
    s3util.sign_headers(method, path, query, h, hashlib.sha256(b"").hexdigest(),
                        srv.access_key, srv.secret_key)
    target = s3util.uri_encode(path, True) + "?" + "&".join(
        "%s=%s" % (s3util.uri_encode(k, False), s3util.uri_encode(v, False))
        for k, v in query)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        conn.request(method, target, headers=h)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


@pytest.fixture
def mp_object(s3, bucket):
    parts = [os.urandom(5 * MIB), os.urandom(5 * MIB + 17), b"tail" * 250]
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    done = []
    for i, p in enumerate(parts, 1):
        r = s3.upload_part(Bucket=bucket, Key="mp", UploadId=up, PartNumber=i,
                           Body=p)
        done.append({"PartNumber": i, "ETag": r["ETag"]})
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=up,
                                 MultipartUpload={"Parts": done})
    return parts


def test_get_and_head_each_part(s3, bucket, mp_object):
    parts = mp_object
    total = sum(len(p) for p in parts)
    etag = s3.head_object(Bucket=bucket, Key="mp")["ETag"]
    off = 0
    for n, p in enumerate(parts, 1):
        r = s3.get_object(Bucket=bucket, Key="mp", PartNumber=n)
        assert r["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert r["ContentRange"] == "bytes %d-%d/%d" % (off, off + len(p) - 1,
                                                        total)
        assert r["ContentLength"] == len(p)
        assert r["PartsCount"] == 3
        assert r["ETag"] == etag
        assert r["Body"].read() == p
        h = s3.head_object(Bucket=bucket, Key="mp", PartNumber=n)
        assert h["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert h["ContentLength"] == len(p) and h["PartsCount"] == 3
        off += len(p)
    # the whole object: no parts count, as S3
    r = s3.get_object(Bucket=bucket, Key="mp")
    assert "PartsCount" not in r
    assert r["Body"].read() == b"".join(parts)


def test_part_number_errors(s3_server, s3, bucket, mp_object):
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket=bucket, Key="mp", PartNumber=4)
    assert e.value.response["Error"]["Code"] == "InvalidPartNumber"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 416
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.head_object(Bucket=bucket, Key="mp", PartNumber=4)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 416
    path = "/%s/mp" % bucket
    for bad in ("0", "10001", "x", "-1"):
        st, _, data = signed_get(s3_server, "GET", path, [("partNumber", bad)])
        assert st == 400 and b"<Code>InvalidArgument</Code>" in data, bad
    st, _, data = signed_get(s3_server, "GET", path, [("partNumber", "1")],
                             {"range": "bytes=0-9"})
    assert st == 400 and b"<Code>InvalidRequest</Code>" in data
    assert b"Cannot specify both Range header and partNumber" in data


def test_simple_object_is_one_part(s3, bucket):
    s3.put_object(Bucket=bucket, Key="one", Body=b"0123456789")
    r = s3.get_object(Bucket=bucket, Key="one", PartNumber=1)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert r["ContentRange"] == "bytes 0-9/10"
    assert r["Body"].read() == b"0123456789"
    assert "PartsCount" not in r
    h = s3.head_object(Bucket=bucket, Key="one", PartNumber=1)
    assert h["ContentLength"] == 10
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket=bucket, Key="one", PartNumber=2)
    assert e.value.response["Error"]["Code"] == "InvalidPartNumber"
    # an empty object: 200, nothing to range over
    s3.put_object(Bucket=bucket, Key="empty", Body=b"")
    r = s3.get_object(Bucket=bucket, Key="empty", PartNumber=1)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert r["Body"].read() == b""
