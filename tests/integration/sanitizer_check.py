"""Fails a test when one of our daemons printed a sanitizer report.

storaged and ecfs run in the background (ecfs even daemonizes), so an
AddressSanitizer, UndefinedBehaviorSanitizer, LeakSanitizer or
ThreadSanitizer report in them would otherwise go unnoticed: the test only
sees its S3 calls succeed, and a leak is reported at exit, after the test's
last assertion. The autouse fixture ``sanitizer_reports`` checks, at each
test's teardown (after every server and mount fixture has stopped its
processes, since autouse fixtures are torn down last):

1. ``$ECFS_SAN_LOG_DIR`` (set by ``make check`` and ``make tsan-check``,
   whose ASAN_OPTIONS / UBSAN_OPTIONS / TSAN_OPTIONS carry
   ``log_path=$ECFS_SAN_LOG_DIR/<kind>``): any report file that appeared
   during the test;
2. every ``*.log`` file under the test's tmp dir (the daemons' stderr and
   log_file), for runs where the sanitizers write to stderr.

A report found either way fails the test in teardown with the report text.
conftest.py imports the fixture, so every integration test gets it; without
sanitized binaries it finds nothing and costs a directory listing.
"""

import os

import pytest

# Lines that only a sanitizer report contains.
MARKERS = (
    "ERROR: AddressSanitizer",
    "ERROR: LeakSanitizer",
    "WARNING: ThreadSanitizer",
    "ERROR: ThreadSanitizer",
    "runtime error:",
    "ERROR: UndefinedBehaviorSanitizer",
)
MAX_SHOW = 12000


def _report_files(d):
    """Names of the regular files in directory @d (empty if none)."""
    try:
        return {n for n in os.listdir(d)
                if os.path.isfile(os.path.join(d, n))}
    except OSError:
        return set()


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _has_report(text):
    return any(m in text for m in MARKERS)


def _scan_logs(root):
    """(path, text) for each *.log under @root holding a sanitizer report."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        # never descend into a mount point (a live FUSE mount may hang)
        dirnames[:] = [d for d in dirnames
                       if not os.path.ismount(os.path.join(dirpath, d))]
        for n in filenames:
            if n.endswith(".log"):
                p = os.path.join(dirpath, n)
                t = _read(p)
                if _has_report(t):
                    found.append((p, t))
    return found


@pytest.fixture(autouse=True)
def sanitizer_reports(request, tmp_path):
    """Autouse: fails the test at teardown if a sanitizer report appeared
    in $ECFS_SAN_LOG_DIR or in a *.log under the test's tmp dir."""
    san_dir = os.environ.get("ECFS_SAN_LOG_DIR")
    before = _report_files(san_dir) if san_dir else set()
    yield
    found = []
    if san_dir:
        for n in sorted(_report_files(san_dir) - before):
            t = _read(os.path.join(san_dir, n))
            if _has_report(t):
                found.append((os.path.join(san_dir, n), t))
    found += _scan_logs(str(tmp_path))
    if found:
        parts = []
        for path, text in found:
            parts.append("---- %s ----\n%s" % (path, text[-MAX_SHOW:]))
        pytest.fail("sanitizer report(s) from a daemon during %s:\n%s"
                    % (request.node.nodeid, "\n".join(parts)),
                    pytrace=False)
