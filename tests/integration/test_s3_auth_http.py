"""Authentication and HTTP-level behaviour against a real storaged: wrong
secrets, missing auth, skew, payload hashes, aws-chunked (signed and
unsigned-with-trailer), Expect: 100-continue (an error in the head closes
the connection, so the client's next request does not stall), chunked
bodies, pipelining, keep-alive, malformed requests and limits. Each error leaves the store
unchanged."""

import datetime
import hashlib
import http.client
import socket
import time
import base64

import botocore
import pytest

import s3util
from s3util import raw_request, status_of
from test_s3_checksums import b64_checksum


def err_code(excinfo):
    return excinfo.value.response["Error"]["Code"]


def keys(s3, bucket):
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


def test_wrong_secret_and_unknown_key(s3_server, s3, bucket):
    bad = s3_server.client(secret_key="not-the-secret")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        bad.put_object(Bucket=bucket, Key="x", Body=b"1")
    assert err_code(e) == "SignatureDoesNotMatch"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        bad.list_buckets()
    assert err_code(e) == "SignatureDoesNotMatch"
    unknown = s3_server.client(access_key="nobody")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        unknown.get_object(Bucket=bucket, Key="x")
    assert err_code(e) == "InvalidAccessKeyId"
    assert keys(s3, bucket) == []


def test_unsigned_requests_denied(s3_server, s3, bucket):
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config
    anon = boto3.client("s3", endpoint_url=s3_server.endpoint, region_name="us-east-1",
                        config=Config(signature_version=UNSIGNED,
                                      s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}))
    with pytest.raises(botocore.exceptions.ClientError) as e:
        anon.put_object(Bucket=bucket, Key="x", Body=b"1")
    assert err_code(e) == "AccessDenied"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        anon.list_objects_v2(Bucket=bucket)
    assert err_code(e) == "AccessDenied"
    assert keys(s3, bucket) == []


def signed_put(srv, path, body, extra=None, payload_hash=None, now=None, secret=None):
    h = {"host": "127.0.0.1:%d" % srv.port, "content-length": str(len(body))}
    h.update(extra or {})
    ph = payload_hash or hashlib.sha256(body).hexdigest()
    s3util.sign_headers("PUT", path, [], h, ph, srv.access_key,
                        secret or srv.secret_key, now=now)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    conn.request("PUT", s3util.uri_encode(path, True), body=body, headers=h)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, data


def test_skew_and_payload_hash(s3_server, s3, bucket):
    srv = s3_server
    old = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=20)
    st, data = signed_put(srv, "/%s/skew" % bucket, b"abc", now=old)
    assert st == 403 and b"RequestTimeTooSkewed" in data
    st, data = signed_put(srv, "/%s/sha" % bucket, b"abc",
                          payload_hash=hashlib.sha256(b"abd").hexdigest())
    assert st == 400 and b"XAmzContentSHA256Mismatch" in data
    st, data = signed_put(srv, "/%s/ok" % bucket, b"abc")
    assert st == 200
    st, data = signed_put(srv, "/%s/unsigned" % bucket, b"abc",
                          payload_hash="UNSIGNED-PAYLOAD")
    assert st == 200
    assert keys(s3, bucket) == ["ok", "unsigned"]


def aws_chunked_body(key, amz_date, scope, seed, chunks, trailer=None):
    out, prev = b"", seed
    for c in chunks + [b""]:
        sig = s3util.chunk_sig(key, amz_date, scope, prev, c)
        out += b"%x;chunk-signature=%s\r\n" % (len(c), sig.encode()) + c + b"\r\n"
        prev = sig
    if trailer is not None:
        out = out[:-2]  # the final chunk's CRLF is replaced by the trailers
        tb = trailer.encode() + b"\n"
        tsig = s3util.trailer_sig(key, amz_date, scope, prev, tb)
        out += trailer.encode() + b"\r\n" + b"x-amz-trailer-signature:" + tsig.encode() + b"\r\n\r\n"
    return out


def test_aws_chunked_signed(s3_server, s3, bucket):
    srv = s3_server
    data = [b"a" * 65536, b"b" * 1000, b"c" * 70000]
    whole = b"".join(data)
    for trailer in (False, True):
        key = "chunked-%d" % trailer
        h = {"host": "127.0.0.1:%d" % srv.port,
             "content-encoding": "aws-chunked",
             "x-amz-decoded-content-length": str(len(whole))}
        mode = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
        tr = None
        if trailer:
            mode += "-TRAILER"
            h["x-amz-trailer"] = "x-amz-checksum-crc32"
            tr = "x-amz-checksum-crc32:" + s3util.crc32_b64(whole)
        path = "/%s/%s" % (bucket, key)
        # content-length must be known before signing: build body with a
        # placeholder signature chain computed after signing headers.
        h["content-length"] = "0"
        sig, amz, scope, skey = s3util.sign_headers("PUT", path, [], dict(h), mode,
                                                    srv.access_key, srv.secret_key)
        body = aws_chunked_body(skey, amz, scope, sig, data, tr)
        h["content-length"] = str(len(body))
        sig, amz, scope, skey = s3util.sign_headers("PUT", path, [], h, mode,
                                                    srv.access_key, srv.secret_key)
        body = aws_chunked_body(skey, amz, scope, sig, data, tr)
        assert len(body) == int(h["content-length"])
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        conn.request("PUT", path, body=body, headers=h)
        r = conn.getresponse()
        assert r.status == 200, r.read()
        r.read()
        g = s3.get_object(Bucket=bucket, Key=key)
        assert g["Body"].read() == whole
        assert g.get("ContentEncoding") in (None, "")
        # a tampered chunk is refused and nothing is stored
        bad = body.replace(b"b" * 1000, b"B" * 1000)
        conn.request("PUT", path + "-bad", body=bad, headers=h)
        r = conn.getresponse()
        assert r.status == 403, r.read()
        conn.close()
    assert keys(s3, bucket) == ["chunked-0", "chunked-1"]


def unsigned_trailer_put(srv, path, chunks, trailer_line, te_chunked=False):
    whole = b"".join(chunks)
    body = b""
    for c in chunks:
        body += b"%x\r\n" % len(c) + c + b"\r\n"
    body += b"0\r\n" + trailer_line.encode() + b"\r\n\r\n"
    h = {"host": "127.0.0.1:%d" % srv.port, "content-encoding": "aws-chunked",
         "x-amz-decoded-content-length": str(len(whole)),
         "x-amz-trailer": trailer_line.split(":")[0]}
    if not te_chunked:
        h["content-length"] = str(len(body))
    s3util.sign_headers("PUT", path, [], h, "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                        srv.access_key, srv.secret_key)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    if te_chunked:
        conn.putrequest("PUT", path, skip_accept_encoding=True, skip_host=True)
        for k, v in h.items():
            conn.putheader(k, v)
        conn.putheader("transfer-encoding", "chunked")
        conn.endheaders()
        for i in range(0, len(body), 1000):
            piece = body[i:i + 1000]
            conn.send(b"%x\r\n" % len(piece) + piece + b"\r\n")
        conn.send(b"0\r\n\r\n")
    else:
        conn.request("PUT", path, body=body, headers=h)
    r = conn.getresponse()
    out = r.status, r.read(), dict((k.lower(), v) for k, v in r.getheaders())
    conn.close()
    return out



@pytest.mark.parametrize("algo", ["crc32", "crc32c", "sha1", "sha256"])
@pytest.mark.parametrize("te", [False, True])
def test_unsigned_trailer(s3_server, s3, bucket, algo, te):
    chunks = [b"x" * 8192, b"y" * 100, b"z" * 3000]
    whole = b"".join(chunks)
    v = b64_checksum(algo, whole)
    path = "/%s/t-%s-%d" % (bucket, algo, te)
    st, body, hdrs = unsigned_trailer_put(s3_server, path, chunks,
                                          "x-amz-checksum-%s:%s" % (algo, v), te)
    assert st == 200, body
    assert hdrs.get("x-amz-checksum-%s" % algo) == v
    assert s3.get_object(Bucket=bucket, Key=path.split("/", 2)[2])["Body"].read() == whole
    # a wrong checksum is refused and stores nothing
    wrong = base64.b64encode(b"\0" * len(base64.b64decode(v))).decode()
    st, body, _ = unsigned_trailer_put(s3_server, path + "-bad", chunks,
                                       "x-amz-checksum-%s:%s" % (algo, wrong), te)
    assert st == 400 and b"BadDigest" in body
    assert path.split("/", 2)[2] + "-bad" not in keys(s3, bucket)


def test_expect_100_continue(s3_server, s3, bucket):
    srv = s3_server
    body = b"q" * 100000
    h = {"host": "127.0.0.1:%d" % srv.port, "content-length": str(len(body)),
         "expect": "100-continue"}
    s3util.sign_headers("PUT", "/%s/e100" % bucket, [], h, "UNSIGNED-PAYLOAD",
                        srv.access_key, srv.secret_key)
    req = "PUT /%s/e100 HTTP/1.1\r\n" % bucket + "".join(
        "%s: %s\r\n" % kv for kv in h.items()) + "\r\n"
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    sock.sendall(req.encode())
    interim = sock.recv(4096)
    assert interim.startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
    sock.sendall(body)
    resp = b""
    while b"\r\n\r\n" not in resp:
        resp += sock.recv(4096)
    assert status_of(resp) == 200
    # a bucket that does not exist is refused before the body is sent
    h2 = {"host": "127.0.0.1:%d" % srv.port, "content-length": str(len(body)),
          "expect": "100-continue"}
    s3util.sign_headers("PUT", "/nobucket/e", [], h2, "UNSIGNED-PAYLOAD",
                        srv.access_key, srv.secret_key)
    req = "PUT /nobucket/e HTTP/1.1\r\n" + "".join(
        "%s: %s\r\n" % kv for kv in h2.items()) + "\r\n"
    sock.sendall(req.encode())
    resp = sock.recv(65536)
    assert status_of(resp) == 404 and b"NoSuchBucket" in resp
    sock.close()
    assert s3.get_object(Bucket=bucket, Key="e100")["Body"].read() == body


def test_pipelining_in_order(s3_server, s3, bucket):
    srv = s3_server
    for i in range(5):
        s3.put_object(Bucket=bucket, Key="p%d" % i, Body=(b"%d" % i) * (i + 1) * 1000)
    reqs = b""
    for i in range(5):
        h = {"host": "127.0.0.1:%d" % srv.port}
        s3util.sign_headers("GET", "/%s/p%d" % (bucket, i), [], h, s3util.EMPTY_SHA,
                            srv.access_key, srv.secret_key)
        reqs += ("GET /%s/p%d HTTP/1.1\r\n" % (bucket, i)).encode() + "".join(
            "%s: %s\r\n" % kv for kv in h.items()).encode() + b"\r\n"
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    sock.sendall(reqs)
    f = sock.makefile("rb")
    for i in range(5):
        st, hdrs, body = s3util.read_response(f)
        assert st == 200
        assert body == (b"%d" % i) * (i + 1) * 1000
    sock.close()


@pytest.mark.parametrize("raw,code", [
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET / HTTP/9.9\r\n\r\n", 400),
    (b"GET /\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nBad Header\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400),
    # a well-formed request: the connection stays open unless asked to close
    (b"PATCH /b/k HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 405),
    (b"GET relative HTTP/1.1\r\n\r\n", 400),
    (b"GET http://nopath HTTP/1.1\r\n\r\n", 400),
])
def test_malformed_http(s3_server, raw, code):
    resp = raw_request(s3_server.port, raw)
    assert status_of(resp) == code
    assert b"<Error><Code>" in resp
    assert b"x-amz-request-id:" in resp
    # the server is still fine
    assert raw_request(s3_server.port, b"GET /health/live HTTP/1.1\r\n\r\n",
                       read_all=False).startswith(b"HTTP/1.1 200")


def test_header_limits(s3_server):
    port = s3_server.port
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(101))
    resp = raw_request(port, b"GET / HTTP/1.1\r\n" + many + b"\r\n")
    assert status_of(resp) == 400 and b"RequestHeaderSectionTooLarge" in resp
    ok = b"".join(b"X-H%d: v\r\n" % i for i in range(99))
    resp = raw_request(port, b"GET / HTTP/1.1\r\n" + ok + b"\r\n", read_all=False)
    assert status_of(resp) == 403  # parsed fine, then unsigned -> AccessDenied
    big = b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n"
    resp = raw_request(port, big)
    assert status_of(resp) == 400


def test_malformed_xml_leaves_store(s3_server, s3, bucket):
    srv = s3_server
    s3.put_object(Bucket=bucket, Key="keep", Body=b"1")
    body = b"<Delete><Object><Key>keep</Key></Object"
    h = {"host": "127.0.0.1:%d" % srv.port, "content-length": str(len(body)),
         "content-md5": base64.b64encode(hashlib.md5(body).digest()).decode()}
    s3util.sign_headers("POST", "/%s" % bucket, [("delete", "")], h,
                        hashlib.sha256(body).hexdigest(), srv.access_key, srv.secret_key)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    conn.request("POST", "/%s?delete=" % bucket, body=body, headers=h)
    r = conn.getresponse()
    assert r.status == 400 and b"MalformedXML" in r.read()
    assert keys(s3, bucket) == ["keep"]


def test_idle_timeout_and_graceful_stop(storaged):
    srv = storaged(args=["--idle-timeout", "1"])
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    time.sleep(2.5)
    assert sock.recv(10) == b""  # closed by the server
    sock.close()
    # SIGTERM with an idle connection open: exits promptly with status 0
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    t0 = time.monotonic()
    assert srv.stop() == 0
    assert time.monotonic() - t0 < 5
    sock.close()


def test_refuses_without_credentials(tmp_path):
    import os
    import subprocess
    from conftest import STORAGED
    env = {k: v for k, v in os.environ.items() if not k.startswith("STORAGED_ROOT")}
    p = subprocess.run([STORAGED, "serve", "--address", "127.0.0.1:1",
                        str(tmp_path / "d1")], env=env, capture_output=True,
                       timeout=10)
    assert p.returncode != 0
    assert b"STORAGED_ROOT_USER" in p.stderr


def test_absolute_form_target(s3_server, s3, bucket):
    srv = s3_server
    resp = raw_request(srv.port, b"GET http://127.0.0.1:%d/health/live HTTP/1.1\r\n"
                       b"Host: 127.0.0.1\r\n\r\n" % srv.port, read_all=False)
    assert status_of(resp) == 200
    s3.put_object(Bucket=bucket, Key="abs", Body=b"absolute")
    h = {"host": "127.0.0.1:%d" % srv.port}
    s3util.sign_headers("GET", "/%s/abs" % bucket, [], h, s3util.EMPTY_SHA,
                        srv.access_key, srv.secret_key)
    req = ("GET http://127.0.0.1:%d/%s/abs HTTP/1.1\r\n" % (srv.port, bucket)).encode() + \
        "".join("%s: %s\r\n" % kv for kv in h.items()).encode() + b"\r\n"
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    sock.sendall(req)
    st, _, body = s3util.read_response(sock.makefile("rb"))
    sock.close()
    assert st == 200 and body == b"absolute"


def test_head_error_to_expect_continue_does_not_stall_next_request(
        s3_server, bucket):
    """An error found in the head of an empty PUT (Expect: 100-continue,
    no 100 sent) used to leave the connection open; botocore then reused
    that status line for its next response on the connection and stalled
    until its read timeout. The connection must be closed instead."""
    c = s3util.client_with_read_timeout(s3_server, read_timeout=3)
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
