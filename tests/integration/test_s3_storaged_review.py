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
