#!/usr/bin/python3
"""Generates the botocore cross-check vectors of tests/unit/sigv4_test.c.

Runs real boto3/botocore S3 calls (put_object, list_objects_v2, get_object,
and a presigned get_object URL) with awkward keys and query values at a fixed
clock, intercepts each request before it is sent (no network), and prints C
initialisers: the DECODED path and query (what struct cm_sigv4_req takes),
the signed headers as sent, the payload hash, botocore's canonical request,
its Authorization header or presigned query, and an independently computed
(Python hmac) aws-chunked trailer signature.

Usage: /usr/bin/python3 tests/unit/gen_sigv4_botocore.py > /tmp/vectors.inc
then paste the output over the generated block in sigv4_test.c.
"""
import calendar
import datetime
import hashlib
import hmac
import logging
import sys
from unittest import mock
from urllib.parse import unquote, urlsplit

import boto3
import botocore.auth
import botocore.awsrequest
from botocore.config import Config

try:
    import botocore.crt.auth  # noqa: F401  (awscrt signer, when installed)
    HAVE_CRT = True
except ImportError:
    HAVE_CRT = False

AK = "AKIDBOTOCORETEST"
SK = "botocore/secret+key=with~odd/chars0123456"
NOW = datetime.datetime(2026, 11, 29, 8, 30, 0)
NOW_T = calendar.timegm(NOW.timetuple())


def c_str(b):
    """C string literal of bytes: printable ASCII as is, rest 3-digit octal
    (never ambiguous with a following digit), '?' escaped (trigraphs)."""
    if isinstance(b, str):
        b = b.encode()
    out = []
    for c in b:
        ch = chr(c)
        if ch in '"\\?':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif 0x20 <= c < 0x7F:
            out.append(ch)
        else:
            out.append("\\%03o" % c)
    return '"' + "".join(out) + '"'


class Capture(logging.Handler):
    """Keeps botocore.auth's debug messages (the canonical request)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.canonical = []

    def emit(self, record):
        if record.msg.startswith("CanonicalRequest:"):
            self.canonical.append(record.args[0] if record.args else "")


captured = []


class EmptyRaw:
    """Stands in for urllib3's response: an empty body."""

    def stream(self, *args, **kwargs):
        yield b""

    def read(self, *args, **kwargs):
        return b""


def before_send(request, **kwargs):
    captured.append(request)
    return botocore.awsrequest.AWSResponse(request.url, 200, {}, EmptyRaw())


def emit(name, req, canonical):
    parts = urlsplit(req.url)
    auth = req.headers["Authorization"]
    if isinstance(auth, bytes):
        auth = auth.decode()
    signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
    headers = []
    for h in signed:
        if h == "host":
            headers.append(("host", parts.netloc))
            continue
        for k, v in req.headers.items():
            if k.lower() == h:
                headers.append((k, v.decode() if isinstance(v, bytes) else v))
    query = []
    if parts.query:
        for pair in parts.query.split("&"):
            k, _, v = pair.partition("=")
            query.append((unquote(k), unquote(v)))
    payload = req.headers["X-Amz-Content-SHA256"]
    if isinstance(payload, bytes):
        payload = payload.decode()
    print("    /* %s: %s %s */" % (name, req.method, req.url))
    print("    {")
    print("        .method = %s," % c_str(req.method))
    print("        .path = %s," % c_str(unquote(parts.path).encode()))
    if query:  # an empty {} is not ISO C (-Wpedantic): omitted, it is zero
        print("        .query = {")
        for k, v in query:
            print("            KV(%s, %s)," % (c_str(k.encode()),
                                             c_str(v.encode())))
        print("        },")
    print("        .nquery = %d," % len(query))
    print("        .headers = {")
    for k, v in headers:
        print("            KV(%s, %s)," % (c_str(k), c_str(v)))
    print("        },")
    print("        .nheaders = %d," % len(headers))
    print("        .payload_hash = %s," % c_str(payload))
    lines = canonical.split("\n")
    print("        .canonical =")
    for i, line in enumerate(lines):
        end = "\n" if i + 1 < len(lines) else ""
        print("            %s%s" % (c_str(line + end),
                                   "," if i + 1 == len(lines) else ""))
    print("        .authorization = %s," % c_str(auth))
    print("    },")


def run_calls(s3):
    """The S3 calls whose requests become vectors; returns the presigned URL."""
    s3.put_object(Bucket="bkt",
                  Key="dir one/\u00fcn\u00ef c\u00f6d\u00e9+plus=eq~tilde!$&'().txt",
                  Body=b"hello world", ContentType="text/plain",
                  Metadata={"note": "  spaced   value  "})
    s3.list_objects_v2(Bucket="bkt", Prefix="dir one/\u00fc+=~", Delimiter="/",
                       MaxKeys=7, StartAfter="a&b=c%d e")
    s3.get_object(Bucket="bkt", Key="a/b//c/./d/../~ +x", Range="bytes=0-99")
    return s3.generate_presigned_url(
        "get_object",
        Params={"Bucket": "bkt", "Key": "pre signed/\u00e9+=.bin"},
        ExpiresIn=3600)


def signed_run(use_crt):
    """Runs the calls at the fixed clock with botocore's pure-Python SigV4
    signer (use_crt False) or the awscrt one botocore prefers when
    installed. Returns (captured requests, presigned URL)."""
    captured.clear()
    fake_dt = mock.Mock(wraps=datetime.datetime)
    fake_dt.utcnow.return_value = NOW
    maps = dict(botocore.auth.AUTH_TYPE_MAPS)
    if not use_crt:
        maps["s3v4"] = botocore.auth.S3SigV4Auth
        maps["s3v4-query"] = botocore.auth.S3SigV4QueryAuth
    with mock.patch("botocore.auth.datetime.datetime", fake_dt), \
            mock.patch.dict("botocore.auth.AUTH_TYPE_MAPS", maps):
        if HAVE_CRT:
            crt_patch = mock.patch("botocore.crt.auth.datetime.datetime", fake_dt)
        elif use_crt:
            return None, None
        else:
            crt_patch = mock.patch("botocore.auth.datetime.datetime", fake_dt)
        with crt_patch:
            s3 = boto3.session.Session().client(
                "s3", endpoint_url="http://127.0.0.1:9", region_name="us-east-1",
                aws_access_key_id=AK, aws_secret_access_key=SK,
                config=Config(signature_version="s3v4",
                              s3={"addressing_style": "path"},
                              retries={"max_attempts": 0}))
            s3.meta.events.register("before-send.s3", before_send)
            url = run_calls(s3)
    return list(captured), url


def main():
    cap = Capture()
    log = logging.getLogger("botocore.auth")
    log.setLevel(logging.DEBUG)
    log.addHandler(cap)
    reqs, url = signed_run(False)
    crt_reqs, crt_url = signed_run(True)
    if crt_reqs is not None:
        # Two independent signers must agree before we trust the vectors.
        for a, b in zip(reqs, crt_reqs):
            assert a.headers["Authorization"] == b.headers["Authorization"], \
                (a.headers["Authorization"], b.headers["Authorization"])
        sig = lambda u: [p for p in urlsplit(u).query.split("&")
                         if p.startswith("X-Amz-Signature=")]
        assert sig(url) == sig(crt_url), (url, crt_url)
        sys.stderr.write("botocore and awscrt signers agree\n")
    captured[:] = reqs
    names = ["put_object", "list_objects_v2", "get_object"]
    print("/* generated by tests/unit/gen_sigv4_botocore.py (botocore %s), "
          "now = %d (%s), access key %s, secret %s */"
          % (botocore.__version__, NOW_T, NOW.isoformat() + "Z", c_str(AK),
             c_str(SK)))
    print("static const struct bc_vec bc_vecs[] = {")
    for name, req, canon in zip(names, captured, cap.canonical):
        emit(name, req, canon)
    print("};")
    parts = urlsplit(url)
    print("/* presigned get_object: %s */" % url)
    print("static const char bc_presign_path[] = %s;" % c_str(unquote(parts.path).encode()))
    print("static const char bc_presign_host[] = %s;" % c_str(parts.netloc))
    sig = [p.split("=", 1)[1] for p in parts.query.split("&")
           if p.startswith("X-Amz-Signature=")][0]
    print("static const char bc_presign_sig[] = %s;" % c_str(sig))

    # Trailer signature computed with Python's hmac (an independent
    # implementation): sts = "AWS4-HMAC-SHA256-TRAILER\n" date "\n" scope
    # "\n" prev "\n" hex(sha256(trailer)).
    date8 = NOW.strftime("%Y%m%d")
    amz = NOW.strftime("%Y%m%dT%H%M%SZ")
    scope = "%s/us-east-1/s3/aws4_request" % date8
    k = hmac.new(("AWS4" + SK).encode(), date8.encode(), hashlib.sha256).digest()
    for part in ("us-east-1", "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    prev = "a" * 64
    trailer = b"x-amz-checksum-crc32c:sOO8/Q==\n"
    sts = "\n".join(["AWS4-HMAC-SHA256-TRAILER", amz, scope, prev,
                     hashlib.sha256(trailer).hexdigest()])
    print("static const char bc_trailer[] = %s;" % c_str(trailer))
    print("static const char bc_trailer_sig[] = %s;"
          % c_str(hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()))
    print("static const char bc_signing_key_hex[] = %s;" % c_str(k.hex()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
