"""Encryption at rest (storaged/s3/sse.c, issue 18): SSE-C and SSE-S3 in
64 KiB packages sealed with AES-256-GCM, bucket default encryption, and
copies between the kinds. Every test greps the drives for a plaintext
marker: an encrypted object's bytes must never lie on them. Driven with
boto3 and awscli against a real storaged."""
import base64
import hashlib
import os
import subprocess
import uuid

import botocore.exceptions
import pytest

import meta_util
from conftest import STORAGED

from test_s3_header_audit import drives_clear_of, drives_hold, err

KEY_A = os.urandom(32)
KEY_B = os.urandom(32)
PKG = 64 * 1024


def body_with_marker(n):
    """@n bytes: a unique marker repeated, so a plaintext leak is found in
    any shard piece."""
    m = b"sse-marker-" + uuid.uuid4().hex.encode() + b"|"
    b = (m * (n // len(m) + 1))[:n]
    return m, b


def ssec(key):
    return dict(SSECustomerAlgorithm="AES256", SSECustomerKey=key)


def ssec_b64(key):
    """SSE-C arguments for calls botocore does not encode (Complete)."""
    return dict(SSECustomerAlgorithm="AES256",
                SSECustomerKey=base64.b64encode(key).decode(),
                SSECustomerKeyMD5=base64.b64encode(
                    hashlib.md5(key).digest()).decode())


def ssec_src(key):
    return dict(CopySourceSSECustomerAlgorithm="AES256",
                CopySourceSSECustomerKey=key)


def test_ssec_round_trip_key_rules_and_ranges(s3, bucket):
    srv = s3.ecfs_server
    marker, body = body_with_marker(3 * PKG + 1234)
    r = s3.put_object(Bucket=bucket, Key="c", Body=body, **ssec(KEY_A))
    kmd5 = base64.b64encode(hashlib.md5(KEY_A).digest()).decode()
    assert r["SSECustomerAlgorithm"] == "AES256"
    assert r["SSECustomerKeyMD5"] == kmd5
    g = s3.get_object(Bucket=bucket, Key="c", **ssec(KEY_A))
    assert g["Body"].read() == body
    assert g["SSECustomerKeyMD5"] == kmd5
    assert g["ETag"].strip('"') == hashlib.md5(body).hexdigest()
    # HEAD and GET need the key; another key is refused
    assert err(lambda: s3.get_object(Bucket=bucket, Key="c")) == \
        (400, "InvalidRequest")
    assert err(lambda: s3.head_object(Bucket=bucket, Key="c"))[0] == 400
    assert err(lambda: s3.get_object(Bucket=bucket, Key="c",
                                     **ssec(KEY_B))) == (400, "InvalidRequest")
    h = s3.head_object(Bucket=bucket, Key="c", **ssec(KEY_A))
    assert h["ContentLength"] == len(body)
    # ranges inside one package, across two and across three boundaries
    for first, last in [(5, 99), (PKG - 10, PKG + 10), (100, 3 * PKG + 50),
                        (3 * PKG, len(body) - 1)]:
        g = s3.get_object(Bucket=bucket, Key="c", Range="bytes=%d-%d" %
                          (first, last), **ssec(KEY_A))
        assert g["Body"].read() == body[first:last + 1]
    # the listing gives the plaintext's size
    ls = s3.list_objects_v2(Bucket=bucket)["Contents"]
    assert [(o["Key"], o["Size"]) for o in ls] == [("c", len(body))]
    assert not drives_hold(srv, marker)


def test_ssec_bad_parameters_store_nothing(s3, bucket):
    srv = s3.ecfs_server
    marker, body = body_with_marker(1000)
    good_md5 = base64.b64encode(hashlib.md5(KEY_A).digest()).decode()
    cases = [
        # algorithm, key, key MD5 -> expected code
        ("AES256", KEY_A, base64.b64encode(b"\0" * 16).decode(),
         "InvalidArgument"),
        ("AES256", None, None, "InvalidArgument"),
        (None, KEY_A, good_md5, "InvalidArgument"),
        ("AES128", KEY_A, good_md5, "InvalidArgument"),
        ("AES256", b"short", base64.b64encode(
            hashlib.md5(b"short").digest()).decode(), "InvalidArgument"),
    ]
    for i, (alg, key, kmd5, code) in enumerate(cases):
        hdrs = {}
        if alg:
            hdrs["x-amz-server-side-encryption-customer-algorithm"] = alg
        if key:
            hdrs["x-amz-server-side-encryption-customer-key"] = \
                base64.b64encode(key).decode()
        if kmd5:
            hdrs["x-amz-server-side-encryption-customer-key-MD5"] = kmd5

        def add(params, **kw):
            params["headers"].update(hdrs)
        s3.meta.events.register_first("before-call.s3.PutObject", add)
        try:
            assert err(lambda: s3.put_object(Bucket=bucket, Key="k%d" % i,
                                             Body=body)) == (400, code), i
        finally:
            s3.meta.events.unregister("before-call.s3.PutObject", add)
    assert err(lambda: s3.put_object(
        Bucket=bucket, Key="kms", Body=body, ServerSideEncryption="aws:kms",
        SSEKMSKeyId="k")) == (501, "NotImplemented")
    assert err(lambda: s3.put_object(
        Bucket=bucket, Key="both", Body=body, ServerSideEncryption="AES256",
        **ssec(KEY_A))) == (400, "InvalidArgument")
    # the plaintext's Content-MD5 is checked (the store sees ciphertext)
    bad_md5 = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    assert err(lambda: s3.put_object(
        Bucket=bucket, Key="md5", Body=body, ContentMD5=bad_md5,
        ServerSideEncryption="AES256")) == (400, "BadDigest")
    good_md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
    s3.put_object(Bucket=bucket, Key="md5", Body=body, ContentMD5=good_md5,
                  **ssec(KEY_A))
    s3.delete_object(Bucket=bucket, Key="md5")
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0
    assert not drives_hold(srv, marker)


def test_sse_s3_put_get_list_and_restart(storaged):
    srv = storaged(ndrives=4)
    s3 = srv.client()
    s3.create_bucket(Bucket="enc")
    marker, big = body_with_marker(3 * 1024 * 1024 + 77)  # several pieces
    small = marker + b"tiny"
    for key, body in [("big", big), ("small", small), ("empty", b"")]:
        r = s3.put_object(Bucket="enc", Key=key, Body=body,
                          ServerSideEncryption="AES256")
        assert r["ServerSideEncryption"] == "AES256"
        assert r["ETag"].strip('"') == hashlib.md5(body).hexdigest()
    sizes = {o["Key"]: (o["Size"], o["ETag"].strip('"'))
             for o in s3.list_objects_v2(Bucket="enc")["Contents"]}
    assert sizes["big"] == (len(big), hashlib.md5(big).hexdigest())
    assert not drives_hold(srv, marker)
    srv.restart()  # the master key is read back from the store
    s3 = srv.client()
    for key, body in [("big", big), ("small", small), ("empty", b"")]:
        g = s3.get_object(Bucket="enc", Key=key)
        assert g["Body"].read() == body
        assert g["ServerSideEncryption"] == "AES256"
    g = s3.get_object(Bucket="enc", Key="big", Range="bytes=1000000-2000000")
    assert g["Body"].read() == big[1000000:2000001]
    # an SSE-C key does not apply to an SSE-S3 object
    assert err(lambda: s3.get_object(Bucket="enc", Key="small",
                                     **ssec(KEY_A)))[0] == 400


def test_bucket_default_encryption(s3, bucket):
    srv = s3.ecfs_server
    assert err(lambda: s3.get_bucket_encryption(Bucket=bucket)) == \
        (404, "ServerSideEncryptionConfigurationNotFoundError")
    s3.put_bucket_encryption(
        Bucket=bucket, ServerSideEncryptionConfiguration={"Rules": [{
            "ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
    rules = s3.get_bucket_encryption(Bucket=bucket)[
        "ServerSideEncryptionConfiguration"]["Rules"]
    assert rules[0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == \
        "AES256"
    marker, body = body_with_marker(200 * 1024)
    r = s3.put_object(Bucket=bucket, Key="d", Body=body)
    assert r["ServerSideEncryption"] == "AES256"
    assert s3.get_object(Bucket=bucket, Key="d")["Body"].read() == body
    # SSE-C on the request wins over the default
    r = s3.put_object(Bucket=bucket, Key="c", Body=body, **ssec(KEY_A))
    assert "ServerSideEncryption" not in r
    assert s3.get_object(Bucket=bucket, Key="c", **ssec(KEY_A))[
        "Body"].read() == body
    # a multipart upload gets the default too
    up = s3.create_multipart_upload(Bucket=bucket, Key="m")
    assert up["ServerSideEncryption"] == "AES256"
    pr = s3.upload_part(Bucket=bucket, Key="m", UploadId=up["UploadId"],
                        PartNumber=1, Body=body)
    s3.complete_multipart_upload(
        Bucket=bucket, Key="m", UploadId=up["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": pr["ETag"]}]})
    r = s3.get_object(Bucket=bucket, Key="m")
    assert r["ServerSideEncryption"] == "AES256"
    assert r["Body"].read() == body
    assert err(lambda: s3.put_bucket_encryption(
        Bucket=bucket, ServerSideEncryptionConfiguration={"Rules": [{
            "ApplyServerSideEncryptionByDefault": {
                "SSEAlgorithm": "aws:kms", "KMSMasterKeyID": "x"}}]})) == \
        (501, "NotImplemented")
    assert not drives_hold(srv, marker)
    s3.delete_bucket_encryption(Bucket=bucket)
    assert err(lambda: s3.get_bucket_encryption(Bucket=bucket))[0] == 404
    r = s3.put_object(Bucket=bucket, Key="p", Body=b"plain now")
    assert "ServerSideEncryption" not in r
    # the configuration goes with the bucket
    s3.put_bucket_encryption(
        Bucket=bucket, ServerSideEncryptionConfiguration={"Rules": [{
            "ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
    for k in ("d", "c", "p", "m"):
        s3.delete_object(Bucket=bucket, Key=k)
    s3.delete_bucket(Bucket=bucket)
    s3.create_bucket(Bucket=bucket)
    assert err(lambda: s3.get_bucket_encryption(Bucket=bucket))[0] == 404


def test_copy_between_sse_kinds(s3, bucket):
    srv = s3.ecfs_server
    marker, body = body_with_marker(150 * 1024 + 5)
    s3.put_object(Bucket=bucket, Key="c", Body=body, **ssec(KEY_A))
    src = {"Bucket": bucket, "Key": "c"}
    # the source key is required, and must be the right one
    assert err(lambda: s3.copy_object(Bucket=bucket, Key="x",
                                      CopySource=src))[0] == 400
    assert err(lambda: s3.copy_object(Bucket=bucket, Key="x", CopySource=src,
                                      **ssec_src(KEY_B)))[0] == 400
    # SSE-C -> SSE-S3 -> plaintext -> SSE-C (another key)
    r = s3.copy_object(Bucket=bucket, Key="s", CopySource=src,
                       ServerSideEncryption="AES256", **ssec_src(KEY_A))
    assert r["ServerSideEncryption"] == "AES256"
    s3.copy_object(Bucket=bucket, Key="p", CopySource={"Bucket": bucket,
                                                       "Key": "s"})
    assert s3.get_object(Bucket=bucket, Key="p")["Body"].read() == body
    s3.copy_object(Bucket=bucket, Key="c2", CopySource={"Bucket": bucket,
                                                        "Key": "p"},
                   **ssec(KEY_B))
    assert s3.get_object(Bucket=bucket, Key="s")["Body"].read() == body
    assert s3.get_object(Bucket=bucket, Key="c2", **ssec(KEY_B))[
        "Body"].read() == body
    assert err(lambda: s3.get_object(Bucket=bucket, Key="c2",
                                     **ssec(KEY_A)))[0] == 400
    # a part copy from an encrypted source into a plain upload
    up = s3.create_multipart_upload(Bucket=bucket, Key="m")["UploadId"]
    pc = s3.upload_part_copy(Bucket=bucket, Key="m", UploadId=up, PartNumber=1,
                             CopySource=src, CopySourceRange="bytes=10-70009",
                             **ssec_src(KEY_A))
    s3.complete_multipart_upload(
        Bucket=bucket, Key="m", UploadId=up, MultipartUpload={"Parts": [{
            "PartNumber": 1, "ETag": pc["CopyPartResult"]["ETag"]}]})
    assert s3.get_object(Bucket=bucket, Key="m")["Body"].read() == \
        body[10:70010]
    # only "p" and "m" are plaintext on purpose: the grep finds them (it
    # would find any plaintext), and nothing once they are gone
    assert drives_hold(srv, marker)
    for k in ("p", "m"):
        s3.delete_object(Bucket=bucket, Key=k)
    assert drives_clear_of(srv, marker)


# six awscli runs (~10 s each at load 20-30: its Python start-up) and a
# restart: 50 s in a passing run at load 18, past the 60 s default at 30
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_awscli_sse_and_kms_key_file(storaged, tmp_path):
    keyfile = tmp_path / "kms.key"
    keyfile.write_text(os.urandom(32).hex() + "\n")
    srv = storaged(ndrives=4, args=["--kms-key-file", str(keyfile)])
    env = dict(os.environ, AWS_ACCESS_KEY_ID=srv.access_key,
               AWS_SECRET_ACCESS_KEY=srv.secret_key,
               AWS_DEFAULT_REGION="us-east-1")
    env.pop("AWS_CA_BUNDLE", None)
    marker, body = body_with_marker(300 * 1024)
    src = tmp_path / "f"
    src.write_bytes(body)
    aws = ["/usr/bin/aws", "--endpoint-url", srv.endpoint, "s3"]
    subprocess.run(aws + ["mb", "s3://cli"], env=env, check=True,
                   capture_output=True)
    subprocess.run(aws + ["cp", str(src), "s3://cli/s3", "--sse", "AES256"],
                   env=env, check=True, capture_output=True)
    ckey = "k" * 32
    subprocess.run(aws + ["cp", str(src), "s3://cli/c", "--sse-c", "AES256",
                          "--sse-c-key", ckey], env=env, check=True,
                   capture_output=True)
    out = tmp_path / "o"
    subprocess.run(aws + ["cp", "s3://cli/s3", str(out)], env=env, check=True,
                   capture_output=True)
    assert out.read_bytes() == body
    subprocess.run(aws + ["cp", "s3://cli/c", str(out), "--sse-c", "AES256",
                          "--sse-c-key", ckey], env=env, check=True,
                   capture_output=True)
    assert out.read_bytes() == body
    bad = subprocess.run(aws + ["cp", "s3://cli/c", str(tmp_path / "x")],
                         env=env, capture_output=True)
    assert bad.returncode != 0
    assert not drives_hold(srv, marker)
    # the master key is sealed under the file's key: without it, SSE-S3
    # objects cannot be opened (and nothing else breaks)
    srv.stop()
    srv.extra_args = []
    srv.start()
    s3 = srv.client()
    assert err(lambda: s3.get_object(Bucket="cli", Key="s3"))[0] == 500
    assert s3.get_object(Bucket="cli", Key="c", **ssec(ckey.encode()))[
        "Body"].read() == body


def test_loop_get_paths_decrypt(storaged):
    """The event loop's small-GET paths (the index's copy of the body, the
    --cache-mem body cache, the io_uring meta reads) hold ciphertext too:
    every one of them must hand the body to the decryption."""
    for args in (["--cache-mem", "16", "--index-body-max", "0"],
                 ["--index-body-max", "65536"]):
        srv = storaged(ndrives=4, args=args)
        s3 = srv.client()
        s3.create_bucket(Bucket="loop")
        marker, body = body_with_marker(3000)
        s3.put_object(Bucket="loop", Key="s", Body=body,
                      ServerSideEncryption="AES256")
        s3.put_object(Bucket="loop", Key="c", Body=body, **ssec(KEY_A))
        for _ in range(3):  # the later ones come from the cache
            assert s3.get_object(Bucket="loop", Key="s")["Body"].read() == body
            assert s3.get_object(Bucket="loop", Key="c", **ssec(KEY_A))[
                "Body"].read() == body
            assert err(lambda: s3.get_object(Bucket="loop", Key="c"))[0] == 400
        assert not drives_hold(srv, marker)
        srv.stop()


def _metric(srv, name):
    import re
    import urllib.request
    text = urllib.request.urlopen(srv.endpoint + "/metrics").read().decode()
    m = re.search(r"^%s (\d+)$" % re.escape(name), text, re.M)
    return int(m.group(1))


def test_sse_s3_plaintext_cached_in_memory_only(storaged):
    """The zero-copy body cache (--zc-cache-mem) keeps an SSE-S3 object as
    the plaintext a whole-object GET opened and authenticated, in memory
    only (pipe pages): later GETs are tee'd from it, exact and with the
    SSE headers; an SSE-C key on such a GET is still refused; a range
    still opens only its packages from the drives; an overwrite is never
    answered from the old entry. An SSE-C object is never kept (its GETs
    need the key every time), and the drives never hold the plaintext."""
    srv = storaged(ndrives=4, args=["--zc-cache-mem", "16"])
    s3 = srv.client()
    s3.create_bucket(Bucket="zsse")
    marker, body = body_with_marker(300 * 1024)
    s3.put_object(Bucket="zsse", Key="s", Body=body,
                  ServerSideEncryption="AES256")
    s3.put_object(Bucket="zsse", Key="c", Body=body, **ssec(KEY_A))
    puts0 = _metric(srv, "storaged_zcache_puts_total")
    for _ in range(4):
        r = s3.get_object(Bucket="zsse", Key="c", **ssec(KEY_A))
        assert r["Body"].read() == body
        assert err(lambda: s3.get_object(Bucket="zsse", Key="c"))[0] == 400
    assert _metric(srv, "storaged_zcache_puts_total") == puts0
    assert _metric(srv, "storaged_zcache_hits_total") == 0
    for _ in range(2):  # the second offer admits
        assert s3.get_object(Bucket="zsse", Key="s")["Body"].read() == body
    assert _metric(srv, "storaged_zcache_puts_total") == puts0 + 1
    for _ in range(3):
        r = s3.get_object(Bucket="zsse", Key="s")
        assert r["ServerSideEncryption"] == "AES256"
        assert r["Body"].read() == body
    assert _metric(srv, "storaged_zcache_hits_total") == 3
    # found in the cache, then refused (its answer drops the tee'd bytes)
    assert err(lambda: s3.get_object(Bucket="zsse", Key="s",
                                     **ssec(KEY_A)))[0] == 400
    hits = _metric(srv, "storaged_zcache_hits_total")
    got = s3.get_object(Bucket="zsse", Key="s", Range="bytes=%d-%d" % (
        PKG - 5, 3 * PKG + 7))["Body"].read()
    assert got == body[PKG - 5:3 * PKG + 8]
    assert _metric(srv, "storaged_zcache_hits_total") == hits
    assert s3.get_object(Bucket="zsse", Key="s")["Body"].read() == body
    _, new = body_with_marker(200 * 1024)
    s3.put_object(Bucket="zsse", Key="s", Body=new,
                  ServerSideEncryption="AES256")
    for _ in range(3):
        assert s3.get_object(Bucket="zsse", Key="s")["Body"].read() == new
    assert not drives_hold(srv, marker)
    srv.stop()


def test_versions_of_encrypted_objects(s3, bucket):
    """An old version is moved to the companion bucket as stored: it stays
    ciphertext there and still opens with its key."""
    s3.put_bucket_versioning(Bucket=bucket,
                             VersioningConfiguration={"Status": "Enabled"})
    marker, b1 = body_with_marker(100 * 1024)
    v1 = s3.put_object(Bucket=bucket, Key="v", Body=b1,
                       **ssec(KEY_A))["VersionId"]
    v2 = s3.put_object(Bucket=bucket, Key="v", Body=b"second",
                       ServerSideEncryption="AES256")["VersionId"]
    assert s3.get_object(Bucket=bucket, Key="v")["Body"].read() == b"second"
    assert s3.get_object(Bucket=bucket, Key="v", VersionId=v1,
                         **ssec(KEY_A))["Body"].read() == b1
    assert err(lambda: s3.get_object(Bucket=bucket, Key="v",
                                     VersionId=v1))[0] == 400
    s3.copy_object(Bucket=bucket, Key="c", CopySource={
        "Bucket": bucket, "Key": "v", "VersionId": v1}, **ssec_src(KEY_A))
    assert s3.get_object(Bucket=bucket, Key="c")["Body"].read() == b1
    assert v1 != v2
    s3.delete_object(Bucket=bucket, Key="c")
    vs = s3.list_object_versions(Bucket=bucket, Prefix="c")
    for v in vs.get("Versions", []):
        s3.delete_object(Bucket=bucket, Key="c", VersionId=v["VersionId"])
    for m in vs.get("DeleteMarkers", []):
        s3.delete_object(Bucket=bucket, Key="c", VersionId=m["VersionId"])
    assert drives_clear_of(s3.ecfs_server, marker)


def test_truncation_on_the_drives_is_an_error(storaged):
    """A writer with access to the drives cuts encrypted objects at a
    package boundary, the size and the tag list together (so every
    remaining package and stripe CRC is genuine): each read of the new end
    must fail, never return the shorter body as whole. Also a cut to 0
    bytes, and an object made to look like the old layout (no
    x-ecfs-sse-fmt), which is refused with its reason."""
    srv = storaged(ndrives=4)
    s3 = srv.client()
    s3.create_bucket(Bucket="cut")
    marker, body = body_with_marker(1100 * 1024)  # 18 packages, shard files
    small = body[:100 * 1024]                      # 2 packages, inline
    for k in ("big", "big-c", "keep"):
        extra = ssec(KEY_A) if k == "big-c" else dict(
            ServerSideEncryption="AES256")
        s3.put_object(Bucket="cut", Key=k, Body=body, **extra)
    for k in ("zero", "old"):
        s3.put_object(Bucket="cut", Key=k, Body=small,
                      ServerSideEncryption="AES256")
    s3.put_object(Bucket="cut", Key="empty", Body=b"",
                  ServerSideEncryption="AES256")
    srv.stop()

    def cut_tags(npkg):
        def f(hs):
            return [(n, v[:32 * npkg] if n == b"x-ecfs-sse-tags" else v)
                    for n, v in hs]
        return f

    mib = 1024 * 1024  # 16 packages; a stripe boundary for any k of 4 drives
    for k in ("big", "big-c"):
        assert meta_util.rewrite_all(srv.drives, "cut", k.encode(), size=mib,
                                     headers=cut_tags(16)) >= 2
    assert meta_util.rewrite_all(srv.drives, "cut", b"zero",
                                 size=0, headers=cut_tags(1)) >= 2
    assert meta_util.rewrite_all(
        srv.drives, "cut", b"old",
        headers=lambda hs: [h for h in hs if h[0] != b"x-ecfs-sse-fmt"]) >= 2
    r = subprocess.run([STORAGED, "index", "rebuild"] + srv.drives,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    srv.restart()
    s3 = srv.client()
    # the forgery took: the store believes the new sizes
    assert s3.head_object(Bucket="cut", Key="big")["ContentLength"] == mib
    for k, extra in (("big", {}), ("big-c", ssec(KEY_A))):
        with pytest.raises((botocore.exceptions.ClientError,
                            botocore.exceptions.ResponseStreamingError)):
            s3.get_object(Bucket="cut", Key=k, **extra)["Body"].read()
        # the range holding the new end fails too
        assert err(lambda: s3.get_object(
            Bucket="cut", Key=k, Range="bytes=%d-%d" % (mib - 10, mib - 1),
            **extra))[0] == 500
    # a cut to 0 bytes: the empty final package is missing
    assert err(lambda: s3.get_object(Bucket="cut", Key="zero"))[0] == 500
    assert err(lambda: s3.get_object(Bucket="cut", Key="old")) == (
        500, "InternalError")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket="cut", Key="old")
    assert "older storaged layout" in e.value.response["Error"]["Message"]
    assert "layout 1 (no x-ecfs-sse-fmt)" in srv.log_text()
    # untouched neighbours still read whole
    assert s3.get_object(Bucket="cut", Key="keep")["Body"].read() == body
    assert s3.get_object(Bucket="cut", Key="empty")["Body"].read() == b""
    assert not drives_hold(srv, marker)


def mpu(s3, bucket, key, parts, create=None, part=None, complete=None):
    """A multipart upload of @parts (bodies, or (number, body) pairs),
    completed in part-number order (with @complete's extra arguments: an
    SSE-C upload needs its key there); returns the Complete answer."""
    up = s3.create_multipart_upload(Bucket=bucket, Key=key,
                                    **(create or {}))["UploadId"]
    done = {}
    for i, p in enumerate(parts):
        n, b = p if isinstance(p, tuple) else (i + 1, p)
        r = s3.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=n,
                           Body=b, **(part or {}))
        done[n] = r["ETag"]
    ps = {"Parts": [{"PartNumber": n, "ETag": e}
                    for n, e in sorted(done.items())]}
    if complete:  # SSE-C: Complete checks the key (400 without, or another)
        for extra in ({}, ssec_b64(KEY_B)):
            assert err(lambda: s3.complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=up, MultipartUpload=ps,
                **extra))[0] == 400
    return s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=up,
                                        MultipartUpload=ps,
                                        **(complete or {}))


def test_encrypted_multipart(s3, bucket):
    """SSE-C and SSE-S3 multipart uploads: each part sealed under its own
    key (a re-uploaded part too), reads across part and package
    boundaries, the key rules on parts and reads, a part copied in, and
    no plaintext on the drives."""
    srv = s3.ecfs_server
    marker, body = body_with_marker(5 * 1024 * 1024 + 3 * PKG + 77)
    p1, p2 = body[:5 * 1024 * 1024], body[5 * 1024 * 1024:]
    # SSE-C; part 2 uploaded twice (the second one counts)
    r = mpu(s3, bucket, "c", [p1, (2, b"x" * 1000), (2, p2)],
            create=ssec(KEY_A), part=ssec(KEY_A), complete=ssec_b64(KEY_A))
    g = s3.get_object(Bucket=bucket, Key="c", **ssec(KEY_A))
    assert g["Body"].read() == body and g["ETag"] == r["ETag"]
    assert g["SSECustomerKeyMD5"]
    for a, b in ((0, 99), (len(p1) - 5, len(p1) + 5),      # part boundary
                 (len(p1) + PKG - 3, len(p1) + 2 * PKG + 3),  # packages
                 (len(body) - 10, len(body) - 1)):
        assert s3.get_object(Bucket=bucket, Key="c", Range="bytes=%d-%d" % (
            a, b), **ssec(KEY_A))["Body"].read() == body[a:b + 1]
    assert s3.get_object(Bucket=bucket, Key="c", PartNumber=2, **ssec(KEY_A))[
        "Body"].read() == p2
    assert err(lambda: s3.get_object(Bucket=bucket, Key="c"))[0] == 400
    assert err(lambda: s3.get_object(Bucket=bucket, Key="c",
                                     **ssec(KEY_B)))[0] == 400
    assert s3.head_object(Bucket=bucket, Key="c", **ssec(KEY_A))[
        "ContentLength"] == len(body)
    # a part of an SSE-C upload needs the upload's key
    up = s3.create_multipart_upload(Bucket=bucket, Key="n",
                                    **ssec(KEY_A))["UploadId"]
    for extra in ({}, ssec(KEY_B)):
        assert err(lambda: s3.upload_part(
            Bucket=bucket, Key="n", UploadId=up, PartNumber=1, Body=b"z",
            **extra))[0] == 400
    s3.abort_multipart_upload(Bucket=bucket, Key="n", UploadId=up)
    # SSE-S3, with a part copied from the SSE-C object and a short last part
    up = s3.create_multipart_upload(Bucket=bucket, Key="s",
                                    ServerSideEncryption="AES256")["UploadId"]
    c1 = s3.upload_part_copy(
        Bucket=bucket, Key="s", UploadId=up, PartNumber=1,
        CopySource={"Bucket": bucket, "Key": "c"},
        CopySourceRange="bytes=0-%d" % (len(p1) - 1), **ssec_src(KEY_A))
    c2 = s3.upload_part(Bucket=bucket, Key="s", UploadId=up, PartNumber=2,
                        Body=p2)
    r = s3.complete_multipart_upload(
        Bucket=bucket, Key="s", UploadId=up, MultipartUpload={"Parts": [
            {"PartNumber": 1, "ETag": c1["CopyPartResult"]["ETag"]},
            {"PartNumber": 2, "ETag": c2["ETag"]}]})
    assert r["ServerSideEncryption"] == "AES256"
    g = s3.get_object(Bucket=bucket, Key="s")
    assert g["ServerSideEncryption"] == "AES256"
    assert g["Body"].read() == body
    # copied out of a multipart object into a plain one
    s3.copy_object(Bucket=bucket, Key="plain", CopySource={
        "Bucket": bucket, "Key": "s"})
    assert s3.get_object(Bucket=bucket, Key="plain")["Body"].read() == body
    s3.delete_object(Bucket=bucket, Key="plain")
    assert drives_clear_of(srv, marker)


def test_encrypted_multipart_survives_restart(storaged):
    """A part's seal (its tags and key salt) is kept in its part meta, so
    an upload in progress completes after a restart."""
    srv = storaged(ndrives=4)
    s3 = srv.client()
    s3.create_bucket(Bucket="rst")
    marker, body = body_with_marker(5 * 1024 * 1024 + 1000)
    up = s3.create_multipart_upload(Bucket="rst", Key="k",
                                    ServerSideEncryption="AES256")["UploadId"]
    e1 = s3.upload_part(Bucket="rst", Key="k", UploadId=up, PartNumber=1,
                        Body=body[:5 * 1024 * 1024])["ETag"]
    srv.restart()
    s3 = srv.client()
    e2 = s3.upload_part(Bucket="rst", Key="k", UploadId=up, PartNumber=2,
                        Body=body[5 * 1024 * 1024:])["ETag"]
    s3.complete_multipart_upload(
        Bucket="rst", Key="k", UploadId=up, MultipartUpload={"Parts": [
            {"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    assert s3.get_object(Bucket="rst", Key="k")["Body"].read() == body
    assert not drives_hold(srv, marker)


def test_multipart_part_list_is_sealed(storaged):
    """Each part's last package is final, so cutting whole trailing parts,
    or swapping two parts of one size, leaves every package genuine: the
    part-list MAC made at Complete must catch both (forged on the drives,
    as in test_truncation_on_the_drives_is_an_error)."""
    srv = storaged(ndrives=4)
    s3 = srv.client()
    s3.create_bucket(Bucket="mpl")
    mib5 = 5 * 1024 * 1024
    marker, body = body_with_marker(2 * mib5 + 1000)
    for k in ("cut", "swap", "keep"):
        mpu(s3, "mpl", k, [body[:mib5], body[mib5:2 * mib5],
                           body[2 * mib5:]],
            create=dict(ServerSideEncryption="AES256"))
    srv.stop()

    def joined(fn):
        def f(hs):
            return [(n, b",".join(fn(v.split(b",")))
                     if n.startswith(b"x-ecfs-part-x-ecfs-sse-") else v)
                    for n, v in hs]
        return f

    assert meta_util.rewrite_all(
        srv.drives, "mpl", b"cut", size=2 * mib5, parts=lambda p: p[:2],
        headers=joined(lambda v: v[:2])) >= 2
    swap = lambda v: [v[1], v[0], v[2]]  # noqa: E731
    assert meta_util.rewrite_all(srv.drives, "mpl", b"swap", parts=swap,
                                 headers=joined(swap)) >= 2
    r = subprocess.run([STORAGED, "index", "rebuild"] + srv.drives,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    srv.restart()
    s3 = srv.client()
    assert s3.head_object(Bucket="mpl", Key="cut")["ContentLength"] == 2 * mib5
    for k in ("cut", "swap"):
        assert err(lambda: s3.get_object(Bucket="mpl", Key=k,
                                         Range="bytes=0-9")) == (
            500, "InternalError")
    assert "fails its MAC" in srv.log_text()
    assert s3.get_object(Bucket="mpl", Key="keep")["Body"].read() == body
    assert not drives_hold(srv, marker)


def _loop_fallbacks(srv):
    import re
    import urllib.request
    text = urllib.request.urlopen(srv.endpoint + "/metrics").read().decode()
    m = re.search(r'^storaged_get_loop_total\{result="fallback"\} (\d+)$',
                  text, re.M)
    return int(m.group(1))


def test_corrupt_encrypted_shard_is_rebuilt_never_served(storaged):
    """Bit rot in a shard of an encrypted inline object: the loop's read
    finds a corrupt data shard and the GET goes to the worker's reader,
    which rebuilds the shard from parity and queues its heal. The client
    gets the object's bytes every time, never an error and never the
    corrupt bytes; a corrupt parity shard is not read by a GET."""
    import glob
    import time
    # the inline-meta layout, named (the damage is to the metas, which a
    # loop GET of an extent object does not read); no body cache (the
    # GETs counted are the first after each damage)
    srv = storaged(ndrives=4, args=["--index-body-max", "0", "--no-extents",
                                    "--zc-cache-mem", "0"])
    s3 = srv.client()
    s3.create_bucket(Bucket="rot")
    for size in (300 * 1024, 1024 * 1024):  # 2+2 inline metas
        marker, body = body_with_marker(size)
        s3.put_object(Bucket="rot", Key="o", Body=body,
                      ServerSideEncryption="AES256")
        metas = sorted(p for d in srv.drives for p in glob.glob(
            os.path.join(d, "b", "rot", "*", "*.m")))
        assert len(metas) == 4, metas
        nfb = 0
        for p in metas:  # one shard at a time
            good = open(p, "rb").read()
            bad = bytearray(good)
            bad[len(bad) // 2] ^= 0x40  # inside the inline shard
            with open(p, "wb") as f:
                f.write(bad)
            fb = _loop_fallbacks(srv)
            g = s3.get_object(Bucket="rot", Key="o")["Body"].read()
            assert g == body
            if _loop_fallbacks(srv) > fb:
                # a data shard: the loop found it corrupt, the worker's
                # reader rebuilt it and queued its heal, which rewrites it
                nfb += 1
                end = time.monotonic() + 15
                while True:
                    try:
                        meta_util._check_crc(bytearray(open(p, "rb").read()))
                        break
                    except AssertionError:
                        assert time.monotonic() < end, "not healed: " + p
                        time.sleep(0.2)
            with open(p, "wb") as f:  # a parity shard: no GET reads it
                f.write(good)
        assert nfb == 2  # the two data shards (k = 2), each once
        for _ in range(3):
            assert s3.get_object(Bucket="rot", Key="o")["Body"].read() == body
        assert not drives_hold(srv, marker)
    srv.stop()
