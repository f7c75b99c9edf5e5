"""Unmount and exit with a hung server: the server answers the mount's
LIST and HEADs, then accepts a GET and never answers it. SIGTERM to ecfs,
or a (lazy) unmount once the reader is gone, must end ecfs within a few
seconds - not after curl's stall timeout times the retries - and the read
in flight gets EIO."""

import errno
import http.server
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import free_port
from fuse_util import is_mounted

BODY_LEN = 1000
LIST = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
        "<ListBucketResult><Name>hb</Name><Prefix></Prefix><KeyCount>1"
        "</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>"
        "<Contents><Key>slow.bin</Key><LastModified>2024-01-01T00:00:00.000Z"
        "</LastModified><ETag>&quot;e1&quot;</ETag><Size>%d</Size>"
        "</Contents></ListBucketResult>" % BODY_LEN)
EMPTY = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
         "<ListBucketResult><Name>hb</Name><KeyCount>0</KeyCount>"
         "<IsTruncated>false</IsTruncated></ListBucketResult>")
BOUND = 6.0  # seconds; the defaults would wait 20 s per attempt x 9


class Hanger(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    gets = 0
    release = threading.Event()

    def log_message(self, *a):
        pass

    def reply(self, status, data, body=True, etag=None):
        self.send_response(status)
        if etag:
            self.send_header("ETag", etag)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def do_HEAD(self):
        if self.path == "/hb/slow.bin":
            self.reply(200, b"x" * BODY_LEN, body=False, etag='"e1"')
        else:
            self.reply(404, b"", body=False)

    def do_GET(self):
        if self.path.startswith("/hb?"):
            pfx = "prefix=&" in self.path + "&"
            self.reply(200, (LIST if pfx else EMPTY).encode())
            return
        Hanger.gets += 1
        # accept, read the request, never answer (until the test ends)
        Hanger.release.wait(120)


@pytest.fixture
def hung():
    Hanger.gets = 0
    Hanger.release = threading.Event()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Hanger)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d" % srv.server_address[1]
    Hanger.release.set()
    srv.shutdown()
    srv.server_close()


READER = r"""
import errno, os, sys, time
t0 = time.monotonic()
try:
    with open(sys.argv[1], "rb") as f:
        f.read()
    print("DATA")
except OSError as e:
    print("ERR", e.errno, round(time.monotonic() - t0, 2))
sys.stdout.flush()
"""


def start_reader(m):
    return subprocess.Popen([sys.executable, "-c", READER,
                             os.path.join(m.path, "slow.bin")],
                            stdout=subprocess.PIPE, text=True)


def wait_for_get(n=1, timeout=10):
    deadline = time.monotonic() + timeout
    while Hanger.gets < n:
        assert time.monotonic() < deadline, "the GET never came"
        time.sleep(0.02)
    time.sleep(0.2)  # it is now waiting on the server


def wait_exit(pids, timeout):
    t0 = time.monotonic()
    while any(os.path.exists("/proc/%d" % p) and _alive(p) for p in pids):
        if time.monotonic() - t0 > timeout:
            return None
        time.sleep(0.02)
    return time.monotonic() - t0


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_sigterm_with_a_hung_get(hung, ecfs_mount):
    m = ecfs_mount(hung, "hb")
    pids = m.pids()
    r = start_reader(m)
    wait_for_get()
    os.kill(pids[0], signal.SIGTERM)
    took = wait_exit(pids, BOUND)
    out, _ = r.communicate(timeout=BOUND)
    assert took is not None, "ecfs still running %.0fs after SIGTERM" % BOUND
    print("ecfs exited %.2f s after SIGTERM; reader: %s" % (took, out.strip()))
    assert not is_mounted(m.path)
    # the read in flight failed (EIO from ecfs, or ENOTCONN once the
    # connection went away), it did not hang or return data
    assert out.startswith("ERR"), out
    assert int(out.split()[1]) in (errno.EIO, errno.ENOTCONN), out
    assert float(out.split()[2]) < BOUND, out


def test_lazy_unmount_with_a_hung_get(hung, ecfs_mount):
    m = ecfs_mount(hung, "hb")
    pids = m.pids()
    r = start_reader(m)
    wait_for_get()
    # the reader keeps the mount busy: a plain unmount is refused, a lazy
    # one detaches it; once the reader is gone, ecfs must exit promptly
    subprocess.run(["fusermount3", "-u", "-z", m.path], check=True)
    r.kill()
    r.wait(BOUND)
    took = wait_exit(pids, BOUND)
    assert took is not None, "ecfs still running %.0fs after unmount" % BOUND
    print("ecfs exited %.2f s after the reader was gone" % took)
    assert not is_mounted(m.path)
