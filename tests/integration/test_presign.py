"""`ecfs presign BUCKET[:PREFIX]`: a manifest of presigned GET URLs from a
real storaged, fetched with urllib by a "worker" that holds no key.

A manifest of 1000 URLs is fetched whole (every body and size right); the
same objects presigned with a short expiry work at once and are refused
after it; a URL with any byte of its path or query changed is refused; the
URLs carry the signing user's rights (a write-only user's are refused);
the formats (TSV, JSON lines), the prefix, directory markers, keys TSV
cannot carry, --output's all-or-nothing file and the option errors."""

import concurrent.futures
import json
import os
import random
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import STORAGED
from fuse_util import ECFS

N = 1000


def presign(srv, src, *args, ak=None, sk=None, check=True):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID=ak or srv.access_key,
               AWS_SECRET_ACCESS_KEY=sk or srv.secret_key)
    r = subprocess.run([ECFS, "presign", src] + list(args), env=env,
                       capture_output=True, timeout=120)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def fetch(url):
    """(status, body) of a GET of @url with no credentials."""
    try:
        with urllib.request.urlopen(url, timeout=20) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def fetch_all(urls):
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        return list(ex.map(fetch, urls))


@pytest.fixture
def dataset(storaged):
    """A bucket with N small objects under train/ (keys with spaces and
    UTF-8), a directory marker and objects outside the prefix (on a server
    without fsync: the PUTs are setup, not what is tested)."""
    srv = storaged(args=["--no-fsync"])
    c = srv.client()
    b = "presign-data"
    c.create_bucket(Bucket=b)
    objs = {}
    for i in range(N):
        objs["train/c%d/img %04d-é.jpg" % (i % 7, i)] = os.urandom(
            100 + (i * 37) % 3000)
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda kv: c.put_object(Bucket=b, Key=kv[0], Body=kv[1]),
                    objs.items()))
    c.put_object(Bucket=b, Key="train/c0/", Body=b"")  # a directory marker
    c.put_object(Bucket=b, Key="val/outside.jpg", Body=b"not in the prefix")
    return srv, b, objs


def parse_tsv(text):
    rows = [ln.split("\t") for ln in text.splitlines()]
    assert all(len(r) == 3 for r in rows)
    return [(k, int(n), u) for k, n, u in rows]


def test_manifest_of_1000_urls(dataset, tmp_path):
    """One dataset for all the checks (1000 PUTs are the slow part)."""
    srv, b, objs = dataset
    # the short-lived manifest first: it expires while the rest runs
    t0 = time.time()
    r = presign(srv, b + ":train/", "-o", "endpoint=%s,expires=4"
                % srv.endpoint)
    short = parse_tsv(r.stdout.decode())
    assert len(short) == N
    k, _, url = short[0]
    assert fetch(url) == (200, objs[k])        # before expiry: works

    r = presign(srv, b + ":train/", "-o",
                "endpoint=%s,expires=600" % srv.endpoint)
    rows = parse_tsv(r.stdout.decode())
    assert sorted(k for k, _, _ in rows) == sorted(objs)   # no marker, no val/
    assert b"1000 URL(s)" in r.stderr
    assert all("X-Amz-Expires=600&" in u for _, _, u in rows)
    got = fetch_all([u for _, _, u in rows])
    for (k, n, _), (st, body) in zip(rows, got):
        assert st == 200 and body == objs[k] and n == len(body), k

    # any byte of the path or query changed: refused (never the object)
    k, _, url = rows[0]
    start = url.index("/", len("http://")) + 1  # after the host
    for i in range(start, len(url)):
        bad = url[:i] + ("Z" if url[i] != "Z" else "Y") + url[i + 1:]
        st, body = fetch(bad)
        assert 400 <= st < 500 and body != objs[k], (i, bad, st)
    rnd = random.Random(7)
    for k2, _, u2 in rnd.sample(rows, 30):
        i = rnd.randrange(start, len(u2))
        bad = u2[:i] + ("0" if u2[i] != "0" else "1") + u2[i + 1:]
        st, body = fetch(bad)
        assert 400 <= st < 500 and body != objs[k2], (i, bad, st)

    # JSON lines, into a file: the same objects
    out = tmp_path / "m.jsonl"
    presign(srv, b + ":train/c3/", "--format", "jsonl", "--output", str(out),
            "-q", "-o", "endpoint=" + srv.endpoint)
    lines = [json.loads(ln) for ln in out.read_text().splitlines()]
    want = sorted(k for k in objs if k.startswith("train/c3/"))
    assert [d["key"] for d in lines] == want
    assert all(d["size"] == len(objs[d["key"]]) for d in lines)
    assert all("X-Amz-Expires=3600&" in d["url"] for d in lines)  # default
    assert fetch(lines[0]["url"]) == (200, objs[lines[0]["key"]])
    assert not os.path.exists(str(out) + ".tmp")

    check_signers_rights(srv, b, objs)

    # after expiry: every one of the 1000 short-lived URLs is refused
    time.sleep(max(0.0, t0 + 6 - time.time()))
    for st, body in fetch_all([u for _, _, u in short]):
        assert st == 403 and b"AccessDenied" in body, (st, body)


def check_signers_rights(srv, b, objs):
    """The URLs carry the signing user's rights, checked per request."""
    env = dict(os.environ, STORAGED_ROOT_USER=srv.access_key,
               STORAGED_ROOT_PASSWORD=srv.secret_key)
    keys = {}
    for pol in ("readonly", "writeonly"):
        r = subprocess.run([STORAGED, "admin", "--endpoint", srv.endpoint,
                            "user", "add", "ps-" + pol, "--policy", pol],
                           env=env, capture_output=True, timeout=30)
        assert r.returncode == 0, r.stderr
        d = json.loads(r.stdout)
        keys[pol] = (d["access_key"], d["secret_key"])
    src = b + ":train/c1/"
    ok = parse_tsv(presign(srv, src, "-o", "endpoint=" + srv.endpoint,
                           ak=keys["readonly"][0],
                           sk=keys["readonly"][1]).stdout.decode())
    k, _, u = ok[0]
    assert fetch(u) == (200, objs[k])
    # a write-only user may not even list: the command fails cleanly
    r = presign(srv, src, "-o", "endpoint=%s,retries=0" % srv.endpoint,
                ak=keys["writeonly"][0], sk=keys["writeonly"][1], check=False)
    assert r.returncode == 1 and b"cannot list" in r.stderr, r.stderr
    # once the reader is disabled its URLs stop working at once
    r = subprocess.run([STORAGED, "admin", "--endpoint", srv.endpoint,
                        "user", "disable", "ps-readonly"], env=env,
                       capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    st, body = fetch(u)
    assert st == 403, (st, body)


def test_formats_and_errors(s3_server, tmp_path):
    srv = s3_server
    c = srv.client()
    c.create_bucket(Bucket="presign-odd")
    c.put_object(Bucket="presign-odd", Key="a\tb", Body=b"tab")
    c.put_object(Bucket="presign-odd", Key="line\nbreak", Body=b"lf")
    ep = "endpoint=" + srv.endpoint
    out = tmp_path / "m.tsv"
    # TSV cannot carry these keys: an error that names the key and the way
    # out, and no manifest file
    r = presign(srv, "presign-odd", "--output", str(out), "-o", ep,
                check=False)
    assert r.returncode == 1 and b"use --format jsonl" in r.stderr, r.stderr
    assert not out.exists() and not os.path.exists(str(out) + ".tmp")
    r = presign(srv, "presign-odd", "--format", "jsonl", "-o", ep)
    lines = [json.loads(ln) for ln in r.stdout.decode().splitlines()]
    assert sorted(d["key"] for d in lines) == ["a\tb", "line\nbreak"]
    for d in lines:
        st, body = fetch(d["url"])
        assert st == 200 and body in (b"tab", b"lf")

    # keys that need every kind of encoding in a URL path
    odd = {"odd/a+b": b"1", "odd/100%": b"2", "odd/q?x=1&y#z": b"3",
           "odd//double": b"4", "odd/~tilde": b"5", "odd/\u00fcn\u00ef c\u00f6d": b"6",
           "odd/./dot/../x": b"7", "odd/semi;colon=eq,comma": b"8"}
    for k, v in odd.items():
        c.put_object(Bucket="presign-odd", Key=k, Body=v)
    r = presign(srv, "presign-odd:odd/", "-o", ep)
    rows = [ln.split("\t") for ln in r.stdout.decode().splitlines()]
    assert sorted(k for k, _, _ in rows) == sorted(odd)
    for k, n, u in rows:
        assert fetch(u) == (200, odd[k]), (k, u)

    for args, msg in [
        (["-o", ep + ",expires=604801"], b"7 days"),
        (["-o", ep + ",expires=0"], b"expires="),
        (["-o", ep + ",expires=1h"], b"expires="),
        (["-o", ep + ",nosuch=1"], b"unknown option"),
        (["--format", "csv", "-o", ep], b"tsv or jsonl"),
        ([], b"endpoint=URL is required"),
    ]:
        r = subprocess.run([ECFS, "presign", "presign-odd"] + args,
                           capture_output=True, timeout=30,
                           env={k: v for k, v in os.environ.items()
                                if not k.startswith("AWS_ENDPOINT")})
        assert r.returncode == 1 and msg in r.stderr, (args, r.stderr)
    r = subprocess.run([ECFS, "presign", "nosuchbucket", "-o", ep],
                       capture_output=True, timeout=30,
                       env=dict(os.environ, AWS_ACCESS_KEY_ID=srv.access_key,
                                AWS_SECRET_ACCESS_KEY=srv.secret_key))
    assert r.returncode == 1 and b"no such bucket" in r.stderr, r.stderr
    # no key at all: nothing to sign with
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["HOME"] = str(tmp_path)
    r = subprocess.run([ECFS, "presign", "presign-odd", "-o", ep],
                       capture_output=True, timeout=30, env=env)
    assert r.returncode == 1 and b"no credentials" in r.stderr, r.stderr
    r = subprocess.run([ECFS, "presign", "--help"], capture_output=True)
    assert r.returncode == 0 and b"expires=S" in r.stdout
    assert b"ecfs presign" in subprocess.run([ECFS, "--help"],
                                             capture_output=True).stdout
