"""Size limits and refused signing schemes against a real storaged, decided
from the request head alone (no 5 GiB is ever sent):

- PutObject / UploadPart larger than 5 GiB (Content-Length, or
  x-amz-decoded-content-length with aws-chunked) -> 400 EntityTooLarge
  before any body byte is read; exactly 5 GiB is accepted (100-continue);
- CopyObject / UploadPartCopy of a source (or range) over 5 GiB -> 400
  InvalidRequest, decided from the source's size before reading it;
- with `--no-sigv2`, SigV2 (Authorization: AWS AKID:sig, or
  ?AWSAccessKeyId=&Signature=) -> 400 InvalidRequest naming
  AWS4-HMAC-SHA256, not a generic AccessDenied (SigV2 itself, accepted by
  default: test_s3_sigv2.py).
Each refusal leaves the store unchanged."""

import glob
import os
import socket
import subprocess

import botocore
import pytest

import meta_util
import s3util
from conftest import STORAGED

GIB5 = 5 * 1024 * 1024 * 1024


def head_only(srv, method, path, query, extra, payload="UNSIGNED-PAYLOAD"):
    """Signs a request head and sends only the head; returns what the server
    answers within a few seconds (it must not wait for the body)."""
    h = {"host": "127.0.0.1:%d" % srv.port}
    h.update(extra)
    s3util.sign_headers(method, path, query, h, payload, srv.access_key,
                        srv.secret_key)
    target = s3util.uri_encode(path, True)
    if query:
        target += "?" + "&".join("%s=%s" % (s3util.uri_encode(k, False),
                                            s3util.uri_encode(v, False))
                                 for k, v in query)
    head = "%s %s HTTP/1.1\r\n" % (method, target)
    head += "".join("%s: %s\r\n" % (k, v) for k, v in h.items()) + "\r\n"
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    try:
        s.sendall(head.encode())
        out = b""
        while b"\r\n\r\n" not in out or (b"</Error>" not in out and
                                         not out.startswith(b"HTTP/1.1 100")):
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            if not b:
                break
            out += b
        return out
    finally:
        s.close()


def keys(s3, bucket):
    return [o["Key"] for o in
            s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


def test_put_over_5gib_refused_from_head(s3_server, s3, bucket):
    srv = s3_server
    path = "/%s/huge" % bucket
    out = head_only(srv, "PUT", path, [], {"content-length": str(GIB5 + 1),
                                           "expect": "100-continue"})
    assert s3util.status_of(out) == 400, out[:200]
    assert b"<Code>EntityTooLarge</Code>" in out
    assert b"HTTP/1.1 100" not in out  # refused before asking for the body
    # without Expect too: the answer comes before any body byte
    out = head_only(srv, "PUT", path, [], {"content-length": str(GIB5 + 1)})
    assert s3util.status_of(out) == 400 and b"EntityTooLarge" in out
    # aws-chunked: the decoded length decides
    out = head_only(srv, "PUT", path, [], {
        "content-length": "100", "content-encoding": "aws-chunked",
        "x-amz-decoded-content-length": str(GIB5 + 1),
        "x-amz-trailer": "x-amz-checksum-crc32"},
        payload="STREAMING-UNSIGNED-PAYLOAD-TRAILER")
    assert s3util.status_of(out) == 400 and b"EntityTooLarge" in out
    # exactly 5 GiB is allowed: the server asks for the body
    out = head_only(srv, "PUT", path, [], {"content-length": str(GIB5),
                                           "expect": "100-continue"})
    assert out.startswith(b"HTTP/1.1 100"), out[:200]
    assert keys(s3, bucket) == []


def test_upload_part_over_5gib_refused(s3_server, s3, bucket):
    srv = s3_server
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    q = [("partNumber", "1"), ("uploadId", up)]
    out = head_only(srv, "PUT", "/%s/mp" % bucket, q,
                    {"content-length": str(GIB5 + 1),
                     "expect": "100-continue"})
    assert s3util.status_of(out) == 400 and b"EntityTooLarge" in out
    assert s3.list_parts(Bucket=bucket, Key="mp",
                         UploadId=up).get("Parts", []) == []
    s3.abort_multipart_upload(Bucket=bucket, Key="mp", UploadId=up)


SIGV2_MSG = (b"The authorization mechanism you have provided is not supported."
             b" Please use AWS4-HMAC-SHA256.")


def test_sigv2_header_refused_clearly(storaged):
    srv = storaged(args=["--no-sigv2"])
    s3 = srv.client()
    bucket = "nov2"
    s3.create_bucket(Bucket=bucket)
    for method, body in (("GET", b""), ("PUT", b"data")):
        req = ("%s /%s/v2 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
               "Date: Sun, 30 Aug 2015 12:36:00 GMT\r\n"
               "Authorization: AWS %s:frJIUN8DYpKDtOLCwo//yllqDzg=\r\n"
               "Content-Length: %d\r\nConnection: close\r\n\r\n"
               % (method, bucket, srv.port, srv.access_key, len(body)))
        out = s3util.raw_request(srv.port, req.encode() + body)
        assert s3util.status_of(out) == 400, out[:300]
        assert b"<Code>InvalidRequest</Code>" in out
        assert SIGV2_MSG in out
        assert b"x-amz-request-id" in out.lower()
    assert keys(s3, bucket) == []


def test_sigv2_query_refused_clearly(storaged):
    srv = storaged(args=["--no-sigv2"])
    s3 = srv.client()
    bucket = "nov2"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="v2", Body=b"x")
    req = ("GET /%s/v2?AWSAccessKeyId=%s&Expires=4102444800&Signature="
           "vjbyPxybdZaNmGa%%2ByT272YEAiv4%%3D HTTP/1.1\r\nHost: 127.0.0.1:%d"
           "\r\nConnection: close\r\n\r\n" % (bucket, srv.access_key, srv.port))
    out = s3util.raw_request(srv.port, req.encode())
    assert s3util.status_of(out) == 400, out[:300]
    assert b"<Code>InvalidRequest</Code>" in out and SIGV2_MSG in out
    assert b"\r\n\r\nx" not in out  # no object bytes


# ---- copy sources over 5 GiB, without writing 5 GiB -----------------------
# The object's meta records (storaged/FORMAT.md, "The meta record") are
# rewritten while the server is stopped so that the index believes a 1.1 MiB
# shard-file object (over the 1 MiB inline limit, so it has one part) is
# 5 GiB + 1 long: the copy limit is decided from that size before
# any byte is read, so no 5 GiB ever exists on disk.


def forge_size(path, key, new_size):
    """Sets size (and the one part's size) in the meta record at @path when
    it is @key's; True when it did. Checks the record's CRC first."""
    return meta_util.rewrite(path, key, size=new_size)


COPY_MSG = (b"The specified copy source is larger than the maximum allowable"
            b" size for a copy source: 5368709120")


def test_copy_source_over_5gib_refused(storaged):
    srv = storaged()
    s3 = srv.client()
    s3.create_bucket(Bucket="cpy")
    data = os.urandom(1100 * 1024)  # over the inline limit: one part
    s3.put_object(Bucket="cpy", Key="src", Body=data)
    srv.stop()
    n = 0
    for d in srv.drives:
        for m in glob.glob(os.path.join(d, "b", "cpy", "*", "*.m")):
            n += forge_size(m, b"src", GIB5 + 1)
    assert n >= 2
    # the metas changed behind the server's back: the index (a copy of
    # them, trusted after a clean stop) is rebuilt from them offline
    r = subprocess.run([STORAGED, "index", "rebuild"] + srv.drives,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    srv.restart()
    s3 = srv.client()
    assert s3.head_object(Bucket="cpy", Key="src")["ContentLength"] == GIB5 + 1

    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.copy_object(Bucket="cpy", Key="dst", CopySource="cpy/src")
    err = e.value.response
    assert err["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert err["Error"]["Code"] == "InvalidRequest"
    assert err["Error"]["Message"].encode() == COPY_MSG
    up = s3.create_multipart_upload(Bucket="cpy", Key="mp")["UploadId"]
    for rng in (None, "bytes=0-%d" % GIB5):  # whole source; 5 GiB + 1 range
        kw = {"CopySourceRange": rng} if rng else {}
        with pytest.raises(botocore.exceptions.ClientError) as e:
            s3.upload_part_copy(Bucket="cpy", Key="mp", UploadId=up,
                                PartNumber=1, CopySource="cpy/src", **kw)
        assert e.value.response["Error"]["Code"] == "InvalidRequest", rng
        assert e.value.response["Error"]["Message"].encode() == COPY_MSG
    # a range of at most 5 GiB is allowed (these bytes really exist)
    r = s3.upload_part_copy(Bucket="cpy", Key="mp", UploadId=up, PartNumber=1,
                            CopySource="cpy/src", CopySourceRange="bytes=0-99")
    assert r["CopyPartResult"]["ETag"]
    parts = s3.list_parts(Bucket="cpy", Key="mp", UploadId=up)["Parts"]
    assert [p["Size"] for p in parts] == [100]
    s3.abort_multipart_upload(Bucket="cpy", Key="mp", UploadId=up)
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="cpy")["Contents"]] == [
        "src"]


def test_copy_onto_itself_needs_replace(s3, bucket):
    s3.put_object(Bucket=bucket, Key="self", Body=b"x", Metadata={"a": "1"})
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="self",
                       CopySource="%s/self" % bucket)
    err = e.value.response["Error"]
    assert err["Code"] == "InvalidRequest"
    assert err["Message"].startswith(
        "This copy request is illegal because it is trying to copy an "
        "object to itself without changing the object's metadata")
    s3.copy_object(Bucket=bucket, Key="self", CopySource="%s/self" % bucket,
                   MetadataDirective="REPLACE", Metadata={"a": "2"})
    assert s3.head_object(Bucket=bucket, Key="self")["Metadata"] == {"a": "2"}
