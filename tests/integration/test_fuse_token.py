"""Temporary credentials: AWS_SESSION_TOKEN (environment) or
aws_session_token (a ~/.aws/credentials profile) reach the server as a
*signed* x-amz-security-token header on every request.

storaged issues no session tokens, so the server here is a small S3
stand-in in the test (ListObjectsV2, HEAD, GET of one object) that records
every request, refuses (403) one without the token, and checks each
signature with botocore's own S3 SigV4 signer."""

import http.server
import os
import threading
import urllib.parse

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from conftest import free_port

AK, SK = "ASIATESTKEY", "test/secret+key"
TOKEN = "FQoGZXIvYXdzE" + "x" * 600 + "/+=="  # STS tokens are long
BODY = b"hello, token\n"
ETAG = '"0123456789abcdef0123456789abcdef"'
LIST = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
        "<ListBucketResult><Name>tb</Name><Prefix></Prefix><KeyCount>1"
        "</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>"
        "<Contents><Key>hello.txt</Key><LastModified>2024-01-01T00:00:00.000Z"
        "</LastModified><ETag>&quot;0123456789abcdef0123456789abcdef&quot;"
        "</ETag><Size>%d</Size></Contents></ListBucketResult>" % len(BODY))


def signature_ok(method, raw_path, headers):
    """Recomputes the request's SigV4 signature with botocore."""
    auth = headers.get("Authorization", "")
    parts = dict(p.strip().split("=", 1) for p in
                 auth[len("AWS4-HMAC-SHA256 "):].split(","))
    signed = parts["SignedHeaders"].split(";")
    req = AWSRequest(method=method, url="http://%s%s" % (headers["Host"],
                                                         raw_path),
                     headers={h: headers[h] for h in signed})
    req.context["timestamp"] = headers["x-amz-date"]
    signer = S3SigV4Auth(Credentials(AK, SK, TOKEN), "s3", "us-east-1")
    creq = signer.canonical_request(req)
    sts = signer.string_to_sign(req, creq)
    return signer.signature(sts, req) == parts["Signature"], signed


class Recorder(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen = []

    def log_message(self, *a):
        pass

    def answer(self, body):
        ok, signed = signature_ok(self.command, self.path, self.headers)
        tok = self.headers.get("x-amz-security-token")
        Recorder.seen.append((self.command, self.path, ok, signed, tok))
        if not ok or tok != TOKEN or "x-amz-security-token" not in signed:
            self.send_response(403)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path = urllib.parse.urlsplit(self.path).path
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        if path == "/tb":
            # the one object is at the root: any other prefix is empty
            data = (LIST if q.get("prefix", [""])[0] == "" else
                    LIST.replace("<KeyCount>1", "<KeyCount>0").split(
                        "<Contents>")[0] + "</ListBucketResult>").encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/xml")
        elif path == "/tb/hello.txt":
            data = BODY
            self.send_response(200)
            self.send_header("ETag", ETAG)
            self.send_header("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT")
        else:
            data = b""
            self.send_response(404)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def do_GET(self):
        self.answer(True)

    def do_HEAD(self):
        self.answer(False)


@pytest.fixture
def recorder():
    Recorder.seen = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()),
                                          Recorder)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield "http://127.0.0.1:%d" % srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def read_through(m):
    with open(os.path.join(m.path, "hello.txt"), "rb") as f:
        assert f.read() == BODY
    assert os.listdir(m.path) == ["hello.txt"]


def check_seen():
    kinds = {(c, urllib.parse.urlsplit(p).path) for c, p, *_ in Recorder.seen}
    assert ("GET", "/tb") in kinds and ("GET", "/tb/hello.txt") in kinds
    for c, p, ok, signed, tok in Recorder.seen:
        assert ok, (c, p)
        assert "x-amz-security-token" in signed, (c, p, signed)
        assert tok == TOKEN, (c, p)


def test_session_token_from_environment(recorder, ecfs_mount):
    m = ecfs_mount(recorder, "tb", access_key=AK, secret_key=SK,
                   env={"AWS_SESSION_TOKEN": TOKEN})
    read_through(m)
    check_seen()


def test_session_token_from_profile(recorder, ecfs_mount, tmp_path):
    cred = tmp_path / "credentials"
    cred.write_text("[default]\naws_access_key_id = wrong\n"
                    "aws_secret_access_key = wrong\n\n"
                    "[sts]\naws_access_key_id = %s\n"
                    "aws_secret_access_key = %s\n"
                    "aws_session_token = %s\n" % (AK, SK, TOKEN))
    m = ecfs_mount(recorder, "tb", opts=["profile=sts"],
                   env={"AWS_SHARED_CREDENTIALS_FILE": str(cred)})
    read_through(m)
    check_seen()


def test_without_token_the_server_refuses(recorder, ecfs_mount):
    """The stand-in really checks: the same keys without the token are
    refused, so the mount fails (nothing mounted)."""
    m = ecfs_mount(recorder, "tb", access_key=AK, secret_key=SK,
                   env={"AWS_SESSION_TOKEN": ""}, start=False)
    with pytest.raises(AssertionError):
        m.start()
    assert Recorder.seen and all(t is None for *_, t in Recorder.seen)
