"""Monitoring test helpers: an OTLP/HTTP metrics receiver, a Prometheus text
parser, and a real Prometheus server.

- ``OtlpReceiver``: a Python http.server on 127.0.0.1 that accepts
  ``POST /v1/metrics`` with ``Content-Type: application/json`` (the OTLP/HTTP
  JSON encoding of ExportMetricsServiceRequest), decodes every request and
  keeps them. ``stop()`` closes the socket (a collector that is down),
  ``start()`` listens again on the same port. ``latest(service)`` gives the
  newest decoded push of that service.name as ``{(name, labels): value}``
  (labels a sorted tuple of pairs; histograms as dicts with count, sum,
  bucketCounts, explicitBounds), plus the resource attributes.
- ``parse_prom(text)``: the same mapping from Prometheus text.
- ``Prometheus``: the Debian ``prometheus`` binary scraping given targets
  every second, with ``query(promql)`` over its HTTP API.
"""

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from conftest import free_port  # noqa: F401 (tests import it from here too)


def _attrs(lst):
    out = []
    for a in lst or []:
        v = a.get("value", {})
        out.append((a["key"], v.get("stringValue", v.get("intValue", ""))))
    return tuple(sorted(out))


def decode_otlp(doc):
    """(resource attributes dict, {(name, labels): value}, {name: kind}) of
    one ExportMetricsServiceRequest in OTLP JSON."""
    series, kinds, res = {}, {}, {}
    for rm in doc["resourceMetrics"]:
        res.update(dict(_attrs(rm["resource"]["attributes"])))
        for sm in rm["scopeMetrics"]:
            for m in sm["metrics"]:
                name = m["name"]
                if "sum" in m:
                    kinds[name] = "counter"
                    assert m["sum"]["aggregationTemporality"] == 2
                    assert m["sum"]["isMonotonic"] is True
                    pts = m["sum"]["dataPoints"]
                elif "gauge" in m:
                    kinds[name] = "gauge"
                    pts = m["gauge"]["dataPoints"]
                elif "histogram" in m:
                    kinds[name] = "histogram"
                    assert m["histogram"]["aggregationTemporality"] == 2
                    for p in m["histogram"]["dataPoints"]:
                        bc = [int(x) for x in p["bucketCounts"]]
                        assert len(bc) == len(p["explicitBounds"]) + 1
                        assert sum(bc) == int(p["count"])
                        series[(name, _attrs(p["attributes"]))] = {
                            "count": int(p["count"]), "sum": float(p["sum"]),
                            "bucketCounts": bc,
                            "explicitBounds": p["explicitBounds"]}
                    continue
                else:
                    raise AssertionError("unknown metric kind in %r" % m)
                for p in pts:
                    assert int(p["timeUnixNano"]) >= int(p["startTimeUnixNano"])
                    if "asInt" in p:
                        v = int(p["asInt"])  # int64 as a JSON string
                    else:
                        v = float(p["asDouble"])
                    series[(name, _attrs(p["attributes"]))] = v
    return res, series, kinds


def _split_labels(s):
    out, i = [], 0
    while i < len(s):
        eq = s.index("=", i)
        k = s[i:eq].strip().lstrip(",").strip()
        j = eq + 2
        v = []
        while s[j] != '"':
            if s[j] == "\\":
                j += 1
                v.append({"n": "\n"}.get(s[j], s[j]))
            else:
                v.append(s[j])
            j += 1
        out.append((k, "".join(v)))
        i = j + 1
        while i < len(s) and s[i] in ", ":
            i += 1
    return out


def parse_prom(text):
    """{(name, labels): float} and {name: type} of Prometheus text."""
    series, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, n, t = line.split(" ", 3)
            types[n] = t
            continue
        if not line or line.startswith("#"):
            continue
        if "{" in line:
            name, rest = line.split("{", 1)
            lab, val = rest.rsplit("}", 1)
            labels = tuple(sorted(_split_labels(lab)))
        else:
            name, val = line.split(None, 1)
            labels = ()
        series[(name, labels)] = float(val.split()[0])
    return series, types


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as collectors do

    def setup(self):
        super().setup()
        with self.server.receiver.lock:
            self.server.receiver.conns.add(self.connection)

    def do_POST(self):
        rx = self.server.receiver
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        ok = (self.path == "/v1/metrics" and
              self.headers.get("Content-Type", "").startswith(
                  "application/json"))
        if ok:
            try:
                doc = json.loads(body)
                decoded = decode_otlp(doc)
            except Exception as e:  # noqa: BLE001 - recorded for the test
                rx.errors.append("%s: %r" % (e, body[:200]))
                ok = False
        if ok:
            with rx.lock:
                rx.pushes.append((time.time(), decoded))
        self.send_response(200 if ok else 400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *a):
        pass


class OtlpReceiver:
    def __init__(self, port=None):
        self.port = port or free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.pushes, self.errors = [], []
        self.conns = set()  # kept-alive connections, cut by stop()
        self.lock = threading.Lock()
        self.httpd = None
        self.start()

    def start(self):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.receiver = self
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        """Down: no listener and every kept-alive connection cut."""
        if self.httpd:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None
        with self.lock:
            conns, self.conns = self.conns, set()
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def count(self, service):
        with self.lock:
            return sum(1 for _, (r, _s, _k) in self.pushes
                       if r.get("service.name") == service)

    def latest(self, service):
        with self.lock:
            for _, d in reversed(self.pushes):
                if d[0].get("service.name") == service:
                    return d
        return None

    def wait_for(self, service, pred, timeout=15.0):
        """The newest push of @service for which pred(series) is true."""
        end = time.time() + timeout
        last = None
        while time.time() < end:
            last = self.latest(service)
            if last and pred(last[1]):
                return last
            time.sleep(0.1)
        raise AssertionError("no push of %s matched in %.0f s; last: %r; "
                             "errors: %r" % (service, timeout,
                                             last and sorted(last[1])[:40],
                                             self.errors))


PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


class Prometheus:
    """A real Prometheus scraping @targets ({job: "host:port"}) every 1 s."""

    def __init__(self, workdir, targets):
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        os.makedirs(workdir, exist_ok=True)
        cfg = os.path.join(workdir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n")
            for job, tgt in targets.items():
                f.write("  - job_name: %s\n    static_configs:\n"
                        "      - targets: ['%s']\n" % (job, tgt))
        self.log = os.path.join(workdir, "prometheus.log")
        self.proc = subprocess.Popen(
            [PROMETHEUS, "--config.file=" + cfg,
             "--storage.tsdb.path=" + os.path.join(workdir, "data"),
             "--web.listen-address=127.0.0.1:%d" % self.port,
             "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=open(self.log, "w"))
        end = time.time() + 20
        while time.time() < end:
            try:
                with urllib.request.urlopen(self.url + "/-/ready",
                                            timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        self.stop()
        raise AssertionError("prometheus did not start: %s" %
                             open(self.log).read()[-2000:])

    def query(self, promql):
        """The instant vector of @promql as [(labels dict, float)]."""
        u = self.url + "/api/v1/query?" + urllib.parse.urlencode(
            {"query": promql})
        with urllib.request.urlopen(u, timeout=5) as r:
            doc = json.load(r)
        assert doc["status"] == "success", doc
        return [(x["metric"], float(x["value"][1]))
                for x in doc["data"]["result"]]

    def targets_up(self):
        with urllib.request.urlopen(self.url + "/api/v1/targets",
                                    timeout=5) as r:
            doc = json.load(r)
        return {t["labels"]["job"]: t["health"]
                for t in doc["data"]["activeTargets"]}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
