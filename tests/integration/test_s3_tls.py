"""storaged serving HTTPS itself (--tls-cert/--tls-key, OpenSSL on the event
loops), driven by real clients over TLS with a test CA made here with
openssl: boto3 (verify=CA), awscli (--ca-bundle), s3cmd (ca_certs_file),
rclone (--ca-cert), curl (--cacert) and an ecfs mount of https:// with
-o ca_file=. Also: a wrong CA fails cleanly for each; TLS 1.2 and 1.3 are
both served; plain HTTP to the TLS port gets a 400 and a close; 1000
connections dropped mid-handshake leave the server serving; SIGHUP
reloads the certificate (and a bad one is refused, the old one kept);
bad --tls-* arguments stop the start with a clear message."""

import json
import os
import socket
import ssl
import struct
import subprocess
import textwrap
import time
import urllib.request
import uuid

import pytest

from conftest import STORAGED, boto3_client, free_port
from tls_util import make_ca, make_server_cert

TIMEOUT = 120


def run(argv, env=None, check=True, timeout=TIMEOUT):
    p = subprocess.run(argv, env=env, capture_output=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError("%s failed (%d):\nstdout: %s\nstderr: %s" % (
            " ".join(argv), p.returncode,
            p.stdout.decode(errors="replace")[-3000:],
            p.stderr.decode(errors="replace")[-3000:]))
    return p


def clean_env():
    """The environment without CA overrides (AWS_CA_BUNDLE is set on this
    machine; SSL_CERT_* would change what "no CA given" means)."""
    return {k: v for k, v in os.environ.items()
            if k not in ("AWS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR",
                         "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE")}


@pytest.fixture
def certs(tmp_path):
    """(CA cert, CA key, wrong CA cert, server cert, server key, dir)."""
    d = tmp_path / "pki"
    d.mkdir()
    ca, ca_key = make_ca(d, "ecfs-test-ca")
    wrong, _ = make_ca(d, "ecfs-wrong-ca")
    crt, key = make_server_cert(d, ca, ca_key)
    return ca, ca_key, wrong, crt, key, d


@pytest.fixture
def tls_srv(storaged, certs):
    ca, _, _, crt, key, _ = certs
    return storaged(tls=(crt, key, ca))


def peer_cert(port, ca, version=None):
    """The DER certificate a fresh TLS connection to @port presents, and
    the protocol version agreed (@version: pin min = max to it)."""
    ctx = ssl.create_default_context(cafile=ca)
    if version is not None:
        ctx.minimum_version = ctx.maximum_version = version
    with socket.create_connection(("127.0.0.1", port), 5) as s:
        with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
            return t.getpeercert(binary_form=True), t.version()


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1:DeprecationWarning")
def test_boto3_and_urllib_over_tls(tls_srv, certs):
    ca, _, wrong, _, _, _ = certs
    c = tls_srv.client()
    b = "tls-" + uuid.uuid4().hex[:8]
    c.create_bucket(Bucket=b)
    blobs = {"zero": b"", "small": os.urandom(4096),
             "mib": os.urandom(1 << 20), "big": os.urandom((9 << 20) + 11)}
    for k, v in blobs.items():
        c.put_object(Bucket=b, Key=k, Body=v)
    for k, v in blobs.items():
        assert c.get_object(Bucket=b, Key=k)["Body"].read() == v, k
    # a range, a listing, a multipart upload through boto3's transfer
    r = c.get_object(Bucket=b, Key="big", Range="bytes=1000-1999")
    assert r["Body"].read() == blobs["big"][1000:2000]
    src = tls_srv.workdir + "/up.bin"
    with open(src, "wb") as f:
        f.write(os.urandom(12 << 20))
    from boto3.s3.transfer import TransferConfig
    c.upload_file(src, b, "multi", Config=TransferConfig(
        multipart_threshold=5 << 20, multipart_chunksize=5 << 20))
    with open(src, "rb") as f:
        assert c.get_object(Bucket=b, Key="multi")["Body"].read() == f.read()
    keys = [o["Key"] for o in c.list_objects_v2(Bucket=b)["Contents"]]
    assert sorted(keys) == sorted(list(blobs) + ["multi"])

    # a presigned URL over https, fetched with urllib and the CA
    url = c.generate_presigned_url("get_object", Params={"Bucket": b,
                                   "Key": "small"}, ExpiresIn=60)
    assert url.startswith("https://")
    ctx = ssl.create_default_context(cafile=ca)
    with urllib.request.urlopen(url, context=ctx, timeout=10) as r:
        assert r.read() == blobs["small"]

    # TLS 1.2 and TLS 1.3 are both served, by the same certificate
    der12, v12 = peer_cert(tls_srv.port, ca, ssl.TLSVersion.TLSv1_2)
    der13, v13 = peer_cert(tls_srv.port, ca, ssl.TLSVersion.TLSv1_3)
    assert (v12, v13) == ("TLSv1.2", "TLSv1.3") and der12 == der13
    # TLS 1.1 is refused
    with pytest.raises(ssl.SSLError):
        ctx11 = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx11.load_verify_locations(ca)
        ctx11.minimum_version = ctx11.maximum_version = ssl.TLSVersion.TLSv1_1
        with socket.create_connection(("127.0.0.1", tls_srv.port), 5) as s:
            ctx11.wrap_socket(s, server_hostname="127.0.0.1")

    # a wrong CA (and none: the system store) fails verification cleanly
    from botocore.exceptions import SSLError
    for verify in (wrong, True):
        bad = boto3_client(tls_srv.endpoint, tls_srv.access_key,
                           tls_srv.secret_key, verify=verify)
        with pytest.raises(SSLError):
            bad.head_bucket(Bucket=b)
    assert tls_srv.alive()


def test_cli_clients_over_tls(tls_srv, certs, tmp_path):
    """curl, awscli, s3cmd and rclone with the test CA; each fails cleanly
    with the wrong one."""
    ca, _, wrong, _, _, _ = certs
    srv = tls_srv
    env = clean_env()
    b = "cli-" + uuid.uuid4().hex[:8]
    srv.client().create_bucket(Bucket=b)
    data = os.urandom(300000)
    src = tmp_path / "f.bin"
    src.write_bytes(data)

    # curl: /health/ready with the CA; exit 60 (verify failed) without
    r = run(["curl", "-sS", "--cacert", ca, srv.endpoint + "/health/ready",
             "-o", "/dev/null", "-w", "%{http_code}"], env=env)
    assert r.stdout == b"200"
    r = run(["curl", "-sS", "--cacert", wrong, srv.endpoint + "/health/ready"],
            env=env, check=False)
    assert r.returncode == 60, r.stderr

    # awscli v2
    cfg = tmp_path / "aws.cfg"
    cfg.write_text("[default]\nregion = us-east-1\n"
                   "s3 =\n  addressing_style = path\n")
    aenv = {k: v for k, v in env.items() if not k.startswith("AWS_")}
    aenv.update(AWS_ACCESS_KEY_ID=srv.access_key,
                AWS_SECRET_ACCESS_KEY=srv.secret_key,
                AWS_CONFIG_FILE=str(cfg),
                AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "nocreds"),
                AWS_DEFAULT_REGION="us-east-1", AWS_PAGER="")
    aws = ["/usr/bin/aws", "--endpoint-url", srv.endpoint]
    run(aws + ["--ca-bundle", ca, "s3", "cp", str(src),
               "s3://%s/aws/f.bin" % b], env=aenv)
    out = json.loads(run(aws + ["--ca-bundle", ca, "s3api", "list-objects-v2",
                                "--bucket", b], env=aenv).stdout)
    assert [o["Key"] for o in out["Contents"]] == ["aws/f.bin"]
    r = run(aws + ["--ca-bundle", wrong, "s3", "ls", "s3://" + b], env=aenv,
            check=False)
    assert r.returncode != 0 and b"SSL validation failed" in r.stderr, \
        r.stderr

    # s3cmd
    hp = "127.0.0.1:%d" % srv.port
    s3cfg = tmp_path / "s3cfg"
    base = textwrap.dedent("""\
        [default]
        access_key = %s
        secret_key = %s
        host_base = %s
        host_bucket = %s
        use_https = True
        check_ssl_certificate = True
        check_ssl_hostname = True
        signature_v2 = False
        bucket_location = us-east-1
        """ % (srv.access_key, srv.secret_key, hp, hp))
    s3cfg.write_text(base + "ca_certs_file = %s\n" % ca)
    s3cmd = ["/usr/bin/s3cmd", "-c", str(s3cfg)]
    run(s3cmd + ["put", str(src), "s3://%s/s3cmd/f.bin" % b], env=env)
    run(s3cmd + ["get", "s3://%s/s3cmd/f.bin" % b, str(tmp_path / "g.bin")],
        env=env)
    assert (tmp_path / "g.bin").read_bytes() == data
    s3cfg.write_text(base + "ca_certs_file = %s\n" % wrong)
    r = run(s3cmd + ["ls", "s3://" + b], env=env, check=False)
    assert r.returncode != 0 and b"CERTIFICATE_VERIFY_FAILED" in \
        r.stdout + r.stderr, r.stdout + r.stderr

    # rclone
    renv = dict(env, RCLONE_CONFIG_ST_TYPE="s3",
                RCLONE_CONFIG_ST_PROVIDER="Other",
                RCLONE_CONFIG_ST_ENDPOINT=srv.endpoint,
                RCLONE_CONFIG_ST_ACCESS_KEY_ID=srv.access_key,
                RCLONE_CONFIG_ST_SECRET_ACCESS_KEY=srv.secret_key,
                RCLONE_CONFIG_ST_REGION="us-east-1",
                RCLONE_CONFIG_ST_FORCE_PATH_STYLE="true",
                RCLONE_CONFIG=str(tmp_path / "rclone.conf"))
    (tmp_path / "rclone.conf").write_text("")
    rc = ["rclone", "--low-level-retries", "1", "--retries", "1"]
    run(rc + ["--ca-cert", ca, "copyto", str(src),
              "st:%s/rclone/f.bin" % b], env=renv)
    got = run(rc + ["--ca-cert", ca, "cat", "st:%s/rclone/f.bin" % b],
              env=renv).stdout
    assert got == data
    r = run(rc + ["--ca-cert", wrong, "lsf", "st:" + b], env=renv,
            check=False)
    assert r.returncode != 0 and b"certificate" in r.stderr, r.stderr

    # storaged admin (libcurl) with --ca-file; without it the system store
    # refuses the test CA
    adm = [STORAGED, "admin", "--endpoint", srv.endpoint]
    aenv2 = dict(env, STORAGED_ROOT_USER=srv.access_key,
                 STORAGED_ROOT_PASSWORD=srv.secret_key)
    out = run(adm + ["--ca-file", ca, "user", "add", "tlsuser", "--policy",
                     "readonly"], env=aenv2).stdout.decode()
    assert "tlsuser" in run(adm + ["--ca-file", ca, "user", "list"],
                            env=aenv2).stdout.decode(), out
    r = run(adm + ["user", "list"], env=aenv2, check=False)
    assert r.returncode == 1 and b"SSL" in r.stderr, r.stderr

    c = srv.client()
    for k in ("aws/f.bin", "s3cmd/f.bin", "rclone/f.bin"):
        assert c.get_object(Bucket=b, Key=k)["Body"].read() == data, k


def test_ecfs_mounts_https(tls_srv, certs, ecfs_mount, tmp_path):
    from fuse_util import ECFS, Mount, is_mounted
    ca, _, wrong, _, _, _ = certs
    srv = tls_srv
    c = srv.client()
    b = "fs-" + uuid.uuid4().hex[:8]
    c.create_bucket(Bucket=b)
    data = os.urandom(700000)
    c.put_object(Bucket=b, Key="d/blob.bin", Body=data)
    env = clean_env()
    m = ecfs_mount(srv.endpoint, b, opts=["ca_file=" + ca],
                   access_key=srv.access_key, secret_key=srv.secret_key,
                   env=env)
    with open(os.path.join(m.path, "d", "blob.bin"), "rb") as f:
        assert f.read() == data
    assert sorted(os.listdir(m.path)) == ["d"]
    new = os.urandom(123457)
    with open(os.path.join(m.path, "d", "new.bin"), "wb") as f:
        f.write(new)
    assert c.get_object(Bucket=b, Key="d/new.bin")["Body"].read() == new
    m.unmount()
    # ecfs presign over https with the same ca_file: the URLs are https://
    # and work with the CA, without a key
    penv = dict(env, AWS_ACCESS_KEY_ID=srv.access_key,
                AWS_SECRET_ACCESS_KEY=srv.secret_key)
    r = run([ECFS, "presign", b + ":d/", "-o",
             "endpoint=%s,ca_file=%s,expires=120" % (srv.endpoint, ca)],
            env=penv)
    rows = [ln.split("\t") for ln in r.stdout.decode().splitlines()]
    assert sorted(k for k, _, _ in rows) == ["d/blob.bin", "d/new.bin"]
    ctx = ssl.create_default_context(cafile=ca)
    for k, n, url in rows:
        assert url.startswith("https://127.0.0.1:%d/" % srv.port)
        with urllib.request.urlopen(url, context=ctx, timeout=10) as resp:
            assert len(resp.read()) == int(n)
    r = run([ECFS, "presign", b, "-o", "endpoint=%s,ca_file=%s,retries=0"
             % (srv.endpoint, wrong)], env=penv, check=False)
    assert r.returncode == 1 and b"cannot list" in r.stderr, r.stderr
    mm = Mount(tmp_path, srv.endpoint, b, opts=["ca_file=" + wrong,
                                                "retries=0"],
               access_key=srv.access_key, secret_key=srv.secret_key, env=env)
    r = subprocess.run(mm.argv, env=mm.env, capture_output=True, timeout=30)
    assert r.returncode != 0 and b"SSL certificate problem" in r.stderr
    assert not is_mounted(mm.path)


def client_hello():
    """The bytes of a real TLS ClientHello (Python's, via a memory BIO)."""
    ctx = ssl.create_default_context()
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return out.read()


def test_plain_http_and_dropped_handshakes(tls_srv, certs):
    ca = certs[0]
    port = tls_srv.port
    # plain HTTP on the TLS port: a 400 that says why, then a close
    with socket.create_connection(("127.0.0.1", port), 5) as s:
        s.sendall(b"GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    assert got.startswith(b"HTTP/1.1 400 ") and b"https://" in got, got

    # 1000 connections dropped at every point of a handshake: before any
    # byte, after half or all of the ClientHello (the server has answered
    # or is answering), with garbage, with a RST
    hello = client_hello()
    rst = struct.pack("ii", 1, 0)
    for i in range(1000):
        s = socket.create_connection(("127.0.0.1", port), 5)
        kind = i % 5
        if kind == 1:
            s.sendall(hello[:len(hello) // 2])
        elif kind == 2:
            s.sendall(hello)
        elif kind == 3:
            s.sendall(b"\x16\x03\x01\xff\xff" + os.urandom(200))
        elif kind == 4:
            s.sendall(hello)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, rst)
        s.close()
    # ... and some that hold a handshake open while others are served
    held = [socket.create_connection(("127.0.0.1", port), 5)
            for _ in range(50)]
    for s in held[::2]:
        s.sendall(hello[:20])
    try:
        ctx = ssl.create_default_context(cafile=ca)
        for _ in range(3):
            with urllib.request.urlopen(tls_srv.endpoint + "/health/ready",
                                        context=ctx, timeout=5) as r:
                assert r.status == 200
        c = tls_srv.client()
        c.create_bucket(Bucket="after-drops")
        c.put_object(Bucket="after-drops", Key="k", Body=b"still serving")
        assert c.get_object(Bucket="after-drops",
                            Key="k")["Body"].read() == b"still serving"
    finally:
        for s in held:
            s.close()
    assert tls_srv.alive()
    # every dropped connection was closed by the server too
    deadline = time.monotonic() + 10
    while True:
        with urllib.request.urlopen(tls_srv.endpoint + "/metrics",
                                    context=ctx, timeout=5) as r:
            text = r.read().decode()
        open_conns = [ln for ln in text.splitlines()
                      if ln.startswith("storaged_http_connections ") or
                      ln.startswith("storaged_connections ")]
        if not open_conns or float(open_conns[0].split()[1]) <= 2:
            break
        assert time.monotonic() < deadline, open_conns
        time.sleep(0.2)


def test_sighup_reloads_the_certificate(tls_srv, certs):
    ca, ca_key, _, crt, key, d = certs
    port = tls_srv.port
    before, _ = peer_cert(port, ca)
    # a keep-alive connection made with the old certificate
    c = tls_srv.client()
    c.create_bucket(Bucket="reload")
    c.put_object(Bucket="reload", Key="k", Body=b"x")

    def reloads():
        return tls_srv.log_text().count("TLS certificate and key reloaded")

    def failures():
        return tls_srv.log_text().count("TLS reload failed")

    def hup_and_wait(count):
        n = count()
        tls_srv.proc.send_signal(1)  # SIGHUP
        deadline = time.monotonic() + 10
        while count() == n:
            assert time.monotonic() < deadline, tls_srv.log_text()
            time.sleep(0.1)

    ncrt, nkey = make_server_cert(d, ca, ca_key, name="srv2")
    os.replace(ncrt, crt)
    os.replace(nkey, key)
    hup_and_wait(reloads)
    after, _ = peer_cert(port, ca)
    assert after != before
    assert c.get_object(Bucket="reload", Key="k")["Body"].read() == b"x"

    # a broken pair: refused, logged, and the last good one stays
    with open(key, "w") as f:
        f.write("-----BEGIN PRIVATE KEY-----\nnot a key\n")
    hup_and_wait(failures)
    assert "keeping the old certificate" in tls_srv.log_text()
    assert peer_cert(port, ca)[0] == after
    assert tls_srv.alive()


def test_bad_tls_arguments(certs, tmp_path):
    ca, _, _, crt, key, d = certs
    env = dict(os.environ, STORAGED_ROOT_USER="u",
               STORAGED_ROOT_PASSWORD="password123")
    drive = tmp_path / "drv"
    drive.mkdir()
    base = [STORAGED, "serve", "--address", "127.0.0.1:%d" % free_port()]
    cases = [
        (["--tls-cert", crt], "--tls-cert and --tls-key go together"),
        (["--tls-cert", crt, "--tls-key", str(d / "nope.key")],
         "cannot load the private key"),
        (["--tls-cert", str(d / "nope.crt"), "--tls-key", key],
         "cannot load the certificate"),
        (["--tls-cert", ca, "--tls-key", key],
         "does not match the certificate"),
    ]
    for args, msg in cases:
        r = subprocess.run(base + args + [str(drive)], env=env,
                           capture_output=True, timeout=30)
        assert r.returncode == 2, (args, r.stderr)
        assert msg.encode() in r.stderr, (args, r.stderr)
    r = subprocess.run([STORAGED, "serve", "--help"], capture_output=True)
    assert b"--tls-cert FILE" in r.stdout and b"SIGHUP" in r.stdout
