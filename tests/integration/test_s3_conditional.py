"""GetObject/HeadObject conditionals against a real storaged: If-Range
(an ETag or an HTTP-date decides whether Range is honoured; otherwise 200
with the whole object) and the three HTTP-date forms of RFC 9110 section
5.6.7 (IMF-fixdate, RFC 850, asctime) in If-Modified-Since,
If-Unmodified-Since and If-Range; an invalid date is ignored. A
conditional PUT (If-None-Match: *) is atomic: of racing PUTs of one key
exactly one wins, the others get 412."""

import datetime
import email.utils
import hashlib
import http.client

import pytest

import s3util

BODY = bytes(range(256)) * 40  # 10240 bytes


def signed(srv, method, path, headers=None, body=b""):
    """One SigV4-signed request; returns (status, {lowercase: value}, body)."""
    h = {"host": "127.0.0.1:%d" % srv.port}
    h.update(headers or {})
    if body:
        h["content-length"] = str(len(body))
    s3util.sign_headers(method, path, [], h, hashlib.sha256(body).hexdigest(),
                        srv.access_key, srv.secret_key)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        conn.request(method, s3util.uri_encode(path, True), body=body or None,
                     headers=h)
        r = conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        conn.close()


def put_obj(s3, bucket, key="obj"):
    s3.put_object(Bucket=bucket, Key=key, Body=BODY)
    head = s3.head_object(Bucket=bucket, Key=key)
    lm = email.utils.parsedate_to_datetime(
        head["ResponseMetadata"]["HTTPHeaders"]["last-modified"])
    return head["ETag"], lm


def forms(dt):
    """The same instant in IMF-fixdate, RFC 850 and asctime form."""
    return [dt.strftime("%a, %d %b %Y %H:%M:%S GMT"),
            dt.strftime("%A, %d-%b-%y %H:%M:%S GMT"),
            dt.strftime("%a %b ") + ("%2d" % dt.day) + dt.strftime(" %H:%M:%S %Y")]


def test_if_range_etag(s3_server, s3, bucket):
    etag, _ = put_obj(s3, bucket)
    path = "/%s/obj" % bucket
    for method in ("GET", "HEAD"):
        st, h, data = signed(s3_server, method, path,
                             {"range": "bytes=10-19", "if-range": etag})
        assert st == 206, (method, st)
        assert h["content-range"] == "bytes 10-19/%d" % len(BODY)
        assert h["content-length"] == "10"
        if method == "GET":
            assert data == BODY[10:20]
        # another ETag, or a weak one: the whole object, 200
        for other in ('"0123456789abcdef0123456789abcdef"', "W/" + etag):
            st, h, data = signed(s3_server, method, path,
                                 {"range": "bytes=10-19", "if-range": other})
            assert st == 200, (method, other, st)
            assert "content-range" not in h
            assert h["content-length"] == str(len(BODY))
            if method == "GET":
                assert data == BODY
    # If-Range without Range changes nothing
    st, h, data = signed(s3_server, "GET", path,
                         {"if-range": '"ffffffffffffffffffffffffffffffff"'})
    assert st == 200 and data == BODY


def test_if_range_date_all_forms(s3_server, s3, bucket):
    _, lm = put_obj(s3, bucket)
    path = "/%s/obj" % bucket
    earlier = lm - datetime.timedelta(seconds=30)
    for f in forms(lm):
        st, h, data = signed(s3_server, "GET", path,
                             {"range": "bytes=-5", "if-range": f})
        assert st == 206, f
        assert data == BODY[-5:]
        assert h["content-range"] == "bytes %d-%d/%d" % (
            len(BODY) - 5, len(BODY) - 1, len(BODY))
    for f in forms(earlier):
        st, h, data = signed(s3_server, "GET", path,
                             {"range": "bytes=-5", "if-range": f})
        assert st == 200, f
        assert data == BODY
    # not a date and not a tag: the range is not honoured
    st, _, data = signed(s3_server, "GET", path,
                         {"range": "bytes=0-0", "if-range": "yesterday"})
    assert st == 200 and data == BODY


def test_modified_since_all_date_forms(s3_server, s3, bucket):
    etag, lm = put_obj(s3, bucket)
    path = "/%s/obj" % bucket
    later = lm + datetime.timedelta(hours=1)
    earlier = lm - datetime.timedelta(hours=1)
    for f in forms(later):
        st, h, data = signed(s3_server, "GET", path, {"if-modified-since": f})
        assert st == 304, f
        assert data == b"" and h["etag"] == etag
        st, _, _ = signed(s3_server, "GET", path, {"if-unmodified-since": f})
        assert st == 200, f
    for f in forms(earlier):
        st, _, data = signed(s3_server, "GET", path, {"if-modified-since": f})
        assert st == 200 and data == BODY, f
        st, _, data = signed(s3_server, "GET", path, {"if-unmodified-since": f})
        assert st == 412 and b"<Code>PreconditionFailed</Code>" in data, f
        st, _, data = signed(s3_server, "HEAD", path, {"if-unmodified-since": f})
        assert st == 412 and data == b"", f
    # an invalid date is ignored, as S3 does
    for bad in ("not a date", "Sun, 31 Feb 2015 12:00:00 GMT", "1700000000"):
        st, _, data = signed(s3_server, "GET", path, {"if-modified-since": bad})
        assert st == 200 and data == BODY, bad
        st, _, data = signed(s3_server, "GET", path, {"if-unmodified-since": bad})
        assert st == 200 and data == BODY, bad


# ---- conditional PUT (If-None-Match: *) ----

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
