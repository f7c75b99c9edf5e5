"""Additional checksums kept with objects, against a real storaged: an
x-amz-checksum-{crc32,crc32c,crc64nvme,sha1,sha256} sent with a PutObject,
as a header or as an aws-chunked trailer, is verified, stored, and returned
on GET/HEAD (with x-amz-checksum-type: FULL_OBJECT) when the request has
x-amz-checksum-mode: ENABLED - boto3's ChecksumMode='ENABLED' validates the
body against it. Not returned without the mode, for a range, or for a
multipart object (whose composite "-N" checksum is tested below)."""

import base64
import ctypes
import functools
import hashlib
import http.client
import os
import subprocess

import botocore.exceptions
import pytest

import s3util

from s3util import NPM_DIR, ensure_js_sdk

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

BODY = os.urandom(200 * 1024 + 7)  # striped, not inline


def _crc_table(poly):
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (poly if c & 1 else 0)
        table.append(c)
    return table


CRC32C_TABLE = _crc_table(0x82F63B78)
CRC64NVME_TABLE = _crc_table(0x9A6C9329AC4BC9B5)


def _isal_crc32c():
    """isa-l's crc32_iscsi (CRC-32C, no final xor), checked against the
    standard check value; None if the library cannot be loaded."""
    try:
        lib = ctypes.CDLL("libisal.so.2")
    except OSError:
        return None
    fn = lib.crc32_iscsi
    fn.restype = ctypes.c_uint32
    fn.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint32]
    if fn(b"123456789", 9, 0xFFFFFFFF) ^ 0xFFFFFFFF != 0xE3069283:
        return None
    return fn


ISAL_CRC32C = _isal_crc32c()


def crc32c(data):
    # The multipart tests checksum 5 MiB parts: bit by bit in Python that
    # took over 60 s at load, so isa-l computes long inputs (checked above
    # against the standard check value); the table form is the fallback.
    data = bytes(data)
    if ISAL_CRC32C is not None and len(data) > 4096:
        return (ISAL_CRC32C(data, len(data), 0xFFFFFFFF) ^ 0xFFFFFFFF).to_bytes(4, "big")
    crc = 0xFFFFFFFF
    t = CRC32C_TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return (crc ^ 0xFFFFFFFF).to_bytes(4, "big")


def crc64nvme(data):
    # table-driven CRC-64/NVME (reflected poly 0x9A6C9329AC4BC9B5)
    crc = 0xFFFFFFFFFFFFFFFF
    t = CRC64NVME_TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return (crc ^ 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big")


def b64_checksum(algo, data):
    """The base64 checksum @algo of @data; cached, because the parametrised
    multipart tests checksum the same 5 MiB parts again."""
    return _b64_checksum(algo, bytes(data))


@functools.lru_cache(maxsize=64)
def _b64_checksum(algo, data):
    if algo == "crc32":
        return s3util.crc32_b64(data)
    if algo == "crc32c":
        return base64.b64encode(crc32c(data)).decode()
    if algo == "crc64nvme":
        return base64.b64encode(crc64nvme(data)).decode()
    return base64.b64encode(hashlib.new(algo, data).digest()).decode()


def signed(srv, method, path, body=b"", headers=None):
    h = {"host": "127.0.0.1:%d" % srv.port}
    h.update(headers or {})
    if method == "PUT":
        h["content-length"] = str(len(body))
    s3util.sign_headers(method, path, [], h, hashlib.sha256(body).hexdigest(),
                        srv.access_key, srv.secret_key)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        conn.request(method, path, body=body if method == "PUT" else None,
                     headers=h)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def trailer_put(srv, path, data, algo, value):
    """PutObject with STREAMING-UNSIGNED-PAYLOAD-TRAILER and the checksum in
    the trailer (what SDKs send for stream bodies)."""
    body = b""
    for i in range(0, len(data), 65536):
        c = data[i:i + 65536]
        body += b"%x\r\n" % len(c) + c + b"\r\n"
    body += b"0\r\nx-amz-checksum-%s:%s\r\n\r\n" % (algo.encode(),
                                                     value.encode())
    h = {"host": "127.0.0.1:%d" % srv.port, "content-encoding": "aws-chunked",
         "x-amz-decoded-content-length": str(len(data)),
         "x-amz-trailer": "x-amz-checksum-" + algo,
         "content-length": str(len(body))}
    s3util.sign_headers("PUT", path, [], h, "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                        srv.access_key, srv.secret_key)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        conn.request("PUT", path, body=body, headers=h)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def assert_returned(srv, path, algo, value):
    """GET and HEAD with the checksum mode return @value; without it, or
    for a range, no checksum."""
    name = "x-amz-checksum-" + algo
    for method in ("GET", "HEAD"):
        st, h, _ = signed(srv, method, path,
                          headers={"x-amz-checksum-mode": "ENABLED"})
        assert st == 200 and h.get(name) == value, (method, h)
        assert h.get("x-amz-checksum-type") == "FULL_OBJECT"
        st, h, _ = signed(srv, method, path)
        assert st == 200 and name not in h
    st, h, _ = signed(srv, "GET", path, headers={
        "x-amz-checksum-mode": "ENABLED", "range": "bytes=0-99"})
    assert st == 206 and name not in h


@pytest.mark.parametrize("algo", ["crc32", "crc32c", "crc64nvme", "sha1",
                                  "sha256"])
def test_header_and_trailer_checksums_kept(s3_server, bucket, algo):
    v = b64_checksum(algo, BODY)
    path = "/%s/h-%s" % (bucket, algo)
    st, h, data = signed(s3_server, "PUT", path, BODY,
                         {"x-amz-checksum-" + algo: v})
    assert st == 200, data
    assert h.get("x-amz-checksum-" + algo) == v
    assert_returned(s3_server, path, algo, v)
    path = "/%s/t-%s" % (bucket, algo)
    st, data = trailer_put(s3_server, path, BODY, algo, v)
    assert st == 200, data
    assert_returned(s3_server, path, algo, v)


@pytest.mark.parametrize("algo", ["CRC32", "CRC32C", "SHA1", "SHA256"])
def test_boto3_checksum_mode_validates(s3, bucket, algo):
    s3.put_object(Bucket=bucket, Key="b", Body=BODY, ChecksumAlgorithm=algo)
    want = b64_checksum(algo.lower(), BODY)
    r = s3.get_object(Bucket=bucket, Key="b", ChecksumMode="ENABLED")
    assert r["Checksum" + algo] == want
    assert r["Body"].read() == BODY  # botocore checks it against the header
    h = s3.head_object(Bucket=bucket, Key="b", ChecksumMode="ENABLED")
    assert h["Checksum" + algo] == want
    # CopyObject keeps it, also when the metadata is replaced
    s3.copy_object(Bucket=bucket, Key="c", CopySource="%s/b" % bucket,
                   MetadataDirective="REPLACE", Metadata={"k": "v"})
    r = s3.get_object(Bucket=bucket, Key="c", ChecksumMode="ENABLED")
    assert r["Checksum" + algo] == want and r["Metadata"] == {"k": "v"}
    assert r["Body"].read() == BODY


def composite(algo, parts):
    """S3's composite checksum: the checksum of the parts' raw checksums,
    then "-N"."""
    raw = b"".join(base64.b64decode(b64_checksum(algo, p)) for p in parts)
    return "%s-%d" % (b64_checksum(algo, raw), len(parts))


@pytest.mark.parametrize("algo", ["CRC32", "SHA256"])
def test_multipart_composite_checksum(s3, bucket, algo):
    """x-amz-checksum-algorithm on CreateMultipartUpload: each part's
    checksum is verified and kept, a Complete naming a wrong object
    checksum is refused (BadDigest), and the object answers the composite
    "...-N" value (type COMPOSITE) on Complete, HEAD/GET with the checksum
    mode, and GetObjectAttributes, with each part's own there too."""
    field = "Checksum" + algo
    parts = [os.urandom(5 * 1024 * 1024 + 3), os.urandom(100 * 1024)]
    cr = s3.create_multipart_upload(Bucket=bucket, Key="mp",
                                    ChecksumAlgorithm=algo)
    assert cr["ChecksumAlgorithm"] == algo
    done = []
    for i, body in enumerate(parts):
        r = s3.upload_part(Bucket=bucket, Key="mp", UploadId=cr["UploadId"],
                           PartNumber=i + 1, Body=body,
                           ChecksumAlgorithm=algo)
        assert r[field] == b64_checksum(algo.lower(), body)
        done.append({"PartNumber": i + 1, "ETag": r["ETag"], field: r[field]})
    want = composite(algo.lower(), parts)
    # a Complete naming another object checksum is refused; the upload stays
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.complete_multipart_upload(Bucket=bucket, Key="mp",
                                     UploadId=cr["UploadId"],
                                     MultipartUpload={"Parts": done},
                                     **{field: "bad"})
    assert e.value.response["Error"]["Code"] == "BadDigest"
    c = s3.complete_multipart_upload(Bucket=bucket, Key="mp",
                                     UploadId=cr["UploadId"],
                                     MultipartUpload={"Parts": done},
                                     **{field: want})
    assert c[field] == want
    h = s3.head_object(Bucket=bucket, Key="mp", ChecksumMode="ENABLED")
    assert h[field] == want
    assert field not in s3.head_object(Bucket=bucket, Key="mp")
    g = s3.get_object(Bucket=bucket, Key="mp", ChecksumMode="ENABLED")
    assert g[field] == want
    assert g["Body"].read() == b"".join(parts)
    a = s3.get_object_attributes(Bucket=bucket, Key="mp",
                                 ObjectAttributes=["Checksum", "ObjectParts"])
    assert a["Checksum"][field] == want
    # (this botocore's model has no Checksum.ChecksumType to read back)
    assert [p[field] for p in a["ObjectParts"]["Parts"]] == [
        d[field] for d in done]
    a = s3.get_object_attributes(Bucket=bucket, Key="mp", MaxParts=1,
                                 PartNumberMarker=1,
                                 ObjectAttributes=["ObjectParts"])
    assert [p[field] for p in a["ObjectParts"]["Parts"]] == [done[1][field]]


def test_multipart_checksum_edges(s3, bucket):
    """An upload created without an algorithm keeps no composite; a part
    sent without its checksum leaves the object without one (never a
    wrong value); CRC64NVME makes a FULL_OBJECT upload (its default;
    test_s3_mpu_checksums.py tests those)."""
    up = s3.create_multipart_upload(Bucket=bucket, Key="plain")["UploadId"]
    r = s3.upload_part(Bucket=bucket, Key="plain", UploadId=up, PartNumber=1,
                       Body=BODY, ChecksumAlgorithm="CRC32")
    s3.complete_multipart_upload(
        Bucket=bucket, Key="plain", UploadId=up,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": r["ETag"]}]})
    g = s3.get_object(Bucket=bucket, Key="plain", ChecksumMode="ENABLED")
    assert "ChecksumCRC32" not in g
    assert g["Body"].read() == BODY
    up = s3.create_multipart_upload(Bucket=bucket, Key="gap",
                                    ChecksumAlgorithm="CRC32")["UploadId"]
    r = s3.upload_part(Bucket=bucket, Key="gap", UploadId=up, PartNumber=1,
                       Body=b"no checksum sent")
    s3.complete_multipart_upload(
        Bucket=bucket, Key="gap", UploadId=up,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": r["ETag"]}]})
    assert "ChecksumCRC32" not in s3.head_object(Bucket=bucket, Key="gap",
                                                 ChecksumMode="ENABLED")
    nv = s3.create_multipart_upload(Bucket=bucket, Key="nv",
                                    ChecksumAlgorithm="CRC64NVME")
    assert nv["ResponseMetadata"]["HTTPHeaders"][
        "x-amz-checksum-type"] == "FULL_OBJECT"
    s3.abort_multipart_upload(Bucket=bucket, Key="nv", UploadId=nv["UploadId"])
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


JS = r"""
const { S3Client, CreateBucketCommand, PutObjectCommand, GetObjectCommand
      } = require("@aws-sdk/client-s3");
const { Readable } = require("stream");
const crypto = require("crypto");
const assert = require("assert");
(async () => {
  const c = new S3Client({ endpoint: process.env.EP, region: "us-east-1",
    forcePathStyle: true, maxAttempts: 1,
    credentials: { accessKeyId: process.env.AK, secretAccessKey: process.env.SK } });
  await c.send(new CreateBucketCommand({ Bucket: "js-ck" }));
  const big = crypto.randomBytes(1024 * 1024 + 5);
  // a stream body: the SDK sends aws-chunked with a checksum trailer
  const p = await c.send(new PutObjectCommand({ Bucket: "js-ck", Key: "s",
    Body: Readable.from([big.subarray(0, 300000), big.subarray(300000)]),
    ContentLength: big.length, ChecksumAlgorithm: "CRC32" }));
  assert.ok(p.ChecksumCRC32, "PUT answers the checksum");
  const g = await c.send(new GetObjectCommand({ Bucket: "js-ck", Key: "s",
                                               ChecksumMode: "ENABLED" }));
  assert.strictEqual(g.ChecksumCRC32, p.ChecksumCRC32);
  const got = Buffer.from(await g.Body.transformToByteArray());
  assert.ok(got.equals(big), "content");
  console.log("JS-CK-OK");
})().catch(e => { console.error(e); process.exit(1); });
"""


# the first JS test of a clean clone installs @aws-sdk/client-s3 with npm
# (ensure_js_sdk, up to 300 s) in the test body
@pytest.mark.timeout(360)
def test_aws_sdk_js_trailer_checksum_round_trip(s3_server, tmp_path):
    ensure_js_sdk()
    script = tmp_path / "ck.js"
    script.write_text(JS)
    env = dict(os.environ, NODE_PATH=os.path.join(NPM_DIR, "node_modules"),
               EP=s3_server.endpoint, AK=s3_server.access_key,
               SK=s3_server.secret_key)
    p = subprocess.run(["node", str(script)], env=env, capture_output=True,
                       timeout=120)
    assert p.returncode == 0 and b"JS-CK-OK" in p.stdout, p.stderr[-2000:]


def test_checksum_header_errors_before_body(s3_server, s3, bucket):
    v32 = b64_checksum("crc32", BODY)
    vsha = b64_checksum("sha1", BODY)
    # two algorithms in one request
    st, _, data = signed(s3_server, "PUT", "/%s/two" % bucket, BODY, {
        "x-amz-checksum-crc32": v32, "x-amz-checksum-sha1": vsha})
    assert st == 400 and b"<Code>InvalidRequest</Code>" in data
    assert b"Expecting a single x-amz-checksum- header" in data
    # a value that is not base64 of its algorithm's size: 400 InvalidRequest
    # naming the header, as AWS answers (ceph/s3-tests expects RGW's
    # BadDigest: storaged/README.md); nothing is stored
    for algo, bad in (("crc32", "AAAA"), ("sha256", v32), ("crc32c", "!!"),
                      ("sha256", "bad"), ("sha1", v32),
                      ("crc64nvme", "AAAAAAAAAAAA")):
        st, _, data = signed(s3_server, "PUT", "/%s/bad" % bucket, BODY,
                             {"x-amz-checksum-" + algo: bad})
        assert st == 400 and b"<Code>InvalidRequest</Code>" in data, algo
        assert (b"<Message>Value for x-amz-checksum-%s header is invalid."
                b"</Message>" % algo.encode()) in data, data
    assert s3.list_objects_v2(Bucket=bucket).get("Contents", []) == []


def test_complete_mpu_with_object_checksum_header(s3, bucket):
    # CompleteMultipartUpload's x-amz-checksum-* describes the object (here a
    # composite "-N" value), not the XML body: it is checked against the
    # parts' (test_multipart_composite_checksum: a wrong one is BadDigest),
    # never as the checksum of the XML
    up = s3.create_multipart_upload(Bucket=bucket, Key="mpc",
                                    ChecksumAlgorithm="CRC32")["UploadId"]
    r = s3.upload_part(Bucket=bucket, Key="mpc", UploadId=up, PartNumber=1,
                       Body=BODY, ChecksumAlgorithm="CRC32")
    comp = composite("crc32", [BODY])
    s3.complete_multipart_upload(
        Bucket=bucket, Key="mpc", UploadId=up, ChecksumCRC32=comp,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": r["ETag"],
                                    "ChecksumCRC32": r["ChecksumCRC32"]}]})
    assert s3.get_object(Bucket=bucket, Key="mpc")["Body"].read() == BODY


def test_checksum_header_with_trailer_refused(s3_server, bucket):
    """An x-amz-checksum-* header and an announced trailer checksum are two
    checksums: InvalidRequest, as for two headers (the header's value was
    never checked: a wrong one got 200)."""
    data = b"hello trailer"
    good = b64_checksum("sha256", data)
    body = b"%x\r\n" % len(data) + data + \
        b"\r\n0\r\nx-amz-checksum-sha256:%s\r\n\r\n" % good.encode()
    path = "/%s/both" % bucket
    h = {"host": "127.0.0.1:%d" % s3_server.port,
         "content-encoding": "aws-chunked",
         "x-amz-decoded-content-length": str(len(data)),
         "x-amz-trailer": "x-amz-checksum-sha256",
         "x-amz-checksum-crc32": "AAAAAA==",
         "content-length": str(len(body))}
    s3util.sign_headers("PUT", path, [], h,
                        "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                        s3_server.access_key, s3_server.secret_key)
    conn = http.client.HTTPConnection("127.0.0.1", s3_server.port, timeout=10)
    try:
        conn.request("PUT", path, body=body, headers=h)
        r = conn.getresponse()
        status, text = r.status, r.read()
    finally:
        conn.close()
    assert status == 400, text
    assert b"<Code>InvalidRequest</Code>" in text
    assert signed(s3_server, "HEAD", path)[0] == 404
