"""The client matrix: real S3 clients against a real storaged.
awscli v2 (s3 cp/sync/ls/rm, s3api, s3 presign), s3cmd, rclone (provider
Other), s3fs-fuse (mount: ls, cat, cp both ways) and the current
@aws-sdk/client-s3 from npm with its default checksum settings (installed
on first use into build/npm-s3, git-ignored)."""

import hashlib
import json
import os
import shutil
import subprocess
import time
import urllib.request

import pytest

import s3util
from s3util import NPM_DIR, ensure_js_sdk

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

TIMEOUT = 120


def run(argv, env=None, check=True, timeout=TIMEOUT, **kw):
    p = subprocess.run(argv, env=env, capture_output=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise AssertionError("%s failed (%d):\nstdout: %s\nstderr: %s" % (
            " ".join(argv), p.returncode, p.stdout.decode(errors="replace")[-3000:],
            p.stderr.decode(errors="replace")[-3000:]))
    return p


def tree(root, files):
    for rel, data in files.items():
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)


FILES = {
    "a.txt": b"alpha\n",
    "dir/b.bin": os.urandom(3000),
    "dir/sub/c.bin": os.urandom(9 * 1024 * 1024 + 7),  # multipart for most
    "space name.txt": b"spaces",
}


def same_tree(a, b):
    for rel, data in FILES.items():
        with open(os.path.join(b, rel), "rb") as f:
            assert f.read() == data, rel


# ---------------------------------------------------------------- awscli

@pytest.fixture
def aws_env(s3_server, tmp_path):
    cfg = tmp_path / "aws.cfg"
    cfg.write_text("[default]\nregion = us-east-1\ns3 =\n  addressing_style = path\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID=s3_server.access_key,
               AWS_SECRET_ACCESS_KEY=s3_server.secret_key,
               AWS_CONFIG_FILE=str(cfg),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "nocreds"),
               AWS_DEFAULT_REGION="us-east-1", AWS_PAGER="")
    return env


def aws(srv, env, *args, check=True):
    return run(["/usr/bin/aws", "--endpoint-url", srv.endpoint] + list(args),
               env=env, check=check)


# Budget from what it waits for: 13 awscli runs, each a fresh Python start
# of botocore: about 1.5 s on an idle 2-core VM, 8.5 s at load 16 (measured
# with `time aws --version`), so 60 s timed out under load.
@pytest.mark.timeout(300)
def test_awscli(s3_server, aws_env, tmp_path):
    srv, env = s3_server, aws_env
    src, dst = tmp_path / "src", tmp_path / "dst"
    tree(str(src), FILES)
    aws(srv, env, "s3", "mb", "s3://cli-bucket")
    aws(srv, env, "s3", "cp", str(src / "a.txt"), "s3://cli-bucket/one/a.txt")
    aws(srv, env, "s3", "sync", str(src), "s3://cli-bucket/tree")
    out = aws(srv, env, "s3", "ls", "--recursive", "s3://cli-bucket/").stdout.decode()
    for rel in FILES:
        assert "tree/" + rel in out
    aws(srv, env, "s3", "sync", "s3://cli-bucket/tree", str(dst))
    same_tree(str(src), str(dst))
    aws(srv, env, "s3", "cp", "s3://cli-bucket/one/a.txt", str(tmp_path / "back.txt"))
    assert (tmp_path / "back.txt").read_bytes() == FILES["a.txt"]
    # s3api
    h = json.loads(aws(srv, env, "s3api", "head-object", "--bucket", "cli-bucket",
                       "--key", "tree/dir/sub/c.bin").stdout)
    assert h["ContentLength"] == len(FILES["dir/sub/c.bin"])
    lst = json.loads(aws(srv, env, "s3api", "list-objects-v2", "--bucket", "cli-bucket",
                         "--prefix", "tree/", "--delimiter", "/").stdout)
    assert sorted(p["Prefix"] for p in lst["CommonPrefixes"]) == ["tree/dir/"]
    # presign, then fetch with urllib
    url = aws(srv, env, "s3", "presign", "s3://cli-bucket/one/a.txt",
              "--expires-in", "60").stdout.decode().strip()
    with urllib.request.urlopen(url) as r:
        assert r.read() == FILES["a.txt"]
    aws(srv, env, "s3", "rm", "--recursive", "s3://cli-bucket/tree")
    out = aws(srv, env, "s3", "ls", "--recursive", "s3://cli-bucket/").stdout.decode()
    assert "tree/" not in out and "one/a.txt" in out
    bad = dict(env, AWS_SECRET_ACCESS_KEY="wrong-secret")
    p = aws(srv, bad, "s3", "ls", "s3://cli-bucket/", check=False)
    assert p.returncode != 0 and b"SignatureDoesNotMatch" in p.stderr


# ---------------------------------------------------------------- s3cmd

def test_s3cmd(s3_server, tmp_path):
    srv = s3_server
    s3cmd = s3util.s3cmd_config(srv, tmp_path / "s3cfg")
    src, dst = tmp_path / "src", tmp_path / "dst"
    tree(str(src), FILES)
    run(s3cmd + ["mb", "s3://s3cmd-bucket"])
    run(s3cmd + ["put", str(src / "a.txt"), "s3://s3cmd-bucket/a.txt"])
    run(s3cmd + ["sync", str(src) + "/", "s3://s3cmd-bucket/tree/"])
    out = run(s3cmd + ["ls", "-r", "s3://s3cmd-bucket/"]).stdout.decode()
    for rel in FILES:
        assert "tree/" + rel in out
    run(s3cmd + ["get", "s3://s3cmd-bucket/tree/dir/sub/c.bin", str(tmp_path / "c.bin")])
    assert (tmp_path / "c.bin").read_bytes() == FILES["dir/sub/c.bin"]
    run(s3cmd + ["sync", "s3://s3cmd-bucket/tree/", str(dst) + "/"])
    same_tree(str(src), str(dst))
    info = run(s3cmd + ["info", "s3://s3cmd-bucket/a.txt"], check=False)
    assert b"a.txt" in info.stdout or info.returncode == 0
    run(s3cmd + ["del", "--recursive", "--force", "s3://s3cmd-bucket/tree/"])
    out = run(s3cmd + ["ls", "-r", "s3://s3cmd-bucket/"]).stdout.decode()
    assert "tree/" not in out and "a.txt" in out
    run(s3cmd + ["del", "s3://s3cmd-bucket/a.txt"])
    run(s3cmd + ["rb", "s3://s3cmd-bucket"])


# ---------------------------------------------------------------- rclone

def test_rclone(s3_server, s3, tmp_path):
    srv = s3_server
    env = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}
    env.update(RCLONE_CONFIG_ST_TYPE="s3", RCLONE_CONFIG_ST_PROVIDER="Other",
               RCLONE_CONFIG_ST_ENDPOINT=srv.endpoint,
               RCLONE_CONFIG_ST_ACCESS_KEY_ID=srv.access_key,
               RCLONE_CONFIG_ST_SECRET_ACCESS_KEY=srv.secret_key,
               RCLONE_CONFIG_ST_REGION="us-east-1",
               RCLONE_CONFIG_ST_FORCE_PATH_STYLE="true",
               RCLONE_CONFIG=str(tmp_path / "rclone.conf"))
    (tmp_path / "rclone.conf").write_text("")
    src, dst = tmp_path / "src", tmp_path / "dst"
    tree(str(src), FILES)
    rc = ["rclone", "--s3-upload-cutoff", "5M", "--s3-chunk-size", "5M",
          "--low-level-retries", "1", "--retries", "1"]
    run(rc + ["mkdir", "st:rc-bucket"], env=env)
    run(rc + ["copy", str(src), "st:rc-bucket/tree"], env=env)
    out = run(rc + ["ls", "st:rc-bucket"], env=env).stdout.decode()
    for rel in FILES:
        assert "tree/" + rel in out
    run(rc + ["check", str(src), "st:rc-bucket/tree"], env=env)
    run(rc + ["copy", "st:rc-bucket/tree", str(dst)], env=env)
    same_tree(str(src), str(dst))
    assert run(rc + ["cat", "st:rc-bucket/tree/a.txt"], env=env).stdout == FILES["a.txt"]
    run(rc + ["delete", "st:rc-bucket/tree/dir"], env=env)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="rc-bucket")["Contents"]]
    assert sorted(keys) == ["tree/a.txt", "tree/space name.txt"]


# ---------------------------------------------------------------- s3fs-fuse

def test_s3fs_mount(s3_server, s3, tmp_path):
    if not os.path.exists("/dev/fuse") or shutil.which("s3fs") is None:
        pytest.skip("needs /dev/fuse and s3fs")
    srv = s3_server
    s3.create_bucket(Bucket="fs-bucket")
    s3.put_object(Bucket="fs-bucket", Key="hello.txt", Body=b"hello from s3\n")
    s3.put_object(Bucket="fs-bucket", Key="d/inner.bin", Body=FILES["dir/b.bin"])
    pw = tmp_path / "passwd"
    pw.write_text("%s:%s\n" % (srv.access_key, srv.secret_key))
    os.chmod(pw, 0o600)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}
    run(["s3fs", "fs-bucket", str(mnt), "-o", "url=" + srv.endpoint,
         "-o", "use_path_request_style", "-o", "passwd_file=" + str(pw),
         "-o", "endpoint=us-east-1", "-o", "sigv4", "-o", "retries=1",
         "-o", "stat_cache_expire=1"], env=env)
    try:
        deadline = time.time() + 10
        while not os.path.ismount(mnt) and time.time() < deadline:
            time.sleep(0.1)
        assert os.path.ismount(mnt)
        assert sorted(os.listdir(mnt)) == ["d", "hello.txt"]
        assert (mnt / "hello.txt").read_bytes() == b"hello from s3\n"
        assert (mnt / "d" / "inner.bin").read_bytes() == FILES["dir/b.bin"]
        big = os.urandom(6 * 1024 * 1024 + 3)
        (tmp_path / "big.bin").write_bytes(big)
        shutil.copy(tmp_path / "big.bin", mnt / "big.bin")
        shutil.copy(mnt / "hello.txt", tmp_path / "out.txt")
        assert (tmp_path / "out.txt").read_bytes() == b"hello from s3\n"
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True, timeout=30)
        if os.path.ismount(mnt):
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)
    got = s3.get_object(Bucket="fs-bucket", Key="big.bin")["Body"].read()
    assert hashlib.sha256(got).digest() == hashlib.sha256(big).digest()


# ---------------------------------------------------------------- aws-sdk-js v3

JS = r"""
const { S3Client, CreateBucketCommand, PutObjectCommand, GetObjectCommand,
        ListObjectsV2Command, DeleteObjectsCommand, HeadObjectCommand,
        CreateMultipartUploadCommand, UploadPartCommand,
        CompleteMultipartUploadCommand } = require("@aws-sdk/client-s3");
const { Readable } = require("stream");
const crypto = require("crypto");
const assert = require("assert");
(async () => {
  const c = new S3Client({ endpoint: process.env.EP, region: "us-east-1",
    forcePathStyle: true, maxAttempts: 1,
    credentials: { accessKeyId: process.env.AK, secretAccessKey: process.env.SK } });
  const B = "js-bucket";
  await c.send(new CreateBucketCommand({ Bucket: B }));
  const small = Buffer.from("hello from aws-sdk-js v3");
  await c.send(new PutObjectCommand({ Bucket: B, Key: "small.txt", Body: small,
                                      ContentType: "text/plain" }));
  const big = crypto.randomBytes(3 * 1024 * 1024 + 11);
  // a stream body: the SDK sends aws-chunked with a CRC32 trailer
  await c.send(new PutObjectCommand({ Bucket: B, Key: "stream.bin",
    Body: Readable.from([big.subarray(0, 1000000), big.subarray(1000000)]),
    ContentLength: big.length }));
  for (const [k, want] of [["small.txt", small], ["stream.bin", big]]) {
    const g = await c.send(new GetObjectCommand({ Bucket: B, Key: k }));
    const got = Buffer.from(await g.Body.transformToByteArray());
    assert.ok(got.equals(want), "content of " + k);
  }
  const h = await c.send(new HeadObjectCommand({ Bucket: B, Key: "small.txt" }));
  assert.strictEqual(h.ContentType, "text/plain");
  const up = await c.send(new CreateMultipartUploadCommand({ Bucket: B, Key: "mp.bin" }));
  const p1 = crypto.randomBytes(5 * 1024 * 1024), p2 = crypto.randomBytes(1000);
  const e1 = await c.send(new UploadPartCommand({ Bucket: B, Key: "mp.bin",
    UploadId: up.UploadId, PartNumber: 1, Body: p1 }));
  const e2 = await c.send(new UploadPartCommand({ Bucket: B, Key: "mp.bin",
    UploadId: up.UploadId, PartNumber: 2, Body: p2 }));
  await c.send(new CompleteMultipartUploadCommand({ Bucket: B, Key: "mp.bin",
    UploadId: up.UploadId, MultipartUpload: { Parts: [
      { PartNumber: 1, ETag: e1.ETag }, { PartNumber: 2, ETag: e2.ETag }] } }));
  const g = await c.send(new GetObjectCommand({ Bucket: B, Key: "mp.bin" }));
  const got = Buffer.from(await g.Body.transformToByteArray());
  assert.ok(got.equals(Buffer.concat([p1, p2])), "multipart content");
  const l = await c.send(new ListObjectsV2Command({ Bucket: B }));
  assert.deepStrictEqual(l.Contents.map(o => o.Key), ["mp.bin", "small.txt", "stream.bin"]);
  const d = await c.send(new DeleteObjectsCommand({ Bucket: B, Delete: { Objects: [
    { Key: "small.txt" }, { Key: "stream.bin" }] } }));
  assert.strictEqual(d.Deleted.length, 2);
  const l2 = await c.send(new ListObjectsV2Command({ Bucket: B }));
  assert.deepStrictEqual(l2.Contents.map(o => o.Key), ["mp.bin"]);
  console.log("JS-OK");
})().catch(e => { console.error(e); process.exit(1); });
"""


# the first JS test of a clean clone installs @aws-sdk/client-s3 with npm
# (ensure_js_sdk, up to 300 s) in the test body
@pytest.mark.timeout(360)
def test_aws_sdk_js_v3(s3_server, tmp_path):
    ensure_js_sdk()
    script = tmp_path / "t.js"
    script.write_text(JS)
    env = dict(os.environ, NODE_PATH=os.path.join(NPM_DIR, "node_modules"),
               EP=s3_server.endpoint, AK=s3_server.access_key, SK=s3_server.secret_key)
    p = run(["node", str(script)], env=env)
    assert b"JS-OK" in p.stdout
