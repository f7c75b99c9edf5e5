"""ecfs tree fidelity: a generated ImageFolder-like tree uploaded with boto3
is seen through the mount by find, ls -lR and stat with the right sizes,
every file compares equal, random preads match, and writes to a ro mount fail
with EROFS. Run against every server of the ``s3_backend`` fixture (storaged, s3rver,
Ceph RGW)."""

import errno
import os
import random
import subprocess

import pytest

from fuse_util import make_tree, mount_of, upload_tree


def local_view(root):
    files, dirs = {}, set()
    for d, ds, fs in os.walk(root):
        for n in ds:
            dirs.add(os.path.relpath(os.path.join(d, n), root))
        for n in fs:
            p = os.path.join(d, n)
            files[os.path.relpath(p, root)] = os.path.getsize(p)
    return files, dirs


def find_view(mnt):
    out = subprocess.run(["find", mnt, "-mindepth", "1", "-printf",
                          "%y\\t%s\\t%P\\0"], capture_output=True, check=True)
    files, dirs = {}, set()
    for rec in out.stdout.split(b"\0"):
        if not rec:
            continue
        kind, size, rel = rec.decode().split("\t", 2)
        if kind == "d":
            dirs.add(rel)
        else:
            assert kind == "f", rec
            files[rel] = int(size)
    return files, dirs


def test_tree_fidelity(s3_backend, ecfs_mount, tmp_path):
    server = s3_backend
    local = str(tmp_path / "local")
    make_tree(local)
    bucket = server.new_bucket()
    upload_tree(server.s3, bucket, local)
    m = mount_of(server, ecfs_mount, bucket)

    lfiles, ldirs = local_view(local)
    mfiles, mdirs = find_view(m.path)
    assert mfiles == lfiles
    assert mdirs == ldirs

    r = subprocess.run(["ls", "-lR", m.path], capture_output=True)
    assert r.returncode == 0, r.stderr
    assert b"img 000.jpg" in r.stdout and "ünïcödé 日本".encode() in r.stdout

    for rel, size in lfiles.items():
        st = os.stat(os.path.join(m.path, rel))
        assert st.st_size == size, rel
        r = subprocess.run(["cmp", os.path.join(local, rel),
                            os.path.join(m.path, rel)], capture_output=True)
        assert r.returncode == 0, (rel, r.stdout, r.stderr)

    rnd = random.Random(7)
    for rel in ("big/blob0.bin", "big/blob1.bin"):
        with open(os.path.join(local, rel), "rb") as f:
            want = f.read()
        fd = os.open(os.path.join(m.path, rel), os.O_RDONLY)
        try:
            for _ in range(150):
                off = rnd.randrange(0, len(want) + 100)
                n = rnd.choice([1, 17, 4096, 65536, 200000, 1 << 20])
                assert os.pread(fd, n, off) == want[off:off + n], (rel, off, n)
        finally:
            os.close(fd)
    st = m.stats()
    assert st["get"] > 0 and st["list"] > 0 and st["errors"] == 0


def test_writes_are_refused(s3_backend, ecfs_mount, tmp_path):
    """On a ro mount (writable mounts: test_fuse_write.py)."""
    server = s3_backend
    bucket = server.new_bucket()
    server.s3.put_object(Bucket=bucket, Key="d/f.txt", Body=b"data")
    m = mount_of(server, ecfs_mount, bucket, opts=["ro"])
    p = m.path
    cases = [
        lambda: open(os.path.join(p, "new.txt"), "w"),
        lambda: open(os.path.join(p, "d/f.txt"), "a"),
        lambda: open(os.path.join(p, "d/f.txt"), "r+"),
        lambda: os.mkdir(os.path.join(p, "newdir")),
        lambda: os.unlink(os.path.join(p, "d/f.txt")),
        lambda: os.rmdir(os.path.join(p, "d")),
        lambda: os.rename(os.path.join(p, "d/f.txt"), os.path.join(p, "g")),
        lambda: os.truncate(os.path.join(p, "d/f.txt"), 0),
        lambda: os.symlink("x", os.path.join(p, "lnk")),
    ]
    for i, op in enumerate(cases):
        with pytest.raises(OSError) as e:
            op()
        assert e.value.errno in (errno.EROFS, errno.EPERM), (i, e.value)
    with open(os.path.join(p, "d/f.txt"), "rb") as f:
        assert f.read() == b"data"
    assert [o["Key"] for o in server.s3.list_objects_v2(
        Bucket=bucket)["Contents"]] == ["d/f.txt"]


def test_prefix_mount_markers_and_missing(s3_backend, ecfs_mount, tmp_path):
    server = s3_backend
    if server.kind == "s3rver":
        pytest.skip("s3rver omits CommonPrefixes of prefixes that hold no "
                    "direct object (its bug); checked on storaged")
    bucket = server.new_bucket()
    c = server.s3
    c.put_object(Bucket=bucket, Key="data/train/a/1.bin", Body=b"1")
    c.put_object(Bucket=bucket, Key="data/train/b/2.bin", Body=b"22")
    c.put_object(Bucket=bucket, Key="data/emptydir/", Body=b"")  # marker
    c.put_object(Bucket=bucket, Key="other/x", Body=b"x")
    m = mount_of(server, ecfs_mount, bucket, prefix="data")
    assert sorted(os.listdir(m.path)) == ["emptydir", "train"]
    assert os.path.isdir(os.path.join(m.path, "emptydir"))
    assert os.listdir(os.path.join(m.path, "emptydir")) == []
    assert sorted(os.listdir(os.path.join(m.path, "train"))) == ["a", "b"]
    with open(os.path.join(m.path, "train/b/2.bin"), "rb") as f:
        assert f.read() == b"22"
    with pytest.raises(FileNotFoundError):
        os.stat(os.path.join(m.path, "nope"))
    with pytest.raises(FileNotFoundError):
        os.stat(os.path.join(m.path, "other"))


def test_lookup_without_listing(s3_backend, ecfs_mount, tmp_path):
    server = s3_backend
    """Direct path access with no readdir first: HEAD + LIST per lookup."""
    bucket = server.new_bucket()
    server.s3.put_object(Bucket=bucket, Key="x/y/z.txt", Body=b"zz")
    server.s3.put_object(Bucket=bucket, Key="x/r", Body=b"r")
    m = mount_of(server, ecfs_mount, bucket)
    st = os.stat(os.path.join(m.path, "x/y/z.txt"))
    assert st.st_size == 2
    with open(os.path.join(m.path, "x/y/z.txt"), "rb") as f:
        assert f.read() == b"zz"
    assert os.path.isdir(os.path.join(m.path, "x/y"))
    s = m.stats()
    assert s["head"] >= 1 and s["get"] == 1


def test_stats_file_is_hidden_and_fresh(s3_backend, ecfs_mount):
    server = s3_backend
    bucket = server.new_bucket()
    server.s3.put_object(Bucket=bucket, Key="a.txt", Body=b"abc")
    for opts in ([], ["ro"]):
        m = mount_of(server, ecfs_mount, bucket, opts=opts)
        assert os.listdir(m.path) == ["a.txt"]  # never listed
        s0 = m.stats()
        with open(os.path.join(m.path, "a.txt"), "rb") as f:
            assert f.read() == b"abc"
        s1 = m.stats()
        assert s1["get"] == s0["get"] + 1  # fresh, not a cached page
        with pytest.raises(OSError):
            os.getxattr(os.path.join(m.path, "a.txt"), "user.x")
        with pytest.raises(OSError):
            open(os.path.join(m.path, ".ecfs-stats"), "w")
