"""The sanitizer gate itself (sanitizer_check.py): a daemon's sanitizer
report must fail the test that ran it, whether the report went to the
daemon's *.log (stderr) or to a log_path file in $ECFS_SAN_LOG_DIR, and a
clean run must pass. Runs a nested pytest on a throwaway test file so the
outer run stays green."""

import os
import subprocess
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))

INNER = textwrap.dedent('''
    import os
    from sanitizer_check import sanitizer_reports  # noqa: F401

    def test_stderr_report(tmp_path):
        (tmp_path / "storaged.log").write_text(
            "==42==ERROR: LeakSanitizer: detected memory leaks\\n")

    def test_ubsan_in_subdir(tmp_path):
        d = tmp_path / "storaged0"
        d.mkdir()
        (d / "ecfs-mnt.log").write_text(
            "fuse/read.c:10:5: runtime error: signed integer overflow\\n")

    def test_log_path_report(tmp_path):
        d = os.environ["ECFS_SAN_LOG_DIR"]
        with open(os.path.join(d, "san.4242"), "w") as f:
            f.write("==4242==ERROR: AddressSanitizer: heap-use-after-free\\n")

    def test_clean(tmp_path):
        (tmp_path / "storaged.log").write_text("INFO ready\\n")
        d = os.environ["ECFS_SAN_LOG_DIR"]
        with open(os.path.join(d, "san.4343"), "w") as f:
            f.write("==4343==WARNING: unrelated, not a report\\n")
''')


def test_gate_fails_on_reports_and_passes_clean(tmp_path):
    (tmp_path / "test_inner.py").write_text(INNER)
    sandir = tmp_path / "san"
    sandir.mkdir()
    env = dict(os.environ)
    env["ECFS_SAN_LOG_DIR"] = str(sandir)
    env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
    # --basetemp of its own: a nested pytest left on the default cleans up
    # /tmp/pytest-of-USER, deleting other, finished runs' tmp dirs (drive
    # trees of hundreds of MiB), which under load ran past the 60 s timeout
    # in CI. Not under tmp_path: the inner reports would fail this test.
    with tempfile.TemporaryDirectory(prefix="ecfs-inner-") as bt:
        r = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-rA", "-p",
             "no:cacheprovider", "--rootdir", str(tmp_path), "--basetemp",
             os.path.join(bt, "t"), str(tmp_path / "test_inner.py")],
            cwd=str(tmp_path), env=env, capture_output=True, text=True,
            timeout=60)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    # each bad test errors in teardown; the clean one passes
    assert "ERROR test_inner.py::test_stderr_report" in out, out
    assert "ERROR test_inner.py::test_ubsan_in_subdir" in out, out
    assert "ERROR test_inner.py::test_log_path_report" in out, out
    assert "PASSED test_inner.py::test_clean" in out, out
    assert "ERROR test_inner.py::test_clean" not in out, out
    assert "heap-use-after-free" in out, out
    assert "4 passed, 3 errors" in out, out
