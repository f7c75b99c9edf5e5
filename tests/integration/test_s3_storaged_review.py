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
