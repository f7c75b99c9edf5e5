"""Who is told what (issue 18): the answer to a refused request on a
missing bucket or key, as AWS gives it. One shared storaged (4 drives, EC
2+2), real boto3 clients, unsigned requests as curl sends them.
"""

import hashlib
import json
import os
import urllib.error
import urllib.request
import uuid

import pytest

from conftest import Storaged
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
