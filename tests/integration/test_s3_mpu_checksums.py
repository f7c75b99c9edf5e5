"""Full-object multipart checksums and per-part checksums, against a real
storaged: CreateMultipartUpload with x-amz-checksum-type FULL_OBJECT (CRC32,
CRC32C; CRC64NVME's default) makes the object's checksum the CRC of its
whole body, combined from the parts' at Complete and answered like a
PutObject's (type FULL_OBJECT) on Complete, HEAD/GET and
GetObjectAttributes; ListParts lists each part's checksum; the part
checksums Complete's XML names are checked (InvalidPart when one differs).
This machine's botocore (1.29) has no ChecksumType or CRC64NVME
parameters, so these requests are signed here (test_s3_conformance)."""

import base64
import os
import re
import zlib

import pytest

from test_s3_checksums import b64_checksum, composite
from test_s3_conformance import signed

# every part but the last must be >= 5 MiB
PARTS = [os.urandom(5 * 1024 * 1024 + 11), os.urandom(70 * 1024 + 3)]
WHOLE = b"".join(PARTS)


def req(srv, method, path, query=(), body=b"", headers=None):
    """One signed request (test_s3_conformance.signed); (status,
    lower-case headers, body)."""
    return signed(srv, method, path, query, headers, body)


def xml_all(data, tag):
    return re.findall(r"<%s>([^<]*)</%s>" % (tag, tag), data.decode())


def create(srv, path, algo, ctype=None):
    h = {"x-amz-checksum-algorithm": algo}
    if ctype:
        h["x-amz-checksum-type"] = ctype
    return req(srv, "POST", path, [("uploads", "")], headers=h)


def upload(srv, path, algo):
    """An upload of PARTS with each part's checksum; (upload id, values)."""
    st, h, data = create(srv, path, algo.upper(), "FULL_OBJECT"
                         if algo != "crc64nvme" else None)
    assert st == 200, data
    assert h["x-amz-checksum-type"] == "FULL_OBJECT"
    uid = xml_all(data, "UploadId")[0]
    vals = []
    for i, body in enumerate(PARTS):
        v = b64_checksum(algo, body)
        st, h, data = req(srv, "PUT", path, [("partNumber", str(i + 1)),
                                             ("uploadId", uid)], body,
                          {"x-amz-checksum-" + algo: v})
        assert st == 200 and h["x-amz-checksum-" + algo] == v, data
        vals.append((h["etag"], v))
    return uid, vals


def complete_xml(algo, vals, bad=None):
    field = "Checksum" + algo.upper()
    x = "<CompleteMultipartUpload>"
    for i, (etag, v) in enumerate(vals):
        x += "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag>" % (i + 1, etag)
        x += "<%s>%s</%s></Part>" % (field, bad if bad and i == 1 else v,
                                      field)
    return (x + "</CompleteMultipartUpload>").encode()


@pytest.mark.parametrize("algo", ["crc32", "crc32c", "crc64nvme"])
def test_full_object_multipart_checksum(s3_server, s3, bucket, algo):
    srv, path = s3_server, "/%s/full" % bucket
    name, field = "x-amz-checksum-" + algo, "Checksum" + algo.upper()
    want = b64_checksum(algo, WHOLE)
    uid, vals = upload(srv, path, algo)
    # ListParts: the algorithm, the type and each part's checksum
    st, _, data = req(srv, "GET", path, [("uploadId", uid)])
    assert st == 200
    assert xml_all(data, "ChecksumAlgorithm") == [algo.upper()]
    assert xml_all(data, "ChecksumType") == ["FULL_OBJECT"]
    assert xml_all(data, field) == [v for _, v in vals]
    # a listed part checksum that is not the part's: InvalidPart
    st, _, data = req(srv, "POST", path, [("uploadId", uid)],
                      complete_xml(algo, vals, bad=vals[0][1]))
    assert st == 400 and b"<Code>InvalidPart</Code>" in data
    # an object checksum that is not the whole body's: BadDigest
    st, _, data = req(srv, "POST", path, [("uploadId", uid)],
                      complete_xml(algo, vals), {name: vals[0][1]})
    assert st == 400 and b"<Code>BadDigest</Code>" in data
    assert s3.list_multipart_uploads(Bucket=bucket)["Uploads"]  # it stays
    st, _, data = req(srv, "POST", path, [("uploadId", uid)],
                      complete_xml(algo, vals), {name: want})
    assert st == 200, data
    assert xml_all(data, field) == [want]
    assert xml_all(data, "ChecksumType") == ["FULL_OBJECT"]
    for method in ("HEAD", "GET"):
        st, h, body = req(srv, method, path,
                          headers={"x-amz-checksum-mode": "ENABLED"})
        assert st == 200 and h[name] == want, (method, h)
        assert h["x-amz-checksum-type"] == "FULL_OBJECT"
        assert method == "HEAD" or body == WHOLE
        st, h, _ = req(srv, method, path)
        assert st == 200 and name not in h
    # a part asked by number: that part's own checksum
    st, h, body = req(srv, "GET", path, [("partNumber", "2")],
                      headers={"x-amz-checksum-mode": "ENABLED"})
    assert st == 206 and body == PARTS[1]
    assert h[name] == vals[1][1] and h["x-amz-checksum-type"] == "FULL_OBJECT"
    st, _, data = req(srv, "GET", path, [("attributes", "")],
                      headers={"x-amz-object-attributes": "Checksum"})
    assert st == 200
    assert xml_all(data, field) == [want]
    assert xml_all(data, "ChecksumType") == ["FULL_OBJECT"]
    if algo == "crc32":  # boto3 validates the body against it
        g = s3.get_object(Bucket=bucket, Key="full", ChecksumMode="ENABLED")
        assert g["ChecksumCRC32"] == want
        assert g["Body"].read() == WHOLE


def test_full_object_crc32_matches_zlib(s3_server, bucket):
    """The combined value is zlib's CRC-32 of the whole body (a check
    independent of the test's own helpers), also without a Complete
    naming one and without the parts listed with their checksums."""
    srv, path = s3_server, "/%s/z" % bucket
    uid, vals = upload(srv, path, "crc32")
    x = "<CompleteMultipartUpload>" + "".join(
        "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % (i + 1, e)
        for i, (e, _) in enumerate(vals)) + "</CompleteMultipartUpload>"
    st, _, data = req(srv, "POST", path, [("uploadId", uid)], x.encode())
    assert st == 200, data
    want = base64.b64encode(zlib.crc32(WHOLE).to_bytes(4, "big")).decode()
    assert xml_all(data, "ChecksumCRC32") == [want]


def test_composite_parts_listed(s3_server, bucket):
    """A COMPOSITE upload: ListParts lists each part's checksum and the
    type, Complete checks the listed ones, a part GET answers its own."""
    srv, path = s3_server, "/%s/c" % bucket
    st, h, data = create(srv, path, "CRC32C")
    assert st == 200 and h["x-amz-checksum-type"] == "COMPOSITE"
    uid = xml_all(data, "UploadId")[0]
    vals = []
    for i, body in enumerate(PARTS):
        v = b64_checksum("crc32c", body)
        st, h, _ = req(srv, "PUT", path, [("partNumber", str(i + 1)),
                                          ("uploadId", uid)], body,
                       {"x-amz-checksum-crc32c": v})
        assert st == 200
        vals.append((h["etag"], v))
    st, _, data = req(srv, "GET", path, [("uploadId", uid)])
    assert xml_all(data, "ChecksumType") == ["COMPOSITE"]
    assert xml_all(data, "ChecksumCRC32C") == [v for _, v in vals]
    st, _, data = req(srv, "POST", path, [("uploadId", uid)],
                      complete_xml("crc32c", vals, bad="AAAAAA=="))
    assert st == 400 and b"<Code>InvalidPart</Code>" in data
    st, _, data = req(srv, "POST", path, [("uploadId", uid)],
                      complete_xml("crc32c", vals))
    assert st == 200, data
    assert xml_all(data, "ChecksumCRC32C") == [composite("crc32c", PARTS)]
    st, h, _ = req(srv, "HEAD", path, [("partNumber", "1")],
                   headers={"x-amz-checksum-mode": "ENABLED"})
    assert st == 206 and h["x-amz-checksum-crc32c"] == vals[0][1]
    assert h["x-amz-checksum-type"] == "COMPOSITE"


def test_checksum_type_errors(s3_server, s3, bucket):
    """What S3 refuses at Create, refused with InvalidRequest and nothing
    made: SHA with FULL_OBJECT, CRC64NVME with COMPOSITE, an unknown type,
    a type without an algorithm. Complete's XML naming an unknown
    checksum element is MalformedXML."""
    path = "/%s/e" % bucket
    for algo, ctype in (("SHA256", "FULL_OBJECT"), ("SHA1", "FULL_OBJECT"),
                        ("CRC64NVME", "COMPOSITE"), ("CRC32", "BOGUS")):
        st, _, data = create(s3_server, path, algo, ctype)
        assert st == 400 and b"<Code>InvalidRequest</Code>" in data, algo
    st, _, data = req(s3_server, "POST", path, [("uploads", "")],
                      headers={"x-amz-checksum-type": "FULL_OBJECT"})
    assert st == 400 and b"<Code>InvalidRequest</Code>" in data
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    up = s3.create_multipart_upload(Bucket=bucket, Key="e")["UploadId"]
    r = s3.upload_part(Bucket=bucket, Key="e", UploadId=up, PartNumber=1,
                       Body=b"x")
    x = ("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
         "<ETag>%s</ETag><ChecksumMD5>AAAA</ChecksumMD5></Part>"
         "</CompleteMultipartUpload>" % r["ETag"])
    st, _, data = req(s3_server, "POST", path, [("uploadId", up)], x.encode())
    assert st == 400 and b"<Code>MalformedXML</Code>" in data
