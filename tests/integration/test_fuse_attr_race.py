"""chmod/chown/utimens of a closed file are stored about a second later by
ecfs's janitor (a CopyObject of the object onto itself carrying
x-amz-meta-*). A rename of the file, or of a directory above it, while that
store is under way must not lose them: before, the rename's copies went
without them and the store then met the deleted source (404), so the file
kept its old attributes under the new name (the CI failure of
test_user_tools_on_every_server[storaged] was this class).

A proxy in front of the real storaged holds the janitor's copy onto
itself until the test lets it go, so the rename starts while the store is
under way every time."""

import http.client
import http.server
import os
import threading
import time
import urllib.parse

import pytest

from fuse_util import ForwardProxy, client_bucket


class _HoldProxy:
    """HTTP/1.1 proxy to @upstream that holds the first CopyObject of
    @bucket/@key onto itself until .release is set (.held is set when it
    came), and sets .copied once a CopyObject from @key to another key (a
    rename's copy) was answered."""

    def __init__(self, upstream, bucket, key):
        host, port = upstream.split("//")[1].split(":")
        proxy = self
        self.held = threading.Event()
        self.release = threading.Event()
        self.copied = threading.Event()
        self.copied_while_held = False
        self.lock = threading.Lock()
        self.holding = False
        src = "%s/%s" % (bucket, key)

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _fwd(self, method):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                cs = self.headers.get("x-amz-copy-source")
                if cs is not None:
                    cs = urllib.parse.unquote(cs.split("?")[0]).lstrip("/")
                    to = urllib.parse.unquote(
                        self.path.split("?")[0]).lstrip("/")
                    hold = copy = False
                    with proxy.lock:
                        if cs == src and to == src and \
                                not proxy.held.is_set():
                            proxy.holding = hold = True
                            proxy.held.set()
                        copy = cs == src and to != src
                    if hold:
                        proxy.release.wait(30)
                        with proxy.lock:
                            proxy.holding = False
                c = http.client.HTTPConnection(host, int(port), timeout=20)
                c.request(method, self.path, body=body,
                          headers=dict(self.headers))
                r = c.getresponse()
                data = r.read()
                if cs is not None and copy:
                    with proxy.lock:
                        proxy.copied_while_held |= proxy.holding
                    proxy.copied.set()
                self.send_response(r.status)
                for k, v in r.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection"):
                        self.send_header(k, v)
                if r.getheader("Content-Length") is None:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if method != "HEAD":
                    self.wfile.write(data)
                c.close()

            def do_GET(self):
                self._fwd("GET")

            def do_HEAD(self):
                self._fwd("HEAD")

            def do_PUT(self):
                self._fwd("PUT")

            def do_POST(self):
                self._fwd("POST")

            def do_DELETE(self):
                self._fwd("DELETE")

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True
        self.endpoint = "http://127.0.0.1:%d" % self.srv.server_address[1]
        self.th = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.th.start()

    def close(self):
        self.release.set()
        self.srv.shutdown()
        self.srv.server_close()


def _rename_during_store(storaged, ecfs_mount, key, src, dst, new_key):
    """Puts @key, chmods it 0640 through a mount, renames @src -> @dst
    (paths in the mount) while the janitor's store of the mode is held,
    then returns (boto3 client, bucket, whether the rename copied while
    the store was held)."""
    srv = storaged()
    c, b = client_bucket(srv)
    c.put_object(Bucket=b, Key=key, Body=b"x" * 100)
    px = _HoldProxy(srv.endpoint, b, key)
    try:
        m = ecfs_mount(px.endpoint, b, access_key=srv.access_key,
                       secret_key=srv.secret_key)
        os.chmod(os.path.join(m.path, key), 0o640)
        # the janitor took it (about a second later) and is storing it
        assert px.held.wait(20), "no store of the chmod"
        err = []

        def mv():
            try:
                os.rename(os.path.join(m.path, src),
                          os.path.join(m.path, dst))
            except OSError as e:
                err.append(e)

        t = threading.Thread(target=mv)
        t.start()
        # before the fix the rename copies at once (and the store, let go
        # once that copy was answered, comes too late); with it, the rename
        # waits for the store, so this bound passes and the store goes on
        px.copied.wait(3)
        px.release.set()
        t.join(30)
        assert not t.is_alive() and not err, err
        assert px.copied.is_set()
        held = px.copied_while_held
    finally:
        px.close()
    mode = int(c.head_object(Bucket=b, Key=new_key)["Metadata"]["mode"])
    assert mode & 0o7777 == 0o640, oct(mode)
    assert "Contents" not in c.list_objects_v2(Bucket=b, Prefix=key)
    return held


def test_dir_rename_waits_for_an_attribute_store_under_way(storaged,
                                                           ecfs_mount):
    held = _rename_during_store(storaged, ecfs_mount, "d/sub/f", "d", "e",
                                "e/sub/f")
    assert not held, "the rename copied while the store was under way"


def test_file_rename_waits_for_an_attribute_store_under_way(storaged,
                                                            ecfs_mount):
    held = _rename_during_store(storaged, ecfs_mount, "d/f", "d/f", "d/g",
                                "d/g")
    assert not held, "the rename copied while the store was under way"


@pytest.mark.parametrize("ttl", ["0", "60"])
def test_rmdir_during_attribute_store_brings_no_marker_back(storaged,
                                                            ecfs_mount, ttl):
    """chmod of a directory, then rmdir while the janitor stores the mode
    (its copy of the marker onto itself, held by the proxy until the rmdir
    returned): the copy meets no marker (404), and the store must not PUT
    a new one, which would bring the removed directory back. It checked for
    the rmdir through the mount's notes as a lookup does, only while they
    are fresh, i.e. never with list_ttl=0 (-o list_ttl=0, the setting for
    buckets that other clients change)."""
    srv = storaged()
    c, b = client_bucket(srv)
    removed, seen = threading.Event(), []

    def before(method, path, headers):
        if headers.get("x-amz-copy-source") and path.split("?")[0] == \
                "/%s/d/" % b and not seen:
            seen.append(path)
            removed.wait(10)  # the rmdir runs meanwhile

    px = ForwardProxy(srv.endpoint, before)
    try:
        m = ecfs_mount(px.endpoint, b, access_key=srv.access_key,
                       secret_key=srv.secret_key,
                       opts=["list_ttl=" + ttl, "attr_timeout=0",
                             "negative_timeout=0"])
        d = os.path.join(m.path, "d")
        os.mkdir(d)
        os.chmod(d, 0o750)
        deadline = time.monotonic() + 10
        while not seen:  # the janitor's store began (a second later)
            assert time.monotonic() < deadline, "no store of the chmod"
            time.sleep(0.05)
        os.rmdir(d)
        removed.set()
        m.unmount()  # the store is over
        assert "Contents" not in c.list_objects_v2(Bucket=b, Prefix="d")
    finally:
        removed.set()
        px.close()
