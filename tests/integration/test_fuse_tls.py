"""ecfs over TLS: an https:// endpoint verified against -o ca_file=, a
clean mount failure without it (or with a wrong CA), and the
insecure_skip_tls_verify_testing_only escape hatch.

The TLS side is a real nginx (Debian nginx-light, its own process, config,
pid and logs in the test's tmp dir, on a free port) proxying to a real
storaged; the CA and the server certificate (subjectAltName IP:127.0.0.1)
are made here with openssl. nginx passes the client's Host on, so the
SigV4 signature storaged checks is the one ecfs made."""

import os
import shutil
import socket
import subprocess
import time
import uuid

import pytest

from conftest import free_port
from fuse_util import ECFS, Mount, is_mounted
from tls_util import make_ca, make_server_cert

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


NGINX_CONF = """
daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {crt};
        ssl_certificate_key {key};
        client_max_body_size 0;
        location / {{
            proxy_pass http://127.0.0.1:{up};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_request_buffering off;
            proxy_buffering off;
        }}
    }}
}}
"""


@pytest.fixture
def tls_proxy(storaged, tmp_path):
    """storaged behind nginx over TLS: (server, https endpoint, CA cert,
    a wrong CA cert). nginx is killed at teardown, whatever happened."""
    if not os.access(NGINX, os.X_OK):
        pytest.fail("no nginx (scripts/install-deps installs nginx-light)")
    srv = storaged()
    d = tmp_path / "tls"
    d.mkdir()
    ca_crt, ca_key = make_ca(d, "ecfs-test-ca")
    wrong_crt, _ = make_ca(d, "ecfs-wrong-ca")
    crt, key = make_server_cert(d, ca_crt, ca_key)
    nd = d / "nginx"
    nd.mkdir()
    port = free_port()
    conf = nd / "nginx.conf"
    conf.write_text(NGINX_CONF.format(d=nd, port=port, crt=crt, key=key,
                                      up=srv.port))
    logf = open(nd / "stderr.log", "ab")
    proc = subprocess.Popen([NGINX, "-p", str(nd), "-c", str(conf),
                             "-e", str(nd / "error.log")],
                            stdin=subprocess.DEVNULL, stdout=logf,
                            stderr=logf, start_new_session=True)
    logf.close()
    try:
        deadline = time.monotonic() + 10
        while True:
            assert proc.poll() is None, (nd / "error.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "nginx did not listen"
                time.sleep(0.05)
        yield srv, "https://127.0.0.1:%d" % port, ca_crt, wrong_crt
    finally:
        proc.kill()
        proc.wait(10)


def tls_env():
    """The environment without OpenSSL trust-store overrides, so "no
    ca_file" really means the system store."""
    return {k: v for k, v in os.environ.items()
            if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE")}


def test_ecfs_over_tls(tls_proxy, ecfs_mount, tmp_path):
    srv, ep, ca, wrong_ca = tls_proxy
    c = srv.client()
    b = "tls-" + uuid.uuid4().hex[:8]
    c.create_bucket(Bucket=b)
    data = os.urandom(200000)
    c.put_object(Bucket=b, Key="dir/blob.bin", Body=data)

    m = ecfs_mount(ep, b, opts=["ca_file=" + ca],
                   access_key=srv.access_key, secret_key=srv.secret_key,
                   env=tls_env())
    with open(os.path.join(m.path, "dir", "blob.bin"), "rb") as f:
        assert f.read() == data
    new = os.urandom(70000)
    with open(os.path.join(m.path, "dir", "new.bin"), "wb") as f:
        f.write(new)
    assert c.get_object(Bucket=b, Key="dir/new.bin")["Body"].read() == new
    m.unmount()

    # no ca_file: the system trust store does not know the test CA; a
    # wrong CA neither. Both fail the mount command, naming the error.
    for opts in ([], ["ca_file=" + wrong_ca]):
        mm = Mount(tmp_path, ep, b, opts=opts + ["retries=0"],
                   access_key=srv.access_key, secret_key=srv.secret_key,
                   env=tls_env())
        r = subprocess.run(mm.argv, env=mm.env, capture_output=True,
                           timeout=30)
        err = r.stderr.decode(errors="replace")
        assert r.returncode != 0, err
        assert not is_mounted(mm.path)
        assert "SSL certificate problem" in err, err
        assert "unable to get local issuer certificate" in err, err
        assert "ecfs: cannot " in err and "s3://%s/" % b in err, err

    # a ca_file that is not there fails before anything is tried
    mm = Mount(tmp_path, ep, b, opts=["ca_file=" + str(tmp_path / "nope")],
               access_key=srv.access_key, secret_key=srv.secret_key)
    r = subprocess.run(mm.argv, env=mm.env, capture_output=True, timeout=30)
    assert r.returncode != 0
    assert b"cannot read ca_file=" in r.stderr
    assert b"No such file or directory" in r.stderr
    assert not is_mounted(mm.path)

    # ecfs pack shares fuse/s3.c: the same ca_file works, and without it
    # the pack fails on the TLS check
    src = tmp_path / "packsrc"
    src.mkdir()
    (src / "a.txt").write_bytes(b"packed over tls\n")
    penv = tls_env()
    penv.update(AWS_ACCESS_KEY_ID=srv.access_key,
                AWS_SECRET_ACCESS_KEY=srv.secret_key)
    r = subprocess.run([ECFS, "pack", str(src), b + ":packed", "-q", "-o",
                        "endpoint=%s,ca_file=%s,retries=0" % (ep, wrong_ca)],
                       env=penv, capture_output=True, timeout=60)
    assert r.returncode != 0 and b"SSL certificate problem" in r.stderr, \
        r.stderr
    r = subprocess.run([ECFS, "pack", str(src), b + ":packed", "-q", "-o",
                        "endpoint=%s,ca_file=%s" % (ep, ca)],
                       env=penv, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert c.head_object(Bucket=b, Key="packed/.ecfs-pack/index")

    # the testing-only switch skips verification, and says so
    mm = Mount(tmp_path, ep, b, opts=["insecure_skip_tls_verify_testing_only"],
               access_key=srv.access_key, secret_key=srv.secret_key,
               env=tls_env())
    r = subprocess.run(mm.argv, env=mm.env, capture_output=True, timeout=30)
    try:
        assert r.returncode == 0, r.stderr
        assert b"TLS certificate verification is OFF" in r.stderr
        with open(os.path.join(mm.path, "dir", "blob.bin"), "rb") as f:
            assert f.read() == data
    finally:
        mm.cleanup()


def test_help_names_the_tls_options():
    for argv in ([ECFS, "--help"], [ECFS, "pack", "--help"]):
        r = subprocess.run(argv, capture_output=True)
        assert r.returncode == 0
        assert b"ca_file=" in r.stdout
        assert b"insecure_skip_tls_verify_testing_only" in r.stdout
