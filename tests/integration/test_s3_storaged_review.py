"""Regression tests for defects found in the storaged review: each test
drives a real storaged with real clients (boto3, raw sockets) and checks
the behaviour S3 clients depend on."""

import time

import boto3
import botocore
from botocore.config import Config
import pytest


def _client(srv, read_timeout=5):
    return boto3.client(
        "s3", endpoint_url=srv.endpoint, region_name="us-east-1",
        aws_access_key_id=srv.access_key,
        aws_secret_access_key=srv.secret_key,
        config=Config(signature_version="s3v4",
                      s3={"addressing_style": "path"},
                      retries={"max_attempts": 1, "mode": "standard"},
                      connect_timeout=5, read_timeout=read_timeout))


def test_head_error_to_expect_continue_does_not_stall_next_request(
        s3_server, bucket):
    """An error found in the head of an empty PUT (Expect: 100-continue,
    no 100 sent) used to leave the connection open; botocore then reused
    that status line for its next response on the connection and stalled
    until its read timeout. The connection must be closed instead."""
    c = _client(s3_server, read_timeout=3)
    for _ in range(2):
        with pytest.raises(botocore.exceptions.ClientError) as ei:
            c.put_object(Bucket=bucket, Key="k" * 1025, Body=b"")
        assert ei.value.response["Error"]["Code"] == "KeyTooLongError"
        t0 = time.monotonic()
        r = c.put_object(Bucket=bucket, Key="ok", Body=b"")
        assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
        assert time.monotonic() - t0 < 2.0
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        c.put_object(Bucket="no-such-bucket-x", Key="k", Body=b"")
    assert ei.value.response["Error"]["Code"] == "NoSuchBucket"
    assert c.get_object(Bucket=bucket, Key="ok")["Body"].read() == b""


def test_foreign_version_id_never_reads_or_deletes_current_data(s3, bucket):
    """Buckets are unversioned, so the only version id is "null". A GET,
    HEAD, DELETE, DeleteObjects entry or copy source naming another version
    used to act on the current object (wrong bytes, or deleting the data
    the client did not name); it must answer NoSuchVersion instead."""
    s3.put_object(Bucket=bucket, Key="k", Body=b"current")

    def code(fn, **kw):
        with pytest.raises(botocore.exceptions.ClientError) as ei:
            fn(Bucket=bucket, **kw)
        return (ei.value.response["Error"]["Code"],
                ei.value.response["ResponseMetadata"]["HTTPStatusCode"])

    assert code(s3.get_object, Key="k", VersionId="abc") == (
        "NoSuchVersion", 404)
    assert code(s3.head_object, Key="k", VersionId="abc")[1] == 404
    assert code(s3.delete_object, Key="k", VersionId="abc") == (
        "NoSuchVersion", 404)
    assert code(s3.copy_object, Key="c",
                CopySource={"Bucket": bucket, "Key": "k",
                            "VersionId": "abc"}) == ("NoSuchVersion", 404)
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [
        {"Key": "k", "VersionId": "abc"}]})
    assert [e["Code"] for e in r.get("Errors", [])] == ["NoSuchVersion"]
    assert "Deleted" not in r
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
    NoSuchUpload and touch nothing."""
    import os
    import threading

    clients = [_client(s3_server, read_timeout=30) for _ in range(5)]
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
        wins = [r for r in res if r.endswith('-4"')]
        assert len(wins) == 1, res
        assert sorted(r for r in res if r not in wins) == [
            "NoSuchUpload"] * (len(clients) - 1), res
        got = c0.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert got == b"".join(parts)


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
    silently came out shorter than asked. S3 answers InvalidRange."""
    import os

    s3.put_object(Bucket=bucket, Key="src", Body=b"0123456789a")
    u = s3.create_multipart_upload(Bucket=bucket, Key="dst")["UploadId"]
    for rg in ("bytes=2-40", "bytes=11-12", "bytes=5-2", "bytes=-3",
               "bytes=0-", "bytes 0-3"):
        with pytest.raises(botocore.exceptions.ClientError) as ei:
            s3.upload_part_copy(Bucket=bucket, Key="dst", UploadId=u,
                                PartNumber=1, CopySourceRange=rg,
                                CopySource={"Bucket": bucket, "Key": "src"})
        assert ei.value.response["Error"]["Code"] == "InvalidRange", rg
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


def _signed_put(srv, path, body, extra):
    import hashlib
    import http.client
    import s3util

    h = {"host": "%s:%d" % (srv.host, srv.port)}
    h.update(extra)
    s3util.sign_headers("PUT", path, [], h, hashlib.sha256(body).hexdigest(),
                        srv.access_key, srv.secret_key)
    c = http.client.HTTPConnection(srv.host, srv.port, timeout=30)
    try:
        c.request("PUT", s3util.uri_encode(path, True), body=body, headers=h)
        r = c.getresponse()
        r.read()
        return r.status
    finally:
        c.close()


@pytest.mark.parametrize("size", [100, 300 * 1024])
def test_conditional_put_is_atomic(s3_server, size):
    """If-None-Match: * (create only if absent) and If-Match were checked
    only when the PUT began, so concurrent conditional writers all passed
    and all committed: several 200s for a create-if-absent, and the last
    one silently replaced the others. Exactly one may win."""
    import os
    import threading

    s3 = s3_server.client()
    s3.create_bucket(Bucket="cond")
    n = 6
    for trial in range(3):
        key = "lock-%d-%d" % (size, trial)
        bodies = [os.urandom(size) for _ in range(n)]
        res = [None] * n
        go = threading.Barrier(n)

        def put(i):
            go.wait()
            res[i] = _signed_put(s3_server, "/cond/" + key, bodies[i],
                                 {"if-none-match": "*"})

        ts = [threading.Thread(target=put, args=(i,)) for i in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert sorted(res) == [200] + [412] * (n - 1), res
        got = s3.get_object(Bucket="cond", Key=key)["Body"].read()
        assert got == bodies[res.index(200)]
        # compare-and-swap: all racers hold the same ETag, one wins
        etag = s3.head_object(Bucket="cond", Key=key)["ETag"]
        res = [None] * n

        def cas(i):
            go.wait()
            res[i] = _signed_put(s3_server, "/cond/" + key, bodies[i][::-1],
                                 {"if-match": etag})

        ts = [threading.Thread(target=cas, args=(i,)) for i in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert sorted(res) == [200] + [412] * (n - 1), res
        got = s3.get_object(Bucket="cond", Key=key)["Body"].read()
        assert got == bodies[res.index(200)][::-1]
