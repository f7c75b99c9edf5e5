"""Presigned URLs that carry a payload hash, against a real storaged: when
the query string has X-Amz-Content-Sha256, or the request an
x-amz-content-sha256 header, with a hex SHA-256, that value is the payload
hash of the signature and the body must match it (400
XAmzContentSHA256Mismatch otherwise, and nothing is stored); without one
the payload is UNSIGNED-PAYLOAD as before."""

import datetime
import hashlib
import hmac
import http.client

import s3util


def presign(srv, method, path, extra_query=(), headers=None, payload=None):
    """A presigned target (path?query) for @method on @path, signing 'host'
    plus @headers; @payload is the payload hash the client signs (default
    UNSIGNED-PAYLOAD)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    scope = "%s/us-east-1/s3/aws4_request" % amz_date[:8]
    hdrs = {"host": "127.0.0.1:%d" % srv.port}
    hdrs.update(headers or {})
    names = sorted(hdrs)
    q = [("X-Amz-Algorithm", "AWS4-HMAC-SHA256"),
         ("X-Amz-Credential", "%s/%s" % (srv.access_key, scope)),
         ("X-Amz-Date", amz_date), ("X-Amz-Expires", "300"),
         ("X-Amz-SignedHeaders", ";".join(names))] + list(extra_query)
    cq = "&".join("%s=%s" % (s3util.uri_encode(k, False),
                             s3util.uri_encode(v, False)) for k, v in sorted(q))
    canon = "\n".join([method, s3util.uri_encode(path, True), cq,
                       "".join("%s:%s\n" % (n, hdrs[n]) for n in names),
                       ";".join(names), payload or "UNSIGNED-PAYLOAD"])
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(canon.encode()).hexdigest()])
    key = s3util.signing_key(srv.secret_key, amz_date[:8])
    sig = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
    return s3util.uri_encode(path, True) + "?" + cq + "&X-Amz-Signature=" + sig


def send(srv, method, target, body=b"", headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        conn.request(method, target, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def keys(s3, bucket):
    return [o["Key"] for o in
            s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


def test_presigned_query_sha256_verified(s3_server, s3, bucket):
    srv = s3_server
    body = b"the body the URL was made for"
    sha = hashlib.sha256(body).hexdigest()
    path = "/%s/q" % bucket
    t = presign(srv, "PUT", path, [("X-Amz-Content-Sha256", sha)], payload=sha)
    st, data = send(srv, "PUT", t, b"another body, same URL")
    assert st == 400, data
    assert b"<Code>XAmzContentSHA256Mismatch</Code>" in data
    assert keys(s3, bucket) == []
    st, data = send(srv, "PUT", t, body)
    assert st == 200, data
    assert s3.get_object(Bucket=bucket, Key="q")["Body"].read() == body
    # a malformed digest is refused before anything is read
    t = presign(srv, "PUT", "/%s/q2" % bucket,
                [("X-Amz-Content-Sha256", "nothex")], payload="nothex")
    st, data = send(srv, "PUT", t, body)
    assert st == 400 and b"InvalidArgument" in data
    assert keys(s3, bucket) == ["q"]


def test_presigned_header_sha256_verified(s3_server, s3, bucket):
    srv = s3_server
    body = b"header-hashed body"
    sha = hashlib.sha256(body).hexdigest()
    path = "/%s/h" % bucket
    t = presign(srv, "PUT", path, headers={"x-amz-content-sha256": sha},
                payload=sha)
    st, data = send(srv, "PUT", t, b"header-hashed bodX",
                    {"x-amz-content-sha256": sha})
    assert st == 400, data
    assert b"<Code>XAmzContentSHA256Mismatch</Code>" in data
    assert keys(s3, bucket) == []
    st, data = send(srv, "PUT", t, body, {"x-amz-content-sha256": sha})
    assert st == 200, data
    assert s3.get_object(Bucket=bucket, Key="h")["Body"].read() == body


def test_presigned_unsigned_payload_unchanged(s3_server, s3, bucket):
    srv = s3_server
    path = "/%s/u" % bucket
    st, data = send(srv, "PUT", presign(srv, "PUT", path), b"any bytes")
    assert st == 200, data
    st, data = send(srv, "GET", presign(srv, "GET", path))
    assert st == 200 and data == b"any bytes"
    # an explicit UNSIGNED-PAYLOAD in the query is the same
    t = presign(srv, "PUT", path, [("X-Amz-Content-Sha256",
                                    "UNSIGNED-PAYLOAD")])
    st, data = send(srv, "PUT", t, b"other bytes")
    assert st == 200, data
