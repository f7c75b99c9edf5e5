"""Users, policies, bucket policies and canned ACLs (issue 17): one shared
storaged (4 drives, EC 2+2) for the policy matrix, real boto3 / awscli /
curl / ecfs clients, users made with the real `storaged admin` CLI.

The matrix: for each of readonly, readwrite, writeonly, a prefix-limited
policy, readwrite with an explicit Deny, a disabled user and an admin
user, every action (GET, PUT, DELETE, LIST at and below the prefix,
multipart, copy with the source outside or inside the prefix, bucket
create/delete, the admin API) either succeeds or answers 403 AccessDenied,
and root then checks that a refused action changed nothing.
"""

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
import uuid

import pytest

from conftest import STORAGED, Storaged, boto3_client

BUCKET = "data"

PREFIX_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Action": "s3:ListBucket",
         "Resource": "arn:aws:s3:::data",
         "Condition": {"StringLike": {"s3:prefix": ["train/", "train/*"]}}},
        {"Effect": "Allow",
         "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject",
                    "s3:AbortMultipartUpload"],
         "Resource": "arn:aws:s3:::data/train/*"},
    ],
}

DENY_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Action": "s3:*", "Resource": "arn:aws:s3:::*"},
        {"Effect": "Deny", "Action": ["s3:PutObject", "s3:DeleteObject"],
         "Resource": "arn:aws:s3:::data/golden/*"},
    ],
}

# user -> how it is made (canned name or policy dict), disabled afterwards
USERS = {
    "ro": "readonly",
    "rw": "readwrite",
    "wo": "writeonly",
    "pfx": PREFIX_POLICY,
    "deny": DENY_POLICY,
    "dis": "readwrite",
    "adm": "admin",
}

ACTIONS = ["get", "get_val", "put", "put_val", "delete", "list_root",
           "list_train", "list_val", "list_versions", "mpu", "copy_out", "copy_in",
           "mkbucket", "rmbucket", "admin", "golden_put", "golden_del"]

ALL = set(ACTIONS) - {"admin"}
ALLOWED = {
    "ro": {"get", "get_val", "list_root", "list_train", "list_val",
           "list_versions"},
    "rw": ALL,
    "wo": {"put", "put_val", "mpu", "golden_put"},
    "pfx": {"get", "put", "delete", "list_train", "mpu", "copy_in"},
    "deny": ALL - {"golden_put", "golden_del"},
    "dis": set(),
    "adm": ALL | {"admin"},
}


def admin(srv, *args, access_key=None, secret_key=None, check=True):
    """Runs `storaged admin --endpoint URL ARGS...` with root's (or the
    given) credentials."""
    env = dict(os.environ)
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        env.pop(k, None)
    if access_key:
        env.pop("STORAGED_ROOT_USER", None)
        env.pop("STORAGED_ROOT_PASSWORD", None)
        env["AWS_ACCESS_KEY_ID"] = access_key
        env["AWS_SECRET_ACCESS_KEY"] = secret_key
    else:
        env["STORAGED_ROOT_USER"] = srv.access_key
        env["STORAGED_ROOT_PASSWORD"] = srv.secret_key
    p = subprocess.run([STORAGED, "admin", "--endpoint", srv.endpoint]
                       + list(args), env=env, capture_output=True, text=True,
                       timeout=30)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def add_user(srv, tmp, name, policy):
    args = ["user", "add", name]
    if isinstance(policy, dict):
        path = os.path.join(tmp, name + ".json")
        with open(path, "w") as f:
            json.dump(policy, f)
        args += ["--policy", path]
    elif policy:
        args += ["--policy", policy]
    out = json.loads(admin(srv, *args).stdout)
    assert out["user"] == name and len(out["access_key"]) == 20
    return out["access_key"], out["secret_key"]


def code(exc):
    return exc.response["Error"]["Code"]


def anon(url, method="GET", data=None):
    """Status and body of an unsigned request (what curl without keys
    does)."""
    req = urllib.request.Request(url, method=method, data=data)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("iam"))
    srv = Storaged(os.path.join(tmp, "srv"), ndrives=4, ec="2+2")
    srv.start()
    try:
        root = srv.client()
        root.create_bucket(Bucket=BUCKET)
        for k in ("train/a.jpg", "train/sub/b.jpg", "val/c.jpg",
                  "golden/g.bin"):
            root.put_object(Bucket=BUCKET, Key=k, Body=k.encode())
        keys = {n: add_user(srv, tmp, n, p) for n, p in USERS.items()}
        admin(srv, "user", "disable", "dis")
        clients = {n: srv.client(ak, sk)
                   for n, (ak, sk) in keys.items()}
        yield {"srv": srv, "root": root, "keys": keys, "clients": clients,
               "tmp": tmp}
    finally:
        rc = srv.stop()
        srv.kill9()
        assert rc == 0, srv.log_text()


def exists(root, key, bucket=BUCKET):
    try:
        root.head_object(Bucket=bucket, Key=key)
        return True
    except Exception as e:  # botocore ClientError 404
        assert e.response["Error"]["Code"] in ("404", "NoSuchKey"), e
        return False


def bucket_exists(root, name):
    return name in [b["Name"] for b in root.list_buckets()["Buckets"]]


def run_action(e, user, action, tag):
    """Does @action as @user; returns a check(allowed) run afterwards with
    root's client that asserts what the store holds."""
    c, root, srv = e["clients"][user], e["root"], e["srv"]
    b = BUCKET
    if action == "get":
        assert c.get_object(Bucket=b, Key="train/a.jpg")["Body"].read() \
            == b"train/a.jpg"
        return None
    if action == "get_val":
        c.get_object(Bucket=b, Key="val/c.jpg")["Body"].read()
        return None
    if action in ("put", "put_val", "golden_put"):
        key = {"put": "train/", "put_val": "val/",
               "golden_put": "golden/"}[action] + "new-" + tag
        c.put_object(Bucket=b, Key=key, Body=b"x" * 100)
        return lambda ok: exists(root, key) == ok
    if action in ("delete", "golden_del"):
        key = ("train/del-" if action == "delete" else "golden/del-") + tag
        root.put_object(Bucket=b, Key=key, Body=b"keep")
        c.delete_object(Bucket=b, Key=key)
        return lambda ok: exists(root, key) != ok
    if action == "list_versions":  # s3:ListBucketVersions
        r = c.list_object_versions(Bucket=b, Prefix="train/")
        assert r["Versions"] and r["Versions"][0]["VersionId"] == "null"
        return None
    if action.startswith("list_"):
        pre = {"list_root": "", "list_train": "train/",
               "list_val": "val/"}[action]
        r = c.list_objects_v2(Bucket=b, Prefix=pre, Delimiter="/")
        assert r["KeyCount"] >= 1
        return None
    if action == "mpu":
        key = "train/mpu-" + tag
        up = c.create_multipart_upload(Bucket=b, Key=key)["UploadId"]
        p = c.upload_part(Bucket=b, Key=key, UploadId=up, PartNumber=1,
                          Body=b"m" * 1000)
        c.complete_multipart_upload(
            Bucket=b, Key=key, UploadId=up,
            MultipartUpload={"Parts": [{"PartNumber": 1,
                                        "ETag": p["ETag"]}]})

        def check(ok):
            ups = root.list_multipart_uploads(Bucket=b, Prefix=key)
            return exists(root, key) == ok and not ups.get("Uploads")
        return check
    if action in ("copy_out", "copy_in"):
        src = "val/c.jpg" if action == "copy_out" else "train/a.jpg"
        key = "train/cp-" + tag
        c.copy_object(Bucket=b, Key=key,
                      CopySource={"Bucket": b, "Key": src})
        return lambda ok: exists(root, key) == ok
    if action == "mkbucket":
        name = "mk-" + tag
        c.create_bucket(Bucket=name)

        def check(ok):
            there = bucket_exists(root, name)
            if there:
                root.delete_bucket(Bucket=name)
            return there == ok
        return check
    if action == "rmbucket":
        name = "rm-" + tag
        root.create_bucket(Bucket=name)
        c.delete_bucket(Bucket=name)

        def check(ok):
            there = bucket_exists(root, name)
            if there:
                root.delete_bucket(Bucket=name)
            return there != ok
        return check
    if action == "admin":
        ak, sk = e["keys"][user]
        name = "made-by-" + tag
        p = admin(srv, "user", "add", name, access_key=ak, secret_key=sk,
                  check=False)
        if p.returncode != 0:
            assert "403 AccessDenied" in p.stderr, p.stderr

            def check(ok):
                names = [u["name"] for u in
                         json.loads(admin(srv, "user", "list").stdout)
                         ["users"]]
                return (name in names) == ok
            raise Refused(check)
        return lambda ok: name in [
            u["name"] for u in
            json.loads(admin(srv, "user", "list").stdout)["users"]]
    raise AssertionError(action)


class Refused(Exception):
    """The admin CLI was refused (it is no botocore call)."""

    def __init__(self, check):
        super().__init__("refused")
        self.check = check


@pytest.mark.parametrize("user", list(USERS))
@pytest.mark.parametrize("action", ACTIONS)
def test_policy_matrix(env, user, action):
    allowed = action in ALLOWED[user]
    tag = "%s-%s-%s" % (user, action.replace("_", ""), uuid.uuid4().hex[:6])
    check = None
    try:
        check = run_action(env, user, action, tag)
        refused = False
    except Refused as r:
        check, refused = r.check, True
    except Exception as e:  # botocore.exceptions.ClientError
        if not hasattr(e, "response"):
            raise
        assert code(e) == "AccessDenied", (user, action, e.response)
        assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        refused = True
        # the check of what the store holds is rebuilt from the tag
        check = None
    assert refused != allowed, "%s %s: expected %s" % (
        user, action, "success" if allowed else "AccessDenied")
    if check is not None:
        assert check(allowed), "%s %s: the store does not show it" % (
            user, action)
    elif refused:
        verify_unchanged(env, action, tag)


def verify_unchanged(e, action, tag):
    """After a refused call: whatever it tried is not in the store."""
    root = e["root"]
    if action in ("put", "put_val", "golden_put"):
        pre = {"put": "train/", "put_val": "val/", "golden_put": "golden/"}
        assert not exists(root, pre[action] + "new-" + tag)
    elif action in ("delete", "golden_del"):
        key = ("train/del-" if action == "delete" else "golden/del-") + tag
        assert root.get_object(Bucket=BUCKET, Key=key)["Body"].read() == \
            b"keep"
    elif action == "mpu":
        key = "train/mpu-" + tag
        assert not exists(root, key)
        assert not root.list_multipart_uploads(
            Bucket=BUCKET, Prefix=key).get("Uploads")
    elif action in ("copy_out", "copy_in"):
        assert not exists(root, "train/cp-" + tag)
    elif action == "mkbucket":
        assert not bucket_exists(root, "mk-" + tag)
    elif action == "rmbucket":
        assert bucket_exists(root, "rm-" + tag)
        root.delete_bucket(Bucket="rm-" + tag)
    # the originals are untouched whatever was refused
    for k in ("train/a.jpg", "val/c.jpg", "golden/g.bin"):
        assert root.get_object(Bucket=BUCKET, Key=k)["Body"].read() == \
            k.encode()


def test_awscli_readonly_and_prefix(env, tmp_path):
    """awscli with the readonly key downloads but cannot upload; with the
    prefix key it cannot list val/ (boto3 covers the rest of the
    matrix)."""
    srv = env["srv"]

    def aws(user, *args):
        ak, sk = env["keys"][user]
        e = dict(os.environ, AWS_ACCESS_KEY_ID=ak, AWS_SECRET_ACCESS_KEY=sk,
                 AWS_DEFAULT_REGION="us-east-1", AWS_MAX_ATTEMPTS="1")
        e.pop("AWS_PROFILE", None)
        return subprocess.run(["/usr/bin/aws", "--endpoint-url", srv.endpoint,
                               "s3"] + list(args), env=e, capture_output=True,
                              text=True, timeout=60)

    # three calls only: each awscli start costs about a second
    dst = str(tmp_path / "a.jpg")
    p = aws("ro", "cp", "s3://data/train/a.jpg", dst)
    assert p.returncode == 0, p.stderr
    assert open(dst, "rb").read() == b"train/a.jpg"
    p = aws("ro", "cp", dst, "s3://data/train/from-cli")
    assert p.returncode != 0 and "AccessDenied" in p.stderr, p.stderr
    assert not exists(env["root"], "train/from-cli")
    p = aws("pfx", "ls", "s3://data/val/")
    assert p.returncode != 0 and "AccessDenied" in p.stderr, p.stderr


def test_list_buckets_shows_what_the_caller_may_use(env):
    root = env["root"]
    root.create_bucket(Bucket="other-lb")
    try:
        names = [b["Name"] for b in
                 env["clients"]["pfx"].list_buckets()["Buckets"]]
        assert names == ["data"]
        all_names = [b["Name"] for b in root.list_buckets()["Buckets"]]
        assert "other-lb" in all_names and "data" in all_names
        assert not any(".." in n for n in all_names)  # no system area
        st, _ = anon(env["srv"].endpoint + "/")
        assert st == 403
    finally:
        root.delete_bucket(Bucket="other-lb")


def test_system_area_is_closed_even_to_root(env):
    root = env["root"]
    with pytest.raises(Exception) as ei:
        root.get_object(Bucket="storaged..system", Key="iam.json")
    assert code(ei.value) == "AccessDenied"
    with pytest.raises(Exception) as ei:
        root.list_objects_v2(Bucket="storaged..system")
    assert code(ei.value) == "AccessDenied"


def test_presigned_urls_are_authorised(env):
    ro = env["clients"]["ro"]
    url = ro.generate_presigned_url(
        "get_object", Params={"Bucket": BUCKET, "Key": "train/a.jpg"})
    assert anon(url) == (200, b"train/a.jpg")
    url = ro.generate_presigned_url(
        "put_object", Params={"Bucket": BUCKET, "Key": "train/presigned"})
    st, body = anon(url, "PUT", b"data")
    assert st == 403 and b"AccessDenied" in body
    assert not exists(env["root"], "train/presigned")


def test_malformed_policies_say_why(env, tmp_path):
    srv, root = env["srv"], env["root"]
    bad = tmp_path / "bad.json"
    bad.write_text('{"Statement": [{"Effect": "Allow", "Action": "s3:*", '
                   '"Resource": "arn:aws:s3:::*", "Condition": '
                   '{"DateLessThan": {"aws:CurrentTime": "2030"}}}]}')
    p = admin(srv, "policy", "set", "ro", str(bad), check=False)
    assert p.returncode == 1
    assert "MalformedPolicy" in p.stderr
    assert 'operator "DateLessThan" is not supported' in p.stderr, p.stderr
    bad.write_text('{"Statement": [')
    p = admin(srv, "user", "add", "never", "--policy", str(bad), check=False)
    assert p.returncode == 1 and "invalid JSON at line 1" in p.stderr
    assert "never" not in admin(srv, "user", "list").stdout
    # the user's policy is unchanged: still readonly
    got = json.loads(admin(srv, "policy", "get", "ro").stdout)
    assert got["Statement"][0]["Effect"] == "Allow"
    with pytest.raises(Exception) as ei:
        root.put_bucket_policy(Bucket=BUCKET, Policy=json.dumps(
            {"Statement": [{"Effect": "Allow", "Action": "s3:GetObject",
                            "Resource": "arn:aws:s3:::data/*"}]}))
    assert code(ei.value) == "MalformedPolicy"
    assert "Principal" in ei.value.response["Error"]["Message"]
    with pytest.raises(Exception) as ei:
        root.get_bucket_policy(Bucket=BUCKET)
    assert code(ei.value) == "NoSuchBucketPolicy"


def test_policy_change_applies_at_once(env):
    """A policy set on a user, a user disabled or enabled, applies to the
    next request, without a restart."""
    srv = env["srv"]
    ak, sk = add_user(srv, env["tmp"], "flip", "readonly")
    c = srv.client(ak, sk)
    users = json.loads(admin(srv, "user", "list").stdout)["users"]
    assert {"name": "flip", "access_key": ak, "enabled": True,
            "policy": "readonly"} in users

    def get():
        try:
            c.get_object(Bucket=BUCKET, Key="val/c.jpg")["Body"].read()
            return "ok"
        except Exception as e:
            return code(e)

    assert get() == "ok"
    admin(srv, "user", "disable", "flip")
    assert get() == "AccessDenied"
    admin(srv, "user", "enable", "flip")
    assert get() == "ok"
    admin(srv, "policy", "set", "flip", "writeonly")
    assert get() == "AccessDenied"
    c.put_object(Bucket=BUCKET, Key="val/flip", Body=b"f")
    admin(srv, "user", "rm", "flip")
    assert "flip" not in admin(srv, "user", "list").stdout
    assert get() == "InvalidAccessKeyId"
    p = admin(srv, "user", "rm", "flip", check=False)
    assert p.returncode == 1 and "NoSuchUser" in p.stderr
    env["root"].delete_object(Bucket=BUCKET, Key="val/flip")


def test_source_ip_condition(env):
    """aws:SourceIp is the connection's address: a policy for 10.0.0.0/8
    refuses a client on 127.0.0.1, one for 127.0.0.1/32 lets it in."""
    srv = env["srv"]

    def pol(net):
        return {"Statement": [{"Effect": "Allow", "Action": "s3:GetObject",
                               "Resource": "arn:aws:s3:::data/*",
                               "Condition": {"IpAddress":
                                             {"aws:SourceIp": net}}}]}
    far = srv.client(*add_user(srv, env["tmp"], "ipfar", pol("10.0.0.0/8")))
    near = srv.client(*add_user(srv, env["tmp"], "ipnear",
                                pol(["127.0.0.1/32", "::1/128"])))
    assert near.get_object(Bucket=BUCKET, Key="val/c.jpg")["Body"].read() \
        == b"val/c.jpg"
    with pytest.raises(Exception) as ei:
        far.get_object(Bucket=BUCKET, Key="val/c.jpg")
    assert code(ei.value) == "AccessDenied"
    admin(srv, "user", "rm", "ipfar")
    admin(srv, "user", "rm", "ipnear")


def test_public_read_bucket_policy(env):
    """Principal "*" GetObject on a prefix: anonymous GET within it works,
    nothing else does; deleting the policy closes it again."""
    srv, root = env["srv"], env["root"]
    root.create_bucket(Bucket="pubds")
    try:
        root.put_object(Bucket="pubds", Key="ds/x.bin", Body=b"public bytes")
        root.put_object(Bucket="pubds", Key="private/y.bin", Body=b"no")
        ep = srv.endpoint
        assert anon(ep + "/pubds/ds/x.bin")[0] == 403
        root.put_bucket_policy(Bucket="pubds", Policy=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": "*",
                           "Action": "s3:GetObject",
                           "Resource": "arn:aws:s3:::pubds/ds/*"}]}))
        got = json.loads(root.get_bucket_policy(Bucket="pubds")["Policy"])
        assert got["Statement"][0]["Principal"] == "*"
        curl = subprocess.run(["curl", "-s", "-o", "-", "-w", "\n%{http_code}",
                               ep + "/pubds/ds/x.bin"], capture_output=True,
                              timeout=30)
        assert curl.stdout == b"public bytes\n200"
        for url, method in (("/pubds/private/y.bin", "GET"),
                            ("/pubds/ds/x.bin", "DELETE"),
                            ("/pubds/ds/new", "PUT"),
                            ("/pubds?list-type=2", "GET"),
                            ("/pubds?policy", "GET"),
                            ("/", "GET")):
            st, body = anon(ep + url, method,
                            b"zz" if method == "PUT" else None)
            assert st == 403 and b"AccessDenied" in body, (url, method)
        assert exists(root, "ds/x.bin", "pubds")
        assert not exists(root, "ds/new", "pubds")
        # HEAD too (the same action)
        assert anon(ep + "/pubds/ds/x.bin", "HEAD")[0] == 200
        root.delete_bucket_policy(Bucket="pubds")
        assert anon(ep + "/pubds/ds/x.bin")[0] == 403
    finally:
        for k in ("ds/x.bin", "private/y.bin"):
            root.delete_object(Bucket="pubds", Key=k)
        root.delete_bucket(Bucket="pubds")


def test_canned_acls(env):
    srv, root, ep = env["srv"], env["root"], env["srv"].endpoint
    nopol = env["clients"]["wo"]  # a user that cannot read by policy
    b = "acl-" + uuid.uuid4().hex[:6]
    root.create_bucket(Bucket=b, ACL="public-read")
    try:
        # public-read on a bucket lists it, and gets nothing by itself
        root.put_object(Bucket=b, Key="k1", Body=b"one")
        st, body = anon(ep + "/" + b + "?list-type=2")
        assert st == 200 and b"<Key>k1</Key>" in body
        assert anon(ep + "/" + b + "/k1")[0] == 403
        root.put_object(Bucket=b, Key="k2", Body=b"two", ACL="public-read")
        assert anon(ep + "/" + b + "/k2") == (200, b"two")
        grants = root.get_object_acl(Bucket=b, Key="k2")["Grants"]
        # the group grant first, then the owner's (AWS's and RGW's order)
        assert [g["Grantee"]["Type"] for g in grants] == ["Group",
                                                          "CanonicalUser"]
        assert grants[0]["Grantee"]["URI"].endswith("/AllUsers")
        assert grants[1]["Permission"] == "FULL_CONTROL"
        # an overwrite without x-amz-acl makes it private again, as in S3
        root.put_object(Bucket=b, Key="k2", Body=b"two again")
        assert anon(ep + "/" + b + "/k2")[0] == 403
        root.put_object_acl(Bucket=b, Key="k2", ACL="authenticated-read")
        assert anon(ep + "/" + b + "/k2")[0] == 403
        assert nopol.get_object(Bucket=b, Key="k2")["Body"].read() == \
            b"two again"
        root.put_object_acl(Bucket=b, Key="k2", ACL="private")
        with pytest.raises(Exception) as ei:
            nopol.get_object(Bucket=b, Key="k2")
        assert code(ei.value) == "AccessDenied"
        root.copy_object(Bucket=b, Key="k3", CopySource={"Bucket": b,
                                                          "Key": "k1"},
                         ACL="public-read")
        assert anon(ep + "/" + b + "/k3") == (200, b"one")
        # grant lists are honoured (test_s3_acl.py has the rest)
        root.put_object(Bucket=b, Key="k4", Body=b"x",
                        GrantRead='uri="http://acs.amazonaws.com/groups/'
                                  'global/AllUsers"')
        assert anon(ep + "/" + b + "/k4") == (200, b"x")
        root.put_bucket_acl(Bucket=b, AccessControlPolicy={
            "Owner": {"ID": "storaged"},
            "Grants": [{"Grantee": {"Type": "Group", "URI":
                        "http://acs.amazonaws.com/groups/global/AllUsers"},
                        "Permission": "READ"}]})
        assert anon(ep + "/" + b + "?list-type=2")[0] == 200
        root.put_bucket_acl(Bucket=b, ACL="private")
        assert anon(ep + "/" + b + "?list-type=2")[0] == 403
        # a user may not set a public ACL without the ACL permission
        with pytest.raises(Exception) as ei:
            env["clients"]["pfx"].put_object(Bucket=BUCKET, Key="train/pub",
                                             Body=b"x", ACL="public-read")
        assert code(ei.value) == "AccessDenied"
        assert not exists(root, "train/pub")
    finally:
        for k in ("k1", "k2", "k3", "k4"):
            root.delete_object(Bucket=b, Key=k)
        root.delete_bucket(Bucket=b)
    # a new bucket of the same name starts private: nothing carried over
    root.create_bucket(Bucket=b)
    root.put_object(Bucket=b, Key="k3", Body=b"new")
    assert anon(ep + "/" + b + "/k3")[0] == 403
    assert anon(ep + "/" + b + "?list-type=2")[0] == 403
    root.delete_object(Bucket=b, Key="k3")
    root.delete_bucket(Bucket=b)


def test_secrets_stay_secret(env):
    """A user's secret is in no log line, no /metrics, no error, and not
    in clear on the drives."""
    srv = env["srv"]
    secrets = [sk for _, sk in env["keys"].values()]
    with urllib.request.urlopen(srv.endpoint + "/metrics", timeout=10) as r:
        metrics = r.read().decode()
    log = srv.log_text()
    listing = admin(srv, "user", "list").stdout
    for sk in secrets:
        assert sk not in metrics and sk not in log and sk not in listing
    # a wrong signature's error names no secret either
    bad = boto3_client(srv.endpoint, env["keys"]["ro"][0], "wrong" * 8)
    with pytest.raises(Exception) as ei:
        bad.get_object(Bucket=BUCKET, Key="train/a.jpg")
    assert code(ei.value) == "SignatureDoesNotMatch"
    assert not any(sk in str(ei.value.response) for sk in secrets)
    raw = b""
    for d in srv.drives:
        for top, _, files in os.walk(d):
            for f in files:
                with open(os.path.join(top, f), "rb") as fh:
                    raw += fh.read()
    assert b"access_key" in raw  # the document is there (inline, EC'd)
    for sk in secrets:
        assert sk.encode() not in raw


def test_users_survive_restart_and_losing_m_drives(storaged, tmp_path):
    """Users, their policies and bucket policies come back after a
    restart and with M=2 of 6 drives (EC 4+2) wiped; with other root
    credentials the keys stop working (the secrets cannot be
    decrypted)."""
    srv = storaged(ndrives=6, ec="4+2")
    root = srv.client()
    root.create_bucket(Bucket="keep")
    root.put_object(Bucket="keep", Key="pub/a", Body=b"a")
    root.put_object(Bucket="keep", Key="priv/b", Body=b"b")
    ak, sk = add_user(srv, str(tmp_path), "reader", "readonly")
    add_user(srv, str(tmp_path), "writer", PREFIX_POLICY)
    root.put_bucket_policy(Bucket="keep", Policy=json.dumps({
        "Statement": [{"Effect": "Allow", "Principal": "*",
                       "Action": "s3:GetObject",
                       "Resource": "arn:aws:s3:::keep/pub/*"}]}))

    def works():
        c = srv.client(ak, sk)
        assert c.get_object(Bucket="keep", Key="priv/b")["Body"].read() \
            == b"b"
        with pytest.raises(Exception) as ei:
            c.put_object(Bucket="keep", Key="x", Body=b"x")
        assert code(ei.value) == "AccessDenied"
        assert anon(srv.endpoint + "/keep/pub/a") == (200, b"a")
        assert anon(srv.endpoint + "/keep/priv/b")[0] == 403
        users = json.loads(admin(srv, "user", "list").stdout)["users"]
        assert {u["name"] for u in users} == {"reader", "writer"}
        pol = json.loads(admin(srv, "policy", "get", "writer").stdout)
        assert pol == PREFIX_POLICY

    works()
    srv.restart()
    works()
    srv.stop()
    for d in srv.drives[:2]:  # M = 2 drives lost: replaced by empty ones
        shutil.rmtree(d)
        os.makedirs(d)
    srv.start()
    works()
    srv.stop()
    srv.secret_key = "another-root-password"
    srv.start()
    c = srv.client(ak, sk)
    with pytest.raises(Exception) as ei:
        c.get_object(Bucket="keep", Key="priv/b")
    assert code(ei.value) == "AccessDenied"
    assert "cannot be decrypted" in srv.log_text()


def test_ecfs_readonly_key(env, ecfs_mount):
    """ecfs mounted with the readonly key reads, and gets EACCES on
    writes (the server's 403)."""
    ak, sk = env["keys"]["ro"]
    m = ecfs_mount(env["srv"].endpoint, BUCKET, access_key=ak, secret_key=sk)
    mp = m.path
    with open(os.path.join(mp, "train", "a.jpg"), "rb") as f:
        assert f.read() == b"train/a.jpg"
    assert "c.jpg" in os.listdir(os.path.join(mp, "val"))
    with pytest.raises(PermissionError):
        with open(os.path.join(mp, "train", "new.txt"), "wb") as f:
            f.write(b"hello")
    with pytest.raises(PermissionError):
        os.unlink(os.path.join(mp, "val", "c.jpg"))
    with pytest.raises(PermissionError):
        os.mkdir(os.path.join(mp, "newdir"))
    root = env["root"]
    assert not exists(root, "train/new.txt")
    assert exists(root, "val/c.jpg")
    assert not exists(root, "newdir/")
