"""Tags given with a PutObject (x-amz-tagging) against a real storaged:
GetObjectTagging lists them (URL-decoded, in order), GET/HEAD carry
x-amz-tagging-count (as S3) rather than the raw header, and CopyObject keeps
them."""


def test_put_tagging_is_readable(s3, bucket):
    s3.put_object(Bucket=bucket, Key="t", Body=b"x",
                  Tagging="project=ecfs&team=storage%20core&empty=")
    tags = s3.get_object_tagging(Bucket=bucket, Key="t")["TagSet"]
    assert tags == [{"Key": "project", "Value": "ecfs"},
                    {"Key": "team", "Value": "storage core"},
                    {"Key": "empty", "Value": ""}]
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
    assert len(tags) == 10 and tags[8] == {"Key": "\u00e9" * 128,
                                           "Value": "v" * 256}
    assert tags[9] == {"Key": "emoji", "Value": "\U0001f600"}


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
