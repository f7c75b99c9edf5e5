"""CORS (storaged/s3/cors.c, issue 18): Put/Get/DeleteBucketCors, preflight
OPTIONS answered from the rules, Access-Control-* headers on requests that
carry Origin, and a real browser: headless Chromium on a page of another
origin fetching presigned GET and PUT URLs (the PUT needs a preflight)."""
import http.client
import http.server
import json
import os
import shutil
import subprocess
import threading

import botocore.exceptions
import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def raw(srv, method, path, headers):
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        c.request(method, path, headers=headers)
        r = c.getresponse()
        r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}
    finally:
        c.close()


def test_cors_config_and_rules(s3, bucket):
    srv = s3.ecfs_server
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.get_bucket_cors(Bucket=bucket)
    assert ei.value.response["Error"]["Code"] == "NoSuchCORSConfiguration"
    pre = {"Origin": "foo.suffix", "Access-Control-Request-Method": "GET"}
    assert raw(srv, "OPTIONS", "/%s/k" % bucket, pre)[0] == 403
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": [
        {"AllowedMethods": ["GET"], "AllowedOrigins": ["*suffix"],
         "ExposeHeaders": ["ETag"], "MaxAgeSeconds": 600},
        {"AllowedMethods": ["GET"], "AllowedOrigins": ["start*end"]},
        {"AllowedMethods": ["PUT", "DELETE"], "AllowedOrigins": ["*.put"],
         "AllowedHeaders": ["content-*", "x-amz-meta-a"]},
        {"AllowedMethods": ["GET"], "AllowedOrigins": ["*"]},
    ]})
    rules = s3.get_bucket_cors(Bucket=bucket)["CORSRules"]
    assert len(rules) == 4 and rules[0]["MaxAgeSeconds"] == 600
    # preflights: the first rule that allows it answers
    st, h = raw(srv, "OPTIONS", "/%s/k" % bucket, pre)
    assert st == 200
    assert h["access-control-allow-origin"] == "foo.suffix"
    assert h["access-control-allow-methods"] == "GET"
    assert h["access-control-max-age"] == "600"
    assert h["access-control-expose-headers"] == "ETag"
    st, h = raw(srv, "OPTIONS", "/%s/k" % bucket,
                {"Origin": "start12end", "Access-Control-Request-Method": "GET"})
    assert (st, h["access-control-allow-origin"]) == (200, "start12end")
    st, h = raw(srv, "OPTIONS", "/%s/k" % bucket,
                {"Origin": "elsewhere", "Access-Control-Request-Method": "GET"})
    assert (st, h["access-control-allow-origin"]) == (200, "*")
    assert raw(srv, "OPTIONS", "/%s/k" % bucket,
               {"Origin": "elsewhere",
                "Access-Control-Request-Method": "PUT"})[0] == 403
    ok = {"Origin": "a.put", "Access-Control-Request-Method": "PUT",
          "Access-Control-Request-Headers": "Content-Type, x-amz-meta-a"}
    st, h = raw(srv, "OPTIONS", "/%s/k" % bucket, ok)
    assert st == 200 and h["access-control-allow-methods"] == "PUT, DELETE"
    assert h["access-control-allow-headers"] == "Content-Type, x-amz-meta-a"
    ok["Access-Control-Request-Headers"] = "x-amz-meta-b"
    assert raw(srv, "OPTIONS", "/%s/k" % bucket, ok)[0] == 403
    # 400 without Origin or without the method
    assert raw(srv, "OPTIONS", "/%s/k" % bucket, {})[0] == 400
    assert raw(srv, "OPTIONS", "/%s/k" % bucket, {"Origin": "x"})[0] == 400
    # a request with Origin gets the headers, errors too; without, none
    st, h = raw(srv, "GET", "/%s/missing" % bucket, {"Origin": "foo.suffix"})
    assert st in (403, 404) and h["access-control-allow-origin"] == "foo.suffix"
    st, h = raw(srv, "GET", "/%s/missing" % bucket, {})
    assert "access-control-allow-origin" not in h
    # bad configurations change nothing
    for cfg, code in [
            ({"AllowedMethods": ["PATCH"], "AllowedOrigins": ["*"]},
             "InvalidRequest"),
            ({"AllowedMethods": ["GET"], "AllowedOrigins": ["*a*"]},
             "InvalidRequest")]:
        with pytest.raises(botocore.exceptions.ClientError) as ei:
            s3.put_bucket_cors(Bucket=bucket,
                               CORSConfiguration={"CORSRules": [cfg]})
        assert ei.value.response["Error"]["Code"] == code
    assert len(s3.get_bucket_cors(Bucket=bucket)["CORSRules"]) == 4
    s3.delete_bucket_cors(Bucket=bucket)
    assert raw(srv, "OPTIONS", "/%s/k" % bucket, pre)[0] == 403


class _Page(http.server.BaseHTTPRequestHandler):
    page = b""
    results = []
    got = threading.Event()

    def log_message(self, *a):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        type(self).results.append(json.loads(self.rfile.read(n)))
        self.send_response(204)
        self.end_headers()
        type(self).got.set()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
def test_chromium_fetches_presigned_urls_cross_origin(s3, bucket, tmp_path):
    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    origin = "http://127.0.0.1:%d" % web.server_address[1]
    threading.Thread(target=web.serve_forever, daemon=True).start()
    s3.create_bucket(Bucket=bucket + "-nocors")
    for b in (bucket, bucket + "-nocors"):
        s3.put_object(Bucket=b, Key="hello.txt", Body=b"cross-origin hello")
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": [
        {"AllowedMethods": ["GET", "PUT"], "AllowedOrigins": [origin],
         "AllowedHeaders": ["*"], "ExposeHeaders": ["ETag"]}]})
    get = s3.generate_presigned_url("get_object", Params={
        "Bucket": bucket, "Key": "hello.txt"}, ExpiresIn=600)
    put = s3.generate_presigned_url("put_object", Params={
        "Bucket": bucket, "Key": "from-browser.txt",
        "ContentType": "text/plain"}, ExpiresIn=600)
    denied = s3.generate_presigned_url("get_object", Params={
        "Bucket": bucket + "-nocors", "Key": "hello.txt"}, ExpiresIn=600)
    _Page.page = ("""<!doctype html><script>
async function run() {
  const out = {};
  try {
    const g = await fetch(%s);
    out.get = [g.status, await g.text(), g.headers.get("ETag")];
  } catch (e) { out.get = ["error", String(e)]; }
  try {
    const p = await fetch(%s, {method: "PUT", body: "written by chromium",
                               headers: {"Content-Type": "text/plain"}});
    out.put = [p.status];
  } catch (e) { out.put = ["error", String(e)]; }
  try {
    const d = await fetch(%s);
    out.denied = [d.status];
  } catch (e) { out.denied = ["error", String(e)]; }
  await fetch("/result", {method: "POST", body: JSON.stringify(out)});
}
run();
</script>""" % (json.dumps(get), json.dumps(put), json.dumps(denied))).encode()
    _Page.results.clear()
    _Page.got.clear()
    prof = tmp_path / "chromium"
    proc = subprocess.Popen(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
         "--no-first-run", "--disable-extensions", "--user-data-dir=%s" % prof,
         origin + "/page.html"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert _Page.got.wait(60), "chromium sent no result"
    finally:
        proc.kill()
        proc.wait()
        web.shutdown()
    res = _Page.results[0]
    assert res["get"][0] == 200 and res["get"][1] == "cross-origin hello"
    assert res["get"][2]  # ETag exposed by the rule
    assert res["put"] == [200]
    assert res["denied"][0] == "error"  # no CORS: the browser refuses it
    assert s3.get_object(Bucket=bucket, Key="from-browser.txt")[
        "Body"].read() == b"written by chromium"
    s3.delete_object(Bucket=bucket + "-nocors", Key="hello.txt")
    s3.delete_bucket(Bucket=bucket + "-nocors")
