"""Virtual-hosted-style addressing (issue 18): `storaged serve --domain
s3.test` answers requests whose Host is BUCKET.s3.test[:PORT] beside path
style. The names are resolved to 127.0.0.1 inside this test process only
(socket.getaddrinfo is patched for *.s3.test), so boto3 and urllib send
exactly what they would to a real DNS name."""
import http.client
import socket
import subprocess
import urllib.request
import uuid

import boto3
import pytest
from botocore.config import Config

from conftest import STORAGED, mpu_one_part

DOMAIN = "s3.test"


@pytest.fixture
def vsrv(storaged, monkeypatch):
    real = socket.getaddrinfo

    def fake(host, *a, **kw):
        if isinstance(host, str) and (host == DOMAIN or
                                      host.endswith("." + DOMAIN)):
            host = "127.0.0.1"
        return real(host, *a, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return storaged(ndrives=4, args=["--domain", DOMAIN])


def vclient(srv):
    return boto3.client(
        "s3", endpoint_url="http://%s:%d" % (DOMAIN, srv.port),
        aws_access_key_id=srv.access_key, aws_secret_access_key=srv.secret_key,
        region_name="us-east-1",
        config=Config(signature_version="s3v4",
                      s3={"addressing_style": "virtual"},
                      retries={"max_attempts": 1, "mode": "standard"}))


def test_virtual_hosted_requests(vsrv):
    v = vclient(vsrv)
    path = vsrv.client()  # path style on 127.0.0.1, same server
    name = "vh-" + uuid.uuid4().hex[:8]
    sent = []
    v.meta.events.register("before-send.s3",
                           lambda request, **kw: sent.append(request.url))
    v.create_bucket(Bucket=name)
    assert sent[-1].startswith("http://%s.%s:%d/" % (name, DOMAIN, vsrv.port))
    v.put_object(Bucket=name, Key="dir/a b.txt", Body=b"hello")
    v.put_object(Bucket=name, Key="metrics", Body=b"not the endpoint")
    # the same objects through path style
    assert path.get_object(Bucket=name, Key="dir/a b.txt")["Body"].read() == \
        b"hello"
    assert [o["Key"] for o in v.list_objects_v2(Bucket=name)["Contents"]] == \
        ["dir/a b.txt", "metrics"]
    assert v.get_object(Bucket=name, Key="dir/a b.txt", Range="bytes=1-3")[
        "Body"].read() == b"ell"
    # /metrics and /health are the server's only in path style
    assert v.get_object(Bucket=name, Key="metrics")["Body"].read() == \
        b"not the endpoint"
    mpu_one_part(v, name, "mp", b"part")
    v.copy_object(Bucket=name, Key="copy", CopySource={"Bucket": name,
                                                       "Key": "mp"})
    assert path.get_object(Bucket=name, Key="copy")["Body"].read() == b"part"
    # presigned virtual-hosted URL, fetched as a worker would
    url = v.generate_presigned_url("get_object", Params={
        "Bucket": name, "Key": "dir/a b.txt"}, ExpiresIn=300)
    assert url.startswith("http://%s.%s:" % (name, DOMAIN))
    assert urllib.request.urlopen(url, timeout=10).read() == b"hello"
    for k in ("dir/a b.txt", "metrics", "mp", "copy"):
        v.delete_object(Bucket=name, Key=k)
    v.delete_bucket(Bucket=name)
    assert name not in [b["Name"] for b in path.list_buckets()["Buckets"]]


def test_unsigned_and_unknown_hosts(vsrv):
    path = vsrv.client()
    name = "vh-" + uuid.uuid4().hex[:8]
    path.create_bucket(Bucket=name)
    path.put_object(Bucket=name, Key="k", Body=b"x")
    # anonymous virtual-hosted GET: refused, as in path style
    c = http.client.HTTPConnection("127.0.0.1", vsrv.port, timeout=5)
    c.request("GET", "/k", headers={"Host": "%s.%s" % (name, DOMAIN)})
    r = c.getresponse()
    assert r.status == 403 and b"AccessDenied" in r.read()
    c.close()
    # a Host outside the domain is path style: /k is bucket "k"
    c = http.client.HTTPConnection("127.0.0.1", vsrv.port, timeout=5)
    c.request("GET", "/health/ready", headers={"Host": "other.example"})
    assert c.getresponse().status == 200
    c.close()
    # curl through its own resolver override, signed by curl's aws-sigv4
    p = subprocess.run(
        ["curl", "-sS", "-o", "-", "-w", "%{http_code}",
         "--resolve", "%s.%s:%d:127.0.0.1" % (name, DOMAIN, vsrv.port),
         "--aws-sigv4", "aws:amz:us-east-1:s3",
         "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
         "--user", "%s:%s" % (vsrv.access_key, vsrv.secret_key),
         "http://%s.%s:%d/k" % (name, DOMAIN, vsrv.port)],
        capture_output=True, timeout=30)
    assert p.stdout == b"x200", (p.stdout, p.stderr)


def test_bad_domain_is_refused(tmp_path):
    drive = tmp_path / "d0"
    drive.mkdir()
    for bad in ("127.0.0.1", "s3.test:9000", "-x.test", "a..b"):
        p = subprocess.run([STORAGED, "serve", "--address", "127.0.0.1:1",
                            "--domain", bad, str(drive)],
                           capture_output=True, timeout=30,
                           env={"STORAGED_ROOT_USER": "u",
                                "STORAGED_ROOT_PASSWORD": "password1"})
        assert p.returncode == 2, (bad, p.stderr)
        assert b"--domain wants a DNS name" in p.stderr
    assert list(drive.iterdir()) == []  # nothing was formatted
