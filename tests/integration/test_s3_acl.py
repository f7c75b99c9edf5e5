"""ACL grant lists (issue 18): x-amz-grant-* headers and AccessControlPolicy
bodies on buckets and objects, answered by Get*Acl and honoured for the
accounts that exist (root's and those made with `storaged admin account
add`), the AllUsers and AuthenticatedUsers groups; grantees that resolve
to nobody are refused. One shared storaged (4 drives, EC 2+2), real boto3
clients, unsigned requests as curl sends them."""

import json
import os
import subprocess
import urllib.error
import urllib.request
import uuid

import botocore
import pytest

from conftest import STORAGED, Storaged

ALL = "http://acs.amazonaws.com/groups/global/AllUsers"
AUTH = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
ROOT_ID = "02d6176db174dc93cb1b899f7c6078f08654445fe8cf1b6ce98d8855f66bdbf4"


def anon(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def code(exc):
    return exc.response["Error"]["Code"]


def denied(fn, **kw):
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        fn(**kw)
    return code(ei.value)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("acl"))
    srv = Storaged(os.path.join(tmp, "srv"), ndrives=4, ec="2+2")
    srv.start()
    try:
        root = srv.client()
        e = {"srv": srv, "root": root}
        adm = dict(os.environ, STORAGED_ROOT_USER=srv.access_key,
                   STORAGED_ROOT_PASSWORD=srv.secret_key)
        for name in ("alice", "bob"):
            p = subprocess.run([STORAGED, "admin", "--endpoint", srv.endpoint,
                                "account", "add", name], env=adm,
                               capture_output=True, text=True, timeout=30)
            assert p.returncode == 0, p.stderr
            out = json.loads(p.stdout)
            e[name] = srv.client(out["access_key"], out["secret_key"])
            e[name + "_id"] = out["id"]
        yield e
    finally:
        rc = srv.stop()
        srv.kill9()
        assert rc == 0, srv.log_text()


def grants_of(acl):
    """[(type, id or uri, display name or None, permission)] in order."""
    return [(g["Grantee"]["Type"],
             g["Grantee"].get("ID") or g["Grantee"].get("URI"),
             g["Grantee"].get("DisplayName"), g["Permission"])
            for g in acl["Grants"]]


def new_bucket(root):
    b = "acl-" + uuid.uuid4().hex[:10]
    root.create_bucket(Bucket=b)
    return b


def test_object_grant_headers(env):
    """Grant headers on PutObject are the object's ACL, exactly (no owner
    grant added), answered with display names, and honoured: alice reads
    with READ, bob does not; READ_ACP and WRITE_ACP are separate."""
    root, alice, bob = env["root"], env["alice"], env["bob"]
    b = new_bucket(root)
    aid = env["alice_id"]
    root.put_object(Bucket=b, Key="k", Body=b"data",
                    GrantRead='id="%s"' % aid, GrantReadACP="id=%s" % aid,
                    GrantFullControl='id="%s"' % ROOT_ID)
    assert grants_of(root.get_object_acl(Bucket=b, Key="k")) == [
        ("CanonicalUser", aid, "alice", "READ"),
        ("CanonicalUser", aid, "alice", "READ_ACP"),
        ("CanonicalUser", ROOT_ID, "root", "FULL_CONTROL")]
    assert alice.get_object(Bucket=b, Key="k")["Body"].read() == b"data"
    assert alice.get_object_acl(Bucket=b, Key="k")["Owner"]["ID"] == ROOT_ID
    assert denied(bob.get_object, Bucket=b, Key="k") == "AccessDenied"
    # READ_ACP is not WRITE_ACP
    assert denied(alice.put_object_acl, Bucket=b, Key="k",
                  ACL="public-read") == "AccessDenied"
    # the object's grants do not reach the bucket: alice cannot list
    assert denied(alice.list_objects_v2, Bucket=b) == "AccessDenied"
    # an overwrite without grants makes it private again
    root.put_object(Bucket=b, Key="k", Body=b"new")
    assert denied(alice.get_object, Bucket=b, Key="k") == "AccessDenied"
    assert [g[3] for g in grants_of(root.get_object_acl(Bucket=b,
                                                        Key="k"))] \
        == ["FULL_CONTROL"]


def test_access_control_policy_bodies(env):
    """PutBucketAcl and PutObjectAcl with AccessControlPolicy bodies:
    group grants (AllUsers READ lets anonymous list; AuthenticatedUsers
    only signed callers), WRITE on the bucket lets alice write objects,
    WRITE_ACP lets her change the ACL; group grants are answered first."""
    root, alice, bob = env["root"], env["alice"], env["bob"]
    srv = env["srv"]
    b = new_bucket(root)
    owner = {"ID": ROOT_ID, "DisplayName": "root"}
    root.put_bucket_acl(Bucket=b, AccessControlPolicy={"Owner": owner,
        "Grants": [
            {"Grantee": {"Type": "CanonicalUser", "ID": ROOT_ID},
             "Permission": "FULL_CONTROL"},
            {"Grantee": {"Type": "Group", "URI": ALL},
             "Permission": "READ"},
            {"Grantee": {"Type": "CanonicalUser", "ID": env["alice_id"]},
             "Permission": "WRITE"}]})
    assert grants_of(root.get_bucket_acl(Bucket=b)) == [
        ("Group", ALL, None, "READ"),
        ("CanonicalUser", ROOT_ID, "root", "FULL_CONTROL"),
        ("CanonicalUser", env["alice_id"], "alice", "WRITE")]
    assert anon("%s/%s?list-type=2" % (srv.endpoint, b))[0] == 200
    alice.put_object(Bucket=b, Key="from-alice", Body=b"a")
    assert denied(bob.put_object, Bucket=b, Key="from-bob",
                  Body=b"b") == "AccessDenied"
    # without READ_ACP alice cannot read the bucket's ACL
    assert denied(alice.get_bucket_acl, Bucket=b) == "AccessDenied"
    # AuthenticatedUsers: bob (signed) reads the object, anonymous not
    root.put_object(Bucket=b, Key="o", Body=b"o")
    root.put_object_acl(Bucket=b, Key="o", AccessControlPolicy={
        "Owner": owner, "Grants": [
            {"Grantee": {"Type": "Group", "URI": AUTH},
             "Permission": "READ"},
            {"Grantee": {"Type": "CanonicalUser", "ID": env["bob_id"]},
             "Permission": "WRITE_ACP"}]})
    assert bob.get_object(Bucket=b, Key="o")["Body"].read() == b"o"
    assert anon("%s/%s/o" % (srv.endpoint, b))[0] == 403
    # WRITE_ACP: bob may replace the ACL (and so lock himself out)
    bob.put_object_acl(Bucket=b, Key="o", ACL="private")
    assert denied(bob.get_object, Bucket=b, Key="o") == "AccessDenied"
    assert root.get_object(Bucket=b, Key="o")["Body"].read() == b"o"
    # the canned ACL again replaces the grant list
    root.put_bucket_acl(Bucket=b, ACL="private")
    assert anon("%s/%s?list-type=2" % (srv.endpoint, b))[0] == 403
    assert denied(alice.put_object, Bucket=b, Key="again",
                  Body=b"a") == "AccessDenied"


def test_grants_on_create_bucket_and_copy(env):
    """CreateBucket with grant headers records them; CopyObject's grant
    headers are the copy's ACL."""
    root, alice = env["root"], env["alice"]
    b = "acl-" + uuid.uuid4().hex[:10]
    root.create_bucket(Bucket=b, GrantRead="id=%s" % env["alice_id"])
    assert ("CanonicalUser", env["alice_id"], "alice", "READ") in \
        grants_of(root.get_bucket_acl(Bucket=b))
    root.put_object(Bucket=b, Key="src", Body=b"s")
    assert alice.list_objects_v2(Bucket=b)["KeyCount"] == 1
    root.copy_object(Bucket=b, Key="dst", CopySource={"Bucket": b,
                                                      "Key": "src"},
                     GrantRead='uri="%s"' % ALL)
    assert anon("%s/%s/dst" % (env["srv"].endpoint, b)) == (200, b"s")
    assert anon("%s/%s/src" % (env["srv"].endpoint, b))[0] == 403


def test_recreating_ones_own_bucket_resets_its_acl(env, storaged):
    """As AWS documents CreateBucket's BucketAlreadyOwnedByYou: in
    us-east-1 re-creating a bucket one's account owns answers 200 and
    resets the bucket's ACL (to the request's x-amz-acl or grants, private
    without them); its objects, policy and owner stay. Another account
    gets 409 BucketAlreadyExists and changes nothing; in any other region
    the owner gets 409 BucketAlreadyOwnedByYou and changes nothing."""
    root, alice, ep = env["root"], env["alice"], env["srv"].endpoint
    b = "acl-" + uuid.uuid4().hex[:10]
    alice.create_bucket(Bucket=b, ACL="public-read")
    alice.put_object(Bucket=b, Key="k", Body=b"k")
    pol = json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
        "Resource": "arn:aws:s3:::%s/k" % b}]})
    alice.put_bucket_policy(Bucket=b, Policy=pol)
    assert anon("%s/%s?list-type=2" % (ep, b))[0] == 200
    # another account: refused, the ACL unchanged
    assert denied(root.create_bucket, Bucket=b) == "BucketAlreadyExists"
    assert denied(env["bob"].create_bucket, Bucket=b) == "BucketAlreadyExists"
    assert anon("%s/%s?list-type=2" % (ep, b))[0] == 200
    # the owner, no ACL: 200, private again
    r = alice.create_bucket(Bucket=b)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert grants_of(alice.get_bucket_acl(Bucket=b)) == [
        ("CanonicalUser", env["alice_id"], "alice", "FULL_CONTROL")]
    assert anon("%s/%s?list-type=2" % (ep, b))[0] == 403
    assert alice.get_object(Bucket=b, Key="k")["Body"].read() == b"k"
    assert json.loads(alice.get_bucket_policy(Bucket=b)["Policy"]) == \
        json.loads(pol)
    assert anon("%s/%s/k" % (ep, b)) == (200, b"k")  # by the policy
    # the owner, with an ACL: that ACL; with grants: those grants
    alice.create_bucket(Bucket=b, ACL="public-read")
    assert anon("%s/%s?list-type=2" % (ep, b))[0] == 200
    alice.create_bucket(Bucket=b, GrantRead="id=%s" % env["bob_id"])
    assert ("CanonicalUser", env["bob_id"], "bob", "READ") in \
        grants_of(alice.get_bucket_acl(Bucket=b))
    assert anon("%s/%s?list-type=2" % (ep, b))[0] == 403
    assert env["bob"].list_objects_v2(Bucket=b)["KeyCount"] == 1
    alice.create_bucket(Bucket=b)
    assert denied(env["bob"].list_objects_v2, Bucket=b) == "AccessDenied"
    assert [o["Key"] for o in
            alice.list_objects_v2(Bucket=b)["Contents"]] == ["k"]
    # another region: 409 BucketAlreadyOwnedByYou, the ACL unchanged
    srv = storaged(ndrives=4, args=["--region", "eu-west-1"])
    c = srv.client()
    cfg = {"LocationConstraint": "eu-west-1"}
    c.create_bucket(Bucket="rcr", ACL="public-read",
                    CreateBucketConfiguration=cfg)
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        c.create_bucket(Bucket="rcr", CreateBucketConfiguration=cfg)
    assert code(ei.value) == "BucketAlreadyOwnedByYou"
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409
    assert anon("%s/rcr?list-type=2" % srv.endpoint)[0] == 200


def test_get_bucket_policy_status(env):
    """GetBucketPolicyStatus as AWS answers it: 404 NoSuchBucketPolicy
    without a bucket policy (a public ACL does not make one), IsPublic from
    the policy by the rule BlockPublicPolicy uses (an Allow to "*" not
    narrowed by aws:SourceIp). It needs s3:GetBucketPolicyStatus: another
    account is refused unless the bucket's policy grants it. (RGW and
    ceph/s3-tests also call a bucket with a public ACL public, and answer
    false without a policy; storaged follows AWS.)"""
    root, alice = env["root"], env["alice"]
    b = new_bucket(root)

    def status(c=root):
        return c.get_bucket_policy_status(Bucket=b)["PolicyStatus"]["IsPublic"]

    assert denied(status) == "NoSuchBucketPolicy"
    root.put_bucket_acl(Bucket=b, ACL="public-read")
    assert denied(status) == "NoSuchBucketPolicy"
    res = ["arn:aws:s3:::" + b, "arn:aws:s3:::%s/*" % b]

    def policy(principal, cond=None, action="s3:ListBucket"):
        st = {"Effect": "Allow", "Principal": principal, "Action": action,
              "Resource": res}
        if cond:
            st["Condition"] = cond
        root.put_bucket_policy(Bucket=b, Policy=json.dumps(
            {"Version": "2012-10-17", "Statement": [st]}))

    policy({"AWS": "*"})
    assert status() is True
    policy("*", {"IpAddress": {"aws:SourceIp": "10.0.0.0/32"}})
    assert status() is False
    policy({"AWS": "arn:aws:iam::%s:root" % env["alice_id"]})
    assert status() is False
    # another account needs the permission from the bucket's policy
    assert denied(status, c=alice) == "AccessDenied"
    policy({"AWS": "arn:aws:iam::%s:root" % env["alice_id"]},
           action="s3:GetBucketPolicyStatus")
    assert status(alice) is False
    code_, _ = anon("%s/%s?policyStatus" % (env["srv"].endpoint, b))
    assert code_ == 403
    root.delete_bucket_policy(Bucket=b)
    assert denied(status) == "NoSuchBucketPolicy"
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        root.get_bucket_policy_status(Bucket=b + "-none")
    assert code(ei.value) == "NoSuchBucket"


def test_object_ownership_controls(env):
    """S3 Object Ownership as AWS documents it (ownership.c):
    Get/Put/DeleteBucketOwnershipControls and CreateBucket's
    x-amz-object-ownership. BucketOwnerEnforced: ACLs off (setting one is
    AccessControlListNotSupported but for bucket-owner-full-control on a
    write; stored ACLs grant nothing), the bucket's owner owns every
    object; BucketOwnerPreferred: bucket-owner-full-control hands the
    object to the bucket's owner; ObjectWriter: the writer owns it and the
    bucket's account reads it only if the object's ACL grants it (it may
    delete it). Without a setting: 404 OwnershipControlsNotFoundError and
    storaged's earlier rule."""
    root, alice, ep = env["root"], env["alice"], env["srv"].endpoint

    def ownership(b):
        r = root.get_bucket_ownership_controls(Bucket=b)
        return [x["ObjectOwnership"] for x in r["OwnershipControls"]["Rules"]]

    def owner(b, k, c=root):
        return c.get_object_acl(Bucket=b, Key=k)["Owner"]["ID"]

    def shared(setting):
        b = "own-" + uuid.uuid4().hex[:10]
        kw = {"ObjectOwnership": setting} if setting else {}
        root.create_bucket(Bucket=b, **kw)
        root.put_bucket_policy(Bucket=b, Policy=json.dumps({
            "Version": "2012-10-17", "Statement": [{
                "Effect": "Allow",
                "Principal": {"AWS": "arn:aws:iam::%s:root" % env["alice_id"]},
                "Action": ["s3:PutObject", "s3:GetObject", "s3:GetObjectAcl",
                           "s3:PutObjectAcl", "s3:ListMultipartUploadParts",
                           "s3:AbortMultipartUpload"],
                "Resource": "arn:aws:s3:::%s/*" % b}]}))
        return b

    b = shared(None)
    assert denied(root.get_bucket_ownership_controls, Bucket=b) == \
        "OwnershipControlsNotFoundError"

    # BucketOwnerEnforced
    b = shared("BucketOwnerEnforced")
    assert ownership(b) == ["BucketOwnerEnforced"]
    alice.put_object(Bucket=b, Key="none", Body=b"n")
    alice.put_object(Bucket=b, Key="bofc", Body=b"f",
                     ACL="bucket-owner-full-control")
    assert owner(b, "none") == owner(b, "bofc") == ROOT_ID
    assert root.get_object(Bucket=b, Key="none")["Body"].read() == b"n"
    for kw in ({"ACL": "private"}, {"ACL": "public-read"},
               {"GrantRead": "id=%s" % env["bob_id"]}):
        assert denied(alice.put_object, Bucket=b, Key="x", Body=b"x",
                      **kw) == "AccessControlListNotSupported"
        assert denied(alice.create_multipart_upload, Bucket=b, Key="x",
                      **kw) == "AccessControlListNotSupported"
        assert denied(alice.copy_object, Bucket=b, Key="x", CopySource={
            "Bucket": b, "Key": "none"}, **kw) == \
            "AccessControlListNotSupported"
    assert denied(root.put_bucket_acl, Bucket=b, ACL="private") == \
        "AccessControlListNotSupported"
    assert denied(root.put_object_acl, Bucket=b, Key="none",
                  ACL="private") == "AccessControlListNotSupported"
    u = alice.create_multipart_upload(Bucket=b, Key="mp")["UploadId"]
    e = alice.upload_part(Bucket=b, Key="mp", UploadId=u, PartNumber=1,
                          Body=b"m")["ETag"]
    lp = alice.list_parts(Bucket=b, Key="mp", UploadId=u)
    assert (lp["Initiator"]["ID"], lp["Owner"]["ID"]) == \
        (env["alice_id"], ROOT_ID)
    alice.complete_multipart_upload(Bucket=b, Key="mp", UploadId=u,
                                    MultipartUpload={"Parts": [
                                        {"PartNumber": 1, "ETag": e}]})
    assert owner(b, "mp") == ROOT_ID
    # stored ACLs grant nothing once it is set; a public bucket ACL refuses it
    b2 = "own-" + uuid.uuid4().hex[:10]
    root.create_bucket(Bucket=b2, ACL="public-read")
    root.put_object(Bucket=b2, Key="p", Body=b"p", ACL="public-read")
    assert anon("%s/%s/p" % (ep, b2)) == (200, b"p")
    enforced = {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    assert denied(root.put_bucket_ownership_controls, Bucket=b2,
                  OwnershipControls=enforced) == \
        "InvalidBucketAclWithObjectOwnership"
    root.put_bucket_acl(Bucket=b2, ACL="private")
    root.put_bucket_ownership_controls(Bucket=b2, OwnershipControls=enforced)
    assert anon("%s/%s/p" % (ep, b2))[0] == 403
    root.delete_bucket_ownership_controls(Bucket=b2)
    assert denied(root.get_bucket_ownership_controls, Bucket=b2) == \
        "OwnershipControlsNotFoundError"
    assert anon("%s/%s/p" % (ep, b2)) == (200, b"p")
    assert denied(root.create_bucket, Bucket="own-" + uuid.uuid4().hex[:10],
                  ACL="public-read", ObjectOwnership="BucketOwnerEnforced") \
        == "InvalidBucketAclWithObjectOwnership"
    assert denied(root.create_bucket, Bucket="own-" + uuid.uuid4().hex[:10],
                  ObjectOwnership="Nobody") == "InvalidArgument"
    assert denied(root.put_bucket_ownership_controls, Bucket=b2,
                  OwnershipControls={"Rules": [
                      {"ObjectOwnership": "ObjectWriter"},
                      {"ObjectOwnership": "ObjectWriter"}]}) == "MalformedXML"
    # another account may not change it
    assert denied(alice.put_bucket_ownership_controls, Bucket=b2,
                  OwnershipControls=enforced) == "AccessDenied"

    # BucketOwnerPreferred
    b = shared("BucketOwnerPreferred")
    alice.put_object(Bucket=b, Key="none", Body=b"n")
    alice.put_object(Bucket=b, Key="priv", Body=b"p", ACL="private")
    alice.put_object(Bucket=b, Key="bofc", Body=b"f",
                     ACL="bucket-owner-full-control")
    # the bucket's account reads the ACL of the objects it owns only
    assert owner(b, "none", alice) == owner(b, "priv", alice) == \
        env["alice_id"]
    assert denied(root.get_object_acl, Bucket=b, Key="none") == "AccessDenied"
    assert owner(b, "bofc") == owner(b, "bofc", alice) == ROOT_ID
    u = alice.create_multipart_upload(Bucket=b, Key="mp",
                                      ACL="bucket-owner-full-control")[
        "UploadId"]
    e = alice.upload_part(Bucket=b, Key="mp", UploadId=u, PartNumber=1,
                          Body=b"m")["ETag"]
    u2 = alice.create_multipart_upload(Bucket=b, Key="mp2")["UploadId"]
    for up, want in ((u, ROOT_ID), (u2, env["alice_id"])):
        lp = alice.list_parts(Bucket=b, Key="mp" if up == u else "mp2",
                              UploadId=up)
        assert (lp["Initiator"]["ID"], lp["Owner"]["ID"]) == \
            (env["alice_id"], want)
    alice.abort_multipart_upload(Bucket=b, Key="mp2", UploadId=u2)
    alice.complete_multipart_upload(Bucket=b, Key="mp", UploadId=u,
                                    MultipartUpload={"Parts": [
                                        {"PartNumber": 1, "ETag": e}]})
    assert owner(b, "mp") == ROOT_ID
    root.put_bucket_acl(Bucket=b, ACL="private")  # ACLs stay on

    # ObjectWriter: the bucket's account has what the object's ACL grants
    b = shared("ObjectWriter")
    alice.put_object(Bucket=b, Key="mine", Body=b"m")
    alice.put_object(Bucket=b, Key="bofc", Body=b"f",
                     ACL="bucket-owner-full-control")
    assert denied(root.get_object, Bucket=b, Key="mine") == "AccessDenied"
    assert denied(root.get_object_acl, Bucket=b, Key="mine") == "AccessDenied"
    assert alice.get_object_acl(Bucket=b, Key="mine")["Owner"]["ID"] == \
        env["alice_id"]
    assert root.get_object(Bucket=b, Key="bofc")["Body"].read() == b"f"
    assert owner(b, "bofc") == owner(b, "bofc", alice) == env["alice_id"]
    alice.put_object_acl(Bucket=b, Key="mine", GrantRead="id=%s" % ROOT_ID)
    assert root.get_object(Bucket=b, Key="mine")["Body"].read() == b"m"
    root.delete_object(Bucket=b, Key="bofc")
    assert [o["Key"] for o in root.list_objects_v2(Bucket=b)["Contents"]] \
        == ["mine"]


def test_grantees_that_resolve_to_nobody(env):
    """An unknown canonical id or group is InvalidArgument, an email
    address UnresolvableGrantByEmailAddress (no account has one), a
    malformed header InvalidArgument, x-amz-acl with grants InvalidRequest,
    a body that is not an AccessControlPolicy MalformedACLError; each
    stores nothing."""
    root = env["root"]
    b = new_bucket(root)
    bad = "0" * 64
    assert denied(root.put_object, Bucket=b, Key="k", Body=b"x",
                  GrantRead="id=%s" % bad) == "InvalidArgument"
    assert denied(root.put_object, Bucket=b, Key="k", Body=b"x",
                  GrantRead='uri="http://acs.amazonaws.com/groups/global/'
                            'Nobody"') == "InvalidArgument"
    assert denied(root.put_object, Bucket=b, Key="k", Body=b"x",
                  GrantRead='emailAddress="a@example.com"') == \
        "UnresolvableGrantByEmailAddress"
    assert denied(root.put_object, Bucket=b, Key="k", Body=b"x",
                  GrantRead='id') == "InvalidArgument"
    assert denied(root.put_object, Bucket=b, Key="k", Body=b"x",
                  ACL="public-read",
                  GrantRead="id=%s" % ROOT_ID) == "InvalidRequest"
    assert "Contents" not in root.list_objects_v2(Bucket=b)
    pol = {"Owner": {"ID": ROOT_ID}, "Grants": [
        {"Grantee": {"Type": "CanonicalUser", "ID": bad},
         "Permission": "READ"}]}
    assert denied(root.put_bucket_acl, Bucket=b,
                  AccessControlPolicy=pol) == "InvalidArgument"
    pol["Grants"][0]["Grantee"] = {"Type": "AmazonCustomerByEmail",
                                   "EmailAddress": "a@example.com"}
    assert denied(root.put_bucket_acl, Bucket=b,
                  AccessControlPolicy=pol) == \
        "UnresolvableGrantByEmailAddress"
    pol["Grants"][0]["Grantee"] = {"Type": "CanonicalUser", "ID": ROOT_ID}
    pol["Grants"][0]["Permission"] = "EVERYTHING"
    assert denied(root.put_bucket_acl, Bucket=b,
                  AccessControlPolicy=pol) == "MalformedACLError"
    # what boto3 will not send: a raw body
    assert denied_raw(env, b, b"<AccessControlPolicy><AccessControlList>"
                      b"<Grant><Permission>READ</Permission></Grant>"
                      b"</AccessControlList></AccessControlPolicy>") == \
        (400, "MalformedACLError")
    assert denied_raw(env, b, b"<NotAnAcl/>") == (400, "MalformedACLError")
    assert denied_raw(env, b, b"<AccessControlPolicy>") == \
        (400, "MalformedXML")
    assert [g[3] for g in grants_of(root.get_bucket_acl(Bucket=b))] == \
        ["FULL_CONTROL"]


def denied_raw(env, bucket, body):
    """(status, error code) of PUT /bucket?acl with @body, signed."""
    import hashlib
    import re
    from s3util import sign_headers
    srv = env["srv"]
    h = {"host": srv.endpoint.split("://", 1)[1]}
    sign_headers("PUT", "/" + bucket, [("acl", "")], h,
                 hashlib.sha256(body).hexdigest(), srv.access_key,
                 srv.secret_key)
    req = urllib.request.Request("%s/%s?acl" % (srv.endpoint, bucket),
                                 data=body, method="PUT", headers=h)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, None
    except urllib.error.HTTPError as e:
        m = re.search(rb"<Code>([^<]*)</Code>", e.read())
        return e.code, m.group(1).decode() if m else None


def test_bucket_owner_canned_acls_and_public_access_block(env):
    """bucket-owner-read / -full-control on an object another account
    writes grant the bucket's owner READ / FULL_CONTROL; the public access
    block's BlockPublicAcls refuses public grant lists as it refuses
    public canned ACLs."""
    root, alice = env["root"], env["alice"]
    b = new_bucket(root)
    root.put_bucket_acl(Bucket=b, GrantWrite="id=%s" % env["alice_id"],
                        GrantFullControl="id=%s" % ROOT_ID)
    alice.put_object(Bucket=b, Key="r", Body=b"r", ACL="bucket-owner-read")
    assert grants_of(alice.get_object_acl(Bucket=b, Key="r")) == [
        ("CanonicalUser", env["alice_id"], "alice", "FULL_CONTROL"),
        ("CanonicalUser", ROOT_ID, "root", "READ")]
    alice.put_object(Bucket=b, Key="f", Body=b"f",
                     ACL="bucket-owner-full-control")
    assert grants_of(alice.get_object_acl(Bucket=b, Key="f"))[1] == \
        ("CanonicalUser", ROOT_ID, "root", "FULL_CONTROL")
    root.put_public_access_block(Bucket=b, PublicAccessBlockConfiguration={
        "BlockPublicAcls": True, "IgnorePublicAcls": False,
        "BlockPublicPolicy": False, "RestrictPublicBuckets": False})
    assert denied(root.put_object, Bucket=b, Key="p", Body=b"p",
                  GrantRead='uri="%s"' % AUTH) == "AccessDenied"
    assert denied(root.put_bucket_acl, Bucket=b, AccessControlPolicy={
        "Owner": {"ID": ROOT_ID}, "Grants": [
            {"Grantee": {"Type": "Group", "URI": ALL},
             "Permission": "READ"}]}) == "AccessDenied"
    # a grant list naming accounts only is not public
    root.put_object(Bucket=b, Key="p", Body=b"p",
                    GrantRead="id=%s" % env["alice_id"])
    assert alice.get_object(Bucket=b, Key="p")["Body"].read() == b"p"


def test_grants_survive_restart(env, storaged, tmp_path):
    """Grant lists are kept in the access-control state on the drives."""
    srv = storaged(ndrives=4)
    root = srv.client()
    b = new_bucket(root)
    root.put_object(Bucket=b, Key="k", Body=b"k",
                    GrantRead='uri="%s"' % ALL)
    root.put_bucket_acl(Bucket=b, GrantRead='uri="%s"' % ALL,
                        GrantFullControl="id=%s" % ROOT_ID)
    srv.restart()
    assert anon("%s/%s/k" % (srv.endpoint, b)) == (200, b"k")
    assert anon("%s/%s?list-type=2" % (srv.endpoint, b))[0] == 200


@pytest.mark.parametrize("versioned", [False, True])
def test_multipart_upload_keeps_its_acl(env, versioned):
    """CreateMultipartUpload's grant headers or canned ACL are the
    completed object's ACL (kept with the upload, never shown as a
    header), also after a retried Complete; an upload without one
    completes private."""
    root = env["root"]
    srv = env["srv"]
    b = new_bucket(root)
    if versioned:
        root.put_bucket_versioning(Bucket=b, VersioningConfiguration={
            "Status": "Enabled"})

    def mpu(key, **kw):
        up = root.create_multipart_upload(Bucket=b, Key=key, **kw)
        e = root.upload_part(Bucket=b, Key=key, UploadId=up["UploadId"],
                             PartNumber=1, Body=b"m" * 1000)["ETag"]
        done = {"Parts": [{"PartNumber": 1, "ETag": e}]}
        root.complete_multipart_upload(Bucket=b, Key=key,
                                       UploadId=up["UploadId"],
                                       MultipartUpload=done)
        return up["UploadId"], done

    uid, done = mpu("g", GrantRead='uri="%s"' % ALL,
                    GrantFullControl="id=" + ROOT_ID)
    # a retried Complete (its answer lost) leaves the ACL the first set
    root.complete_multipart_upload(Bucket=b, Key="g", UploadId=uid,
                                   MultipartUpload=done)
    mpu("c", ACL="public-read")
    mpu("p")
    assert anon("%s/%s/g" % (srv.endpoint, b)) == (200, b"m" * 1000)
    assert anon("%s/%s/c" % (srv.endpoint, b)) == (200, b"m" * 1000)
    assert anon("%s/%s/p" % (srv.endpoint, b))[0] == 403
    assert grants_of(root.get_object_acl(Bucket=b, Key="g")) == [
        ("Group", ALL, None, "READ"),
        ("CanonicalUser", ROOT_ID, "root", "FULL_CONTROL")]
    h = root.head_object(Bucket=b, Key="g")["ResponseMetadata"]["HTTPHeaders"]
    assert not any(k.startswith("x-ecfs") for k in h)
