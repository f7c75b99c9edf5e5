"""S3 core against a real storaged with boto3: buckets, objects, ranges,
conditionals, listing, deletes, errors. Each test gets a fresh server on
4 temp drives (conftest.py)."""

import datetime
import hashlib
import os

import botocore
import pytest


def err_code(excinfo):
    return excinfo.value.response["Error"]["Code"]


def http_status(excinfo):
    return excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"]


def test_bucket_lifecycle(s3):
    s3.create_bucket(Bucket="alpha")
    s3.create_bucket(Bucket="beta.1")
    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert names == ["alpha", "beta.1"]
    s3.head_bucket(Bucket="alpha")
    loc = s3.get_bucket_location(Bucket="alpha")
    assert loc.get("LocationConstraint") in (None, "")
    s3.put_object(Bucket="alpha", Key="k", Body=b"x")
    # us-east-1: re-creating one's own bucket is 200 and keeps its objects
    # and resets its ACL (other regions answer 409 BucketAlreadyOwnedByYou;
    # issue 18; test_s3_acl.py)
    r = s3.create_bucket(Bucket="alpha")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert s3.get_object(Bucket="alpha", Key="k")["Body"].read() == b"x"
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == [
        "alpha", "beta.1"]
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.delete_bucket(Bucket="alpha")
    assert err_code(e) == "BucketNotEmpty"
    s3.delete_object(Bucket="alpha", Key="k")
    s3.delete_bucket(Bucket="alpha")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.head_bucket(Bucket="alpha")
    assert http_status(e) == 404
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.list_objects_v2(Bucket="alpha")
    assert err_code(e) == "NoSuchBucket"


@pytest.mark.parametrize("name", ["ab", "Upper", "a_b", "-ab", "ab-",
                                  "192.168.1.1", "a..b", "x" * 64])
def test_bucket_name_rules(s3, name):
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.create_bucket(Bucket=name)
    assert err_code(e) in ("InvalidBucketName",)


def test_put_get_head_metadata(s3, bucket):
    body = b"hello world"
    r = s3.put_object(Bucket=bucket, Key="dir/hello.txt", Body=body,
                      ContentType="text/plain", Metadata={"color": "blue"},
                      CacheControl="max-age=60")
    assert r["ETag"] == '"%s"' % hashlib.md5(body).hexdigest()
    g = s3.get_object(Bucket=bucket, Key="dir/hello.txt")
    assert g["Body"].read() == body
    assert g["ContentType"] == "text/plain"
    assert g["Metadata"] == {"color": "blue"}
    assert g["CacheControl"] == "max-age=60"
    assert g["ETag"] == r["ETag"]
    assert g["AcceptRanges"] == "bytes"
    assert g["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
    h = s3.head_object(Bucket=bucket, Key="dir/hello.txt")
    assert h["ContentLength"] == len(body)
    assert h["Metadata"] == {"color": "blue"}
    assert isinstance(h["LastModified"], datetime.datetime)


def test_default_content_type_and_empty_object(s3, bucket):
    s3.put_object(Bucket=bucket, Key="empty", Body=b"")
    g = s3.get_object(Bucket=bucket, Key="empty")
    assert g["Body"].read() == b""
    assert g["ContentLength"] == 0
    assert g["ETag"] == '"d41d8cd98f00b204e9800998ecf8427e"'
    assert g["ContentType"] == "binary/octet-stream"


def test_large_object_roundtrip(s3, bucket):
    data = os.urandom(9 * 1024 * 1024 + 12345)
    s3.put_object(Bucket=bucket, Key="big.bin", Body=data)
    got = s3.get_object(Bucket=bucket, Key="big.bin")["Body"].read()
    assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest()


def test_overwrite(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"one")
    s3.put_object(Bucket=bucket, Key="k", Body=b"second")
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"second"


def test_missing_key_and_bucket(s3, bucket):
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket=bucket, Key="nope")
    assert err_code(e) == "NoSuchKey" and http_status(e) == 404
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.head_object(Bucket=bucket, Key="nope")
    assert http_status(e) == 404
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket="no-such-bucket", Key="x")
    assert err_code(e) == "NoSuchBucket"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.put_object(Bucket="no-such-bucket", Key="x", Body=b"1")
    assert err_code(e) == "NoSuchBucket"
    # deleting a missing key is a success (204)
    r = s3.delete_object(Bucket=bucket, Key="nope")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204


def test_ranges(s3, bucket):
    data = bytes(range(256)) * 40  # 10240 bytes
    s3.put_object(Bucket=bucket, Key="r", Body=data)
    for rng, lo, hi in [("bytes=0-0", 0, 0), ("bytes=10-19", 10, 19),
                        ("bytes=10240-", None, None), ("bytes=10000-", 10000, 10239),
                        ("bytes=-100", 10140, 10239), ("bytes=100-999999", 100, 10239),
                        ("bytes=-999999", 0, 10239)]:
        if lo is None:
            with pytest.raises(botocore.exceptions.ClientError) as e:
                s3.get_object(Bucket=bucket, Key="r", Range=rng)
            assert err_code(e) == "InvalidRange" and http_status(e) == 416
            continue
        g = s3.get_object(Bucket=bucket, Key="r", Range=rng)
        assert g["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert g["ContentRange"] == "bytes %d-%d/10240" % (lo, hi)
        assert g["Body"].read() == data[lo:hi + 1]
    s3.put_object(Bucket=bucket, Key="e", Body=b"")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket=bucket, Key="e", Range="bytes=0-")
    assert http_status(e) == 416


def test_range_large_streamed(s3, bucket):
    data = os.urandom(6 * 1024 * 1024)
    s3.put_object(Bucket=bucket, Key="r", Body=data)
    lo, hi = 1024 * 1024 - 7, 5 * 1024 * 1024 + 3
    g = s3.get_object(Bucket=bucket, Key="r", Range="bytes=%d-%d" % (lo, hi))
    assert g["Body"].read() == data[lo:hi + 1]


def test_conditionals(s3, bucket):
    etag = s3.put_object(Bucket=bucket, Key="c", Body=b"abc")["ETag"]
    past = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
    future = datetime.datetime(2100, 1, 1, tzinfo=datetime.timezone.utc)
    assert s3.get_object(Bucket=bucket, Key="c", IfMatch=etag)["Body"].read() == b"abc"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfMatch='"0000"')
    assert http_status(e) == 412 and err_code(e) == "PreconditionFailed"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfNoneMatch=etag)
    assert http_status(e) == 304
    assert e.value.response["ResponseMetadata"]["HTTPHeaders"]["etag"] == etag
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfModifiedSince=future)
    assert http_status(e) == 304
    s3.get_object(Bucket=bucket, Key="c", IfModifiedSince=past)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfUnmodifiedSince=past)
    assert http_status(e) == 412
    s3.get_object(Bucket=bucket, Key="c", IfUnmodifiedSince=future)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.head_object(Bucket=bucket, Key="c", IfMatch='"zz"')
    assert http_status(e) == 412


def test_response_overrides(s3, bucket):
    s3.put_object(Bucket=bucket, Key="o", Body=b"x", ContentType="text/plain")
    g = s3.get_object(Bucket=bucket, Key="o", ResponseContentType="image/jpeg",
                      ResponseContentDisposition="attachment; filename=a.jpg",
                      ResponseCacheControl="no-cache")
    assert g["ContentType"] == "image/jpeg"
    assert g["ContentDisposition"] == "attachment; filename=a.jpg"
    assert g["CacheControl"] == "no-cache"


def test_content_md5(s3, bucket):
    import base64
    body = b"payload"
    good = base64.b64encode(hashlib.md5(body).digest()).decode()
    s3.put_object(Bucket=bucket, Key="m", Body=body, ContentMD5=good)
    bad = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.put_object(Bucket=bucket, Key="m2", Body=body, ContentMD5=bad)
    assert err_code(e) == "BadDigest"
    with pytest.raises(botocore.exceptions.ClientError):
        s3.head_object(Bucket=bucket, Key="m2")


def test_delete_objects(s3, bucket):
    for i in range(5):
        s3.put_object(Bucket=bucket, Key="d/%d" % i, Body=b"1")
    r = s3.delete_objects(Bucket=bucket, Delete={
        "Objects": [{"Key": "d/0"}, {"Key": "d/1"}, {"Key": "missing"}]})
    assert sorted(d["Key"] for d in r["Deleted"]) == ["d/0", "d/1", "missing"]
    r = s3.delete_objects(Bucket=bucket, Delete={
        "Objects": [{"Key": "d/2"}], "Quiet": True})
    assert "Deleted" not in r
    left = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert left == ["d/3", "d/4"]


def test_copy_object(s3, bucket):
    s3.put_object(Bucket=bucket, Key="src", Body=b"copy me",
                  ContentType="text/x", Metadata={"a": "1"})
    r = s3.copy_object(Bucket=bucket, Key="dst",
                       CopySource={"Bucket": bucket, "Key": "src"})
    assert r["CopyObjectResult"]["ETag"] == '"%s"' % hashlib.md5(b"copy me").hexdigest()
    g = s3.get_object(Bucket=bucket, Key="dst")
    assert g["Body"].read() == b"copy me"
    assert g["Metadata"] == {"a": "1"} and g["ContentType"] == "text/x"
    s3.copy_object(Bucket=bucket, Key="dst2", CopySource="%s/src" % bucket,
                   MetadataDirective="REPLACE", Metadata={"b": "2"},
                   ContentType="text/y")
    g = s3.get_object(Bucket=bucket, Key="dst2")
    assert g["Metadata"] == {"b": "2"} and g["ContentType"] == "text/y"
    # copy onto itself without REPLACE is illegal; with REPLACE it works
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="src", CopySource="%s/src" % bucket)
    assert err_code(e) == "InvalidRequest"
    s3.copy_object(Bucket=bucket, Key="src", CopySource="%s/src" % bucket,
                   MetadataDirective="REPLACE", Metadata={"c": "3"})
    assert s3.head_object(Bucket=bucket, Key="src")["Metadata"] == {"c": "3"}
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="x", CopySource="%s/src" % bucket,
                       CopySourceIfMatch='"nomatch"')
    assert http_status(e) == 412
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="x", CopySource="%s/none" % bucket)
    assert err_code(e) == "NoSuchKey"


def test_put_if_none_match(s3, bucket):
    s3.put_object(Bucket=bucket, Key="once", Body=b"1")
    req = s3.meta.events
    def add_header(request, **kw):
        request.headers["If-None-Match"] = "*"
    req.register("before-sign.s3.PutObject", add_header)
    try:
        with pytest.raises(botocore.exceptions.ClientError) as e:
            s3.put_object(Bucket=bucket, Key="once", Body=b"2")
        assert http_status(e) == 412
        s3.put_object(Bucket=bucket, Key="fresh", Body=b"3")
    finally:
        req.unregister("before-sign.s3.PutObject", add_header)
    assert s3.get_object(Bucket=bucket, Key="once")["Body"].read() == b"1"


def test_object_acl_tagging_and_part_number(s3, bucket):
    s3.put_object(Bucket=bucket, Key="o", Body=b"abc")
    acl = s3.get_object_acl(Bucket=bucket, Key="o")
    assert acl["Grants"][0]["Permission"] == "FULL_CONTROL"
    assert s3.get_object_tagging(Bucket=bucket, Key="o")["TagSet"] == []
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object_acl(Bucket=bucket, Key="missing")
    assert err_code(e) == "NoSuchKey"
    g = s3.get_object(Bucket=bucket, Key="o", PartNumber=1)
    assert g["Body"].read() == b"abc"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket=bucket, Key="o", PartNumber=2)
    assert http_status(e) == 416
    # PutObjectTagging is built now (test_s3_tagging.py)
    s3.put_object_tagging(Bucket=bucket, Key="o",
                          Tagging={"TagSet": [{"Key": "a", "Value": "b"}]})
    assert s3.get_object_tagging(Bucket=bucket, Key="o")["TagSet"] == [
        {"Key": "a", "Value": "b"}]
    v = s3.get_bucket_versioning(Bucket=bucket)
    assert "Status" not in v
