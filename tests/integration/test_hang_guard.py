"""The per-test timeout itself (pytest.ini, hang_guard.py): a test stuck in
a FUSE call on a mount whose daemon hangs must fail alone, with its
timeout and its logs, its servers and mount must be gone after teardown,
and the next test must run. Runs a nested pytest on a throwaway test file
beside copies of this folder's conftest.py and pytest.ini (the fixture
modules come through PYTHONPATH), so the outer run stays green."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import BIN_DIR

HERE = os.path.dirname(os.path.abspath(__file__))

INNER = textwrap.dedent('''
    import os
    import signal

    import pytest


    @pytest.fixture
    def hang_mount(storaged, ecfs_mount):
        srv = storaged()
        srv.client().create_bucket(Bucket="hang")
        return ecfs_mount(srv.endpoint, "hang", access_key=srv.access_key,
                          secret_key=srv.secret_key)


    # func_only: the 2 s run from the call, not from the fixtures' start,
    # so a slow start on a loaded machine never times out before the
    # test is stuck in FUSE (the case this test is about)
    @pytest.mark.timeout(2, func_only=True)
    def test_stuck_in_fuse(hang_mount, tmp_path):
        m = hang_mount
        (tmp_path.parent / "stuck-tmp").write_text(str(tmp_path))
        pids = m.pids()
        assert pids
        for p in pids:
            os.kill(p, signal.SIGSTOP)
        os.stat(os.path.join(m.path, "not-there"))  # never answered


    def test_next_one_runs(s3, bucket):
        s3.put_object(Bucket=bucket, Key="k", Body=b"1")
''')


def _mounted_under(root):
    with open("/proc/self/mounts") as f:
        return [ln for ln in f if " " + root in ln]


def _procs_naming(root):
    out = []
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if root.encode() in f.read():
                    out.append(pid)
        except OSError:
            pass
    return out


@pytest.mark.timeout(120)
def test_hang_fails_one_test_and_teardown_cleans(tmp_path):
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "test_inner_hang.py").write_text(INNER)
    for f in ("conftest.py", "pytest.ini"):
        shutil.copy(os.path.join(HERE, f), str(inner / f))
    base = tmp_path / "base"
    env = dict(os.environ, ECFS_HANG_GRACE="2", ECFS_BIN_DIR=BIN_DIR)
    env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
         "--basetemp", str(base), "test_inner_hang.py"],
        cwd=str(inner), env=env, capture_output=True, text=True, timeout=100)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "FAILED test_inner_hang.py::test_stuck_in_fuse" in out, out
    assert "Timeout >2.0s" in out, out
    assert "PASSED test_inner_hang.py::test_next_one_runs" in out, out
    assert "1 failed, 1 passed" in out, out
    assert "hang_guard: " in out and "SIGKILL to its processes" in out, out
    # the failed test's logs were printed at teardown
    assert "---- ecfs log " in out and "---- storaged log " in out, out
    stuck = (base / "stuck-tmp").read_text()
    assert not _mounted_under(stuck), out
    assert not _procs_naming(stuck), out
