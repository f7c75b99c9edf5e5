"""Backstop for the per-test timeout (pytest.ini: ``timeout``).

pytest-timeout's ``signal`` method fails a test that runs past its timeout
by raising from a SIGALRM handler, so the test's fixtures still tear down:
every storaged is stopped, every ecfs mount is unmounted and the logs are
printed. Python runs that handler only when the main thread gets back to
the interpreter, and a thread blocked in a FUSE request the daemon already
took (a read, a stat on an ecfs mount whose daemon hangs) is in a killable
wait only: SIGALRM does not end it, and the test would hang for good.

So, ``GRACE`` seconds after a test's timeout, a watchdog thread SIGKILLs
the processes that test started: every process whose command line names a
path under the test's tmp dir (each storaged names its drive directories
there, each ecfs its mount point). A killed ecfs closes /dev/fuse, the
kernel fails the blocked request with ENOTCONN, and the test fails with its
timeout (the call's report is marked failed here whatever the interrupted
code did next: a SIGALRM handler that runs while an exception unwinds can
end up swallowed); teardown then cleans up as usual. Processes of other
tests and other pytest sessions are never touched.
"""

import os
import signal
import sys
import threading

import pytest

# seconds past the timeout; ECFS_HANG_GRACE overrides (test_hang_guard.py)
GRACE = float(os.environ.get("ECFS_HANG_GRACE", "20"))


def _item_timeout(item):
    """The timeout pytest-timeout applies to @item (marker, --timeout or
    pytest.ini), or None when it has none."""
    try:
        import pytest_timeout

        t = pytest_timeout._get_item_settings(item).timeout
    except (ImportError, AttributeError):
        return None
    return t if t and t > 0 else None


def pids_naming(root):
    """Pids (not ours) whose command line holds a path under @root."""
    key = root.encode()
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if any(a == key or a.startswith(key + b"/") or
               (b"=" + key + b"/") in a for a in argv):
            out.append(int(pid))
    return out


def _rescue(item, root, timeout):
    pids = pids_naming(root)
    msg = ("hang_guard: %s still blocked %.0fs after its %.0fs timeout; "
           "SIGKILL to its processes %s" % (item.nodeid, GRACE, timeout, pids))
    item.hang_guard_fired = "Timeout >%ss (%s)" % (timeout, msg)
    sys.stderr.write("\n" + msg + "\n")
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    timeout = _item_timeout(item)
    tmp = getattr(item, "funcargs", {}).get("tmp_path")
    timer = None
    if timeout is not None and tmp is not None:
        timer = threading.Timer(timeout + GRACE, _rescue,
                                (item, str(tmp), timeout))
        timer.daemon = True
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    fired = getattr(item, "hang_guard_fired", None)
    if rep.when == "call" and fired:
        if not rep.failed:
            rep.outcome = "failed"
            rep.longrepr = fired
        else:
            rep.sections.append(("hang_guard", fired))
