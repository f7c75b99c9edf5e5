"""Policy condition keys read from the request (issue 18): the operator
Null, the request-header keys (s3:x-amz-acl, s3:x-amz-copy-source,
s3:x-amz-metadata-directive, s3:x-amz-server-side-encryption,
s3:x-amz-server-side-encryption-customer-algorithm) and
s3:RequestObjectTag/NAME, s3:ExistingObjectTag/NAME (the stored object's
tags, read on a worker before the request goes on), in user and bucket
policies; and a bucket
policy's explicit Deny holding root too, as AWS holds the account's root
user (storaged/s3/policy.c, authz.c). One storaged, real boto3 clients,
users made with `storaged admin`."""
import base64
import hashlib
import json
import os

import pytest

from conftest import Storaged
from test_s3_iam import add_user, admin, anon, code

B = "data"


def _denied(fn, **kw):
    with pytest.raises(Exception) as ei:
        fn(**kw)
    assert code(ei.value) == "AccessDenied", kw
    return ei


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("polkeys"))
    s = Storaged(os.path.join(tmp, "srv"), ndrives=4, ec="2+2")
    s.start()
    s.tmp = tmp
    try:
        root = s.client()
        root.create_bucket(Bucket=B)
        for k in ("public/a", "private/b"):
            root.put_object(Bucket=B, Key=k, Body=k.encode())
        yield s
    finally:
        rc = s.stop()
        s.kill9()
        assert rc == 0, s.log_text()


def _user(srv, name, statements):
    return srv.client(*add_user(srv, srv.tmp, name, {
        "Version": "2012-10-17", "Statement": statements}))


def test_request_header_and_tag_keys(srv):
    get = {"Effect": "Allow", "Action": "s3:GetObject",
           "Resource": "arn:aws:s3:::data/*"}
    cp = _user(srv, "cp", [get, {
        "Effect": "Allow", "Action": "s3:PutObject",
        "Resource": "arn:aws:s3:::data/dst/*",
        "Condition": {"StringLike": {"s3:x-amz-copy-source": "data/public/*"},
                      "StringEquals": {"s3:x-amz-metadata-directive":
                                       "COPY"}}}])
    cp.copy_object(Bucket=B, Key="dst/1", CopySource={"Bucket": B,
                                                      "Key": "public/a"},
                   MetadataDirective="COPY")
    assert cp.get_object(Bucket=B, Key="dst/1")["Body"].read() == b"public/a"
    _denied(cp.copy_object, Bucket=B, Key="dst/2",
            CopySource={"Bucket": B, "Key": "private/b"},
            MetadataDirective="COPY")
    # no x-amz-metadata-directive: the key is absent, StringEquals fails
    _denied(cp.copy_object, Bucket=B, Key="dst/3",
            CopySource={"Bucket": B, "Key": "public/a"})
    _denied(cp.put_object, Bucket=B, Key="dst/4", Body=b"x")

    tag = _user(srv, "tag", [{
        "Effect": "Allow", "Action": "s3:PutObject",
        "Resource": "arn:aws:s3:::data/*",
        "Condition": {"StringEquals": {"s3:RequestObjectTag/security":
                                       "public"}}}])
    _denied(tag.put_object, Bucket=B, Key="t/1", Body=b"x")
    _denied(tag.put_object, Bucket=B, Key="t/1", Body=b"x",
            Tagging="security=private")
    tag.put_object(Bucket=B, Key="t/1", Body=b"x",
                   Tagging="a=b&security=public")
    root = srv.client()
    assert {"Key": "security", "Value": "public"} in \
        root.get_object_tagging(Bucket=B, Key="t/1")["TagSet"]

    acl = _user(srv, "acl", [
        {"Effect": "Allow", "Action": ["s3:PutObject", "s3:PutObjectAcl"],
         "Resource": "arn:aws:s3:::data/*"},
        {"Effect": "Deny", "Action": "s3:PutObject",
         "Resource": "arn:aws:s3:::data/*",
         "Condition": {"StringLike": {"s3:x-amz-acl": "public*"}}}])
    acl.put_object(Bucket=B, Key="a/1", Body=b"x")
    acl.put_object(Bucket=B, Key="a/2", Body=b"x", ACL="private")
    _denied(acl.put_object, Bucket=B, Key="a/3", Body=b"x", ACL="public-read")
    with pytest.raises(Exception):
        root.head_object(Bucket=B, Key="a/3")


def test_bucket_policy_deny_holds_root(srv):
    root = srv.client()
    root.create_bucket(Bucket="enc")
    root.put_bucket_policy(Bucket="enc", Policy=json.dumps({
        "Version": "2012-10-17", "Statement": [
            {"Effect": "Deny", "Principal": "*", "Action": "s3:PutObject",
             "Resource": "arn:aws:s3:::enc/s/*",
             "Condition": {"Null": {"s3:x-amz-server-side-encryption":
                                    "true"}}},
            {"Effect": "Deny", "Principal": "*", "Action": "s3:PutObject",
             "Resource": "arn:aws:s3:::enc/c/*",
             "Condition": {"StringNotEquals": {
                 "s3:x-amz-server-side-encryption-customer-algorithm":
                 "AES256"}}}]}))
    key = os.urandom(32)
    ssec = {"SSECustomerAlgorithm": "AES256",
            "SSECustomerKey": base64.b64encode(key).decode(),
            "SSECustomerKeyMD5": base64.b64encode(
                hashlib.md5(key).digest()).decode()}
    try:
        _denied(root.put_object, Bucket="enc", Key="s/k", Body=b"plain")
        r = root.put_object(Bucket="enc", Key="s/k", Body=b"sealed",
                            ServerSideEncryption="AES256")
        assert r["ServerSideEncryption"] == "AES256"
        # under enc/c/ an SSE-S3 PUT lacks the customer algorithm: denied
        # (StringNotEquals holds for an absent key); SSE-C is let in
        _denied(root.put_object, Bucket="enc", Key="c/1", Body=b"x",
                ServerSideEncryption="AES256")
        root.put_object(Bucket="enc", Key="c/1", Body=b"x", **ssec)
        # reads are not denied, and the policy stays root's to read and
        # delete (no lock-out)
        assert root.get_object(Bucket="enc", Key="s/k")["Body"].read() == \
            b"sealed"
        assert "Null" in root.get_bucket_policy(Bucket="enc")["Policy"]
    finally:
        root.delete_bucket_policy(Bucket="enc")
    root.put_object(Bucket="enc", Key="s/k2", Body=b"plain again")
    for k in ("s/k", "s/k2", "c/1"):
        root.delete_object(Bucket="enc", Key=k)
    root.delete_bucket(Bucket="enc")


def test_existing_object_tag(srv):
    """s3:ExistingObjectTag/NAME is the stored object's tag, read at each
    request: a bucket policy lets a user get, tag and read the tags of
    objects tagged security=public only, and once one is retagged private
    it is refused; a Deny on it holds root too. As the four s3-tests
    test_bucket_policy_*_existing_tag."""
    root = srv.client()
    root.create_bucket(Bucket="ext")
    root.put_object(Bucket="ext", Key="pub", Body=b"p",
                    Tagging="security=public")
    root.put_object(Bucket="ext", Key="priv", Body=b"q",
                    Tagging="security=private")
    root.put_object(Bucket="ext", Key="none", Body=b"n")
    root.put_object(Bucket="ext", Key="secret", Body=b"s",
                    Tagging="security=secret&x=1")
    cond = {"StringEquals": {"s3:ExistingObjectTag/security": "public"}}
    root.put_bucket_policy(Bucket="ext", Policy=json.dumps({
        "Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": {"AWS": ["extuser"]},
             "Action": ["s3:GetObject", "s3:GetObjectTagging",
                        "s3:PutObjectTagging"],
             "Resource": "arn:aws:s3:::ext/*", "Condition": cond},
            {"Effect": "Deny", "Principal": "*", "Action": "s3:GetObject",
             "Resource": "arn:aws:s3:::ext/*", "Condition": {
                 "StringEquals": {"s3:ExistingObjectTag/security":
                                  "secret"}}}]}))
    u = _user(srv, "extuser", [{"Effect": "Allow", "Action": "s3:ListBucket",
                                "Resource": "arn:aws:s3:::data"}])
    try:
        assert u.get_object(Bucket="ext", Key="pub")["Body"].read() == b"p"
        u.head_object(Bucket="ext", Key="pub")
        assert u.get_object_tagging(Bucket="ext", Key="pub")["TagSet"] == [
            {"Key": "security", "Value": "public"}]
        for k in ("priv", "none"):
            _denied(u.get_object, Bucket="ext", Key=k)
            _denied(u.get_object_tagging, Bucket="ext", Key=k)
        # retagged private by the user itself: refused from then on
        u.put_object_tagging(Bucket="ext", Key="pub", Tagging={"TagSet": [
            {"Key": "security", "Value": "private"}]})
        _denied(u.get_object, Bucket="ext", Key="pub")
        _denied(u.put_object_tagging, Bucket="ext", Key="pub",
                Tagging={"TagSet": [{"Key": "security", "Value": "public"}]})
        # the Deny on an existing tag holds root; other reads are root's
        _denied(root.get_object, Bucket="ext", Key="secret")
        assert root.get_object(Bucket="ext", Key="priv")["Body"].read() == \
            b"q"
        assert root.get_object_tagging(Bucket="ext", Key="secret")["TagSet"]
    finally:
        root.delete_bucket_policy(Bucket="ext")
    for k in ("pub", "priv", "none", "secret"):
        root.delete_object(Bucket="ext", Key=k)
    root.delete_bucket(Bucket="ext")


def test_condition_keys_are_checked_at_compile(srv, tmp_path):
    for cond, why in (
            ({"StringEquals": {"s3:x-amz-made-up": "1"}},
             'Condition key "s3:x-amz-made-up" is not supported'),
            ({"Null": {"s3:x-amz-acl": "maybe"}},
             'Null s3:x-amz-acl takes "true" or "false"'),
            ({"Null": {"aws:SourceIp": "true"}},
             "Null does not apply to aws:SourceIp"),
            ({"StringEquals": {"s3:RequestObjectTagKeys": "1"}},
             'Condition key "s3:RequestObjectTagKeys" is not supported')):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({"Statement": [{
            "Effect": "Allow", "Action": "s3:*",
            "Resource": "arn:aws:s3:::*", "Condition": cond}]}))
        p = admin(srv, "user", "add", "never", "--policy", str(bad),
                  check=False)
        assert p.returncode == 1 and why in p.stderr, (cond, p.stderr)


def test_public_read_write_bucket_acl(srv):
    """x-amz-acl: public-read-write on a bucket: anyone may list it and
    write and delete its objects (S3's bucket WRITE grant); the ACL answer
    lists AllUsers READ, AllUsers WRITE, then the owner."""
    root = srv.client()
    root.create_bucket(Bucket="pubrw")
    ep = root.meta.endpoint_url
    assert anon(ep + "/pubrw/k", "PUT", b"x")[0] == 403
    root.put_bucket_acl(Bucket="pubrw", ACL="public-read-write")
    try:
        g = root.get_bucket_acl(Bucket="pubrw")["Grants"]
        assert [(x["Grantee"].get("URI", "").rsplit("/", 1)[-1],
                 x["Permission"]) for x in g] == [
            ("AllUsers", "READ"), ("AllUsers", "WRITE"), ("", "FULL_CONTROL")]
        assert anon(ep + "/pubrw/k", "PUT", b"anon wrote")[0] == 200
        assert root.get_object(Bucket="pubrw", Key="k")["Body"].read() == \
            b"anon wrote"
        st, body = anon(ep + "/pubrw?list-type=2")
        assert st == 200 and b"<Key>k</Key>" in body
        # objects stay private to read unless their own ACL says otherwise
        assert anon(ep + "/pubrw/k")[0] == 403
        assert anon(ep + "/pubrw/k", "DELETE")[0] == 204
        assert "Contents" not in root.list_objects_v2(Bucket="pubrw")
        # ACL changes stay the owner's
        assert anon(ep + "/pubrw?acl", "PUT")[0] == 403
        root.put_bucket_acl(Bucket="pubrw", ACL="private")
        assert anon(ep + "/pubrw/k2", "PUT", b"x")[0] == 403
    finally:
        root.delete_bucket(Bucket="pubrw")
