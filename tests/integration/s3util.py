"""Helpers for S3 tests that need hand-made requests: a small SigV4 signer
(header auth, aws-chunked signed chunks and trailers) and raw sockets, so
tests can send what clients send byte by byte, and malformed input."""

import base64
import datetime
import hashlib
import hmac
import os
import shutil
import socket
import subprocess
import urllib.parse
import zlib

EMPTY_SHA = hashlib.sha256(b"").hexdigest()


def client_with_read_timeout(srv, read_timeout=5):
    """A boto3 client of @srv (path-style, SigV4, no retries) with its own
    read timeout, for tests that must notice a stalled response fast."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=srv.endpoint, region_name="us-east-1",
        aws_access_key_id=srv.access_key,
        aws_secret_access_key=srv.secret_key,
        config=Config(signature_version="s3v4",
                      s3={"addressing_style": "path"},
                      retries={"max_attempts": 1, "mode": "standard"},
                      connect_timeout=5, read_timeout=read_timeout))


def _hmac(key, msg):
    return hmac.new(key, msg.encode() if isinstance(msg, str) else msg,
                    hashlib.sha256).digest()


def signing_key(secret, date8, region="us-east-1", service="s3"):
    k = _hmac(("AWS4" + secret).encode(), date8)
    k = _hmac(k, region)
    k = _hmac(k, service)
    return _hmac(k, "aws4_request")


def uri_encode(s, keep_slash):
    safe = "-_.~" + ("/" if keep_slash else "")
    return urllib.parse.quote(s, safe=safe)


def sign_headers(method, path, query, headers, payload_hash, access, secret,
                 now=None, region="us-east-1"):
    """Adds x-amz-date, x-amz-content-sha256 and Authorization to @headers
    (a dict with lowercase names, must hold 'host'). @path is decoded.
    Returns (signature, amz_date, scope, key)."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    date8 = amz_date[:8]
    headers["x-amz-date"] = amz_date
    headers["x-amz-content-sha256"] = payload_hash
    names = sorted(headers)
    canon_headers = "".join("%s:%s\n" % (n, " ".join(str(headers[n]).split()))
                            for n in names)
    signed = ";".join(names)
    cq = "&".join("%s=%s" % (uri_encode(k, False), uri_encode(v, False))
                  for k, v in sorted(query))
    canon = "\n".join([method, uri_encode(path, True), cq, canon_headers,
                       signed, payload_hash])
    scope = "%s/%s/s3/aws4_request" % (date8, region)
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(canon.encode()).hexdigest()])
    key = signing_key(secret, date8, region)
    sig = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s"
        % (access, scope, signed, sig))
    return sig, amz_date, scope, key


def chunk_sig(key, amz_date, scope, prev, data):
    sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, prev,
                     EMPTY_SHA, hashlib.sha256(data).hexdigest()])
    return hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()


def trailer_sig(key, amz_date, scope, prev, trailer_bytes):
    sts = "\n".join(["AWS4-HMAC-SHA256-TRAILER", amz_date, scope, prev,
                     hashlib.sha256(trailer_bytes).hexdigest()])
    return hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()


def crc32_b64(data):
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def s3cmd_config(srv, path, signature_v2=False):
    """Writes an s3cmd config for @srv (path style, plain HTTP, 5 MiB
    multipart chunks) to @path; returns the s3cmd argv prefix."""
    hostport = "127.0.0.1:%d" % srv.port
    with open(path, "w") as f:
        f.write("[default]\naccess_key = %s\nsecret_key = %s\n"
                "host_base = %s\nhost_bucket = %s\nuse_https = False\n"
                "signature_v2 = %s\nbucket_location = us-east-1\n"
                "check_ssl_certificate = False\n"
                "multipart_chunk_size_mb = 5\n"
                % (srv.access_key, srv.secret_key, hostport, hostport,
                   signature_v2))
    return ["/usr/bin/s3cmd", "-c", str(path)]


def raw_request(port, data, timeout=5.0, read_all=True):
    """Sends @data on a fresh connection, returns everything read until the
    server closes (or the timeout)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        while True:
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            if not b:
                break
            out += b
            if not read_all:
                break
        return out
    finally:
        s.close()


def status_of(resp):
    line = resp.split(b"\r\n", 1)[0]
    return int(line.split()[1])


def read_response(f):
    """Reads one HTTP/1.1 response with a Content-Length body from the
    binary file @f. Returns (status, {lowercase name: value}, body)."""
    line = f.readline()
    if not line:
        raise EOFError("connection closed")
    status = int(line.split()[1])
    headers = {}
    while True:
        h = f.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        name, _, value = h.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    n = int(headers.get("content-length", "0"))
    body = f.read(n) if n else b""
    return status, headers, body


# @aws-sdk/client-s3 (npm) for the JavaScript client tests, installed once
# into a git-ignored folder by whichever test needs it first
NPM_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "build", "npm-s3")


def ensure_js_sdk():
    """Returns the path of @aws-sdk/client-s3, installing it with npm when
    missing; skips the test (with the reason) without node/npm or a
    reachable registry."""
    import pytest
    mod = os.path.join(NPM_DIR, "node_modules", "@aws-sdk", "client-s3")
    if os.path.isdir(mod):
        return mod
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("node/npm not installed")
    os.makedirs(NPM_DIR, exist_ok=True)
    p = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent",
                        "@aws-sdk/client-s3"], cwd=NPM_DIR, capture_output=True,
                       timeout=300)
    if p.returncode != 0 or not os.path.isdir(mod):
        pytest.skip("npm registry unreachable: %s"
                    % p.stderr.decode(errors="replace")[-300:])
    return mod
