"""Conditional deletes against a real storaged (issue 18): DeleteObject
with If-Match, x-amz-if-match-last-modified-time and x-amz-if-match-size,
and DeleteObjects with <ETag>, <LastModifiedTime> and <Size> per object,
on an unversioned bucket, on the current version of a versioned one and
on a named version (storaged/s3/versioning.c, store/obj_ver.c).

The botocore of this machine does not know these parameters yet, so the
headers and the XML are added to boto3's own (signed) requests by event
hooks; the server sees exactly what a newer SDK sends."""
import base64
import contextlib
import datetime
import hashlib
from email.utils import format_datetime
from xml.sax.saxutils import escape

import pytest
from botocore.exceptions import ClientError


def _err(exc_info):
    e = exc_info.value.response
    return e["ResponseMetadata"]["HTTPStatusCode"], e["Error"]["Code"]


@contextlib.contextmanager
def _headers(s3, op, hdrs):
    """Adds @hdrs to every @op request made inside the block."""
    def add(request, **kw):
        for k, v in hdrs.items():
            request.headers[k] = v
    ev = s3.meta.events
    ev.register("before-sign.s3." + op, add)
    try:
        yield
    finally:
        ev.unregister("before-sign.s3." + op, add)


def _delete(s3, bucket, key, hdrs, **kw):
    with _headers(s3, "DeleteObject", hdrs):
        return s3.delete_object(Bucket=bucket, Key=key, **kw)


def _delete_objects(s3, bucket, objs):
    """DeleteObjects with the per-object conditions of @objs (dicts of
    Key, VersionId, ETag, LastModifiedTime, Size): the body is rewritten
    before signing, with its Content-MD5."""
    xml = "<Delete>"
    for o in objs:
        xml += "<Object>" + "".join(
            "<%s>%s</%s>" % (k, escape(str(v)), k) for k, v in o.items()) + \
            "</Object>"
    xml = (xml + "</Delete>").encode()

    def body(request, **kw):
        request.data = xml
        # (botocore's headers append on assignment: delete first)
        for h in ("Content-MD5", "Content-Length", "x-amz-content-sha256"):
            if h in request.headers:
                del request.headers[h]
        request.headers["Content-MD5"] = base64.b64encode(
            hashlib.md5(xml).digest()).decode()
    ev = s3.meta.events
    ev.register("before-sign.s3.DeleteObjects", body)
    try:
        return s3.delete_objects(Bucket=bucket, Delete={
            "Objects": [{"Key": o["Key"]} for o in objs]})
    finally:
        ev.unregister("before-sign.s3.DeleteObjects", body)


def _exists(s3, bucket, key, **kw):
    try:
        s3.head_object(Bucket=bucket, Key=key, **kw)
        return True
    except ClientError:
        return False


def _http_date(dt):
    return format_datetime(dt.astimezone(datetime.timezone.utc), usegmt=True)


def test_conditional_delete_unversioned(s3, bucket):
    etag = s3.put_object(Bucket=bucket, Key="k", Body=b"abc")["ETag"]
    mtime = s3.head_object(Bucket=bucket, Key="k")["LastModified"]
    for hdrs in ({"If-Match": '"0123"'},
                 {"x-amz-if-match-size": "4"},
                 {"x-amz-if-match-last-modified-time":
                  "Thu, 01 Jan 2015 00:00:00 GMT"},
                 {"If-Match": etag, "x-amz-if-match-size": "2"}):
        with pytest.raises(ClientError) as ei:
            _delete(s3, bucket, "k", hdrs)
        assert _err(ei) == (412, "PreconditionFailed"), hdrs
        assert _exists(s3, bucket, "k")
    # malformed conditions are refused, and nothing is deleted
    for hdrs in ({"x-amz-if-match-size": "x1"},
                 {"x-amz-if-match-last-modified-time": "yesterday"},
                 {"If-Match": '""'}):
        with pytest.raises(ClientError) as ei:
            _delete(s3, bucket, "k", hdrs)
        assert _err(ei) == (400, "InvalidArgument"), hdrs
        assert _exists(s3, bucket, "k")
    _delete(s3, bucket, "k", {"If-Match": etag, "x-amz-if-match-size": "3",
                              "x-amz-if-match-last-modified-time":
                              _http_date(mtime)})
    assert not _exists(s3, bucket, "k")
    # a key that does not exist: 204, whatever the condition
    r = _delete(s3, bucket, "k", {"If-Match": '"0123"'})
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    s3.put_object(Bucket=bucket, Key="k", Body=b"")
    _delete(s3, bucket, "k", {"If-Match": "*"})
    assert not _exists(s3, bucket, "k")

    # DeleteObjects: per object, a failed condition is that key's error
    e1 = s3.put_object(Bucket=bucket, Key="a", Body=b"1")["ETag"]
    s3.put_object(Bucket=bucket, Key="b", Body=b"22")
    s3.put_object(Bucket=bucket, Key="c", Body=b"333")
    mt = s3.head_object(Bucket=bucket, Key="c")["LastModified"]
    r = _delete_objects(s3, bucket, [
        {"Key": "a", "ETag": '"0123"'}, {"Key": "b", "Size": 9},
        {"Key": "c", "LastModifiedTime": "2015-01-01T00:00:00Z"}])
    assert sorted(x["Code"] for x in r["Errors"]) == ["PreconditionFailed"] * 3
    assert all(_exists(s3, bucket, k) for k in "abc")
    r = _delete_objects(s3, bucket, [
        {"Key": "a", "ETag": e1}, {"Key": "b", "Size": 2},
        {"Key": "c", "LastModifiedTime":
         mt.strftime("%Y-%m-%dT%H:%M:%S.000Z")},
        {"Key": "gone", "ETag": '"0123"'}])
    assert sorted(x["Key"] for x in r["Deleted"]) == ["a", "b", "c", "gone"]
    assert "Errors" not in r
    assert not any(_exists(s3, bucket, k) for k in "abc")
    s3.put_object(Bucket=bucket, Key="d", Body=b"4")
    r = _delete_objects(s3, bucket, [{"Key": "d", "Size": "four"}])
    assert r["Errors"][0]["Code"] == "InvalidArgument"
    assert _exists(s3, bucket, "d")


def test_conditional_delete_versions(s3, bucket):
    s3.put_bucket_versioning(Bucket=bucket,
                             VersioningConfiguration={"Status": "Enabled"})
    # nothing there: 204 and no delete marker made
    r = _delete(s3, bucket, "k", {"If-Match": "*"})
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert "DeleteMarkers" not in s3.list_object_versions(Bucket=bucket)
    p1 = s3.put_object(Bucket=bucket, Key="k", Body=b"one")
    p2 = s3.put_object(Bucket=bucket, Key="k", Body=b"two!")
    # the current version is tested, not an older one
    with pytest.raises(ClientError) as ei:
        _delete(s3, bucket, "k", {"If-Match": p1["ETag"]})
    assert _err(ei) == (412, "PreconditionFailed")
    r = _delete(s3, bucket, "k", {"If-Match": p2["ETag"],
                                  "x-amz-if-match-size": "4"})
    assert r["DeleteMarker"] is True
    # a delete marker is current now: it exists for "*" and has no ETag
    # or size to match
    with pytest.raises(ClientError) as ei:
        _delete(s3, bucket, "k", {"If-Match": p2["ETag"]})
    assert _err(ei) == (412, "PreconditionFailed")
    with pytest.raises(ClientError) as ei:
        _delete(s3, bucket, "k", {"x-amz-if-match-size": "0"})
    assert _err(ei) == (412, "PreconditionFailed")
    r = _delete(s3, bucket, "k", {"If-Match": "*"})
    assert r["DeleteMarker"] is True
    vs = s3.list_object_versions(Bucket=bucket)
    assert len(vs["DeleteMarkers"]) == 2 and len(vs["Versions"]) == 2

    # by version id: that version's ETag, size and Last-Modified count
    mt1 = s3.head_object(Bucket=bucket, Key="k",
                         VersionId=p1["VersionId"])["LastModified"]
    with pytest.raises(ClientError) as ei:
        _delete(s3, bucket, "k", {"If-Match": p2["ETag"]},
                VersionId=p1["VersionId"])
    assert _err(ei) == (412, "PreconditionFailed")
    with pytest.raises(ClientError) as ei:
        _delete(s3, bucket, "k", {"x-amz-if-match-last-modified-time":
                                  "Thu, 01 Jan 2015 00:00:00 GMT"},
                VersionId=p1["VersionId"])
    assert _err(ei) == (412, "PreconditionFailed")
    assert _exists(s3, bucket, "k", VersionId=p1["VersionId"])
    r = _delete(s3, bucket, "k", {"If-Match": p1["ETag"],
                                  "x-amz-if-match-size": "3",
                                  "x-amz-if-match-last-modified-time":
                                  _http_date(mt1)},
                VersionId=p1["VersionId"])
    assert "DeleteMarker" not in r
    assert not _exists(s3, bucket, "k", VersionId=p1["VersionId"])
    # a version that is gone: 204, nothing done
    r = _delete(s3, bucket, "k", {"If-Match": '"0123"'},
                VersionId=p1["VersionId"])
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert s3.get_object(Bucket=bucket, Key="k",
                         VersionId=p2["VersionId"])["Body"].read() == b"two!"

    # DeleteObjects by version, with conditions
    r = _delete_objects(s3, bucket, [{"Key": "k", "VersionId":
                                      p2["VersionId"], "ETag": p1["ETag"]}])
    assert r["Errors"][0]["Code"] == "PreconditionFailed"
    r = _delete_objects(s3, bucket, [{"Key": "k", "VersionId":
                                      p2["VersionId"], "ETag": p2["ETag"],
                                      "Size": 4}])
    assert r["Deleted"][0]["VersionId"] == p2["VersionId"]
    assert not _exists(s3, bucket, "k", VersionId=p2["VersionId"])
    # the current version (a marker) by DeleteObjects: Size never matches
    r = _delete_objects(s3, bucket, [{"Key": "k", "Size": 0}])
    assert r["Errors"][0]["Code"] == "PreconditionFailed"
