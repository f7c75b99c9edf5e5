"""POST Object (storaged/s3/post.c): browser-based uploads with an HTML
form, against a real storaged. The forms are what a browser sends: the
fields of boto3's generate_presigned_post (SigV4 policy), a body built
here with urllib as multipart/form-data, and requests' own encoder. Checks
the answers S3 documents (204, 201 with its XML, 303 redirect), what is
stored (key with ${filename}, Content-Type, metadata, ACL, tags, SSE), and
the refusals (signature, policy conditions and extra fields, size range,
malformed bodies), none of which leaves an object behind."""
import hashlib
import os
import urllib.error
import urllib.parse
import urllib.request
import uuid
import xml.etree.ElementTree as ET

import requests

from test_s3_header_audit import absent, drives_hold


def multipart(fields, file_name, data, boundary=None):
    """A browser's multipart/form-data body: @fields (name, value) in
    order, then the file part. Returns (content type, body)."""
    boundary = boundary or "----ecfsFormBoundary" + uuid.uuid4().hex
    out = []
    for k, v in fields:
        out.append(b"--%s\r\nContent-Disposition: form-data; name=\"%s\""
                   b"\r\n\r\n%s\r\n" % (boundary.encode(), k.encode(),
                                        v.encode() if isinstance(v, str)
                                        else v))
    out.append(b"--%s\r\nContent-Disposition: form-data; name=\"file\"; "
               b"filename=\"%s\"\r\nContent-Type: application/octet-stream"
               b"\r\n\r\n" % (boundary.encode(), file_name.encode()))
    out.append(data)
    out.append(b"\r\n--%s--\r\n" % boundary.encode())
    return "multipart/form-data; boundary=" + boundary, b"".join(out)


def post(url, ctype, body):
    """POSTs with urllib (no redirects followed); (status, headers, body)."""
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"Content-Type": ctype})

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(req, timeout=60) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def code_of(body):
    return ET.fromstring(body).find("Code").text


def presigned(s3, bucket, key, fields=None, conditions=None, expires=300):
    return s3.generate_presigned_post(Bucket=bucket, Key=key, Fields=fields,
                                      Conditions=conditions,
                                      ExpiresIn=expires)


def test_presigned_post_streams_a_file(s3, bucket):
    """boto3's SigV4 form, a 3 MiB file (several of PUT's 1 MiB pieces,
    data with CRLFs and delimiter look-alikes), ${filename}, metadata."""
    fields = {"acl": "private", "Content-Type": "text/x-ecfs",
              "x-amz-meta-who": "browser", "Cache-Control": "no-cache"}
    conds = [{"acl": "private"}, ["starts-with", "$Content-Type", "text/"],
             {"x-amz-meta-who": "browser"}, {"Cache-Control": "no-cache"},
             ["content-length-range", 1, 8 << 20]]
    p = presigned(s3, bucket, "up/${filename}", fields, conds)
    assert p["fields"]["x-amz-algorithm"] == "AWS4-HMAC-SHA256"
    chunk = b"line\r\n--" + p["fields"]["key"].encode() + b"\r\n\r\n--x"
    data = (chunk * ((3 << 20) // len(chunk) + 1))[:3 << 20] + os.urandom(99)
    ctype, body = multipart(list(p["fields"].items()), "a b.bin", data)
    st, hdrs, out = post(p["url"], ctype, body)
    assert st == 204, out
    assert out == b""
    etag = hdrs["ETag"].strip('"')
    assert etag == hashlib.md5(data).hexdigest()
    g = s3.get_object(Bucket=bucket, Key="up/a b.bin")
    assert g["Body"].read() == data
    assert g["ContentType"] == "text/x-ecfs"
    assert g["Metadata"] == {"who": "browser"}
    assert g["CacheControl"] == "no-cache"
    # the form's Content-Type, not the request's multipart one
    assert "multipart" not in g["ContentType"]


def test_success_status_and_redirect(s3, bucket):
    p = presigned(s3, bucket, "s201", {"success_action_status": "201"},
                  [{"success_action_status": "201"}])
    ctype, body = multipart(list(p["fields"].items()), "f", b"abc")
    st, hdrs, out = post(p["url"], ctype, body)
    assert st == 201
    x = ET.fromstring(out)
    assert x.tag == "PostResponse"
    assert x.find("Bucket").text == bucket
    assert x.find("Key").text == "s201"
    assert x.find("ETag").text == '"%s"' % hashlib.md5(b"abc").hexdigest()
    assert x.find("Location").text.endswith("/%s/s201" % bucket)
    assert hdrs["Location"] == x.find("Location").text

    p = presigned(s3, bucket, "s200", {"success_action_status": "200"},
                  [{"success_action_status": "200"}])
    st, _, out = post(p["url"], *multipart(list(p["fields"].items()), "f",
                                           b"x"))
    assert (st, out) == (200, b"")

    back = "https://app.example/done?x=1"
    p = presigned(s3, bucket, "k with space",
                  {"success_action_redirect": back},
                  [{"success_action_redirect": back}])
    st, hdrs, _ = post(p["url"], *multipart(list(p["fields"].items()), "f",
                                            b"red"))
    assert st == 303
    loc = urllib.parse.urlsplit(hdrs["Location"])
    q = urllib.parse.parse_qs(loc.query)
    assert hdrs["Location"].startswith(back + "&")
    assert q["bucket"] == [bucket] and q["key"] == ["k with space"]
    assert q["etag"] == ['"%s"' % hashlib.md5(b"red").hexdigest()]
    assert s3.get_object(Bucket=bucket, Key="k with space")[
        "Body"].read() == b"red"


def test_refusals_store_nothing(s3, bucket):
    def form(key, fields=None, conds=None, expires=300):
        p = presigned(s3, bucket, key, fields, conds, expires)
        return p["url"], list(p["fields"].items())

    url, f = form("sig")
    f = [(k, (v[:-4] + "0000") if k == "x-amz-signature" else v)
         for k, v in f]
    st, _, out = post(url, *multipart(f, "f", b"x"))
    assert (st, code_of(out)) == (403, "SignatureDoesNotMatch")
    assert absent(s3, bucket, "sig")

    # a field the policy does not name
    url, f = form("extra")
    st, _, out = post(url, *multipart(f + [("x-amz-meta-sneaky", "1")],
                                      "f", b"x"))
    assert (st, code_of(out)) == (403, "AccessDenied")
    assert b"Invalid according to Policy: Extra input fields" in out
    assert absent(s3, bucket, "extra")

    # a condition that fails
    url, f = form("cond", {"Content-Type": "text/plain"},
                  [["starts-with", "$Content-Type", "image/"]])
    st, _, out = post(url, *multipart(f, "f", b"x"))
    assert (st, code_of(out)) == (403, "AccessDenied")
    assert b"Policy Condition failed" in out

    # outside content-length-range: refused, also while streaming
    url, f = form("big", conds=[["content-length-range", 2, 1000]])
    st, _, out = post(url, *multipart(f, "f", b"y" * (2 << 20)))
    assert (st, code_of(out)) == (400, "EntityTooLarge")
    st, _, out = post(url, *multipart(f, "f", b"y"))
    assert (st, code_of(out)) == (400, "EntityTooSmall")
    assert absent(s3, bucket, "big")

    # an expired policy
    url, f = form("old", expires=-10)
    st, _, out = post(url, *multipart(f, "f", b"x"))
    assert (st, code_of(out)) == (403, "AccessDenied")
    assert b"Policy expired" in out

    # no file part; a body cut before its closing delimiter; no key
    url, f = form("nofile")
    b = "----b" + uuid.uuid4().hex
    body = b"".join(b"--%s\r\nContent-Disposition: form-data; name=\"%s\""
                    b"\r\n\r\n%s\r\n" % (b.encode(), k.encode(), v.encode())
                    for k, v in f) + b"--%s--\r\n" % b.encode()
    st, _, out = post(url, "multipart/form-data; boundary=" + b, body)
    assert (st, code_of(out)) == (400, "InvalidArgument")
    ctype, body = multipart(f, "f", b"cut")
    st, _, out = post(url, ctype, body[:-8])
    assert (st, code_of(out)) == (400, "MalformedPOSTRequest")
    assert absent(s3, bucket, "nofile")
    st, _, out = post(url, *multipart([kv for kv in f if kv[0] != "key"],
                                      "f", b"x"))
    assert (st, code_of(out)) == (400, "InvalidArgument")
    # not a form at all
    st, _, out = post(url, "application/octet-stream", b"x")
    assert (st, code_of(out)) == (400, "MalformedPOSTRequest")

    # a header field with a line break (it would come back on GET)
    url, f = form("crlf", {"x-amz-meta-x": "a\r\nX-Evil: 1"},
                  [["starts-with", "$x-amz-meta-x", ""]])
    st, _, out = post(url, *multipart(f, "f", b"x"))
    assert (st, code_of(out)) == (400, "InvalidArgument")
    assert absent(s3, bucket, "crlf")

    # anonymous, to a private bucket
    st, _, out = post(url, *multipart([("key", "anon")], "f", b"x"))
    assert (st, code_of(out)) == (403, "AccessDenied")
    assert absent(s3, bucket, "anon")


def test_anonymous_public_write_tags_and_sse(s3):
    """requests' own form encoder, anonymous to a public-read-write bucket
    (as S3 allows), with a canned ACL, tags in XML and SSE-S3; the drives
    never hold the plaintext."""
    srv = s3.ecfs_server
    b = "pw-" + uuid.uuid4().hex[:12]
    s3.create_bucket(Bucket=b, ACL="public-read-write")
    marker = b"post-marker-" + uuid.uuid4().hex.encode()
    tags = ("<Tagging><TagSet><Tag><Key>b</Key><Value>2</Value></Tag>"
            "<Tag><Key>a</Key><Value>1</Value></Tag></TagSet></Tagging>")
    r = requests.post("%s/%s" % (srv.endpoint, b), files=[
        ("key", (None, "anon.txt")), ("acl", (None, "public-read")),
        ("tagging", (None, tags)),
        ("x-amz-server-side-encryption", (None, "AES256")),
        ("file", ("anon.txt", marker * 100))], timeout=60)
    assert r.status_code == 204, r.text
    assert r.headers["x-amz-server-side-encryption"] == "AES256"
    g = s3.get_object(Bucket=b, Key="anon.txt")
    assert g["Body"].read() == marker * 100
    assert g["ServerSideEncryption"] == "AES256"
    assert s3.get_object_tagging(Bucket=b, Key="anon.txt")["TagSet"] == [
        {"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}]
    # public-read was recorded: an anonymous GET reads it
    assert requests.get("%s/%s/anon.txt" % (srv.endpoint, b),
                        timeout=30).content == marker * 100
    assert not drives_hold(srv, marker)
    # SSE-KMS is refused, not ignored
    r = requests.post("%s/%s" % (srv.endpoint, b), files=[
        ("key", (None, "kms")),
        ("x-amz-server-side-encryption", (None, "aws:kms")),
        ("file", ("f", b"x"))], timeout=60)
    assert r.status_code == 501
    assert absent(s3, b, "kms")
