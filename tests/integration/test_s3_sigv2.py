"""SigV2 request signing (storaged/s3/auth.c, common/sigv2.c) against a real
storaged with real clients:

- boto3 with Config(signature_version='s3') (botocore's HmacV1 signer):
  PUT/GET/HEAD/DELETE, listings, sub-resources (?acl, ?tagging, ?delete,
  ?versioning, response-* overrides), copy, multipart; its presigned URLs
  (generate_presigned_url) for GET and PUT, fetched with urllib;
- s3cmd with signature_v2 = True: mb, put (and a multipart put), ls, get,
  sync, del, rb;
- what SigV2 is refused with, as AWS answers: a wrong secret 403
  SignatureDoesNotMatch, an unknown key 403 InvalidAccessKeyId, a
  malformed header 400 InvalidArgument, no or a bad date 403 AccessDenied,
  15 minutes' skew 403 RequestTimeTooSkewed, an expired URL 403
  AccessDenied; a SigV2 user's requests are authorised as with SigV4;
- virtual-hosted style (--domain): the bucket from Host signs the resource;
- `--no-sigv2` refuses both forms with 400 InvalidRequest as before
  (test_s3_limits.py checks the messages).
Raw requests are signed here from the AWS documentation's algorithm, not by
botocore, so the server is checked against a second implementation."""

import base64
import email.utils
import hashlib
import hmac
import os
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

import s3util
from test_s3_iam import add_user


def v2_client(srv, access_key=None, secret_key=None, style="path"):
    return boto3.client(
        "s3", endpoint_url=srv.endpoint,
        aws_access_key_id=access_key or srv.access_key,
        aws_secret_access_key=secret_key or srv.secret_key,
        region_name="us-east-1",
        config=Config(signature_version="s3",
                      s3={"addressing_style": style},
                      retries={"max_attempts": 1, "mode": "standard"}))


def err(exc):
    return (exc.response["ResponseMetadata"]["HTTPStatusCode"],
            exc.response["Error"]["Code"])


def sign_v2(secret, method, resource, date="", md5="", ctype="", amz=None):
    """AWS's StringToSign, signed: base64(HMAC-SHA1)."""
    amz = amz or {}
    lines = [method, md5, ctype, date]
    sts = "\n".join(lines) + "\n"
    for k in sorted(amz):
        sts += "%s:%s\n" % (k.lower(), amz[k].strip())
    sts += resource
    mac = hmac.new(secret.encode(), sts.encode(), hashlib.sha1).digest()
    return base64.b64encode(mac).decode()


def raw(srv, method, target, headers, body=b""):
    """Sends one request, returns (status, response bytes)."""
    h = {"Host": "127.0.0.1:%d" % srv.port, "Connection": "close",
         "Content-Length": str(len(body))}
    h.update(headers)
    req = "%s %s HTTP/1.1\r\n" % (method, target)
    req += "".join("%s: %s\r\n" % kv for kv in h.items()) + "\r\n"
    out = s3util.raw_request(srv.port, req.encode() + body)
    return s3util.status_of(out), out


def test_boto3_sigv2_object_operations(s3_server):
    srv = s3_server
    c = v2_client(srv)
    v4 = srv.client()
    c.create_bucket(Bucket="v2b")
    c.put_object(Bucket="v2b", Key="dir/a b+c.txt", Body=b"hello",
                 ContentType="text/plain", Metadata={"k": "v"})
    c.put_object(Bucket="v2b", Key="fran\u00e7ais/\u00e9t\u00e9", Body=b"u")
    g = c.get_object(Bucket="v2b", Key="dir/a b+c.txt")
    assert g["Body"].read() == b"hello" and g["Metadata"] == {"k": "v"}
    # written with SigV2, read with SigV4 and back: one store, one identity
    assert v4.get_object(Bucket="v2b", Key="fran\u00e7ais/\u00e9t\u00e9"
                         )["Body"].read() == b"u"
    h = c.head_object(Bucket="v2b", Key="dir/a b+c.txt")
    assert h["ContentLength"] == 5 and h["ContentType"] == "text/plain"
    # a response-* override is a signed sub-resource, with its value
    g = c.get_object(Bucket="v2b", Key="dir/a b+c.txt",
                     ResponseContentType="application/x-test",
                     ResponseContentDisposition="attachment; filename=x")
    assert g["ContentType"] == "application/x-test"
    assert g["ContentDisposition"] == "attachment; filename=x"
    assert sorted(o["Key"] for o in c.list_objects(Bucket="v2b")["Contents"]
                  ) == ["dir/a b+c.txt", "fran\u00e7ais/\u00e9t\u00e9"]
    lst = c.list_objects_v2(Bucket="v2b", Prefix="dir/", Delimiter="/")
    assert [o["Key"] for o in lst["Contents"]] == ["dir/a b+c.txt"]
    assert "v2b" in [b["Name"] for b in c.list_buckets()["Buckets"]]
    # sub-resources: ?acl, ?tagging, ?versioning, ?location
    acl = c.get_object_acl(Bucket="v2b", Key="dir/a b+c.txt")
    assert acl["Grants"][0]["Permission"] == "FULL_CONTROL"
    c.put_object_tagging(Bucket="v2b", Key="dir/a b+c.txt",
                         Tagging={"TagSet": [{"Key": "t", "Value": "1"}]})
    assert c.get_object_tagging(Bucket="v2b", Key="dir/a b+c.txt"
                                )["TagSet"] == [{"Key": "t", "Value": "1"}]
    c.put_bucket_versioning(Bucket="v2b",
                            VersioningConfiguration={"Status": "Enabled"})
    assert c.get_bucket_versioning(Bucket="v2b")["Status"] == "Enabled"
    c.get_bucket_location(Bucket="v2b")
    # versionId is a sub-resource too
    vid = c.put_object(Bucket="v2b", Key="ver", Body=b"1")["VersionId"]
    c.put_object(Bucket="v2b", Key="ver", Body=b"2")
    assert c.get_object(Bucket="v2b", Key="ver", VersionId=vid
                        )["Body"].read() == b"1"
    assert len(c.list_object_versions(Bucket="v2b", Prefix="ver"
                                      )["Versions"]) == 2
    # copy (x-amz-copy-source is an amz header in the string to sign)
    c.copy_object(Bucket="v2b", Key="copy",
                  CopySource={"Bucket": "v2b", "Key": "dir/a b+c.txt"})
    assert c.get_object(Bucket="v2b", Key="copy")["Body"].read() == b"hello"
    # multipart: ?uploads, ?partNumber&uploadId, ?uploadId
    mp = c.create_multipart_upload(Bucket="v2b", Key="mp")["UploadId"]
    p1 = b"a" * (5 * 1024 * 1024)
    e1 = c.upload_part(Bucket="v2b", Key="mp", UploadId=mp, PartNumber=1,
                       Body=p1)["ETag"]
    e2 = c.upload_part(Bucket="v2b", Key="mp", UploadId=mp, PartNumber=2,
                       Body=b"tail")["ETag"]
    assert len(c.list_parts(Bucket="v2b", Key="mp", UploadId=mp)["Parts"]) == 2
    assert [u["UploadId"] for u in
            c.list_multipart_uploads(Bucket="v2b")["Uploads"]] == [mp]
    c.complete_multipart_upload(
        Bucket="v2b", Key="mp", UploadId=mp,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1},
                                   {"PartNumber": 2, "ETag": e2}]})
    assert v4.get_object(Bucket="v2b", Key="mp")["Body"].read() == p1 + b"tail"
    # DELETE, and ?delete (DeleteObjects, with its Content-MD5 signed)
    c.delete_object(Bucket="v2b", Key="copy")
    out = c.delete_objects(Bucket="v2b", Delete={"Objects": [
        {"Key": "dir/a b+c.txt"}, {"Key": "mp"}]})
    assert len(out["Deleted"]) == 2
    keys = [o["Key"] for o in v4.list_objects_v2(Bucket="v2b"
                                                 ).get("Contents", [])]
    assert "copy" not in keys and "mp" not in keys


def test_boto3_sigv2_presigned_urls(s3_server):
    srv = s3_server
    c = v2_client(srv)
    c.create_bucket(Bucket="pre")
    c.put_object(Bucket="pre", Key="k y", Body=b"secret bytes")
    url = c.generate_presigned_url("get_object",
                                   Params={"Bucket": "pre", "Key": "k y"},
                                   ExpiresIn=300)
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    assert set(q) == {"AWSAccessKeyId", "Expires", "Signature"}
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.read() == b"secret bytes"
    # a presigned PUT; its Content-Type is signed (botocore puts it in the
    # URL too), so the upload must send that one
    url = c.generate_presigned_url("put_object",
                                   Params={"Bucket": "pre", "Key": "up",
                                           "ContentType": "text/x-up"},
                                   ExpiresIn=300, HttpMethod="PUT")
    req = urllib.request.Request(url, data=b"via url", method="PUT",
                                 headers={"Content-Type": "text/x-up"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200
    g = c.get_object(Bucket="pre", Key="up")
    assert g["Body"].read() == b"via url" and g["ContentType"] == "text/x-up"
    # another Content-Type than the signed one
    req = urllib.request.Request(url, data=b"x", method="PUT",
                                 headers={"Content-Type": "text/other"})
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(req, timeout=10)
    assert ei.value.code == 403
    # the URL names another key: the signature no longer matches
    bad = url.replace("/pre/up?", "/pre/other?")
    req = urllib.request.Request(bad, data=b"x", method="PUT",
                                 headers={"Content-Type": "text/x-up"})
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(req, timeout=10)
    assert ei.value.code == 403
    assert b"<Code>SignatureDoesNotMatch</Code>" in ei.value.read()
    # expired: AccessDenied "Request has expired"
    url = c.generate_presigned_url("get_object",
                                   Params={"Bucket": "pre", "Key": "k y"},
                                   ExpiresIn=-5)
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(url, timeout=10)
    body = ei.value.read()
    assert ei.value.code == 403 and b"<Code>AccessDenied</Code>" in body
    assert b"Request has expired" in body
    # a wrong secret, and a URL missing its Expires
    w = v2_client(srv, secret_key="not-the-secret")
    url = w.generate_presigned_url("get_object",
                                   Params={"Bucket": "pre", "Key": "k y"},
                                   ExpiresIn=300)
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(url, timeout=10)
    assert ei.value.code == 403
    assert b"<Code>SignatureDoesNotMatch</Code>" in ei.value.read()
    st, out = raw(srv, "GET", "/pre/k%%20y?AWSAccessKeyId=%s&Signature=abc%%3D"
                  % srv.access_key, {})
    assert st == 403 and b"<Code>AccessDenied</Code>" in out
    assert b"secret bytes" not in out


def test_sigv2_refusals(s3_server):
    srv = s3_server
    c = v2_client(srv)
    c.create_bucket(Bucket="ref")
    w = v2_client(srv, secret_key="wrong-secret")
    with pytest.raises(ClientError) as ei:
        w.put_object(Bucket="ref", Key="k", Body=b"x")
    assert err(ei.value) == (403, "SignatureDoesNotMatch")
    u = v2_client(srv, access_key="AKIANOTAKEY000000000")
    with pytest.raises(ClientError) as ei:
        u.list_objects(Bucket="ref")
    assert err(ei.value) == (403, "InvalidAccessKeyId")
    now = email.utils.formatdate(usegmt=True)

    def put(headers, key="k"):
        return raw(srv, "PUT", "/ref/" + key, headers, b"data")

    sig = sign_v2(srv.secret_key, "PUT", "/ref/k", date=now)
    st, out = put({"Date": now,
                   "Authorization": "AWS %s:%s" % (srv.access_key, sig)})
    assert st == 200, out[:400]
    st, out = put({"Date": now, "Authorization": "AWS HAHAHA"})
    assert st == 400 and b"<Code>InvalidArgument</Code>" in out
    # no date at all, a bad one, one before 1970: AccessDenied
    for hdrs in ({}, {"x-amz-date": "Bad Date"}, {"x-amz-date": ""},
                 {"x-amz-date": "Tue, 07 Jul 1950 21:53:04 GMT"}):
        h = dict(hdrs, Authorization="AWS %s:%s" % (srv.access_key, sig))
        st, out = put(h)
        assert st == 403 and b"<Code>AccessDenied</Code>" in out, (hdrs, out)
    # skew either way, via Date and via x-amz-date
    for d in (time.time() - 16 * 60, time.time() + 16 * 60):
        old = email.utils.formatdate(d, usegmt=True)
        for h in ({"Date": old}, {"x-amz-date": old}):
            sig = sign_v2(srv.secret_key, "PUT", "/ref/k",
                          date=h.get("Date", ""),
                          amz={k: v for k, v in h.items() if k != "Date"})
            st, out = put(dict(h, Authorization="AWS %s:%s"
                               % (srv.access_key, sig)))
            assert st == 403 and b"RequestTimeTooSkewed" in out, out[:400]
    # x-amz-date replaces Date: the Date line is empty, the amz header signed;
    # a header value changed after signing is a mismatch
    amz = {"x-amz-date": now, "x-amz-meta-who": "me"}
    sig = sign_v2(srv.secret_key, "PUT", "/ref/k2", amz=amz)
    st, out = put(dict(amz, Authorization="AWS %s:%s"
                       % (srv.access_key, sig)), key="k2")
    assert st == 200, out[:400]
    assert c.head_object(Bucket="ref", Key="k2")["Metadata"] == {"who": "me"}
    st, out = put(dict(amz, **{"x-amz-meta-who": "you", "Authorization":
                               "AWS %s:%s" % (srv.access_key, sig)}), key="k2")
    assert st == 403 and b"SignatureDoesNotMatch" in out
    # the AWS documentation's "+0000" date form
    d = time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime())
    sig = sign_v2(srv.secret_key, "GET", "/ref/k2", date=d)
    st, out = raw(srv, "GET", "/ref/k2", {"Date": d, "Authorization":
                                          "AWS %s:%s" % (srv.access_key, sig)})
    assert st == 200 and out.endswith(b"data"), out[:400]


def test_sigv2_users_are_authorised_as_with_sigv4(s3_server, tmp_path):
    srv = s3_server
    root = v2_client(srv)
    root.create_bucket(Bucket="auth")
    root.put_object(Bucket="auth", Key="k", Body=b"v")
    ak, sk = add_user(srv, str(tmp_path), "reader", "readonly")
    ro = v2_client(srv, ak, sk)
    assert ro.get_object(Bucket="auth", Key="k")["Body"].read() == b"v"
    with pytest.raises(ClientError) as ei:
        ro.put_object(Bucket="auth", Key="k2", Body=b"x")
    assert err(ei.value) == (403, "AccessDenied")
    with pytest.raises(ClientError) as ei:
        ro.delete_object(Bucket="auth", Key="k")
    assert err(ei.value) == (403, "AccessDenied")
    assert root.get_object(Bucket="auth", Key="k")["Body"].read() == b"v"


def test_sigv2_virtual_hosted(storaged):
    srv = storaged(args=["--domain", "s3.test"])
    srv.client().create_bucket(Bucket="vhb")
    now = email.utils.formatdate(usegmt=True)
    host = "vhb.s3.test:%d" % srv.port
    # the resource is /bucket/key although the path is /key
    sig = sign_v2(srv.secret_key, "PUT", "/vhb/o%20k", date=now,
                  ctype="text/x")
    st, out = raw(srv, "PUT", "/o%20k",
                  {"Host": host, "Date": now, "Content-Type": "text/x",
                   "Authorization": "AWS %s:%s" % (srv.access_key, sig)},
                  b"vhost")
    assert st == 200, out[:400]
    sig = sign_v2(srv.secret_key, "GET", "/vhb/?acl", date=now)
    st, out = raw(srv, "GET", "/?acl", {"Host": host, "Date": now,
                  "Authorization": "AWS %s:%s" % (srv.access_key, sig)})
    assert st == 200 and b"AccessControlPolicy" in out, out[:400]
    # signed without the bucket: refused
    sig = sign_v2(srv.secret_key, "GET", "/o%20k", date=now)
    st, out = raw(srv, "GET", "/o%20k", {"Host": host, "Date": now,
                  "Authorization": "AWS %s:%s" % (srv.access_key, sig)})
    assert st == 403 and b"SignatureDoesNotMatch" in out
    assert srv.client().get_object(Bucket="vhb", Key="o k"
                                   )["Body"].read() == b"vhost"


def test_no_sigv2_refuses_both_forms(storaged):
    srv = storaged(args=["--no-sigv2"])
    c = v2_client(srv)
    with pytest.raises(ClientError) as ei:
        c.create_bucket(Bucket="nov2")
    assert err(ei.value) == (400, "InvalidRequest")
    srv.client().create_bucket(Bucket="nov2")
    srv.client().put_object(Bucket="nov2", Key="k", Body=b"x")
    url = c.generate_presigned_url("get_object",
                                   Params={"Bucket": "nov2", "Key": "k"},
                                   ExpiresIn=300)
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(url, timeout=10)
    assert ei.value.code == 400
    assert b"AWS4-HMAC-SHA256" in ei.value.read()


def test_s3cmd_signature_v2(s3_server, tmp_path):
    srv = s3_server
    cfg = tmp_path / "s3cfg"
    s3cmd = s3util.s3cmd_config(srv, cfg, signature_v2=True) + ["--debug"]

    def run(*args, check=True):
        p = subprocess.run(s3cmd + list(args), capture_output=True,
                           timeout=120)
        if check:
            assert p.returncode == 0, p.stderr.decode()[-3000:]
        return p

    src = tmp_path / "src"
    os.makedirs(src / "d")
    (src / "a.txt").write_bytes(b"alpha")
    (src / "d" / "b c.bin").write_bytes(os.urandom(1000))
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(6 * 1024 * 1024 + 3))
    run("mb", "s3://v2cmd")
    p = run("put", str(src / "a.txt"), "s3://v2cmd/a.txt")
    # it really signed with SigV2 (s3cmd's x-amz-date is "... +0000")
    assert b"Using signature v2" in p.stderr
    assert b"SignHeaders: 'PUT\\n" in p.stderr
    run("put", str(big), "s3://v2cmd/big.bin")  # multipart, 2 parts
    run("sync", str(src) + "/", "s3://v2cmd/tree/")
    out = run("ls", "-r", "s3://v2cmd/").stdout.decode()
    assert "tree/d/b c.bin" in out and "big.bin" in out
    run("get", "s3://v2cmd/big.bin", str(tmp_path / "big.out"))
    assert (tmp_path / "big.out").read_bytes() == big.read_bytes()
    v4 = srv.client()
    assert v4.get_object(Bucket="v2cmd", Key="tree/d/b c.bin")["Body"].read() \
        == (src / "d" / "b c.bin").read_bytes()
    run("del", "--recursive", "--force", "s3://v2cmd/")
    run("rb", "s3://v2cmd")
    # a wrong secret is refused
    cfg.write_text(cfg.read_text().replace(srv.secret_key, "wrong-secret"))
    p = run("ls", "s3://", check=False)
    assert p.returncode != 0
    assert b"SignatureDoesNotMatch" in p.stderr or b"403" in p.stderr
