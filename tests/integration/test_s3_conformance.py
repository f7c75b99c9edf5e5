"""S3 conformance details checked against AWS's documented behaviour (issue
18's core deviations): invalid UTF-8 keys, repeated CompleteMultipartUpload,
copy-source-range syntax, and the like. Raw signed requests where boto3
would normalise what we want to send."""
import hashlib
import http.client
import subprocess
import xml.etree.ElementTree as ET

import botocore.exceptions

import s3util
from conftest import STORAGED


def signed(srv, method, path, query=(), headers=None, body=b""):
    """One SigV4-signed request. @path is bytes or str, unencoded; @query a
    list of (name, value). Returns (status, headers, body)."""
    h = {"host": "127.0.0.1:%d" % srv.port}
    h.update(headers or {})
    s3util.sign_headers(method, path, list(query), h,
                        hashlib.sha256(body).hexdigest(),
                        srv.access_key, srv.secret_key)
    target = s3util.uri_encode(path, True)
    if query:
        target += "?" + "&".join(
            "%s=%s" % (s3util.uri_encode(k, False), s3util.uri_encode(v, False))
            for k, v in query)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        conn.request(method, target, body=body or None, headers=h)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def code_of(body):
    return ET.fromstring(body).findtext("Code")


def test_non_utf8_keys_are_refused_and_listings_stay_well_formed(s3, bucket):
    srv = s3.ecfs_server
    s3.put_object(Bucket=bucket, Key="ok-\u00e9", Body=b"x")
    bad = [b"a\xff", b"\xc0\xae", b"x\xe0\x80\xaf", b"\xed\xa0\x80",
           b"\xf4\x90\x80\x80", b"trunc\xe2\x82"]
    for key in bad:
        path = b"/" + bucket.encode() + b"/" + key
        st, _, body = signed(srv, "PUT", path, body=b"data")
        assert st == 400 and code_of(body) == "InvalidURI", (key, st, body)
        st, _, body = signed(srv, "GET", path)
        assert st == 400 and code_of(body) == "InvalidURI", (key, st, body)
        # a copy whose source key is not UTF-8 is refused the same way
        st, _, body = signed(srv, "PUT", "/%s/dst" % bucket, headers={
            "x-amz-copy-source": s3util.uri_encode(path, True)})
        assert st == 400 and code_of(body) == "InvalidURI", (key, st, body)
    # nothing was stored; every listing parses (XML well-formed)
    for q in ([], [("list-type", "2")], [("uploads", "")]):
        st, _, body = signed(srv, "GET", "/" + bucket, query=q)
        assert st == 200, body
        ET.fromstring(body)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == ["ok-\u00e9"]
    # a prefix that is not UTF-8 is echoed without breaking the document
    st, _, body = signed(srv, "GET", "/" + bucket,
                         query=[("prefix", b"\xff")])
    assert st == 200
    assert ET.fromstring(body).findtext(
        "{http://s3.amazonaws.com/doc/2006-03-01/}Prefix") == "\ufffd"


def test_repeated_complete_multipart_is_answered(s3, bucket):
    import botocore.exceptions
    import pytest
    data = [b"a" * (5 << 20), b"tail"]
    up = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    parts = []
    for i, d in enumerate(data, 1):
        e = s3.upload_part(Bucket=bucket, Key="k", UploadId=up, PartNumber=i,
                           Body=d)["ETag"]
        parts.append({"PartNumber": i, "ETag": e})
    first = s3.complete_multipart_upload(
        Bucket=bucket, Key="k", UploadId=up, MultipartUpload={"Parts": parts})
    # a client that lost the answer retries: the same result, not 404
    again = s3.complete_multipart_upload(
        Bucket=bucket, Key="k", UploadId=up, MultipartUpload={"Parts": parts})
    assert again["ETag"] == first["ETag"] and again["ETag"].endswith('-2"')
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"".join(data)
    head = s3.head_object(Bucket=bucket, Key="k")
    assert head["ETag"] == first["ETag"]
    assert not any(h.startswith("x-ecfs-") for h in
                   head["ResponseMetadata"]["HTTPHeaders"])
    # a copy is a new object: completing the upload into it is not a repeat
    s3.copy_object(Bucket=bucket, Key="c", CopySource={"Bucket": bucket,
                                                       "Key": "k"})

    def nosuch(key, uid, ps):
        with pytest.raises(botocore.exceptions.ClientError) as ei:
            s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=uid,
                                         MultipartUpload={"Parts": ps})
        assert ei.value.response["Error"]["Code"] == "NoSuchUpload"

    nosuch("c", up, parts)
    nosuch("k", up, parts[:1])  # another part list: not the same completion
    nosuch("k", "not-" + up, parts)  # another upload id
    # once the object is replaced the upload is gone for good
    s3.put_object(Bucket=bucket, Key="k", Body=b"new")
    nosuch("k", up, parts)


def test_complete_listing_a_part_twice_is_invalid_part_order(s3, bucket):
    """AWS documents InvalidPartOrder for a list not in ascending order; a
    part number listed twice is not ascending (RGW uses the last one:
    storaged follows AWS). Nothing is stored and the upload stays."""
    import botocore.exceptions
    import pytest
    up = s3.create_multipart_upload(Bucket=bucket, Key="d")["UploadId"]
    e1 = s3.upload_part(Bucket=bucket, Key="d", UploadId=up, PartNumber=1,
                        Body=b"one")["ETag"]
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.complete_multipart_upload(
            Bucket=bucket, Key="d", UploadId=up, MultipartUpload={"Parts": [
                {"PartNumber": 1, "ETag": e1}, {"PartNumber": 1, "ETag": e1}]})
    assert ei.value.response["Error"]["Code"] == "InvalidPartOrder"
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    with pytest.raises(botocore.exceptions.ClientError):
        s3.head_object(Bucket=bucket, Key="d")
    s3.complete_multipart_upload(Bucket=bucket, Key="d", UploadId=up,
                                 MultipartUpload={"Parts": [
                                     {"PartNumber": 1, "ETag": e1}]})
    assert s3.get_object(Bucket=bucket, Key="d")["Body"].read() == b"one"


def test_checksum_sha256_malformed_vs_wrong(s3, bucket):
    """AWS: a value that is not base64 of 32 bytes is 400 InvalidRequest
    (ceph/s3-tests#644: s3-tests expects RGW's BadDigest there); a
    well-formed value that does not match the body is 400 BadDigest.
    Neither stores anything."""
    import base64
    srv = s3.ecfs_server
    body = b"A" * 1024
    good = base64.b64encode(hashlib.sha256(body).digest()).decode()
    wrong = base64.b64encode(hashlib.sha256(b"other").digest()).decode()
    for bad, code in (("bad", "InvalidRequest"), ("!!!!", "InvalidRequest"),
                      (good[:-4], "InvalidRequest"),
                      (wrong, "BadDigest")):
        st, _, data = signed(srv, "PUT", "/%s/ck" % bucket, body=body,
                             headers={"x-amz-checksum-sha256": bad})
        assert st == 400 and code_of(data) == code, (bad, data)
    assert s3.list_objects_v2(Bucket=bucket).get("Contents", []) == []
    st, h, _ = signed(srv, "PUT", "/%s/ck" % bucket, body=body,
                      headers={"x-amz-checksum-sha256": good})
    assert st == 200 and h.get("x-amz-checksum-sha256") == good


def test_list_v2_owner_only_with_fetch_owner_true(s3, bucket):
    s3.put_object(Bucket=bucket, Key="o", Body=b"x")
    srv = s3.ecfs_server
    ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"
    for q, want in (([], False), ([("fetch-owner", "false")], False),
                    ([("fetch-owner", "true")], True)):
        st, _, body = signed(srv, "GET", "/" + bucket,
                             query=[("list-type", "2")] + q)
        assert st == 200
        c = ET.fromstring(body).find(ns + "Contents")
        assert (c.find(ns + "Owner") is not None) == want, (q, body)
    assert "Owner" not in s3.list_objects_v2(Bucket=bucket)["Contents"][0]
    assert "Owner" in s3.list_objects_v2(Bucket=bucket,
                                         FetchOwner=True)["Contents"][0]
    assert "Owner" in s3.list_objects(Bucket=bucket)["Contents"][0]  # v1


def test_list_v2_empty_continuation_token_is_absent(s3, bucket):
    """AWS (and ceph/s3-tests test_bucket_listv2_continuationtoken_empty):
    continuation-token= lists from the start and echoes the empty token; a
    token that is not one is still 400 InvalidArgument."""
    import botocore.exceptions
    import pytest
    names = ["bar", "baz", "foo"]
    for k in names:
        s3.put_object(Bucket=bucket, Key=k, Body=b"x")
    r = s3.list_objects_v2(Bucket=bucket, ContinuationToken="")
    assert r["ContinuationToken"] == "" and r["IsTruncated"] is False
    assert [o["Key"] for o in r["Contents"]] == names
    r = s3.list_objects_v2(Bucket=bucket, ContinuationToken="", MaxKeys=2)
    r = s3.list_objects_v2(Bucket=bucket,
                           ContinuationToken=r["NextContinuationToken"])
    assert [o["Key"] for o in r["Contents"]] == ["foo"]
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.list_objects_v2(Bucket=bucket, ContinuationToken="!")
    assert ei.value.response["Error"]["Code"] == "InvalidArgument"


def test_content_encoding_aws_chunked_is_stripped(s3, bucket):
    """As S3 (ceph/s3-tests test_object_content_encoding_aws_chunked):
    aws-chunked is transport framing, never stored with the object."""
    for sent, want in (("gzip", "gzip"), ("deflate, gzip", "deflate, gzip"),
                       ("gzip, aws-chunked", "gzip"),
                       ("aws-chunked, gzip", "gzip"),
                       ("AWS-Chunked,br", "br"),
                       ("aws-chunked", None),
                       ("aws-chunked, aws-chunked", None)):
        s3.put_object(Bucket=bucket, Key="e", Body=b"x", ContentEncoding=sent)
        h = s3.head_object(Bucket=bucket, Key="e")
        assert h.get("ContentEncoding") == want, (sent, h.get("ContentEncoding"))


def test_options_preflight_without_cors(s3, bucket):
    """OPTIONS (a browser's CORS preflight, unsigned) on a bucket without a
    CORS configuration: what S3 answers (400 without Origin or the method,
    else 403 "CORS is not enabled for this bucket"), not 405."""
    srv = s3.ecfs_server
    s3.put_object(Bucket=bucket, Key="o", Body=b"x")
    for path in ("/%s/o" % bucket, "/%s" % bucket):
        for hdrs, st, msg in (
                ({}, 400, "Origin request header needed"),
                ({"Origin": "http://a.example"}, 400,
                 "Access-Control-Request-Method"),
                ({"Origin": "http://a.example",
                  "Access-Control-Request-Method": "GET"}, 403,
                 "CORS is not enabled for this bucket")):
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
            try:
                conn.request("OPTIONS", path, headers=hdrs)
                r = conn.getresponse()
                body = r.read()
                assert r.status == st, (path, hdrs, body)
                assert msg in ET.fromstring(body).findtext("Message")
                assert r.getheader("access-control-allow-origin") is None
                # the connection stays usable
                conn.request("GET", "/health/live")
                assert conn.getresponse().status == 200
            finally:
                conn.close()


def test_list_object_versions_of_an_unversioned_bucket(s3, bucket):
    """As S3 for a bucket that never had versioning: each key's one version
    is "null" and latest; key-marker pages; a version-id-marker other than
    "null", or without a key-marker, is 400; the null version can be read
    and deleted by id."""
    import botocore.exceptions
    import pytest
    keys = ["a", "b/1", "b/2", "c"]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=k.encode())
    r = s3.list_object_versions(Bucket=bucket)
    assert [(v["Key"], v["VersionId"], v["IsLatest"], v["Size"])
            for v in r["Versions"]] == [(k, "null", True, len(k)) for k in keys]
    assert "DeleteMarkers" not in r and r["IsTruncated"] is False
    assert r["Versions"][0]["ETag"] == s3.head_object(
        Bucket=bucket, Key="a")["ETag"]
    r = s3.list_object_versions(Bucket=bucket, Delimiter="/")
    assert [v["Key"] for v in r["Versions"]] == ["a", "c"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["b/"]
    seen, km, vm = [], None, None
    while True:
        kw = {"KeyMarker": km, "VersionIdMarker": vm} if km else {}
        r = s3.list_object_versions(Bucket=bucket, MaxKeys=1, **kw)
        seen += [v["Key"] for v in r["Versions"]]
        if not r["IsTruncated"]:
            break
        km, vm = r["NextKeyMarker"], r["NextVersionIdMarker"]
        assert vm == "null"
    assert seen == keys
    for bad in ({"KeyMarker": "a", "VersionIdMarker": "v1"},
                {"VersionIdMarker": "null"}):
        with pytest.raises(botocore.exceptions.ClientError) as ei:
            s3.list_object_versions(Bucket=bucket, **bad)
        assert ei.value.response["Error"]["Code"] == "InvalidArgument"
    assert s3.get_object(Bucket=bucket, Key="a",
                         VersionId="null")["Body"].read() == b"a"
    s3.delete_objects(Bucket=bucket, Delete={"Objects": [
        {"Key": k, "VersionId": "null"} for k in keys]})
    assert "Versions" not in s3.list_object_versions(Bucket=bucket)
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.list_object_versions(Bucket="no-such-bucket-here")
    assert ei.value.response["Error"]["Code"] == "NoSuchBucket"


def _create_error(c, name, loc=None):
    """(HTTP status, error code) of CreateBucket @name with LocationConstraint
    @loc (None: no CreateBucketConfiguration), or (200, None)."""
    kw = {"Bucket": name}
    if loc is not None:
        kw["CreateBucketConfiguration"] = {"LocationConstraint": loc}
    try:
        r = c.create_bucket(**kw)
        return r["ResponseMetadata"]["HTTPStatusCode"], None
    except botocore.exceptions.ClientError as e:
        return (e.response["ResponseMetadata"]["HTTPStatusCode"],
                e.response["Error"]["Code"])


def test_create_bucket_location_constraint_us_east_1(s3):
    """The default region is us-east-1: as AWS there, no LocationConstraint
    (or an empty one) creates the bucket, naming us-east-1 itself is
    InvalidLocationConstraint, and another region is refused (this server
    cannot put a bucket there), not ignored. Nothing is created by a
    refused request; GetBucketLocation answers empty."""
    assert _create_error(s3, "loc-a") == (200, None)
    assert _create_error(s3, "loc-b", "") == (200, None)
    assert _create_error(s3, "loc-c", "us-east-1") == \
        (400, "InvalidLocationConstraint")
    assert _create_error(s3, "loc-d", "eu-west-1") == \
        (400, "IllegalLocationConstraintException")
    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert names == ["loc-a", "loc-b"]
    assert s3.get_bucket_location(Bucket="loc-a").get(
        "LocationConstraint") in (None, "")
    # a body that is not a CreateBucketConfiguration is MalformedXML, and a
    # directory-bucket configuration is not implemented
    srv = s3.ecfs_server
    st, _, body = signed(srv, "PUT", "/loc-e", body=b"<Nope/>")
    assert (st, code_of(body)) == (400, "MalformedXML")
    st, _, body = signed(
        srv, "PUT", "/loc-e",
        body=b"<CreateBucketConfiguration><Location><Type>AvailabilityZone"
             b"</Type><Name>use1-az4</Name></Location>"
             b"</CreateBucketConfiguration>")
    assert (st, code_of(body)) == (501, "NotImplemented")
    assert "loc-e" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_region_option_names_the_one_region(storaged):
    """`serve --region eu-west-1`: CreateBucket must name that region (as
    AWS at a regional endpoint: IllegalLocationConstraintException without
    it or with another), GetBucketLocation and HeadBucket answer it, and
    re-creating one's own bucket is 409 BucketAlreadyOwnedByYou (only
    us-east-1 answers 200)."""
    srv = storaged(ndrives=4, args=["--region", "eu-west-1"])
    c = srv.client()
    assert _create_error(c, "r-a") == \
        (400, "IllegalLocationConstraintException")
    assert _create_error(c, "r-a", "us-west-2") == \
        (400, "IllegalLocationConstraintException")
    assert _create_error(c, "r-a", "eu-west-1") == (200, None)
    assert c.get_bucket_location(Bucket="r-a")["LocationConstraint"] == \
        "eu-west-1"
    h = c.head_bucket(Bucket="r-a")["ResponseMetadata"]["HTTPHeaders"]
    assert h["x-amz-bucket-region"] == "eu-west-1"
    assert _create_error(c, "r-a", "eu-west-1") == \
        (409, "BucketAlreadyOwnedByYou")
    assert [b["Name"] for b in c.list_buckets()["Buckets"]] == ["r-a"]


def test_region_option_is_checked(tmp_path):
    """A --region that is not a plain region name is refused at start
    (exit 2): it goes into XML and headers as it is."""
    for bad in ("", "EU-WEST-1", "eu west", "-x", "a" * 33, "x<y"):
        p = subprocess.run([STORAGED, "serve", "--address", "127.0.0.1:1",
                            "--region", bad, str(tmp_path)],
                           capture_output=True, timeout=30)
        assert p.returncode == 2, (bad, p.returncode, p.stderr)
        assert b"--region" in p.stderr


def _complete(s3, bucket, key, body, hdrs=None, upload=None):
    """A one-part multipart upload of @body to @key (or the open @upload,
    (id, parts)), completed with @hdrs added to the signed
    CompleteMultipartUpload (this botocore has no IfMatch/IfNoneMatch
    there). (status, error code or ETag, (upload id, parts))."""
    if upload is None:
        uid = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        r = s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=1,
                           Body=body)
        upload = (uid, [{"ETag": r["ETag"], "PartNumber": 1}])

    def add(request, **kw):
        for k, v in (hdrs or {}).items():
            request.headers[k] = v
    ev = s3.meta.events
    ev.register("before-sign.s3.CompleteMultipartUpload", add)
    try:
        r = s3.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload[0],
            MultipartUpload={"Parts": upload[1]})
        return 200, r["ETag"].strip('"'), upload
    except botocore.exceptions.ClientError as e:
        return (e.response["ResponseMetadata"]["HTTPStatusCode"],
                e.response["Error"]["Code"], upload)
    finally:
        ev.unregister("before-sign.s3.CompleteMultipartUpload", add)


def test_complete_multipart_conditional_write(s3, bucket):
    """If-None-Match and If-Match on CompleteMultipartUpload, as on
    PutObject (AWS: conditional writes): a Complete that fails its
    condition answers 412 (404 NoSuchKey for If-Match on a missing key),
    changes nothing, and leaves the upload open, so the same upload
    completes once the condition holds."""
    st, etag, _ = _complete(s3, bucket, "k", b"one", {"If-Match": "*"})
    assert (st, etag) == (404, "NoSuchKey")
    st, e1, _ = _complete(s3, bucket, "k", b"one", {"If-None-Match": "*"})
    assert st == 200
    st, code, up = _complete(s3, bucket, "k", b"two", {"If-None-Match": "*"})
    assert (st, code) == (412, "PreconditionFailed")
    st, code, _ = _complete(s3, bucket, "k", b"two",
                            {"If-None-Match": '"%s"' % e1})
    assert (st, code) == (412, "PreconditionFailed")
    st, code, _ = _complete(s3, bucket, "k", b"two", {"If-Match": "bad"})
    assert (st, code) == (412, "PreconditionFailed")
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"one"
    # the upload refused above is still open and completes now
    st, e2, _ = _complete(s3, bucket, "k", None, {"If-Match": '"%s"' % e1},
                          upload=up)
    assert st == 200 and e2 != e1
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"two"
    st, _, _ = _complete(s3, bucket, "k", b"three", {"If-None-Match": "other"})
    assert st == 200
    s3.delete_object(Bucket=bucket, Key="k")
    st, code, _ = _complete(s3, bucket, "k", b"four", {"If-Match": '"%s"' % e2})
    assert (st, code) == (404, "NoSuchKey")
    uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert len(uploads) == 4  # each refused Complete left its upload


def test_complete_multipart_conditional_versioned(s3, bucket):
    """The same on a versioned bucket: a refused conditional Complete adds
    no version; If-Match compares the current version only."""
    s3.put_bucket_versioning(Bucket=bucket,
                             VersioningConfiguration={"Status": "Enabled"})
    st, e1, _ = _complete(s3, bucket, "v", b"one", {"If-None-Match": "*"})
    assert st == 200
    st, e2, _ = _complete(s3, bucket, "v", b"two")
    assert st == 200
    st, code, _ = _complete(s3, bucket, "v", b"x", {"If-Match": '"%s"' % e1})
    assert (st, code) == (412, "PreconditionFailed")
    st, code, _ = _complete(s3, bucket, "v", b"x", {"If-None-Match": "*"})
    assert (st, code) == (412, "PreconditionFailed")
    vs = s3.list_object_versions(Bucket=bucket, Prefix="v")["Versions"]
    assert len(vs) == 2
    st, _, _ = _complete(s3, bucket, "v", b"three", {"If-Match": '"%s"' % e2})
    assert st == 200
    vs = s3.list_object_versions(Bucket=bucket, Prefix="v")["Versions"]
    assert len(vs) == 3
    assert s3.get_object(Bucket=bucket, Key="v")["Body"].read() == b"three"


def test_bucket_logging_is_refused_not_ignored(s3, bucket):
    """Server access logging is not built: Put/GetBucketLogging answer 501
    NotImplemented (never a 200 that would let a client believe requests
    are logged), for the owner as for anyone."""
    import botocore.exceptions
    import pytest
    for call, kw in ((s3.put_bucket_logging, {"BucketLoggingStatus": {
            "LoggingEnabled": {"TargetBucket": bucket,
                               "TargetPrefix": "log/"}}}),
                     (s3.put_bucket_logging, {"BucketLoggingStatus": {}}),
                     (s3.get_bucket_logging, {})):
        with pytest.raises(botocore.exceptions.ClientError) as ei:
            call(Bucket=bucket, **kw)
        r = ei.value.response
        assert (r["ResponseMetadata"]["HTTPStatusCode"],
                r["Error"]["Code"]) == (501, "NotImplemented")
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)


def test_bad_digest_ends_the_connection(s3, bucket):
    """A body that does not match its Content-MD5 may be mis-framed: a
    client that sends more bytes than its Content-Length (s3-tests'
    content-length-below test) leaves the rest on the connection, which
    must not be read as the next request. storaged answers 400 BadDigest
    (a Content-MD5 or an x-amz-checksum-* that does not match) and closes;
    a retry on a new connection gets BadDigest again."""
    import base64
    import socket

    srv = s3.ecfs_server
    md5 = base64.b64encode(hashlib.md5(b"bar").digest()).decode()
    # Content-MD5 (botocore 1.29), x-amz-checksum-crc32 (1.43's default)
    for extra in ({"content-md5": md5},
                  {"x-amz-checksum-crc32": s3util.crc32_b64(b"bar")},
                  {"content-md5": md5}):
        h = {"host": "127.0.0.1:%d" % srv.port, "content-length": "2"}
        h.update(extra)
        s3util.sign_headers("PUT", "/%s/foo" % bucket, [], h,
                            "UNSIGNED-PAYLOAD", srv.access_key,
                            srv.secret_key)
        head = "PUT /%s/foo HTTP/1.1\r\n" % bucket + "".join(
            "%s: %s\r\n" % kv for kv in h.items()) + "\r\n"
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        try:
            # "bar" with a Content-Length of 2, then a second request line
            s.sendall(head.encode() + b"bar" + b"GET / HTTP/1.1\r\n\r\n")
            out = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                out += b
        finally:
            s.close()
        assert s3util.status_of(out) == 400 and b"BadDigest" in out, out
        assert out.count(b"HTTP/1.1 ") == 1, out  # closed after the answer
        assert b"Connection: close" in out
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)


def test_sigv4_with_a_date_header_and_no_x_amz_date(s3, bucket):
    """botocore's own SigV4 signer (as without awscrt) signs a request that
    has a Date header with that Date and no x-amz-date (s3-tests'
    test_object_create_date_and_amz_date). AWS takes Date as the request
    time then; so does storaged (skew: s3_auth_test)."""
    from email.utils import formatdate

    import botocore.auth
    import botocore.awsrequest
    import botocore.credentials

    srv = s3.ecfs_server
    creds = botocore.credentials.Credentials(srv.access_key, srv.secret_key)

    def put(date, body=b"dated"):
        req = botocore.awsrequest.AWSRequest(
            method="PUT", url="%s/%s/d" % (srv.endpoint, bucket), data=body,
            headers={"Date": date})
        botocore.auth.S3SigV4Auth(creds, "s3", "us-east-1").add_auth(req)
        assert "X-Amz-Date" not in req.headers and "Date" in req.headers
        p = req.prepare()
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        try:
            conn.request("PUT", p.url[len(srv.endpoint):], body=body,
                         headers=dict(p.headers))
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    st, out = put(formatdate(usegmt=True))
    assert st == 200, out
    assert s3.get_object(Bucket=bucket, Key="d")["Body"].read() == b"dated"


def test_user_metadata_rfc2047(s3, bucket):
    """AWS (UsingMetadata, "User-defined object metadata"): non-ASCII
    metadata values are "character decoded as per RFC 2047 before storing
    and encoded as per RFC 2047 to make them mail-safe before returning. If
    the string contains only US-ASCII characters, it is presented as is."
    s3-tests' test_object_set_get_unicode_metadata sends UTF-8 bytes this
    way (a before-call hook past botocore's ASCII check)."""
    from email.header import decode_header

    srv = s3.ecfs_server

    def rfc2047(v):
        return "".join(p.decode(cs) if cs else
                       (p.decode() if isinstance(p, bytes) else p)
                       for p, cs in decode_header(v))

    # UTF-8 bytes in the header, as botocore sends a str with a hook
    def hook(**kw):
        kw["params"]["headers"]["x-amz-meta-meta1"] = "Hello World\u00e9"
    s3.meta.events.register("before-call.s3.PutObject", hook)
    try:
        s3.put_object(Bucket=bucket, Key="u", Body=b"bar")
    finally:
        s3.meta.events.unregister("before-call.s3.PutObject", hook)
    got = s3.head_object(Bucket=bucket, Key="u")["Metadata"]["meta1"]
    assert got == "=?UTF-8?B?SGVsbG8gV29ybGTDqQ==?="
    assert rfc2047(got) == "Hello World\u00e9"
    got = s3.get_object(Bucket=bucket, Key="u")["Metadata"]["meta1"]
    assert rfc2047(got) == "Hello World\u00e9"

    # encoded-words are decoded before storing: Q and B, a word that is
    # ASCII text comes back as that text, adjacent words join, a word in an
    # unknown charset stays as sent, CR LF never comes back raw
    hdrs = {"x-amz-meta-q": "=?UTF-8?Q?caf=C3=A9_au_lait?=",
            "x-amz-meta-ascii": "=?UTF-8?B?aGVsbG8=?=",
            "x-amz-meta-adj": "=?ISO-8859-1?Q?caf=E9?= =?UTF-8?B?IQ==?=",
            "x-amz-meta-other": "=?KOI8-R?B?w6k=?=",
            "x-amz-meta-crlf": "=?UTF-8?B?YQ0KYg==?=",
            "x-amz-meta-plain": "plain value"}
    st, _, body = signed(srv, "PUT", "/%s/w" % bucket, headers=hdrs,
                         body=b"x")
    assert st == 200, body
    for method in ("GET", "HEAD"):
        st, h, _ = signed(srv, method, "/%s/w" % bucket)
        assert st == 200
        assert h["x-amz-meta-q"] == "=?UTF-8?B?Y2Fmw6kgYXUgbGFpdA==?="
        assert rfc2047(h["x-amz-meta-q"]) == "caf\u00e9 au lait"
        assert h["x-amz-meta-ascii"] == "hello"
        assert rfc2047(h["x-amz-meta-adj"]) == "caf\u00e9!"
        assert h["x-amz-meta-other"] == "=?KOI8-R?B?w6k=?="
        assert h["x-amz-meta-crlf"] == "=?UTF-8?B?YQ0KYg==?="
        assert h["x-amz-meta-plain"] == "plain value"

    # a copy keeps the stored (decoded) value; REPLACE decodes the new one
    s3.copy_object(Bucket=bucket, Key="c", CopySource="%s/w" % bucket)
    st, h, _ = signed(srv, "HEAD", "/%s/c" % bucket)
    assert h["x-amz-meta-q"] == "=?UTF-8?B?Y2Fmw6kgYXUgbGFpdA==?="
    st, _, body = signed(srv, "PUT", "/%s/r" % bucket, headers={
        "x-amz-copy-source": "/%s/w" % bucket,
        "x-amz-metadata-directive": "REPLACE",
        "x-amz-meta-n": "=?UTF-8?Q?=E2=82=AC?="})
    assert st == 200, body
    st, h, _ = signed(srv, "HEAD", "/%s/r" % bucket)
    assert rfc2047(h["x-amz-meta-n"]) == "\u20ac" and "x-amz-meta-q" not in h

    # multipart: the upload's metadata goes to the object
    st, _, body = signed(srv, "POST", "/%s/m" % bucket, query=[("uploads", "")],
                         headers={"x-amz-meta-m": "=?UTF-8?B?w6k=?="})
    assert st == 200, body
    up = ET.fromstring(body).findtext(
        "{http://s3.amazonaws.com/doc/2006-03-01/}UploadId")
    e = s3.upload_part(Bucket=bucket, Key="m", UploadId=up, PartNumber=1,
                       Body=b"p")["ETag"]
    s3.complete_multipart_upload(
        Bucket=bucket, Key="m", UploadId=up,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]})
    got = s3.head_object(Bucket=bucket, Key="m")["Metadata"]["m"]
    assert got == "=?UTF-8?B?w6k=?="
