"""GetObjectAttributes (storaged/s3/attrs.c, issue 18) through boto3: ETag,
full-object checksum, StorageClass and ObjectSize of a simple object;
parts (sizes, paging) of a multipart one; a version's; an SSE-C object's
(its key required). Also two core deviations: ListObjects (v1) echoes
its Prefix as given, and a presigned URL with X-Amz-Expires=0 is expired
(403), one over a week malformed (400), as AWS."""
import base64
import hashlib
import os

import botocore.exceptions
import pytest

ALL = ["ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"]


def test_simple_object_attributes(s3, bucket):
    r = s3.put_object(Bucket=bucket, Key="s", Body=b"x" * 1000,
                      ChecksumAlgorithm="SHA256")
    a = s3.get_object_attributes(Bucket=bucket, Key="s", ObjectAttributes=ALL)
    assert a["ETag"] == r["ETag"].strip('"')
    assert a["ObjectSize"] == 1000 and a["StorageClass"] == "STANDARD"
    assert a["Checksum"]["ChecksumSHA256"] == r["ChecksumSHA256"]
    assert "ObjectParts" not in a
    a = s3.get_object_attributes(Bucket=bucket, Key="s",
                                 ObjectAttributes=["ObjectSize"])
    assert a["ObjectSize"] == 1000 and "ETag" not in a
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.get_object_attributes(Bucket=bucket, Key="missing",
                                 ObjectAttributes=ALL)
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_multipart_attributes_and_paging(s3, bucket):
    up = s3.create_multipart_upload(Bucket=bucket, Key="m")["UploadId"]
    sizes = [5 << 20, 5 << 20, 1234]
    parts = []
    for i, n in enumerate(sizes):
        e = s3.upload_part(Bucket=bucket, Key="m", UploadId=up,
                           PartNumber=i + 1, Body=os.urandom(n))["ETag"]
        parts.append({"PartNumber": i + 1, "ETag": e})
    c = s3.complete_multipart_upload(Bucket=bucket, Key="m", UploadId=up,
                                     MultipartUpload={"Parts": parts})
    a = s3.get_object_attributes(Bucket=bucket, Key="m", ObjectAttributes=ALL)
    assert a["ETag"] == c["ETag"].strip('"') and a["ObjectSize"] == sum(sizes)
    op = a["ObjectParts"]
    assert op["TotalPartsCount"] == 3 and op["IsTruncated"] is False
    assert [(p["PartNumber"], p["Size"]) for p in op["Parts"]] == \
        [(1, 5 << 20), (2, 5 << 20), (3, 1234)]
    a = s3.get_object_attributes(Bucket=bucket, Key="m", MaxParts=2,
                                 ObjectAttributes=["ObjectParts"])
    op = a["ObjectParts"]
    assert op["IsTruncated"] is True and op["NextPartNumberMarker"] == 2
    assert [p["PartNumber"] for p in op["Parts"]] == [1, 2]
    a = s3.get_object_attributes(Bucket=bucket, Key="m", MaxParts=2,
                                 PartNumberMarker=2,
                                 ObjectAttributes=["ObjectParts"])
    assert [p["PartNumber"] for p in a["ObjectParts"]["Parts"]] == [3]


def test_version_and_ssec_attributes(s3, bucket):
    s3.put_bucket_versioning(Bucket=bucket,
                             VersioningConfiguration={"Status": "Enabled"})
    v1 = s3.put_object(Bucket=bucket, Key="v", Body=b"12345")["VersionId"]
    s3.put_object(Bucket=bucket, Key="v", Body=b"1")
    a = s3.get_object_attributes(Bucket=bucket, Key="v", VersionId=v1,
                                 ObjectAttributes=["ObjectSize"])
    assert a["ObjectSize"] == 5 and a["VersionId"] == v1
    key = os.urandom(16).hex()  # 32 characters: boto3 wants a str here
    s3.put_object(Bucket=bucket, Key="c", Body=b"secret", SSECustomerKey=key,
                  SSECustomerAlgorithm="AES256")
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.get_object_attributes(Bucket=bucket, Key="c",
                                 ObjectAttributes=["ObjectSize"])
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    # this botocore does not encode the key for GetObjectAttributes: send
    # the headers as s3-tests does
    hdrs = {"x-amz-server-side-encryption-customer-algorithm": "AES256",
            "x-amz-server-side-encryption-customer-key":
                base64.b64encode(key.encode()).decode(),
            "x-amz-server-side-encryption-customer-key-MD5":
                base64.b64encode(hashlib.md5(key.encode()).digest()).decode()}

    def add(params, **kw):
        params["headers"].update(hdrs)
    s3.meta.events.register("before-call.s3.GetObjectAttributes", add)
    try:
        a = s3.get_object_attributes(Bucket=bucket, Key="c",
                                     ObjectAttributes=["ObjectSize"])
    finally:
        s3.meta.events.unregister("before-call.s3.GetObjectAttributes", add)
    assert a["ObjectSize"] == 6


def test_list_v1_prefix_echoed_as_given(s3, bucket):
    s3.put_object(Bucket=bucket, Key="\nk", Body=b"1")
    r = s3.list_objects(Bucket=bucket, Prefix="\n")
    assert r["Prefix"] == "\n" and [o["Key"] for o in r["Contents"]] == ["\nk"]
    r = s3.list_objects_v2(Bucket=bucket, Prefix="\n")
    assert r["Prefix"] == "\n" and r["KeyCount"] == 1


def _presign(srv, path, expires):
    """A presigned GET URL for @path with X-Amz-Expires=@expires (any
    value: botocore refuses some)."""
    import datetime
    import hmac

    import s3util
    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    scope = "%s/us-east-1/s3/aws4_request" % amz_date[:8]
    q = [("X-Amz-Algorithm", "AWS4-HMAC-SHA256"),
         ("X-Amz-Credential", "%s/%s" % (srv.access_key, scope)),
         ("X-Amz-Date", amz_date), ("X-Amz-Expires", str(expires)),
         ("X-Amz-SignedHeaders", "host")]
    cq = "&".join("%s=%s" % (s3util.uri_encode(k, False),
                             s3util.uri_encode(v, False)) for k, v in sorted(q))
    canon = "\n".join(["GET", s3util.uri_encode(path, True), cq,
                        "host:127.0.0.1:%d\n" % srv.port, "host",
                        "UNSIGNED-PAYLOAD"])
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                      hashlib.sha256(canon.encode()).hexdigest()])
    sig = hmac.new(s3util.signing_key(srv.secret_key, amz_date[:8]),
                   sts.encode(), hashlib.sha256).hexdigest()
    return "%s%s?%s&X-Amz-Signature=%s" % (srv.endpoint, path, cq, sig)


def test_presigned_expires_zero_is_expired(s3, bucket):
    import urllib.error
    import urllib.request
    s3.put_object(Bucket=bucket, Key="p", Body=b"1")
    for exp, status in [(0, 403), (604801, 400), (-7, 400), (60, 200)]:
        url = _presign(s3.ecfs_server, "/%s/p" % bucket, exp)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                got = r.status
        except urllib.error.HTTPError as e:
            got = e.code
        assert got == status, exp
