"""The S3 servers ecfs is tested against, as one parametrised fixture.

A pytest plugin module (conftest.py lists it in ``pytest_plugins``):

- ``s3_backend``: parametrised over ``"storaged"``, ``"s3rver"`` and
  ``"rgw"``; a test that takes it runs once per server. The object has
  ``.kind`` (the parameter), ``.endpoint``, ``.access_key``,
  ``.secret_key``, ``.client(**botocore_config)`` (a fresh boto3 client:
  path-style, us-east-1, SigV4), ``.s3`` (one such client, made once),
  ``.new_bucket(prefix="eb")`` (creates a fresh, empty bucket and returns
  its name), ``.version`` (the server's version, for reports), ``.server``
  (the underlying Storaged / S3rver / CephCluster), and ``.stop()`` /
  ``.start()`` / ``.restart()`` (the S3 service goes away and comes back on
  the same port with its data: storaged itself, s3rver itself, radosgw for
  RGW; the Ceph cluster under it stays up).
  storaged is a fresh 4-drive server per test, s3rver a fresh one per test;
  RGW is one cluster per pytest session (``rgw_cluster``), so each test
  works in buckets of its own from ``new_bucket()``.
  The ``"rgw"`` parameter carries the ``rgw`` marker: ``-m "not rgw"``
  deselects it.
- ``rgw_cluster``: session fixture, the running CephCluster (ceph_rgw.py):
  1 mon, 1 mgr, 1 BlueStore OSD on a sparse file, radosgw on a free
  127.0.0.1 port, an S3 user. Started on first use, torn down (every daemon
  killed, its temp dir removed) at session end whatever happened; a failed
  bring-up prints every daemon's log and errors each test that needs it.
  It is stopped early, right after the last test of the run that uses it,
  so the rest of the session does not carry its daemons.
  ``ECFS_RGW_DIR`` puts the cluster's dir elsewhere (default: pytest's
  session tmp dir).
"""

import os
import subprocess
import sys
import tempfile
import uuid

import pytest

from conftest import boto3_client

KINDS = ("storaged", "s3rver", "rgw")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "rgw: runs against the session's Ceph RGW cluster "
        "(ceph_rgw.py; deselect with -m 'not rgw')")


class Backend:
    """One S3 server for a test (see module doc)."""

    def __init__(self, kind, server, endpoint, access_key, secret_key,
                 version=None, stop=None, start=None):
        self.kind = kind
        self.server = server
        self.endpoint = endpoint
        self.access_key = access_key
        self.secret_key = secret_key
        self.version = version
        self._stop, self._start = stop, start
        self._s3 = None

    def client(self, **cfg):
        return boto3_client(self.endpoint, self.access_key, self.secret_key,
                            **cfg)

    @property
    def s3(self):
        if self._s3 is None:
            self._s3 = self.client()
        return self._s3

    def new_bucket(self, prefix="eb"):
        name = "%s-%s" % (prefix, uuid.uuid4().hex[:10])
        self.s3.create_bucket(Bucket=name)
        return name

    def stop(self):
        self._stop()

    def start(self):
        self._start()

    def restart(self):
        self.stop()
        self.start()

    def __repr__(self):
        return "<%s %s>" % (self.kind, self.endpoint)


def _storaged_version():
    from conftest import STORAGED
    try:
        r = subprocess.run([STORAGED, "--version"], capture_output=True,
                           timeout=5)
        return r.stdout.decode().strip() or None
    except OSError:
        return None


@pytest.fixture(scope="session")
def rgw_cluster(tmp_path_factory):
    from ceph_rgw import CephCluster, CephError
    base = os.environ.get("ECFS_RGW_DIR")
    if base:
        os.makedirs(base, exist_ok=True)
        wd = tempfile.mkdtemp(prefix="ceph-", dir=base)
    else:
        wd = str(tmp_path_factory.mktemp("ceph"))
    c = CephCluster(wd)
    _running.append(c)
    try:
        try:
            c.start()
        except (CephError, OSError, subprocess.SubprocessError) as e:
            logs = c.logs(6000)
            sys.stderr.write("\n==== Ceph bring-up failed: %s\n%s\n"
                             % (e, logs))
            pytest.fail("Ceph RGW bring-up failed: %s\n%s" % (e, logs),
                        pytrace=False)
        sys.stderr.write("\nceph %s cluster up at %s in %.1fs %s\n"
                         % (c.version, c.endpoint, c.timings["total"],
                            c.timings))
        yield c
    finally:
        c.stop()
        if c in _running:
            _running.remove(c)


# The cluster running for this session, stopped as soon as no test left
# in the run needs it (the rest of the suite then has its memory and CPU).
_running = []


def _uses_rgw(item):
    if "rgw_cluster" in getattr(item, "fixturenames", ()):
        return True
    cs = getattr(item, "callspec", None)
    return cs is not None and cs.params.get("s3_backend") == "rgw"


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    if not _running:
        return
    items = item.session.items
    try:
        rest = items[items.index(item) + 1:]
    except ValueError:
        return
    if not any(_uses_rgw(i) for i in rest):
        c = _running.pop()
        sys.stderr.write("\nceph: last RGW test done, cluster stopped\n")
        c.stop()


@pytest.fixture(params=[pytest.param("storaged"), pytest.param("s3rver"),
                        pytest.param("rgw", marks=pytest.mark.rgw)])
def s3_backend(request, tmp_path):
    kind = request.param
    if kind == "storaged":
        srv = request.getfixturevalue("storaged")()
        yield Backend(kind, srv, srv.endpoint, srv.access_key,
                      srv.secret_key, version=_storaged_version(),
                      stop=srv.stop, start=srv.start)
        return
    if kind == "s3rver":
        from fuse_util import S3rver, ensure_s3rver
        ensure_s3rver()
        srv = S3rver(tmp_path)
        try:
            yield Backend(kind, srv, srv.endpoint, srv.access_key,
                          srv.secret_key, version="s3rver",
                          stop=srv.stop, start=srv.start)
        finally:
            srv.stop()
        return
    c = request.getfixturevalue("rgw_cluster")
    if not c.alive():
        # an earlier test stopped radosgw and its teardown could not
        # restart it, or a daemon died: say which, with the logs
        dead = [n for n, p in c.procs.items() if p.poll() is not None]
        if dead != ["client.rgw.a"]:
            pytest.fail("Ceph daemons died: %s\n%s" % (dead, c.logs(4000)))
        c.rgw_start()
    try:
        yield Backend(kind, c, c.endpoint, c.access_key, c.secret_key,
                      version="ceph " + (c.version or "?"),
                      stop=c.rgw_stop, start=c.rgw_start)
    finally:
        # a test that stopped radosgw leaves it running for the next one
        p = c.procs.get("client.rgw.a")
        if p is not None and p.poll() is not None:
            c.rgw_start()
