"""The request-header audit (storaged/s3/audit.c, issue 18): a header that
changes what a request means and that storaged does not implement is
refused with S3's error for it, and nothing is stored, instead of being
accepted and ignored (a PUT with an SSE-C key must never leave plaintext on
the drives and answer 200). Driven with boto3 and awscli; raw signed
requests for values boto3 refuses to send."""
import os
import subprocess
import time
import uuid

import botocore.exceptions
import pytest

from test_s3_conformance import code_of, signed

SSEC_KEY = b"k" * 32
MARKER = b"plaintext-marker-" + uuid.uuid4().hex.encode()


def err(call):
    """Runs @call, which must fail; returns (HTTP status, S3 code)."""
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        call()
    r = ei.value.response
    return r["ResponseMetadata"]["HTTPStatusCode"], r["Error"]["Code"]


def absent(s3, bucket, key):
    st, _ = err(lambda: s3.head_object(Bucket=bucket, Key=key))
    return st == 404


def awscli_env(srv, tmp_path):
    """The environment /usr/bin/aws runs with against @srv: its root keys,
    us-east-1, no other AWS_* setting of the caller's."""
    cfg = tmp_path / "aws.cfg"
    cfg.write_text("[default]\nregion = us-east-1\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID=srv.access_key,
               AWS_SECRET_ACCESS_KEY=srv.secret_key, AWS_CONFIG_FILE=str(cfg),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "nocreds"),
               AWS_PAGER="")
    return env


def drives_hold(srv, needle):
    for d in srv.drives:
        for root, _, files in os.walk(d):
            for f in files:
                try:
                    with open(os.path.join(root, f), "rb") as fh:
                        if needle in fh.read():
                            return True
                except OSError:
                    pass
    return False


# FORMAT.md "DELETE and overwrite": the bytes of a deleted object leave the
# drives within PIN_GRACE s of its DELETE (at once when no zero-copy GET
# sent them in the last PIN_GRACE s: their records stay pinned that long),
# plus the reclaim thread's 200 ms tick
PIN_GRACE = 5.0


def drives_clear_of(srv, needle, within=PIN_GRACE + 1.0):
    """After a DELETE: polls until no file on the drives holds @needle.
    True when that happened within @within seconds of the call."""
    deadline = time.monotonic() + within
    while drives_hold(srv, needle):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_sse_writes_are_refused_and_store_nothing(s3, bucket):
    """What is still refused: SSE-KMS anywhere, multipart uploads too
    (SSE-C and SSE-S3 PUT, copy and multipart: test_s3_sse.py)."""
    srv = s3.ecfs_server
    body = MARKER * 64
    kms = dict(ServerSideEncryption="aws:kms", SSEKMSKeyId="some-key")
    assert err(lambda: s3.put_object(Bucket=bucket, Key="kms", Body=body,
                                     **kms)) == (501, "NotImplemented")
    assert absent(s3, bucket, "kms")
    assert err(lambda: s3.create_multipart_upload(
        Bucket=bucket, Key="m", **kms)) == (501, "NotImplemented")
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    # a copy that asks for SSE-KMS of its destination
    s3.put_object(Bucket=bucket, Key="plain", Body=b"plain bytes")
    assert err(lambda: s3.copy_object(
        Bucket=bucket, Key="copy", CopySource={"Bucket": bucket, "Key": "plain"},
        **kms)) == (501, "NotImplemented")
    assert absent(s3, bucket, "copy")
    # the refused bodies never reached a drive
    assert not drives_hold(srv, MARKER)


def test_ssec_key_on_a_plain_object_is_not_applicable(s3, bucket):
    s3.put_object(Bucket=bucket, Key="plain", Body=b"plain bytes")
    ssec = dict(SSECustomerAlgorithm="AES256", SSECustomerKey=SSEC_KEY)
    assert err(lambda: s3.get_object(Bucket=bucket, Key="plain", **ssec)) == \
        (400, "InvalidRequest")
    st, _ = err(lambda: s3.head_object(Bucket=bucket, Key="plain", **ssec))
    assert st == 400
    assert err(lambda: s3.copy_object(
        Bucket=bucket, Key="c", CopySource={"Bucket": bucket, "Key": "plain"},
        CopySourceSSECustomerAlgorithm="AES256",
        CopySourceSSECustomerKey=SSEC_KEY)) == (400, "InvalidRequest")
    assert absent(s3, bucket, "c")
    up = s3.create_multipart_upload(Bucket=bucket, Key="m")["UploadId"]
    assert err(lambda: s3.upload_part(
        Bucket=bucket, Key="m", UploadId=up, PartNumber=1, Body=b"x",
        **ssec)) == (400, "InvalidRequest")
    assert s3.list_parts(Bucket=bucket, Key="m", UploadId=up).get(
        "Parts", []) == []
    s3.abort_multipart_upload(Bucket=bucket, Key="m", UploadId=up)
    # SSE-S3's header means nothing on a read: refused, not ignored
    srv = s3.ecfs_server
    st, _, body = signed(srv, "GET", "/%s/plain" % bucket,
                         headers={"x-amz-server-side-encryption": "AES256"})
    assert (st, code_of(body)) == (400, "InvalidArgument")
    # and without any of them the object reads as before
    assert s3.get_object(Bucket=bucket, Key="plain")["Body"].read() == \
        b"plain bytes"


def test_storage_class_object_lock_and_append(s3, bucket):
    srv = s3.ecfs_server
    s3.put_object(Bucket=bucket, Key="std", Body=b"1", StorageClass="STANDARD")
    assert s3.get_object(Bucket=bucket, Key="std")["Body"].read() == b"1"
    for cls in ("GLACIER", "STANDARD_IA", "REDUCED_REDUNDANCY"):
        assert err(lambda: s3.put_object(Bucket=bucket, Key="c", Body=b"1",
                                         StorageClass=cls)) == \
            (501, "NotImplemented")
    st, _, body = signed(srv, "PUT", "/%s/c" % bucket, body=b"1",
                         headers={"x-amz-storage-class": "BOGUS"})
    assert (st, code_of(body)) == (400, "InvalidStorageClass")
    assert absent(s3, bucket, "c")
    assert err(lambda: s3.put_object(
        Bucket=bucket, Key="l", Body=b"1", ObjectLockMode="GOVERNANCE",
        ObjectLockRetainUntilDate="2030-01-01T00:00:00Z")) == \
        (400, "InvalidRequest")
    assert err(lambda: s3.put_object(
        Bucket=bucket, Key="l", Body=b"1",
        ObjectLockLegalHoldStatus="ON")) == (400, "InvalidRequest")
    assert absent(s3, bucket, "l")
    st, _, body = signed(srv, "PUT", "/%s/a" % bucket, body=b"1",
                         headers={"x-amz-write-offset-bytes": "0"})
    assert (st, code_of(body)) == (501, "NotImplemented")
    assert absent(s3, bucket, "a")
    # a bucket with Object Lock is refused and not created; false is fine
    name = "lock-" + uuid.uuid4().hex[:8]
    assert err(lambda: s3.create_bucket(
        Bucket=name, ObjectLockEnabledForBucket=True)) == \
        (501, "NotImplemented")
    assert name not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    s3.create_bucket(Bucket=name, ObjectLockEnabledForBucket=False)
    s3.head_bucket(Bucket=name)


def test_expected_bucket_owner(s3, bucket):
    owner = s3.list_buckets()["Owner"]["ID"]
    s3.put_object(Bucket=bucket, Key="o", Body=b"1", ExpectedBucketOwner=owner)
    assert s3.get_object(Bucket=bucket, Key="o",
                         ExpectedBucketOwner=owner)["Body"].read() == b"1"
    assert err(lambda: s3.put_object(Bucket=bucket, Key="o2", Body=b"1",
                                     ExpectedBucketOwner="111122223333")) == \
        (403, "AccessDenied")
    assert absent(s3, bucket, "o2")
    assert err(lambda: s3.list_objects_v2(
        Bucket=bucket, ExpectedBucketOwner="111122223333")) == \
        (403, "AccessDenied")
    assert err(lambda: s3.copy_object(
        Bucket=bucket, Key="o3", CopySource={"Bucket": bucket, "Key": "o"},
        ExpectedSourceBucketOwner="111122223333")) == (403, "AccessDenied")
    s3.copy_object(Bucket=bucket, Key="o3",
                   CopySource={"Bucket": bucket, "Key": "o"},
                   ExpectedSourceBucketOwner=owner)


def test_awscli_sse_kms_upload_fails_cleanly(s3, bucket, tmp_path):
    srv = s3.ecfs_server
    src = tmp_path / "f"
    src.write_bytes(MARKER)
    env = awscli_env(srv, tmp_path)
    p = subprocess.run(["/usr/bin/aws", "--endpoint-url", srv.endpoint, "s3",
                        "cp", "--sse", "aws:kms", str(src),
                        "s3://%s/cli" % bucket],
                       env=env, capture_output=True, timeout=60)
    assert p.returncode != 0
    assert b"NotImplemented" in p.stderr, p.stderr
    assert absent(s3, bucket, "cli")
    p = subprocess.run(["/usr/bin/aws", "--endpoint-url", srv.endpoint, "s3",
                        "cp", str(src), "s3://%s/cli" % bucket],
                       env=env, capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert s3.get_object(Bucket=bucket, Key="cli")["Body"].read() == MARKER


def test_acls_on_a_bucket_owner_enforced_bucket(s3, bucket, tmp_path):
    """A bucket with Object Ownership BucketOwnerEnforced has ACLs off: a
    write that sets one is refused (400 AccessControlListNotSupported)
    and stores nothing, through boto3 and awscli; none, or the canned
    bucket-owner-full-control, is accepted (s3/ownership.c)."""
    srv = s3.ecfs_server
    s3.put_bucket_ownership_controls(Bucket=bucket, OwnershipControls={
        "Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]})
    for kw in ({"ACL": "public-read"}, {"ACL": "private"},
               {"GrantRead": 'uri="http://acs.amazonaws.com/groups/global/'
                             'AllUsers"'}):
        assert err(lambda: s3.put_object(Bucket=bucket, Key="e", Body=b"1",
                                         **kw)) == \
            (400, "AccessControlListNotSupported")
    assert absent(s3, bucket, "e")
    s3.put_object(Bucket=bucket, Key="f", Body=b"1",
                  ACL="bucket-owner-full-control")
    src = tmp_path / "f"
    src.write_bytes(MARKER)
    env = awscli_env(srv, tmp_path)
    p = subprocess.run(["/usr/bin/aws", "--endpoint-url", srv.endpoint, "s3",
                        "cp", "--acl", "public-read", str(src),
                        "s3://%s/cli" % bucket],
                       env=env, capture_output=True, timeout=60)
    assert p.returncode != 0
    assert b"AccessControlListNotSupported" in p.stderr, p.stderr
    assert absent(s3, bucket, "cli")
    p = subprocess.run(["/usr/bin/aws", "--endpoint-url", srv.endpoint,
                        "s3api", "get-bucket-ownership-controls", "--bucket",
                        bucket], env=env, capture_output=True, timeout=60)
    assert p.returncode == 0 and b"BucketOwnerEnforced" in p.stdout, p.stderr
