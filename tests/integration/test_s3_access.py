"""Who is told what (issue 18): the answer to a refused request on a
missing bucket or key, as AWS gives it. One shared storaged (4 drives, EC
2+2), real boto3 clients, unsigned requests as curl sends them.
"""

import hashlib
import json
import os
import subprocess
import urllib.error
import urllib.request
import uuid

import pytest

from conftest import STORAGED, Storaged
from s3util import sign_headers


def anon(url, method="GET", data=None):
    """Status and body of an unsigned request."""
    req = urllib.request.Request(url, method=method, data=data)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def requests_put(srv, bucket, sub, body):
    """A SigV4-signed PUT /bucket?sub with @body, as root: (status, body)
    (boto3 would refuse to send a malformed configuration)."""
    host = srv.endpoint.split("://", 1)[1]
    h = {"host": host}
    sign_headers("PUT", "/" + bucket, [(sub, "")], h,
                 hashlib.sha256(body).hexdigest(), srv.access_key,
                 srv.secret_key)
    req = urllib.request.Request("%s/%s?%s" % (srv.endpoint, bucket, sub),
                                 data=body, method="PUT", headers=h)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def code(exc):
    return exc.response["Error"]["Code"]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("access"))
    srv = Storaged(os.path.join(tmp, "srv"), ndrives=4, ec="2+2")
    srv.start()
    try:
        yield {"srv": srv, "root": srv.client(), "tmp": tmp}
    finally:
        rc = srv.stop()
        srv.kill9()
        assert rc == 0, srv.log_text()


def test_refusals_on_missing_buckets_and_keys(env):
    """A bucket that does not exist is 404 NoSuchBucket whoever asks; a
    missing key is 404 NoSuchKey to a caller who may list the bucket, else
    403 (AWS's rule); a key that exists stays 403, and nothing changes."""
    root, ep = env["root"], env["srv"].endpoint
    gone = "gone-" + uuid.uuid4().hex[:6]
    st, body = anon(ep + "/" + gone + "/k")
    assert st == 404 and b"<Code>NoSuchBucket</Code>" in body
    for method, data in (("DELETE", None), ("PUT", b"zz"), ("HEAD", None)):
        st, body = anon(ep + "/" + gone + "/k", method, data)
        assert st == 404, (method, st, body)
    st, body = anon(ep + "/" + gone + "?list-type=2")
    assert st == 404 and b"NoSuchBucket" in body
    assert gone not in [b["Name"] for b in root.list_buckets()["Buckets"]]

    pub = "pub-" + uuid.uuid4().hex[:6]
    priv = "priv-" + uuid.uuid4().hex[:6]
    root.create_bucket(Bucket=pub, ACL="public-read")
    root.create_bucket(Bucket=priv)
    try:
        root.put_object(Bucket=pub, Key="there", Body=b"x")
        root.put_object(Bucket=priv, Key="there", Body=b"x")
        # may list: a missing key is NoSuchKey, a private one AccessDenied
        st, body = anon(ep + "/" + pub + "/missing")
        assert st == 404 and b"<Code>NoSuchKey</Code>" in body
        assert anon(ep + "/" + pub + "/missing", "HEAD")[0] == 404
        st, body = anon(ep + "/" + pub + "/there")
        assert st == 403 and b"AccessDenied" in body
        # a write or delete is refused whether the key exists or not
        for key in ("there", "missing"):
            st, body = anon(ep + "/" + pub + "/" + key, "DELETE")
            assert st == 403 and b"AccessDenied" in body, key
            st, body = anon(ep + "/" + pub + "/" + key, "PUT", b"new")
            assert st == 403 and b"AccessDenied" in body, key
        # may not list: 403 either way, so keys cannot be probed
        for key in ("there", "missing"):
            st, body = anon(ep + "/" + priv + "/" + key)
            assert st == 403 and b"AccessDenied" in body, key
        assert root.get_object(Bucket=pub, Key="there")["Body"].read() == b"x"
        names = [o["Key"] for o in
                 root.list_objects_v2(Bucket=pub).get("Contents", [])]
        assert names == ["there"]
        # the system area stays closed without a hint
        st, body = anon(ep + "/storaged..system/iam.json")
        assert st in (400, 403), (st, body)
    finally:
        for b in (pub, priv):
            root.delete_object(Bucket=b, Key="there")
            root.delete_bucket(Bucket=b)
    # deleted: the bucket is gone for everyone, anonymous callers included
    st, body = anon(ep + "/" + pub + "/there")
    assert st == 404 and b"NoSuchBucket" in body


PAB_ALL = {"BlockPublicAcls": True, "IgnorePublicAcls": True,
           "BlockPublicPolicy": True, "RestrictPublicBuckets": True}


def pab(**kw):
    conf = {k: False for k in PAB_ALL}
    conf.update(kw)
    return conf


def public_policy(bucket, extra=None):
    st = {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
          "Resource": "arn:aws:s3:::%s/*" % bucket}
    if extra:
        st.update(extra)
    return json.dumps({"Version": "2012-10-17", "Statement": [st]})


def test_public_access_block_stored(env):
    """Put/Get/DeletePublicAccessBlock round trip; malformed bodies are
    refused and change nothing; the configuration survives a restart and
    goes with its bucket."""
    root, srv = env["root"], env["srv"]
    b = "pab-" + uuid.uuid4().hex[:6]
    root.create_bucket(Bucket=b)
    with pytest.raises(Exception) as ei:
        root.get_public_access_block(Bucket=b)
    assert code(ei.value) == "NoSuchPublicAccessBlockConfiguration"
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    # deleting what is not there is 204, as S3
    r = root.delete_public_access_block(Bucket=b)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    for conf in (pab(BlockPublicAcls=True, BlockPublicPolicy=True),
                 pab(), PAB_ALL):
        root.put_public_access_block(Bucket=b,
                                     PublicAccessBlockConfiguration=conf)
        got = root.get_public_access_block(Bucket=b)
        assert got["PublicAccessBlockConfiguration"] == conf
    for body in (b"<PublicAccessBlockConfiguration><BlockPublicAcls>yes"
                 b"</BlockPublicAcls></PublicAccessBlockConfiguration>",
                 b"<Other/>", b"<PublicAccessBlockConfiguration><Bogus>true"
                 b"</Bogus></PublicAccessBlockConfiguration>", b"<<"):
        r = requests_put(srv, b, "publicAccessBlock", body)
        assert r[0] == 400 and b"MalformedXML" in r[1], r
    got = root.get_public_access_block(Bucket=b)
    assert got["PublicAccessBlockConfiguration"] == PAB_ALL
    with pytest.raises(Exception) as ei:
        root.get_public_access_block(Bucket="nosuch-" + b)
    assert code(ei.value) == "NoSuchBucket"
    srv.stop()
    srv.start()
    env["root"] = root = srv.client()
    got = root.get_public_access_block(Bucket=b)
    assert got["PublicAccessBlockConfiguration"] == PAB_ALL
    root.delete_public_access_block(Bucket=b)
    with pytest.raises(Exception) as ei:
        root.get_public_access_block(Bucket=b)
    assert code(ei.value) == "NoSuchPublicAccessBlockConfiguration"
    root.put_public_access_block(Bucket=b,
                                 PublicAccessBlockConfiguration=PAB_ALL)
    root.delete_bucket(Bucket=b)
    root.create_bucket(Bucket=b)
    with pytest.raises(Exception) as ei:
        root.get_public_access_block(Bucket=b)
    assert code(ei.value) == "NoSuchPublicAccessBlockConfiguration"
    root.delete_bucket(Bucket=b)


def test_public_access_block_enforced(env):
    root, ep = env["root"], env["srv"].endpoint
    b = "pabe-" + uuid.uuid4().hex[:6]
    root.create_bucket(Bucket=b)
    try:
        root.put_object(Bucket=b, Key="pub", Body=b"p", ACL="public-read")
        root.put_bucket_acl(Bucket=b, ACL="public-read")
        assert anon(ep + "/" + b + "/pub") == (200, b"p")
        assert anon(ep + "/" + b + "?list-type=2")[0] == 200
        # BlockPublicAcls: no new public ACL, on buckets or objects, even
        # for root; private still works; what is public stays public
        root.put_public_access_block(
            Bucket=b, PublicAccessBlockConfiguration=pab(BlockPublicAcls=True))
        for acl in ("public-read", "public-read-write", "authenticated-read"):
            for call in (lambda: root.put_bucket_acl(Bucket=b, ACL=acl),
                         lambda: root.put_object(Bucket=b, Key="n", Body=b"",
                                                 ACL=acl),
                         lambda: root.put_object_acl(Bucket=b, Key="pub",
                                                     ACL=acl),
                         lambda: root.copy_object(
                             Bucket=b, Key="n", ACL=acl,
                             CopySource={"Bucket": b, "Key": "pub"}),
                         lambda: root.create_multipart_upload(
                             Bucket=b, Key="n", ACL=acl)):
                with pytest.raises(Exception) as ei:
                    call()
                assert code(ei.value) == "AccessDenied", acl
        assert "Contents" not in root.list_objects_v2(Bucket=b, Prefix="n")
        root.put_object(Bucket=b, Key="priv", Body=b"", ACL="private")
        assert anon(ep + "/" + b + "/pub") == (200, b"p")
        # IgnorePublicAcls: the public ACLs grant nothing now, and again
        # once it is lifted
        root.put_public_access_block(
            Bucket=b,
            PublicAccessBlockConfiguration=pab(IgnorePublicAcls=True))
        assert anon(ep + "/" + b + "/pub")[0] == 403
        assert anon(ep + "/" + b + "?list-type=2")[0] == 403
        assert root.get_object(Bucket=b, Key="pub")["Body"].read() == b"p"
        root.delete_public_access_block(Bucket=b)
        assert anon(ep + "/" + b + "/pub") == (200, b"p")
        # BlockPublicPolicy: a public policy is refused, one narrowed to
        # an address is not
        root.put_public_access_block(
            Bucket=b,
            PublicAccessBlockConfiguration=pab(BlockPublicPolicy=True))
        with pytest.raises(Exception) as ei:
            root.put_bucket_policy(Bucket=b, Policy=public_policy(b))
        assert code(ei.value) == "AccessDenied"
        with pytest.raises(Exception) as ei:
            root.get_bucket_policy(Bucket=b)
        assert code(ei.value) == "NoSuchBucketPolicy"
        root.put_bucket_policy(Bucket=b, Policy=public_policy(b, {
            "Condition": {"IpAddress": {"aws:SourceIp": "10.9.9.0/24"}}}))
        # RestrictPublicBuckets: a public policy stops granting anonymous
        # callers; the owner keeps access
        root.delete_public_access_block(Bucket=b)
        root.put_bucket_acl(Bucket=b, ACL="private")
        root.put_object_acl(Bucket=b, Key="pub", ACL="private")
        root.put_bucket_policy(Bucket=b, Policy=public_policy(b))
        assert anon(ep + "/" + b + "/pub") == (200, b"p")
        root.put_public_access_block(
            Bucket=b,
            PublicAccessBlockConfiguration=pab(RestrictPublicBuckets=True))
        assert anon(ep + "/" + b + "/pub")[0] == 403
        assert root.get_object(Bucket=b, Key="pub")["Body"].read() == b"p"
        root.delete_public_access_block(Bucket=b)
        assert anon(ep + "/" + b + "/pub") == (200, b"p")
    finally:
        root.delete_bucket_policy(Bucket=b)
        for k in ("pub", "priv"):
            root.delete_object(Bucket=b, Key=k)
        root.delete_bucket(Bucket=b)


# ---- accounts ----

def admin(srv, *args, check=True):
    env = dict(os.environ, STORAGED_ROOT_USER=srv.access_key,
               STORAGED_ROOT_PASSWORD=srv.secret_key)
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        env.pop(k, None)
    p = subprocess.run([STORAGED, "admin", "--endpoint", srv.endpoint]
                       + list(args), env=env, capture_output=True, text=True,
                       timeout=30)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def account(env, name):
    """Account @name made with the real CLI, once per module: (client,
    its answer)."""
    accts = env.setdefault("accounts", {})
    if name not in accts:
        out = json.loads(admin(env["srv"], "account", "add", name).stdout)
        assert out["account"] == name and len(out["id"]) == 64
        accts[name] = out
    out = accts[name]
    return env["srv"].client(out["access_key"], out["secret_key"]), out


def status(exc):
    return exc.response["ResponseMetadata"]["HTTPStatusCode"]


def test_accounts_own_their_buckets(env):
    """Two boto3 clients of two accounts: each owns what it creates, sees
    only its buckets, cannot read, write, list or re-create the other's,
    and root (the root account) is held to the same rule."""
    root = env["root"]
    alice, a = account(env, "alice")
    bob, bo = account(env, "bob")
    ab, bb, rb = ("acc-" + uuid.uuid4().hex[:6] + s for s in "abr")
    alice.create_bucket(Bucket=ab)
    bob.create_bucket(Bucket=bb)
    root.create_bucket(Bucket=rb)
    try:
        alice.put_object(Bucket=ab, Key="k", Body=b"alice's")
        root.put_object(Bucket=rb, Key="k", Body=b"root's")
        got = alice.list_buckets()
        assert [x["Name"] for x in got["Buckets"]] == [ab]
        assert got["Owner"] == {"ID": a["id"], "DisplayName": "alice"}
        names = [x["Name"] for x in root.list_buckets()["Buckets"]]
        assert rb in names and ab not in names and bb not in names
        # re-creating: one's own is 200 (us-east-1), another's 409
        alice.create_bucket(Bucket=ab)
        for c, name in ((bob, ab), (root, ab), (alice, rb)):
            with pytest.raises(Exception) as ei:
                c.create_bucket(Bucket=name)
            assert code(ei.value) == "BucketAlreadyExists"
            assert status(ei.value) == 409
        # nothing of another account's, whatever the key's state
        for c, name in ((bob, ab), (root, ab), (alice, rb)):
            for call in (lambda: c.get_object(Bucket=name, Key="k"),
                         lambda: c.head_object(Bucket=name, Key="k"),
                         lambda: c.put_object(Bucket=name, Key="k", Body=b"x"),
                         lambda: c.delete_object(Bucket=name, Key="k"),
                         lambda: c.list_objects_v2(Bucket=name),
                         lambda: c.get_bucket_acl(Bucket=name),
                         lambda: c.put_bucket_policy(Bucket=name,
                                                     Policy=public_policy(
                                                         name)),
                         lambda: c.delete_bucket(Bucket=name),
                         lambda: c.copy_object(
                             Bucket=bb if c is bob else
                             (rb if c is root else ab), Key="stolen",
                             CopySource={"Bucket": name, "Key": "k"})):
                with pytest.raises(Exception) as ei:
                    call()
                assert status(ei.value) == 403, (name, ei.value)
        assert alice.get_object(Bucket=ab, Key="k")["Body"].read() == \
            b"alice's"
        assert root.get_object(Bucket=rb, Key="k")["Body"].read() == b"root's"
        for c, name in ((bob, bb), (root, rb), (alice, ab)):
            assert "Contents" not in c.list_objects_v2(Bucket=name,
                                                       Prefix="stolen")
        # the owner in ACL answers is the bucket's account
        acl = alice.get_bucket_acl(Bucket=ab)
        assert acl["Owner"]["ID"] == a["id"]
        assert acl["Grants"][0]["Grantee"]["ID"] == a["id"]
        # the admin API stays the root account's
        p = subprocess.run([STORAGED, "admin", "--endpoint",
                            env["srv"].endpoint, "user", "list"],
                           env=dict(os.environ, STORAGED_ROOT_USER="",
                                    AWS_ACCESS_KEY_ID=a["access_key"],
                                    AWS_SECRET_ACCESS_KEY=a["secret_key"]),
                           capture_output=True, text=True, timeout=30)
        assert p.returncode != 0 and "AccessDenied" in p.stderr
        listed = json.loads(admin(env["srv"], "account", "list").stdout)
        byname = {x["name"]: x for x in listed["accounts"]}
        assert byname["alice"]["buckets"] == [ab]
        assert byname["bob"]["id"] == bo["id"]
    finally:
        alice.delete_object(Bucket=ab, Key="k")
        root.delete_object(Bucket=rb, Key="k")
        alice.delete_bucket(Bucket=ab)
        bob.delete_bucket(Bucket=bb)
        root.delete_bucket(Bucket=rb)


def test_cross_account_through_policy_and_acl(env):
    """Another account gets in only through the bucket's policy or canned
    ACLs; what it writes there it owns (it may read it back), and a Deny
    holds it."""
    root = env["root"]
    alice, a = account(env, "alice")
    b = "xacc-" + uuid.uuid4().hex[:6]
    root.create_bucket(Bucket=b)
    try:
        root.put_object(Bucket=b, Key="in/shared", Body=b"shared")
        root.put_object(Bucket=b, Key="priv", Body=b"p")
        with pytest.raises(Exception) as ei:
            alice.get_object(Bucket=b, Key="in/shared")
        assert status(ei.value) == 403
        root.put_bucket_policy(Bucket=b, Policy=json.dumps({
            "Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Principal": {"AWS": "alice"},
                 "Action": ["s3:GetObject", "s3:PutObject"],
                 "Resource": "arn:aws:s3:::%s/in/*" % b},
                {"Effect": "Deny", "Principal": "*",
                 "Action": "s3:PutObject",
                 "Resource": "arn:aws:s3:::%s/in/ro*" % b}]}))
        assert alice.get_object(Bucket=b, Key="in/shared")["Body"].read() \
            == b"shared"
        with pytest.raises(Exception) as ei:
            alice.get_object(Bucket=b, Key="priv")
        assert status(ei.value) == 403
        alice.put_object(Bucket=b, Key="in/new", Body=b"from alice")
        with pytest.raises(Exception) as ei:
            alice.put_object(Bucket=b, Key="in/ro-x", Body=b"no")
        assert status(ei.value) == 403
        # the bucket's owner reads it too; alice may read it back
        assert root.get_object(Bucket=b, Key="in/new")["Body"].read() == \
            b"from alice"
        root.delete_bucket_policy(Bucket=b)
        assert alice.get_object(Bucket=b, Key="in/new")["Body"].read() == \
            b"from alice"
        with pytest.raises(Exception) as ei:
            alice.get_object(Bucket=b, Key="in/shared")
        assert status(ei.value) == 403
        # once root overwrites it, root owns it again
        root.put_object(Bucket=b, Key="in/new", Body=b"root's now")
        with pytest.raises(Exception) as ei:
            alice.get_object(Bucket=b, Key="in/new")
        assert status(ei.value) == 403
        # object tagging has its own actions, as in AWS
        tags = {"TagSet": [{"Key": "k", "Value": "v"}]}
        with pytest.raises(Exception) as ei:
            alice.put_object_tagging(Bucket=b, Key="priv", Tagging=tags)
        assert status(ei.value) == 403
        root.put_bucket_policy(Bucket=b, Policy=json.dumps({
            "Version": "2012-10-17", "Statement": [{
                "Effect": "Allow", "Principal": {"AWS": "alice"},
                "Action": ["s3:PutObjectTagging", "s3:DeleteObjectTagging"],
                "Resource": "arn:aws:s3:::%s/priv" % b}]}))
        alice.put_object_tagging(Bucket=b, Key="priv", Tagging=tags)
        assert root.get_object_tagging(Bucket=b, Key="priv")["TagSet"] == \
            tags["TagSet"]
        alice.delete_object_tagging(Bucket=b, Key="priv")
        assert root.get_object_tagging(Bucket=b, Key="priv")["TagSet"] == []
        with pytest.raises(Exception) as ei:
            alice.get_object(Bucket=b, Key="priv")
        assert status(ei.value) == 403
        root.delete_bucket_policy(Bucket=b)
        # an account creates its bucket with a canned ACL
        pb = "xacl-" + uuid.uuid4().hex[:6]
        alice.create_bucket(Bucket=pb, ACL="public-read")
        assert anon(env["srv"].endpoint + "/" + pb + "?list-type=2")[0] == 200
        alice.delete_bucket(Bucket=pb)
        # canned ACLs: public-read-write lets any account write
        root.put_bucket_acl(Bucket=b, ACL="public-read-write")
        alice.put_object(Bucket=b, Key="drop", Body=b"d")
        assert [o["Key"] for o in alice.list_objects_v2(
            Bucket=b, Prefix="drop")["Contents"]] == ["drop"]
        # an upload's Initiator and Owner are the account that started it
        up_a = alice.create_multipart_upload(Bucket=b, Key="mp")["UploadId"]
        up_r = root.create_multipart_upload(Bucket=b, Key="mp")["UploadId"]
        ups = {u["UploadId"]: u for u in
               root.list_multipart_uploads(Bucket=b)["Uploads"]}
        assert ups[up_a]["Initiator"] == {"ID": a["id"],
                                          "DisplayName": "alice"}
        assert ups[up_a]["Owner"] == ups[up_a]["Initiator"]
        root_id = root.list_buckets()["Owner"]["ID"]
        assert ups[up_r]["Initiator"]["ID"] == root_id
        parts = root.list_parts(Bucket=b, Key="mp", UploadId=up_a)
        assert parts["Initiator"] == ups[up_a]["Initiator"]
        assert parts["Owner"] == ups[up_a]["Initiator"]
        assert root.list_parts(Bucket=b, Key="mp", UploadId=up_r)[
            "Initiator"]["ID"] == root_id
        alice.abort_multipart_upload(Bucket=b, Key="mp", UploadId=up_a)
        root.abort_multipart_upload(Bucket=b, Key="mp", UploadId=up_r)
        root.put_bucket_acl(Bucket=b, ACL="private")
        with pytest.raises(Exception) as ei:
            alice.list_objects_v2(Bucket=b)
        assert status(ei.value) == 403
    finally:
        for k in ("in/shared", "priv", "in/new", "drop"):
            root.delete_object(Bucket=b, Key=k)
        root.delete_bucket(Bucket=b)


def test_accounts_persist_and_are_removed(env):
    """Accounts, their keys and their buckets' ownership survive a
    restart; an account that owns a bucket cannot be removed; a removed
    account's key is refused; names are checked."""
    srv = env["srv"]
    carol, c = account(env, "carol")
    b = "per-" + uuid.uuid4().hex[:6]
    carol.create_bucket(Bucket=b)
    carol.put_object(Bucket=b, Key="k", Body=b"c")
    srv.stop()
    srv.start()
    env["root"] = root = srv.client()
    carol = srv.client(c["access_key"], c["secret_key"])
    assert carol.get_object(Bucket=b, Key="k")["Body"].read() == b"c"
    assert [x["Name"] for x in carol.list_buckets()["Buckets"]] == [b]
    with pytest.raises(Exception) as ei:
        root.get_object(Bucket=b, Key="k")
    assert status(ei.value) == 403
    p = admin(srv, "account", "rm", "carol", check=False)
    assert p.returncode != 0 and "owns a bucket" in p.stderr
    for bad in ("root", "carol", "bad/name", "x" * 65, "a b"):
        p = admin(srv, "account", "add", bad, check=False)
        assert p.returncode != 0, bad
    carol.delete_object(Bucket=b, Key="k")
    carol.delete_bucket(Bucket=b)
    admin(srv, "account", "rm", "carol")
    del env["accounts"]["carol"]
    with pytest.raises(Exception) as ei:
        carol.list_buckets()
    assert status(ei.value) == 403
    names = [x["name"] for x in
             json.loads(admin(srv, "account", "list").stdout)["accounts"]]
    assert "carol" not in names


def test_account_principals_and_expected_owner(env):
    """A bucket policy names an account by arn:aws:iam::NAME-or-ID:root;
    x-amz-expected-bucket-owner is checked against the bucket's account."""
    root = env["root"]
    alice, a = account(env, "alice")
    bob, _ = account(env, "bob")
    b = "prn-" + uuid.uuid4().hex[:6]
    root.create_bucket(Bucket=b)
    try:
        root.put_object(Bucket=b, Key="k", Body=b"v")
        for who in ("alice", a["id"]):
            root.put_bucket_policy(Bucket=b, Policy=json.dumps({
                "Version": "2012-10-17", "Statement": [{
                    "Effect": "Allow",
                    "Principal": {"AWS": "arn:aws:iam::%s:root" % who},
                    "Action": "s3:GetObject",
                    "Resource": "arn:aws:s3:::%s/*" % b}]}))
            assert alice.get_object(Bucket=b, Key="k")["Body"].read() == b"v"
            with pytest.raises(Exception) as ei:
                bob.get_object(Bucket=b, Key="k")
            assert status(ei.value) == 403
        with pytest.raises(Exception) as ei:
            root.put_bucket_policy(Bucket=b, Policy=json.dumps({
                "Version": "2012-10-17", "Statement": [{
                    "Effect": "Allow",
                    "Principal": {"AWS": "arn:aws:iam:::root"},
                    "Action": "s3:GetObject",
                    "Resource": "arn:aws:s3:::%s/*" % b}]}))
        assert code(ei.value) == "MalformedPolicy"
        ab = "prn-a-" + uuid.uuid4().hex[:6]
        alice.create_bucket(Bucket=ab)
        alice.head_bucket(Bucket=ab, ExpectedBucketOwner=a["id"])
        with pytest.raises(Exception) as ei:
            alice.head_bucket(Bucket=ab, ExpectedBucketOwner="0" * 64)
        assert status(ei.value) == 403
        owner = root.list_buckets()["Owner"]["ID"]
        root.head_bucket(Bucket=b, ExpectedBucketOwner=owner)
        with pytest.raises(Exception) as ei:
            alice.get_object(Bucket=b, Key="k", ExpectedBucketOwner=a["id"])
        assert status(ei.value) == 403
        alice.delete_bucket(Bucket=ab)
    finally:
        root.delete_bucket_policy(Bucket=b)
        root.delete_object(Bucket=b, Key="k")
        root.delete_bucket(Bucket=b)
