"""ecfs's own permission checks (fuse/perm.c; a writable mount without
-o default_permissions; on this allow_other mount asked for with
-o own_permissions), compared side by side with a local tmpfs
directory: the same tree of modes and owners is built in both by root,
then unprivileged users (setpriv: uid 12345 and 12346, with and without a
supplementary group) run the same sequence of calls in each, and every
answer (0 or the errno) must be the same.

The mount has allow_other (and own_permissions), so other users reach it
and ecfs checks for them; ecfs then keeps no
entry cached in the kernel (entry and negative timeouts 0): a user who may
not search a directory is refused its entries even right after root
looked them up (the kernel does not check search permission on a cached
entry without default_permissions).

The calls run in a child process started in the tree (cwd), so the
ancestors of the tree (pytest's tmp dir is 0700) do not matter; paths are
relative to it.

The set-id bits after a write, truncate or chown are compared too (ecfs
clears them itself where the kernel does not). Not compared: a writer's
own chmod that drops only set-id bits, which tmpfs refuses and ecfs
allows (the kernel's kill-priv chmod of a truncate needs it: libfuse 3.14
does not pass FUSE_HANDLE_KILLPRIV on to the kernel; fuse/README.md).
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid

import pytest

A, B, G = 12345, 12346, 20000   # two users and a group A is in
PY = "/usr/bin/python3"

# The calls, run by the child: each is [name, args...]; the answer is "ok"
# (or the value, for listings and stat fields) or the errno's name.
CHILD = r"""
import errno, json, os, sys
def run(op, *a):
    if op == "list":
        return sorted(os.listdir(a[0]))
    if op == "stat":
        st = os.stat(a[0])
        return [oct(st.st_mode), st.st_uid, st.st_gid]
    if op == "lsl":  # ls -l: the names, then each one's attributes
        return [[n, oct(os.lstat(os.path.join(a[0], n)).st_mode),
                 os.lstat(os.path.join(a[0], n)).st_uid]
                for n in sorted(os.listdir(a[0]))]
    if op == "read":
        with open(a[0], "rb") as f:
            return f.read().decode()
    if op == "open":
        flags = 0
        for w in a[1].split("|"):
            flags |= getattr(os, w)
        os.close(os.open(a[0], flags, 0o644))
        return "ok"
    if op == "create":
        os.close(os.open(a[0], os.O_CREAT | os.O_EXCL | os.O_WRONLY, a[1]))
        return "ok"
    if op == "write":
        with open(a[0], "wb") as f:
            f.write(a[1].encode())
        return "ok"
    if op == "mkdir":
        os.mkdir(a[0], 0o755)
    elif op == "rmdir":
        os.rmdir(a[0])
    elif op == "unlink":
        os.unlink(a[0])
    elif op == "rename":
        os.rename(a[0], a[1])
    elif op == "chmod":
        os.chmod(a[0], a[1])
    elif op == "chown":
        os.chown(a[0], a[1], a[2])
    elif op == "touch":
        os.utime(a[0], None)
    elif op == "utime":
        os.utime(a[0], (a[1], a[1]))
    elif op == "truncate":
        os.truncate(a[0], a[1])
    elif op == "access":
        return os.access(a[0], a[1])
    elif op == "exec":
        import subprocess
        return subprocess.run([a[0]]).returncode
    elif op == "chdir":
        os.chdir(a[0])
        os.chdir("..")
    else:
        raise ValueError(op)
    return "ok"
out = []
for c in json.loads(sys.argv[1]):
    try:
        out.append(run(*c))
    except OSError as e:
        out.append(errno.errorcode[e.errno])
print(json.dumps(out))
"""


# what root gives up to be refused like anyone (REVIEW-perm S2: ecfs
# checks capabilities, not uid 0)
DROPPED = "-dac_override,-dac_read_search,-fowner,-chown,-fsetid"


def as_user(cwd, uid, gid, groups, calls, drop_caps=False):
    """Runs @calls as @uid/@gid with supplementary @groups in @cwd (with
    @drop_caps, without the DAC capabilities: root refused like anyone)."""
    g = ["--groups=" + ",".join(map(str, groups))] if groups else \
        ["--clear-groups"]
    if drop_caps:
        g += ["--bounding-set=" + DROPPED, "--inh-caps=" + DROPPED]
    out = subprocess.run(
        ["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid] + g +
        [PY, "-c", CHILD, json.dumps(calls)], cwd=cwd, check=True,
        capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"})
    return json.loads(out.stdout)


def build_tree(root):
    """The same tree in @root (as root): directories and files of every
    kind of mode and owner the calls below need."""
    def d(p, mode, uid=0, gid=0):
        os.mkdir(os.path.join(root, p))
        os.chown(os.path.join(root, p), uid, gid)
        os.chmod(os.path.join(root, p), mode)

    def f(p, mode, uid=0, gid=0, text="x"):
        with open(os.path.join(root, p), "w") as fh:
            fh.write(text)
        os.chown(os.path.join(root, p), uid, gid)
        os.chmod(os.path.join(root, p), mode)
    # files before their directory's final mode (root may anyway)
    for p in ("open", "ro", "nox", "nor", "sticky", "grp", "a", "mv", "sg"):
        d(p, 0o755)
    d("open/sub", 0o755)
    d("open/asub", 0o755, A, A)
    d("mv/dst", 0o777)
    f("ro/f", 0o644)
    f("nox/f", 0o666)
    f("nor/f", 0o644)
    f("sticky/fa", 0o666, A, A)
    f("sticky/fb", 0o666, B, B)
    f("grp/f", 0o660, 0, G)
    f("grp/g", 0o606, 0, G)
    f("a/mine", 0o600, A, A)
    f("a/none", 0o000, A, A)
    f("rw", 0o666)
    f("r", 0o644)
    f("own", 0o644, A, A)
    f("setid", 0o6666)
    f("setid2", 0o6666)
    f("setid3", 0o6755)
    f("xroot", 0o700, text="#!/bin/sh\nexit 3\n")
    f("xall", 0o755, text="#!/bin/sh\nexit 3\n")
    os.chmod(os.path.join(root, "open"), 0o777)
    os.chmod(os.path.join(root, "nox"), 0o776)
    os.chmod(os.path.join(root, "nor"), 0o711)
    os.chmod(os.path.join(root, "sticky"), 0o1777)
    os.chown(os.path.join(root, "grp"), 0, G)
    os.chmod(os.path.join(root, "grp"), 0o770)
    os.chown(os.path.join(root, "a"), A, A)
    os.chmod(os.path.join(root, "mv"), 0o777)
    os.chown(os.path.join(root, "sg"), 0, G)
    os.chmod(os.path.join(root, "sg"), 0o2777)


# (who, calls) in order; every answer is compared
SEQUENCE = [
    ("A", [["list", "."], ["list", "open"], ["list", "ro"], ["list", "nox"],
           ["list", "nor"], ["list", "grp"], ["list", "a"]]),
    ("A", [["stat", "nox/f"], ["read", "nox/f"], ["stat", "nor/f"],
           ["read", "nor/f"], ["read", "ro/f"], ["read", "grp/f"],
           ["read", "a/mine"], ["read", "a/none"], ["read", "r"],
           ["stat", "nox/absent"], ["stat", "ro/absent"]]),
    ("A", [["exec", "./xroot"], ["exec", "./xall"]]),
    ("A", [["access", "r", 4], ["access", "r", 2], ["access", "r", 1],
           ["access", "rw", 6], ["access", "nox", 1], ["access", "nor", 4],
           ["access", "nor", 1], ["access", "a/none", 4],
           ["chdir", "nox"], ["chdir", "nor"], ["chdir", "open"]]),
    ("A", [["open", "r", "O_WRONLY"], ["open", "r", "O_RDWR"],
           ["open", "r", "O_RDONLY|O_TRUNC"], ["open", "rw", "O_RDWR"],
           ["open", "a/mine", "O_RDWR"], ["open", "own", "O_WRONLY"]]),
    ("A", [["open", "ro/new", "O_CREAT|O_EXCL|O_WRONLY"],
           ["open", "open/new", "O_CREAT|O_EXCL|O_WRONLY"],
           ["open", "nox/new", "O_CREAT|O_EXCL|O_WRONLY"],
           ["write", "grp/new", "n"], ["write", "sticky/na", "n"],
           ["mkdir", "ro/d"], ["mkdir", "open/d"], ["mkdir", "nox/d"],
           ["mkdir", "grp/d"], ["mkdir", "sticky/da"]]),
    ("A", [["unlink", "ro/f"], ["unlink", "nox/f"], ["unlink", "sticky/fb"],
           ["rename", "sticky/fb", "sticky/fb2"],
           ["rename", "sticky/fa", "sticky/fb"],
           ["rename", "sticky/fa", "open/fa"], ["unlink", "open/fa"],
           ["rename", "open/sub", "mv/dst/sub"],
           ["rename", "open/asub", "mv/dst/asub"],
           ["rmdir", "open/sub"], ["rmdir", "open/d"],
           ["rename", "open/new", "ro/new"]]),
    # a set-gid, group-x file made in the set-gid directory: kept by a
    # member of its group (A), dropped for anyone else (B)
    ("A", [["create", "sg/xa", 0o2755], ["stat", "sg/xa"]]),
    ("B", [["create", "sg/xb", 0o2755], ["stat", "sg/xb"]]),
    ("A", [["write", "sg/f", "s"], ["stat", "sg/f"], ["mkdir", "sg/d"],
           ["stat", "sg/d"], ["write", "sg/d/f", "t"], ["stat", "sg/d/f"]]),
    ("B", [["unlink", "sticky/na"], ["unlink", "sticky/fb"],
           ["rmdir", "sticky/da"], ["list", "grp"], ["read", "grp/g"]]),
    ("A", [["chmod", "own", 0o600], ["stat", "own"], ["chmod", "r", 0o666],
           ["chmod", "a", 0o2755], ["stat", "a"],
           ["chown", "own", B, -1], ["chown", "own", -1, G],
           ["stat", "own"], ["chown", "own", -1, B], ["chown", "own", A, -1],
           ["chown", "r", -1, A]]),
    ("A", [["touch", "rw"], ["touch", "r"], ["utime", "rw", 1000],
           ["utime", "own", 1000], ["truncate", "rw", 0],
           ["truncate", "r", 0], ["truncate", "own", 0],
           ["write", "setid", "w"], ["stat", "setid"],
           ["truncate", "setid2", 0], ["stat", "setid2"]]),
    ("Z", [["chown", "setid3", A, -1], ["stat", "setid3"]]),
    ("R", [["read", "a/mine"], ["list", "grp"], ["read", "grp/f"],
           ["open", "rw", "O_WRONLY"], ["unlink", "sticky/fa"],
           ["chmod", "own", 0o644], ["chown", "rw", A, -1],
           ["access", "a/none", 4], ["create", "a/rootfile", 0o644],
           ["stat", "own"]]),
]


def who(name):
    if name == "A":
        return A, A, [G]
    if name in ("R", "Z"):  # root without its DAC capabilities; root
        return 0, 0, []
    return B, B, []


def build_trees(local, mnt):
    """The same tree (build_tree) as @local/t and @mnt/t: {name: path}."""
    trees = {"tmpfs": os.path.join(local, "t"), "ecfs": os.path.join(mnt, "t")}
    for t in trees.values():
        os.mkdir(t)
        os.chmod(t, 0o755)
        build_tree(t)
    return trees


def compare(trees, sequence):
    """Runs each step of @sequence in both @trees: every answer equal."""
    for i, (name, calls) in enumerate(sequence):
        uid, gid, groups = who(name)
        got = {k: as_user(t, uid, gid, groups, calls, drop_caps=name == "R")
               for k, t in trees.items()}
        for c, want, have in zip(calls, got["tmpfs"], got["ecfs"]):
            assert have == want, "step %d %s %s: tmpfs %r, ecfs %r" % (
                i, name, c, want, have)


def perm_mount(storaged, ecfs_mount, opts):
    """A storaged, a fresh bucket and an ecfs mount of it with @opts (the
    setpriv tests need root): (server, s3 client, bucket, mount)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv")
    srv = storaged(ndrives=4)
    s3 = srv.client()
    b = "perm-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=b)
    m = ecfs_mount(srv.endpoint, b, opts + ["retries=2"],
                   access_key=srv.access_key, secret_key=srv.secret_key)
    return srv, s3, b, m


@pytest.mark.slow
def test_permissions_match_tmpfs(storaged, ecfs_mount):
    srv, s3, b, m = perm_mount(storaged, ecfs_mount,
                               ["allow_other", "own_permissions"])
    with open("/proc/self/mountinfo") as f:
        line = [x for x in f if " %s " % m.path in x][0]
    assert "default_permissions" not in line  # the answers are ecfs's
    local = tempfile.mkdtemp(prefix="ecfs-perm-", dir="/dev/shm")
    try:
        trees = build_trees(local, m.path)
        compare(trees, SEQUENCE)
        # refusals really were refused: nothing changed in the bucket
        keys = {o["Key"] for o in s3.list_objects_v2(
            Bucket=b, Prefix="t/").get("Contents", [])}
        assert "t/ro/f" in keys and "t/nox/f" in keys
        assert "t/ro/new" not in keys and "t/nox/new" not in keys
    finally:
        shutil.rmtree(local, ignore_errors=True)


@pytest.mark.parametrize("opts", [["allow_other"],
                                  ["allow_other", "default_permissions"]])
def test_default_permissions_option(storaged, ecfs_mount, opts):
    """-o default_permissions, and allow_other without own_permissions (the
    default: the read path keeps the kernel's entry cache), leave the
    checks to the kernel (they still refuse)."""
    srv, s3, b, m = perm_mount(storaged, ecfs_mount, opts)
    t = os.path.join(m.path, "t")
    os.mkdir(t)
    os.chmod(t, 0o755)
    with open(os.path.join(t, "r"), "w") as f:
        f.write("x")
    with open("/proc/self/mountinfo") as f:
        line = [x for x in f if " %s " % m.path in x][0]
    assert "default_permissions" in line
    assert as_user(t, A, A, [], [["open", "r", "O_WRONLY"], ["read", "r"],
                                 ["write", "new", "n"]]) == \
        ["EACCES", "x", "EACCES"]


# what a fresh mount must show of a tree ecfs stored: every entry is
# first known from a listing (no x-amz-meta-*), and its stored mode and
# owner must still be what `ls -l` shows and what decides for others
AFTER_RESTART = [
    ("B", [["lsl", "."], ["lsl", "a"], ["lsl", "grp"], ["stat", "a/mine"],
           ["read", "a/mine"], ["read", "a/none"], ["list", "grp"],
           ["read", "grp/f"], ["read", "r"], ["open", "r", "O_WRONLY"],
           ["open", "own", "O_WRONLY"], ["access", "a/mine", 4],
           ["exec", "./xroot"], ["exec", "./xall"], ["chdir", "nor"],
           ["read", "nor/f"], ["unlink", "sticky/fa"]]),
    ("A", [["lsl", "a"], ["read", "a/mine"], ["open", "own", "O_WRONLY"],
           ["read", "grp/f"], ["list", "grp"], ["stat", "setid"],
           ["chmod", "own", 0o640], ["stat", "own"]]),
]


@pytest.mark.slow
@pytest.mark.parametrize("opts", [["allow_other"],
                                  ["allow_other", "own_permissions"]])
def test_listed_attributes_after_restart(storaged, ecfs_mount, opts):
    """S1 of the permission review: after a restart every entry is known
    from a listing only, which carries no x-amz-meta-*; ecfs must fetch
    the stored mode and owner (a HEAD) before it shows them or anyone but
    the mounting user is checked against them. The tree is built through
    one mount, read through a fresh one, and every answer compared with
    tmpfs: with the kernel's checks (allow_other: meta_fetch=all) and with
    ecfs's own."""
    srv, s3, b, m = perm_mount(storaged, ecfs_mount, opts)
    local = tempfile.mkdtemp(prefix="ecfs-perm-", dir="/dev/shm")
    try:
        trees = build_trees(local, m.path)
        m.unmount()
        m2 = ecfs_mount(srv.endpoint, b, opts + ["retries=2"],
                        access_key=srv.access_key, secret_key=srv.secret_key)
        trees["ecfs"] = os.path.join(m2.path, "t")
        compare(trees, AFTER_RESTART)
        # the owner's chmod after the restart kept the stored owner (the
        # chmod is stored a second later, or at unmount)
        m2.unmount()
        h = s3.head_object(Bucket=b, Key="t/own")["Metadata"]
        assert h.get("uid") == str(A) and h.get("gid") == str(A), h
        assert h.get("mode") == str(0o100640), h
    finally:
        shutil.rmtree(local, ignore_errors=True)


def test_listed_attributes_cost(storaged, ecfs_mount):
    """What S1's fix costs (-o meta_fetch, default marked): `ls -l` of a
    tree uploaded by another client (no directory marker: its listings
    hide no metadata) sends no HEAD; in a directory where ecfs stored a
    chmod (its marker says so) the marker is HEADed once and each listed
    file once, when first shown (a second `ls -l` sends none), and the
    chmod is shown after a restart; meta_fetch=none sends none and shows
    the defaults."""
    srv = storaged(ndrives=4)
    s3 = srv.client()
    b = "perm-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=b)
    for i in range(20):
        s3.put_object(Bucket=b, Key="up/c/%02d" % i, Body=b"u")

    def mount(extra=()):
        return ecfs_mount(srv.endpoint, b, ["retries=2"] + list(extra),
                          access_key=srv.access_key,
                          secret_key=srv.secret_key)

    def ls_l(m, d):
        p = os.path.join(m.path, d)
        return {n: os.lstat(os.path.join(p, n)) for n in os.listdir(p)}

    def heads(m, d):
        """HEADs so far, once the path to @d is looked up (a directory
        only listed is HEADed for its marker's attributes)."""
        os.lstat(os.path.join(m.path, d))
        return m.stats()["head"]

    m = mount()
    os.makedirs(os.path.join(m.path, "made"))
    for i in range(20):
        with open(os.path.join(m.path, "made", "%02d" % i), "w") as f:
            f.write("m")
    os.chmod(os.path.join(m.path, "made", "07"), 0o600)
    os.chmod(os.path.join(m.path, "up", "c", "03"), 0o600)
    m.unmount()
    # the chmod under the uploaded tree made its directory's marker, empty
    # (other tools skip empty markers) and saying so
    h = s3.head_object(Bucket=b, Key="up/c/")
    assert h["ContentLength"] == 0 and h["Metadata"] == {"ecfs-attrs": "1"}
    h = s3.head_object(Bucket=b, Key="made/")
    assert h["ContentLength"] == 0 and h["Metadata"] == {"ecfs-attrs": "1"}
    # files that kept the defaults store none
    assert s3.head_object(Bucket=b, Key="made/06")["Metadata"] == {}
    s3.delete_object(Bucket=b, Key="up/c/03")
    s3.put_object(Bucket=b, Key="up/c/03", Body=b"u")

    m = mount()
    h0 = heads(m, "up/c")
    st = ls_l(m, "up/c")
    assert len(st) == 20
    assert m.stats()["head"] - h0 == 21  # up/c/'s marker, then each file
    m.unmount()
    s3.delete_object(Bucket=b, Key="up/c/")
    m = mount()
    h0 = heads(m, "up/c")
    st = ls_l(m, "up/c")
    assert len(st) == 20 and all(s.st_mode & 0o777 == 0o644
                                 for s in st.values())
    assert m.stats()["head"] == h0  # no marker: nothing to fetch
    h0 = heads(m, "made")
    st = ls_l(m, "made")
    h1 = m.stats()["head"]
    assert h1 - h0 == 21, h1 - h0
    assert st["07"].st_mode & 0o777 == 0o600
    assert st["06"].st_mode & 0o777 == 0o644
    time.sleep(1.5)  # past attr_timeout: the kernel asks again
    st = ls_l(m, "made")
    assert st["07"].st_mode & 0o777 == 0o600
    assert m.stats()["head"] == h1
    m.unmount()
    m = mount(["meta_fetch=none"])
    h0 = heads(m, "made")
    st = ls_l(m, "made")
    assert st["07"].st_mode & 0o777 == 0o644  # the defaults, as asked
    assert m.stats()["head"] == h0


def test_create_over_unlisted_in_sticky_dir(storaged, ecfs_mount):
    """M2 of the permission review: in a sticky directory, a create of a
    name this mount's listing does not show, but another client made,
    must not replace another user's object (ecfs's create makes a new
    object of the caller's): EPERM, EEXIST with O_EXCL, the object
    unchanged; its owner may still replace it."""
    srv, s3, b, m = perm_mount(storaged, ecfs_mount,
                               ["allow_other", "own_permissions"])
    t = os.path.join(m.path, "t")
    os.mkdir(t)
    os.chmod(t, 0o1777)
    assert as_user(t, B, B, [], [["list", "."]]) == [[]]
    s3.put_object(Bucket=b, Key="t/late", Body=b"other",
                  Metadata={"uid": str(A), "gid": str(A),
                            "mode": str(0o100666)})
    got = as_user(t, B, B, [], [["open", "late", "O_CREAT|O_WRONLY"],
                                ["create", "late", 0o644]])
    assert got == ["EPERM", "EEXIST"]
    assert s3.get_object(Bucket=b, Key="t/late")["Body"].read() == b"other"
    assert as_user(t, A, A, [], [["write", "late", "mine"]]) == ["ok"]
    assert s3.get_object(Bucket=b, Key="t/late")["Body"].read() == b"mine"


def epoch(root):
    """A training epoch over @root, as a DataLoader's would go: the scan
    (os.walk), then every file opened, stat'ed and read. Returns {relative
    path: (mode bits, uid, bytes)}."""
    files = []
    for d, _, fs in os.walk(root):
        files += [os.path.join(d, n) for n in fs]
    out = {}
    for p in files:
        with open(p, "rb") as f:
            st = os.fstat(f.fileno())
            out[os.path.relpath(p, root)] = (st.st_mode & 0o7777, st.st_uid,
                                             f.read())
    return out


def test_listed_attributes_epoch_allow_other(storaged, ecfs_mount):
    """The cost of showing stored attributes on an allow_other mount (the
    default there is meta_fetch=marked now): an epoch over a tree uploaded
    by boto3 sends no HEAD (one GET per file); over a tree written through
    the mount (cp -r, then a chmod in one class and a chown in another)
    every mode and owner is shown as written, for one HEAD of each
    directory's marker and one per file of the two classes whose markers
    say their entries store attributes. Files that kept the defaults store
    none, and ecfs's markers stay empty. Other tools' attributes are shown
    under another tool's marker (s3fs makes them), and elsewhere only with
    meta_fetch=all."""
    if os.geteuid() != 0:
        pytest.skip("needs root (allow_other, chown)")
    srv = storaged(ndrives=4)
    s3 = srv.client()
    b = "epoch-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=b)
    n = 12
    for c in range(3):
        for i in range(n):
            s3.put_object(Bucket=b, Key="ds/c%d/%02d" % (c, i), Body=b"x" * (i + 1))

    def mount(prefix, extra=()):
        return ecfs_mount(srv.endpoint, b,
                          ["allow_other", "retries=2"] + list(extra),
                          access_key=srv.access_key,
                          secret_key=srv.secret_key, prefix=prefix)

    m = mount("ds")
    s0 = m.stats()
    got = epoch(m.path)
    s1 = m.stats()
    assert len(got) == 3 * n
    assert all(v[0] == 0o644 and v[1] == 0 for v in got.values())
    assert s1["head"] - s0["head"] == 0
    assert s1["get"] - s0["get"] == 3 * n  # one request per file
    m.unmount()

    # the same tree written through a mount: cp -r, then a chmod in c1
    # and a chown in c2
    local = tempfile.mkdtemp(prefix="ecfs-epoch-", dir="/dev/shm")
    try:
        for c in range(3):
            os.makedirs(os.path.join(local, "c%d" % c))
            for i in range(n):
                with open(os.path.join(local, "c%d" % c, "%02d" % i),
                          "wb") as f:
                    f.write(b"y" * (i + 1))
        s3.put_object(Bucket=b, Key="own/", Body=b"")  # as `aws s3api` would
        m = mount("own")
        subprocess.run(["cp", "-r"] + [os.path.join(local, "c%d" % c)
                                       for c in range(3)] + [m.path],
                       check=True)
        os.chmod(os.path.join(m.path, "c1", "03"), 0o600)
        os.chown(os.path.join(m.path, "c2", "05"), A, A)
        m.unmount()
    finally:
        shutil.rmtree(local, ignore_errors=True)
    for c, says in (("c0", "0"), ("c1", "1"), ("c2", "1")):
        h = s3.head_object(Bucket=b, Key="own/%s/" % c)
        assert h["ContentLength"] == 0
        assert h["Metadata"] == {"ecfs-attrs": says}, (c, h["Metadata"])
    assert s3.head_object(Bucket=b, Key="own/c1/04")["Metadata"] == {}
    assert s3.head_object(Bucket=b, Key="own/c1/03")["Metadata"]["mode"] \
        == str(0o100600)

    m = mount("own")
    s0 = m.stats()
    got = epoch(m.path)
    s1 = m.stats()
    want = {"c%d/%02d" % (c, i): (0o644, 0, b"y" * (i + 1))
            for c in range(3) for i in range(n)}
    want["c1/03"] = (0o600, 0, b"y" * 4)
    want["c2/05"] = (0o644, A, b"y" * 6)
    assert got == want
    # own/'s marker was made by boto3, so it says nothing: one HEAD of it
    # for the root's listing, then one per class directory (its lookup
    # fetches its marker's attributes); each class's listing shows its
    # marker: one HEAD each; c1's and c2's say their entries store
    # attributes: one HEAD per file there, none in c0
    heads = s1["head"] - s0["head"]
    assert heads == 1 + 3 + 3 + 2 * n, heads
    assert s1["get"] - s0["get"] == 3 * n
    m.unmount()

    # other tools' attributes: under another tool's marker (s3fs makes
    # one per directory) they are shown; in a directory without a marker
    # or with an ecfs marker saying "0", only with meta_fetch=all
    s3m = {"mode": str(0o100600), "uid": str(B), "gid": str(B)}
    s3.put_object(Bucket=b, Key="own/s3fs/", Body=b"")
    s3.put_object(Bucket=b, Key="own/s3fs/f", Body=b"s", Metadata=s3m)
    s3.put_object(Bucket=b, Key="own/c0/late", Body=b"l", Metadata=s3m)
    m = mount("own")
    for d in ("s3fs", "c0"):  # shown from their listings, as ls -l does
        os.listdir(os.path.join(m.path, d))
    st = os.stat(os.path.join(m.path, "s3fs", "f"))
    assert (st.st_mode & 0o777, st.st_uid) == (0o600, B)
    st = os.lstat(os.path.join(m.path, "c0", "late"))
    assert (st.st_mode & 0o777, st.st_uid) == (0o644, 0)
    m.unmount()
    m = mount("own", ["meta_fetch=all"])
    os.listdir(os.path.join(m.path, "c0"))
    st = os.lstat(os.path.join(m.path, "c0", "late"))
    assert (st.st_mode & 0o777, st.st_uid) == (0o600, B)
    m.unmount()
