"""Tags against a real storaged: those given with a PutObject
(x-amz-tagging) are listed by GetObjectTagging (URL-decoded, sorted by
key), GET/HEAD carry x-amz-tagging-count (as S3) rather than the raw
header, CopyObject keeps them; Put/DeleteObjectTagging change them (also
of an encrypted object and of an old version) without changing the bytes
or the ETag; bucket tagging; S3's limits."""
import hashlib
import os

import botocore.exceptions
import pytest


def test_put_tagging_is_readable(s3, bucket):
    s3.put_object(Bucket=bucket, Key="t", Body=b"x",
                  Tagging="project=ecfs&team=storage%20core&empty=")
    tags = s3.get_object_tagging(Bucket=bucket, Key="t")["TagSet"]
    assert tags == [{"Key": "empty", "Value": ""},
                    {"Key": "project", "Value": "ecfs"},
                    {"Key": "team", "Value": "storage core"}]
    g = s3.get_object(Bucket=bucket, Key="t")
    hdrs = g["ResponseMetadata"]["HTTPHeaders"]
    assert g["TagCount"] == 3
    assert "x-amz-tagging" not in hdrs
    assert s3.head_object(Bucket=bucket, Key="t")["ResponseMetadata"][
        "HTTPHeaders"]["x-amz-tagging-count"] == "3"
    s3.copy_object(Bucket=bucket, Key="t2", CopySource="%s/t" % bucket)
    assert s3.get_object_tagging(Bucket=bucket, Key="t2")["TagSet"] == tags
    # no tags: an empty set and no count
    s3.put_object(Bucket=bucket, Key="plain", Body=b"y")
    assert s3.get_object_tagging(Bucket=bucket, Key="plain")["TagSet"] == []
    assert "TagCount" not in s3.get_object(Bucket=bucket, Key="plain")
    # an empty x-amz-tagging is no tags either: no count of 0
    for i, empty in enumerate(["", "&"]):
        s3.put_object(Bucket=bucket, Key="e%d" % i, Body=b"y", Tagging=empty)
        assert "TagCount" not in s3.get_object(Bucket=bucket, Key="e%d" % i)
        assert "x-amz-tagging-count" not in s3.head_object(
            Bucket=bucket, Key="e%d" % i)["ResponseMetadata"]["HTTPHeaders"]
        assert s3.get_object_tagging(Bucket=bucket,
                                     Key="e%d" % i)["TagSet"] == []


def _err(exc_info):
    e = exc_info.value.response
    return e["ResponseMetadata"]["HTTPStatusCode"], e["Error"]["Code"]


def test_bad_tagging_header_refused(s3, bucket):
    """As S3: a malformed x-amz-tagging is refused before anything is
    stored (it used to be kept, and GetObjectTagging of a bad escape then
    answered 500 for the object's lifetime)."""
    import botocore.exceptions
    import pytest

    cases = [
        ("a=%ZZ", 400, "InvalidArgument"),        # bad escape
        ("a=1&a=2", 400, "InvalidArgument"),      # duplicate key
        ("&".join("k%d=v" % i for i in range(11)), 400, "BadRequest"),
        ("k" * 129 + "=v", 400, "InvalidTag"),    # key over 128
        ("k=" + "v" * 257, 400, "InvalidTag"),    # value over 256
        ("=v", 400, "InvalidTag"),                # empty key
        ("a=%01", 400, "InvalidTag"),             # control character
        # not UTF-8 (stored, GetObjectTagging's XML was unparseable)
        ("a=%FF", 400, "InvalidArgument"),
        ("%C3=v", 400, "InvalidArgument"),        # truncated sequence
        ("a=%C0%AF", 400, "InvalidArgument"),     # overlong "/"
        ("a=%ED%A0%80", 400, "InvalidArgument"),  # surrogate
    ]
    for tagging, status, code in cases:
        with pytest.raises(botocore.exceptions.ClientError) as ei:
            s3.put_object(Bucket=bucket, Key="bad", Body=b"x",
                          Tagging=tagging)
        assert _err(ei) == (status, code), tagging
        with pytest.raises(botocore.exceptions.ClientError) as ei:
            s3.create_multipart_upload(Bucket=bucket, Key="bad",
                                       Tagging=tagging)
        assert _err(ei) == (status, code), tagging
    with pytest.raises(botocore.exceptions.ClientError):
        s3.head_object(Bucket=bucket, Key="bad")
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    # limits themselves are fine: 10 tags, 128-character keys (counted in
    # characters, not bytes), 256-character values
    ok = "&".join("k%d=v" % i for i in range(8)) + "&" + \
        "%C3%A9" * 128 + "=" + "v" * 256 + "&emoji=%F0%9F%98%80"
    s3.put_object(Bucket=bucket, Key="ok", Body=b"x", Tagging=ok)
    tags = s3.get_object_tagging(Bucket=bucket, Key="ok")["TagSet"]
    # sorted by key: "emoji" < "k0".."k7" < the accented one
    assert len(tags) == 10 and tags[9] == {"Key": "\u00e9" * 128,
                                           "Value": "v" * 256}
    assert tags[0] == {"Key": "emoji", "Value": "\U0001f600"}


def test_copy_object_tagging_directive(s3, bucket):
    """CopyObject copies the source's tags unless x-amz-tagging-directive
    is REPLACE, independently of the metadata directive (as S3)."""
    import botocore.exceptions
    import pytest

    s3.put_object(Bucket=bucket, Key="src", Body=b"x", Tagging="a=1&b=2")
    src_tags = [{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}]

    def tags(key):
        return s3.get_object_tagging(Bucket=bucket, Key=key)["TagSet"]

    # metadata REPLACE keeps the tags (they are not metadata)
    s3.copy_object(Bucket=bucket, Key="m", CopySource="%s/src" % bucket,
                   MetadataDirective="REPLACE", ContentType="text/plain")
    assert tags("m") == src_tags
    assert s3.head_object(Bucket=bucket, Key="m")["ContentType"] == \
        "text/plain"
    # tagging REPLACE takes the request's tags, with or without metadata
    s3.copy_object(Bucket=bucket, Key="t", CopySource="%s/src" % bucket,
                   TaggingDirective="REPLACE", Tagging="z=9")
    assert tags("t") == [{"Key": "z", "Value": "9"}]
    s3.copy_object(Bucket=bucket, Key="mt", CopySource="%s/src" % bucket,
                   MetadataDirective="REPLACE", TaggingDirective="REPLACE",
                   Tagging="y=8")
    assert tags("mt") == [{"Key": "y", "Value": "8"}]
    # REPLACE without x-amz-tagging: no tags
    s3.copy_object(Bucket=bucket, Key="none", CopySource="%s/src" % bucket,
                   TaggingDirective="REPLACE")
    assert tags("none") == []
    assert "TagCount" not in s3.get_object(Bucket=bucket, Key="none")
    # x-amz-tagging without REPLACE is ignored; the source's tags are kept
    s3.copy_object(Bucket=bucket, Key="c", CopySource="%s/src" % bucket,
                   Tagging="z=9")
    assert tags("c") == src_tags
    s3.copy_object(Bucket=bucket, Key="mc", CopySource="%s/src" % bucket,
                   MetadataDirective="REPLACE", Tagging="z=9")
    assert tags("mc") == src_tags
    # a bad directive or bad replacement tags are refused
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.copy_object(Bucket=bucket, Key="x", CopySource="%s/src" % bucket,
                       TaggingDirective="MOVE")
    assert _err(ei) == (400, "InvalidArgument")
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.copy_object(Bucket=bucket, Key="x", CopySource="%s/src" % bucket,
                       TaggingDirective="REPLACE", Tagging="a=1&a=2")
    assert _err(ei) == (400, "InvalidArgument")


def test_tagging_header_twice_refused(s3_server, bucket):
    """x-amz-tagging twice in one PutObject is refused (it was stored
    twice: GET/HEAD then carried two x-amz-tagging-count headers, which
    botocore merges into an unparseable "1, 1")."""
    import hashlib

    import s3util

    body = b"x"
    h = {"host": "127.0.0.1:%d" % s3_server.port, "content-length": "1"}
    s3util.sign_headers("PUT", "/%s/dup" % bucket, "", h,
                        hashlib.sha256(body).hexdigest(),
                        s3_server.access_key, s3_server.secret_key)
    req = "PUT /%s/dup HTTP/1.1\r\n" % bucket + "".join(
        "%s: %s\r\n" % kv for kv in h.items()) + \
        "x-amz-tagging: a=1\r\nx-amz-tagging: b=2\r\n" \
        "Connection: close\r\n\r\n"
    resp = s3util.raw_request(s3_server.port, req.encode() + body)
    assert resp.startswith(b"HTTP/1.1 400"), resp[:200]
    assert b"<Code>InvalidArgument</Code>" in resp


def _ts(d):
    return {"TagSet": [{"Key": k, "Value": v} for k, v in d.items()]}


def test_put_get_delete_object_tagging(s3, bucket):
    body = os.urandom(300 * 1024)
    etag = s3.put_object(Bucket=bucket, Key="o", Body=body,
                         Tagging="z=1")["ETag"]
    s3.put_object_tagging(Bucket=bucket, Key="o",
                          Tagging=_ts({"b": "2", "a": "x y/&=", "c": ""}))
    assert s3.get_object_tagging(Bucket=bucket, Key="o")["TagSet"] == [
        {"Key": "a", "Value": "x y/&="}, {"Key": "b", "Value": "2"},
        {"Key": "c", "Value": ""}]
    g = s3.get_object(Bucket=bucket, Key="o")
    assert g["Body"].read() == body and g["ETag"] == etag
    assert g["TagCount"] == 3
    s3.delete_object_tagging(Bucket=bucket, Key="o")
    assert s3.get_object_tagging(Bucket=bucket, Key="o")["TagSet"] == []
    assert "TagCount" not in s3.get_object(Bucket=bucket, Key="o")
    assert s3.head_object(Bucket=bucket, Key="o")["ETag"] == etag
    # limits, checked before anything changes: all InvalidTag
    s3.put_object_tagging(Bucket=bucket, Key="o", Tagging=_ts(
        {"k%d" % i: "v" for i in range(10)}))
    bad = [{"k%d" % i: "v" for i in range(11)}, {"k" * 129: "v"},
           {"k": "v" * 257}]
    for t in bad:
        with pytest.raises(botocore.exceptions.ClientError) as ei:
            s3.put_object_tagging(Bucket=bucket, Key="o", Tagging=_ts(t))
        assert _err(ei) == (400, "InvalidTag")
    # what boto3 will not send: an empty key, a key twice, bad XML
    from test_s3_conformance import code_of, signed
    srv = s3.ecfs_server
    for body, code in [
            (b"<Tagging><TagSet><Tag><Key></Key><Value>v</Value></Tag>"
             b"</TagSet></Tagging>", "InvalidTag"),
            (b"<Tagging><TagSet><Tag><Key>a</Key><Value>1</Value></Tag>"
             b"<Tag><Key>a</Key><Value>2</Value></Tag></TagSet></Tagging>",
             "InvalidTag"),
            (b"<Tagging><TagSet><Tag><Key>a</Key></Tag></TagSet></Tagging>",
             "MalformedXML"),
            (b"<Tagging><TagSet>", "MalformedXML")]:
        st, _, rb = signed(srv, "PUT", "/%s/o" % bucket, [("tagging", "")],
                           body=body)
        assert (st, code_of(rb)) == (400, code), body
    assert len(s3.get_object_tagging(Bucket=bucket, Key="o")["TagSet"]) == 10
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.put_object_tagging(Bucket=bucket, Key="missing", Tagging=_ts({}))
    assert _err(ei) == (404, "NoSuchKey")


def test_tagging_an_encrypted_object_keeps_it_encrypted(s3, bucket):
    from test_s3_header_audit import drives_hold
    key = os.urandom(32)
    ssec = dict(SSECustomerAlgorithm="AES256", SSECustomerKey=key)
    marker = b"tag-marker-" + os.urandom(8).hex().encode()
    body = marker * 5000
    s3.put_object(Bucket=bucket, Key="e", Body=body, **ssec)
    s3.put_object_tagging(Bucket=bucket, Key="e", Tagging=_ts({"t": "1"}))
    assert s3.get_object(Bucket=bucket, Key="e", **ssec)["Body"].read() == body
    assert s3.get_object_tagging(Bucket=bucket, Key="e")["TagSet"] == [
        {"Key": "t", "Value": "1"}]
    assert not drives_hold(s3.ecfs_server, marker)


def test_tagging_a_version(s3, bucket):
    s3.put_bucket_versioning(Bucket=bucket,
                             VersioningConfiguration={"Status": "Enabled"})
    v1 = s3.put_object(Bucket=bucket, Key="v", Body=b"one",
                       Tagging="gen=1")["VersionId"]
    v2 = s3.put_object(Bucket=bucket, Key="v", Body=b"two")["VersionId"]
    r = s3.put_object_tagging(Bucket=bucket, Key="v", VersionId=v1,
                              Tagging=_ts({"old": "yes"}))
    assert r["VersionId"] == v1
    assert s3.get_object_tagging(Bucket=bucket, Key="v", VersionId=v1)[
        "TagSet"] == [{"Key": "old", "Value": "yes"}]
    assert s3.get_object_tagging(Bucket=bucket, Key="v")["TagSet"] == []
    assert s3.get_object(Bucket=bucket, Key="v", VersionId=v1)[
        "Body"].read() == b"one"
    assert s3.get_object(Bucket=bucket, Key="v")["Body"].read() == b"two"
    vs = s3.list_object_versions(Bucket=bucket)["Versions"]
    assert sorted(v["VersionId"] for v in vs) == sorted([v1, v2])
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.get_object_tagging(Bucket=bucket, Key="v",
                              VersionId="0" * 16)
    assert _err(ei)[0] == 404


def test_bucket_tagging(s3, bucket):
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.get_bucket_tagging(Bucket=bucket)
    assert _err(ei) == (404, "NoSuchTagSet")
    s3.put_bucket_tagging(Bucket=bucket, Tagging=_ts({"team": "ml",
                                                      "cost": "42"}))
    assert s3.get_bucket_tagging(Bucket=bucket)["TagSet"] == [
        {"Key": "cost", "Value": "42"}, {"Key": "team", "Value": "ml"}]
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.put_bucket_tagging(Bucket=bucket, Tagging=_ts(
            {"k%d" % i: "v" for i in range(51)}))
    assert _err(ei) == (400, "InvalidTag")
    assert len(s3.get_bucket_tagging(Bucket=bucket)["TagSet"]) == 2
    s3.delete_bucket_tagging(Bucket=bucket)
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.get_bucket_tagging(Bucket=bucket)
    assert _err(ei) == (404, "NoSuchTagSet")
