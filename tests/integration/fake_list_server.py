"""A fake S3 listing server for memory tests of ecfs at 10^5..10^6 entries
(filling a real bucket with 10^6 objects takes too long for the suite):
one bucket whose directory ``d/`` holds N files ``d/f0000000`` ... of
1000 bytes each, answered from arithmetic, never stored.

It answers what a ro mount that only lists and stats needs: ListObjectsV2
(path style, prefix + delimiter "/", max-keys, continuation-token; 1000
keys a page), HEAD of a file or 404, GET 404 (the pack-index probe) and
GET of a file (its bytes: b"x" * 1000). Signatures are not checked.

    srv = FakeListServer(n); srv.start(); ... srv.endpoint ...; srv.stop()
"""

import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ETAG = '"%032x"'
SIZE = 1000
DATE = "2026-01-01T00:00:00.000Z"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _send(self, code, body=b"", ctype="application/xml", head=False,
              extra=None):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _file_index(self, key):
        if key.startswith("d/f") and len(key) == 10 and key[3:].isdigit():
            i = int(key[3:])
            if i < self.server.n:
                return i
        return None

    def _object(self, head):
        u = urllib.parse.urlsplit(self.path)
        parts = u.path.lstrip("/").split("/", 1)
        key = urllib.parse.unquote(parts[1]) if len(parts) > 1 else ""
        if not key:
            return self._list(u, head)
        i = self._file_index(key)
        if i is None:
            body = (b"<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code>"
                    b"</Error>")
            return self._send(404, body, head=head)
        self._send(200, b"x" * SIZE, "application/octet-stream", head,
                   {"ETag": ETAG % i,
                    "Last-Modified": "Thu, 01 Jan 2026 00:00:00 GMT"})

    def _list(self, u, head):
        q = dict(urllib.parse.parse_qsl(u.query, keep_blank_values=True))
        prefix = q.get("prefix", "")
        mk = min(int(q.get("max-keys", "1000") or 1000), 1000)
        start = int(q.get("continuation-token", "0") or 0)
        out = ['<?xml version="1.0" encoding="UTF-8"?>'
               '<ListBucketResult><Name>b</Name>']
        n = self.server.n
        if prefix == "":
            out.append("<CommonPrefixes><Prefix>d/</Prefix></CommonPrefixes>"
                       "<IsTruncated>false</IsTruncated>")
        elif prefix.startswith("d/"):
            rest = prefix[2:]
            # only whole-directory listings and one-key probes are asked for
            if rest == "":
                page = range(start, min(n, start + mk))
            else:
                fi = self._file_index(prefix)
                page = [] if fi is None else [fi]
            for i in page:
                out.append("<Contents><Key>d/f%07d</Key><LastModified>%s"
                           "</LastModified><ETag>%s</ETag><Size>%d</Size>"
                           "</Contents>" % (i, DATE, ETAG % i, SIZE))
            end = start + mk
            if rest == "" and end < n:
                out.append("<IsTruncated>true</IsTruncated>"
                           "<NextContinuationToken>%d</NextContinuationToken>"
                           % end)
            else:
                out.append("<IsTruncated>false</IsTruncated>")
        else:
            out.append("<IsTruncated>false</IsTruncated>")
        out.append("</ListBucketResult>")
        self.server.lists += 1
        self._send(200, "".join(out).encode(), head=head)

    def do_GET(self):
        self._object(False)

    def do_HEAD(self):
        self._object(True)


class FakeListServer:
    def __init__(self, n):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.n = n
        self.httpd.lists = 0
        self.endpoint = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        self.access_key = "fake"
        self.secret_key = "fake"
        self.thread = None

    def start(self):
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
