"""Test certificates made at test time with openssl (no key is committed):
a self-signed CA and a server certificate for 127.0.0.1 signed by it."""

import shutil
import subprocess

OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"


def openssl(*args):
    subprocess.run([OPENSSL] + list(args), check=True, capture_output=True)


def make_ca(d, name):
    """A self-signed CA in directory @d: (cert path, key path)."""
    key, crt = str(d / (name + ".key")), str(d / (name + ".crt"))
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
            "-out", crt, "-days", "2", "-subj", "/CN=" + name,
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return crt, key


def make_server_cert(d, ca_crt, ca_key, name="srv"):
    """A certificate for 127.0.0.1 (subjectAltName IP:127.0.0.1) signed by
    the CA, in @d as NAME.crt / NAME.key: (cert, key)."""
    key, csr = str(d / (name + ".key")), str(d / (name + ".csr"))
    crt, ext = str(d / (name + ".crt")), d / (name + ".ext")
    ext.write_text("subjectAltName=IP:127.0.0.1\n"
                   "extendedKeyUsage=serverAuth\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
            "-out", csr, "-subj", "/CN=127.0.0.1")
    openssl("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key,
            "-CAcreateserial", "-out", crt, "-days", "2",
            "-extfile", str(ext))
    return crt, key
