"""Markers the suite sets by itself (the list lives in pytest.ini).

A test that takes one of these fixtures gets the marker without writing
it, so ``-m 'not fuse'`` or ``-m s3rver`` select by what a test really
starts:

- ``ecfs_mount`` -> ``fuse`` (a real ecfs mount through /dev/fuse)
- ``s3rver``     -> ``s3rver`` (npm's s3rver, installed on first use)

and a parametrized test whose parameter value is ``"s3rver"`` or ``"rgw"``
(a server fixture parametrized by server kind) gets that marker too.

``needs_net_ns`` is written by hand; such a test is skipped, with the
reason, where this process cannot create a network namespace
(``unshare -n``, i.e. not root or no CAP_SYS_ADMIN).
"""

import shutil
import subprocess

import pytest

FIXTURE_MARKS = {
    "ecfs_mount": "fuse",
    "s3rver": "s3rver",
}
PARAM_MARKS = ("s3rver", "rgw")

_netns_ok = None


def _can_unshare_net():
    global _netns_ok
    if _netns_ok is None:
        try:
            _netns_ok = shutil.which("unshare") is not None and \
                subprocess.run(["unshare", "-n", "true"], capture_output=True,
                               timeout=10).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _netns_ok = False
    return _netns_ok


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = getattr(item, "fixturenames", ())
        want = {m for f, m in FIXTURE_MARKS.items() if f in names}
        callspec = getattr(item, "callspec", None)
        if callspec is not None:
            want |= {v for v in callspec.params.values()
                     if isinstance(v, str) and v in PARAM_MARKS}
        for mark in sorted(want):
            if item.get_closest_marker(mark) is None:
                item.add_marker(getattr(pytest.mark, mark))


def pytest_runtest_setup(item):
    if item.get_closest_marker("needs_net_ns") and not _can_unshare_net():
        pytest.skip("needs a network namespace (unshare -n failed)")
