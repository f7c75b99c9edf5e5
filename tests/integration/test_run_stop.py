"""End-to-end test of the main job: scripts/run (`make run`) and scripts/stop
(`make stop`).

What it checks, on a private copy of the state (ECFS_VAR and ECFS_MNT point
into the test's tmp dir, ECFS_PORT is a free port, ECFS_DATASET=tiny), so it
can never touch a user's running instance under ./var and ./mnt:
  - run starts storaged on 16 drive folders, uploads a generated ImageFolder
    dataset of real JPEGs, mounts it with ecfs, and prints the credentials
    warning, the `ls` hint, the PyTorch snippet and `make stop`;
  - `ls` of the mount shows the class folders and the files read back through
    the mount are byte-identical to the generated ones;
  - the printed five-line PyTorch snippet, run as printed, loads every image;
  - a second run finds the running instance and starts nothing new;
  - stop unmounts and stops everything; nothing of ours is left running or
    mounted; a second stop is a no-op; run after stop comes back on the same
    data without uploading it again.
"""

import os
import re
import signal
import subprocess
import time

import pytest

from conftest import BIN_DIR, REPO, free_port

RUN = os.path.join(REPO, "scripts", "run")
STOP = os.path.join(REPO, "scripts", "stop")
TINY_FILES = 40      # scripts/gen-dataset --preset tiny
TINY_CLASSES = 4


def mounted(path):
    """True when @path is a mount point (also a dead FUSE one)."""
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


def our_pids(marker):
    """Pids of live processes whose command line contains @marker."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            with open("/proc/%s/stat" % d) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z":
            pids.append(int(d))
    return pids


@pytest.fixture
def job(tmp_path):
    """Environment and paths of a private run/stop instance; at teardown runs
    stop and then removes by force whatever might still be there."""
    for b in ("storaged", "ecfs"):
        if not os.access(os.path.join(BIN_DIR, b), os.X_OK):
            pytest.fail("no %s in %s (run make)" % (b, BIN_DIR))
    var = str(tmp_path / "var")
    mnt = str(tmp_path / "mnt" / "train")
    env = dict(os.environ, ECFS_VAR=var, ECFS_MNT=mnt, ECFS_BIN_DIR=BIN_DIR,
               ECFS_PORT=str(free_port()), ECFS_DATASET="tiny")

    def sh(argv, timeout=180):
        return subprocess.run(argv, cwd=str(tmp_path), env=env, text=True,
                              capture_output=True, timeout=timeout)

    yield dict(var=var, mnt=mnt, env=env, cwd=str(tmp_path), sh=sh)
    try:
        sh([STOP], timeout=60)
    finally:
        if mounted(mnt):
            subprocess.run(["fusermount3", "-uz", mnt])
        for pid in our_pids(str(tmp_path)):
            os.kill(pid, signal.SIGKILL)


def pidfile(job, name):
    with open(os.path.join(job["var"], "run", name + ".pid")) as f:
        return int(f.read())


def snippet(out):
    """The PyTorch heredoc printed by run, exactly as a user would copy it."""
    m = re.search(r"^(/usr/bin/python3 - <<'PY'\n.*?\nPY)$", out,
                  re.S | re.M)
    assert m, "no PyTorch snippet in the output of run:\n" + out
    return m.group(1)


def test_run_ls_pytorch_stop(job):
    sh, mnt, var = job["sh"], job["mnt"], job["var"]

    r = sh([RUN])
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "WARNING" in out and "local use only" in out
    assert "ls ./mnt/train" in out
    assert "make stop" in out
    assert mounted(mnt)
    # the status page is on, on 127.0.0.1, behind the printed credentials
    m = re.search(r"^credentials above\): (http://127\.0\.0\.1:\d+/)$", out,
                  re.M)
    assert m, out
    user = re.search(r"access key (\S+)", out).group(1)
    secret = re.search(r"secret key (\S+)", out).group(1)
    import base64
    import urllib.request
    rq = urllib.request.Request(m.group(1), headers={
        "Authorization": "Basic " + base64.b64encode(
            ("%s:%s" % (user, secret)).encode()).decode()})
    with urllib.request.urlopen(rq, timeout=5) as page:
        assert b'<section id="drives">' in page.read()
    spid, epid = pidfile(job, "storaged"), pidfile(job, "ecfs")
    assert os.path.isdir("/proc/%d" % spid) and os.path.isdir("/proc/%d" % epid)
    # 16 drive folders behind one storaged, the default 12+4 geometry.
    assert sorted(os.listdir(os.path.join(var, "drives"))) == sorted(
        "d%d" % i for i in range(1, 17))

    # ls ./mnt/train shows the classes; the bytes match the generated files.
    classes = sorted(os.listdir(mnt))
    assert classes == ["class_%03d" % c for c in range(TINY_CLASSES)]
    n = 0
    for c in classes:
        local = sorted(os.listdir(os.path.join(var, "dataset", c)))
        assert sorted(os.listdir(os.path.join(mnt, c))) == local
        for name in local:
            with open(os.path.join(var, "dataset", c, name), "rb") as f:
                want = f.read()
            with open(os.path.join(mnt, c, name), "rb") as f:
                assert f.read() == want, name
            n += 1
    assert n == TINY_FILES
    ls = subprocess.run(["ls", "./mnt/train"], cwd=job["cwd"], text=True,
                        capture_output=True)
    assert ls.returncode == 0 and ls.stdout.split() == classes

    # The printed PyTorch snippet works as printed.
    py = subprocess.run(["bash", "-c", snippet(out)], cwd=job["cwd"],
                        env=job["env"], text=True, capture_output=True,
                        timeout=120)
    assert py.returncode == 0, py.stdout + py.stderr
    assert re.search(r"^%d images, %d classes, first batch \(%d, 3, 48, 64\)$"
                     % (TINY_FILES, TINY_CLASSES, TINY_FILES), py.stdout, re.M), \
        py.stdout

    # Twice is safe: the running instance is found, nothing new starts.
    r2 = sh([RUN])
    assert r2.returncode == 0, r2.stdout + r2.stderr
    assert "already running" in r2.stdout
    assert (pidfile(job, "storaged"), pidfile(job, "ecfs")) == (spid, epid)
    assert len(our_pids(job["cwd"])) == 2, our_pids(job["cwd"])

    # stop leaves nothing running or mounted.
    s = sh([STOP], timeout=60)
    assert s.returncode == 0, s.stdout + s.stderr
    assert not mounted(mnt)
    deadline = time.monotonic() + 5
    while our_pids(job["cwd"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert our_pids(job["cwd"]) == []
    assert not os.path.exists(os.path.join(var, "run", "storaged.pid"))
    s2 = sh([STOP], timeout=60)
    assert s2.returncode == 0 and "nothing was running" in s2.stdout

    # run after stop: same data, nothing uploaded again, same files visible.
    r3 = sh([RUN])
    assert r3.returncode == 0, r3.stdout + r3.stderr
    assert "uploaded 0 objects" in r3.stdout
    assert sorted(os.listdir(mnt)) == classes
    s3 = sh([STOP], timeout=60)
    assert s3.returncode == 0, s3.stdout + s3.stderr
    assert not mounted(mnt) and our_pids(job["cwd"]) == []


def test_run_port_taken_is_a_clear_error(job):
    """An explicit ECFS_PORT that something else holds: run fails with a
    message naming the port, and leaves nothing running or mounted."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        job["env"]["ECFS_PORT"] = str(port)
        r = job["sh"]([RUN], timeout=60)
    assert r.returncode != 0
    assert "port %d" % port in r.stderr and "in use" in r.stderr, r.stderr
    assert not mounted(job["mnt"])
    assert our_pids(job["cwd"]) == []


def test_run_console_port_held_without_listening(job):
    """The console's default port (ECFS_PORT + 1) is held by a socket that
    does not listen, as an outgoing connection's local port is: a connect
    test calls it free, storaged's bind fails. run must see it taken, give
    the console another port, and start (the CI failure of 2026-12-07)."""
    import socket

    holder = None
    for _ in range(50):
        h = socket.socket()
        h.bind(("127.0.0.1", 0))
        cport = h.getsockname()[1]
        try:
            with socket.socket() as t:
                t.bind(("127.0.0.1", cport - 1))
        except OSError:
            h.close()
            continue
        holder = h
        break
    assert holder is not None, "no free pair of ports found"
    with holder:
        job["env"]["ECFS_PORT"] = str(cport - 1)
        r = job["sh"]([RUN])
        assert r.returncode == 0, r.stdout + r.stderr
        with open(os.path.join(job["var"], "run", "console")) as f:
            console = f.read().strip()
        assert console.startswith("http://127.0.0.1:")
        assert not console.endswith(":%d/" % cport), console
        import urllib.error
        import urllib.request
        # the console answers there (401: it asks for the credentials)
        try:
            with urllib.request.urlopen(console, timeout=10) as resp:
                code = resp.status
        except urllib.error.HTTPError as e:
            code = e.code
        assert code in (200, 401), code
    s = job["sh"]([STOP], timeout=60)
    assert s.returncode == 0, s.stdout + s.stderr
    assert not mounted(job["mnt"]) and our_pids(job["cwd"]) == []
