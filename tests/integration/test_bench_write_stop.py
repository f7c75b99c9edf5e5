"""tests/bench/bench_write.py stopped by a signal while a peer mounts or
writes (`timeout`'s SIGTERM, ^C's SIGINT) leaves no mount and no process
behind: an s3fs mount outlived a run cut by `timeout` in session 9. The
benchmark runs for real (its storaged, a real s3fs or rclone mount, cp -r
of a small dataset); the test only picks the moment of the signal."""

import os
import shutil
import signal
import subprocess
import time

import pytest

from hang_guard import pids_naming

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BENCH = os.path.join(REPO, "tests", "bench", "bench_write.py")
PY = "/usr/bin/python3"


def mounts_under(d):
    """Mount points under @d (/proc/self/mountinfo)."""
    with open("/proc/self/mountinfo") as f:
        return [x.split()[4] for x in f if x.split()[4].startswith(d)]


def cmdline(pid):
    """The command line of @pid, spaces between its words ("" once gone)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.01)
    pytest.fail("no %s within %d s" % (what, timeout))


@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.parametrize("peer,sig,when", [
    ("s3fs", signal.SIGTERM, "starting"),  # in the peer's mount()
    ("s3fs", signal.SIGTERM, "mounted"),   # during cp -r into it
    ("rclone", signal.SIGINT, "mounted"),
])
def test_stopped_bench_leaves_nothing(tmp_path, peer, sig, when):
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        pytest.skip("needs root and /dev/fuse")
    if shutil.which(peer) is None:
        pytest.skip("no %s" % peer)
    work = str(tmp_path)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    p = subprocess.Popen(
        [PY, BENCH, "--peers", peer, "--tests", "cp", "--files", "120",
         "--repeat", "2", "--warm", "0", "--big-mib", "1", "--workdir", work],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
        start_new_session=True)
    try:
        if when == "starting":
            wait_for(lambda: any(cmdline(p).startswith(peer)
                                 for p in pids_naming(work)), 90,
                     "%s process" % peer)
        else:
            wait_for(lambda: mounts_under(work), 90, "%s mount" % peer)
        p.send_signal(sig)
        out, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    text = out.decode(errors="replace")
    assert p.returncode == 128 + sig, text[-3000:]
    assert mounts_under(work) == [], text[-3000:]
    assert [cmdline(p) for p in pids_naming(work)] == [], text[-3000:]
    assert not os.listdir(work), os.listdir(work)  # its work folder went too
