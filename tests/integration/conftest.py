"""Shared pytest fixtures: a real storaged on 127.0.0.1 and real S3 clients.

What the fixtures give a test:

- ``storaged``: a factory. ``srv = storaged(ndrives=4, ec=None, args=[],
  env={}, threads=None)`` starts ``$ECFS_BIN_DIR/storaged serve --address
  127.0.0.1:<free port> [--ec K+M] DRIVE...`` on fresh drive directories
  under the test's tmp dir, with root credentials in STORAGED_ROOT_USER /
  STORAGED_ROOT_PASSWORD, and waits for ``GET /health/ready`` to answer 200.
  The returned object has ``.endpoint`` ("http://127.0.0.1:PORT"), ``.port``,
  ``.drives`` (list of paths), ``.access_key``, ``.secret_key``, ``.log``
  (path of its stderr), ``.proc``, and methods ``.stop()`` (SIGTERM, wait),
  ``.kill9()``, ``.restart()`` (same drives and port), ``.client()``
  (a boto3 S3 client for it) and ``.log_text()``. With
  ``tls=(cert, key, CA cert)`` it serves HTTPS (``--tls-cert/--tls-key``):
  ``.endpoint`` is https://, ``.ssl_context`` verifies against the CA and
  ``.client()`` uses it.
  Every server a test starts is killed at teardown, whatever happened; the
  logs stay in the test's tmp dir and are printed when the test failed.
- ``s3``: a boto3 client (path-style, us-east-1, SigV4) on a default
  4-drive storaged; ``s3.ecfs_server`` is that server object.
- ``s3_server``: that default 4-drive server itself.
- ``bucket``: a fresh bucket name created on the ``s3`` server.

Environment: ECFS_BIN_DIR (absolute path of bin/, set by ``make
integration``; defaults to <repo>/bin).
"""

import os
import signal
import socket
import subprocess
import time
import urllib.request
import uuid

import pytest

# Fixture modules, registered as plugins (a test takes their fixtures by
# name and imports only plain helpers from them):
#   sanitizer_check  autouse: fails a test whose daemons printed a report
#   fuse_util        ecfs_mount, s3rver
#   s3_backends      s3_backend (storaged / s3rver / Ceph RGW), rgw_cluster
#   marks            markers set from the fixtures a test takes
#   hang_guard       the per-test timeout's backstop for a test stuck in FUSE
pytest_plugins = ["sanitizer_check", "fuse_util", "s3_backends", "marks",
                  "hang_guard"]

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN_DIR = os.environ.get("ECFS_BIN_DIR", os.path.join(REPO, "bin"))
STORAGED = os.path.join(BIN_DIR, "storaged")

ROOT_USER = "ecfsroot"
ROOT_PASSWORD = "ecfs-test-secret-key-0123456789"
REGION = "us-east-1"
READY_TIMEOUT = 20.0


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_status(url, timeout=2.0, context=None):
    """Status code of a plain GET to @url, or None when nothing answers
    (@context: the ssl.SSLContext for an https:// URL)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout,
                                    context=context) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (OSError, ValueError):
        return None


def boto3_client(endpoint, access_key, secret_key, verify=None, **cfg):
    """A boto3 S3 client on @endpoint: path-style, us-east-1, SigV4
    (@verify: a CA file for https://, as boto3's verify=)."""
    import boto3
    from botocore.config import Config

    conf = Config(
        signature_version="s3v4",
        s3={"addressing_style": "path"},
        retries={"max_attempts": 1, "mode": "standard"},
        connect_timeout=5,
        read_timeout=30,
        **cfg,
    )
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        region_name=REGION,
        config=conf,
        verify=verify,
    )


def mpu_one_part(c, bucket, key, body):
    """A multipart upload of @body as its only part through client @c:
    CreateMultipartUpload, UploadPart, CompleteMultipartUpload. Returns the
    Complete's answer."""
    up = c.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    e = c.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=1,
                      Body=body)["ETag"]
    return c.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=up,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]})


class Storaged:
    """One storaged process on real drive directories (see module doc)."""

    def __init__(self, workdir, ndrives=4, ec=None, args=None, env=None,
                 threads=None, drives=None, tls=None):
        self.workdir = str(workdir)
        os.makedirs(self.workdir, exist_ok=True)
        if drives is None:
            drives = [os.path.join(self.workdir, "d%d" % (i + 1))
                      for i in range(ndrives)]
        self.drives = list(drives)
        for d in self.drives:
            os.makedirs(d, exist_ok=True)
        self.ec = ec
        self.extra_args = list(args or [])
        self.extra_env = dict(env or {})
        self.threads = threads
        self.access_key = ROOT_USER
        self.secret_key = ROOT_PASSWORD
        self.port = free_port()
        self.host = "127.0.0.1"
        # tls: (cert, key, CA cert) -> --tls-cert/--tls-key, an https://
        # endpoint, and the readiness check verifies against the CA
        self.tls = tls
        self.ssl_context = None
        if tls:
            import ssl
            self.ssl_context = ssl.create_default_context(cafile=tls[2])
        self.endpoint = "%s://%s:%d" % ("https" if tls else "http",
                                        self.host, self.port)
        self.log = os.path.join(self.workdir, "storaged.log")
        self.proc = None
        self.starts = 0

    def argv(self):
        argv = [STORAGED, "serve", "--address",
                "%s:%d" % (self.host, self.port)]
        if self.ec:
            argv += ["--ec", self.ec]
        if self.threads:
            argv += ["--threads", str(self.threads)]
        if self.tls:
            argv += ["--tls-cert", self.tls[0], "--tls-key", self.tls[1]]
        # ECFS_TEST_EXTENTS=1 runs every server with --extents (FORMAT.md
        # "Extent files"): the whole suite against that layout;
        # ECFS_TEST_ZC_CACHE=0 runs it without the zero-copy body cache (on
        # by default). A test's own options come later and win.
        if os.environ.get("ECFS_TEST_EXTENTS") == "1":
            argv.append("--extents")
        if os.environ.get("ECFS_TEST_ZC_CACHE") == "0":
            argv += ["--zc-cache-mem", "0"]
        return argv + self.extra_args + self.drives

    def start(self):
        """Starts the process and waits until /health/ready answers 200."""
        assert self.proc is None or self.proc.poll() is not None
        env = dict(os.environ)
        env["STORAGED_ROOT_USER"] = self.access_key
        env["STORAGED_ROOT_PASSWORD"] = self.secret_key
        env.update(self.extra_env)
        self.starts += 1
        logf = open(self.log, "ab")
        logf.write(("==== start %d: %s\n" % (self.starts,
                                            " ".join(self.argv()))).encode())
        logf.flush()
        try:
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL,
                                         stdout=logf, stderr=logf, env=env,
                                         start_new_session=True)
        finally:
            logf.close()
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("storaged exited with %s during start:\n%s"
                                   % (self.proc.returncode, self.log_text()))
            if http_status(self.endpoint + "/health/ready", 0.5,
                           self.ssl_context) == 200:
                return self
            time.sleep(0.05)
        self.kill9()
        raise RuntimeError("storaged not ready after %.0fs:\n%s"
                           % (READY_TIMEOUT, self.log_text()))

    def stop(self, timeout=10.0):
        """SIGTERM (graceful shutdown) and wait; SIGKILL if it hangs.
        Returns the exit status."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise AssertionError("storaged ignored SIGTERM for %.0fs" % timeout)

    def kill9(self):
        """SIGKILL, as a crash or power cut would, and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        return None if self.proc is None else self.proc.returncode

    def restart(self, graceful=True):
        """Stops (SIGTERM, or SIGKILL with graceful=False) and starts again
        on the same drives and port."""
        if graceful:
            self.stop()
        else:
            self.kill9()
        return self.start()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop_and_check_index(self):
        """Stops it (SIGTERM) and asserts that `storaged index check` finds
        the index of its drives consistent with their metas."""
        self.stop()
        r = subprocess.run([self.argv()[0], "index", "check"] + self.drives,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr

    def client(self, access_key=None, secret_key=None, **cfg):
        return boto3_client(self.endpoint, access_key or self.access_key,
                            secret_key or self.secret_key,
                            verify=self.tls[2] if self.tls else None, **cfg)

    def log_text(self):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Remembers each phase's report on the item, so fixtures know at
    teardown whether the test failed."""
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def _failed(request):
    for when in ("setup", "call"):
        rep = getattr(request.node, "rep_" + when, None)
        if rep is not None and rep.failed:
            return True
    return False


@pytest.fixture
def storaged(request, tmp_path):
    """Factory fixture: storaged(ndrives=4, ec=None, args=None, env=None,
    threads=None, drives=None, start=True, tls=None) -> Storaged (see
    module doc; tls=(cert, key, CA cert) serves HTTPS)."""
    if not os.access(STORAGED, os.X_OK):
        pytest.fail("no storaged binary at %s (run make)" % STORAGED)
    servers = []

    def make(ndrives=4, ec=None, args=None, env=None, threads=None,
             drives=None, start=True, tls=None):
        wd = tmp_path / ("storaged%d" % len(servers))
        srv = Storaged(wd, ndrives=ndrives, ec=ec, args=args, env=env,
                       threads=threads, drives=drives, tls=tls)
        servers.append(srv)
        if start:
            srv.start()
        return srv

    yield make
    failed = _failed(request)
    bad_exit = []
    for srv in servers:
        if srv.proc is not None and srv.proc.poll() is None:
            # A graceful stop is part of what we test (and where sanitizer
            # builds report leaks): a non-zero exit fails the test.
            try:
                rc = srv.stop(timeout=10)
                if rc != 0:
                    bad_exit.append("storaged exited %s on SIGTERM" % rc)
            except AssertionError as e:
                bad_exit.append(str(e))
        srv.kill9()
        if failed or bad_exit:
            print("\n---- storaged log %s ----\n%s" % (srv.log, srv.log_text()))
    if bad_exit and not failed:
        pytest.fail("; ".join(bad_exit))


@pytest.fixture
def s3_server(storaged):
    """The default server: 4 drives, default geometry."""
    return storaged(ndrives=4)


@pytest.fixture
def s3(s3_server):
    """A boto3 client on the default 4-drive server."""
    c = s3_server.client()
    c.ecfs_server = s3_server
    return c


@pytest.fixture
def bucket(s3):
    """A fresh, empty bucket on the default server."""
    name = "b-" + uuid.uuid4().hex[:12]
    s3.create_bucket(Bucket=name)
    return name
