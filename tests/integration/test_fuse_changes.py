"""Objects that change behind an ecfs mount (a non-ro mount, real storaged):
an overwrite or delete is seen once list_ttl has passed, also by a file
opened by path again and again (lookups of a live inode do not renew its
attributes' age), and a directory handle opened before an overwrite never
hands the kernel the old, smaller size. For one version per open file see
test_fuse_pin.py."""

import os
import time

import pytest

from fuse_util import client_bucket, mount_of


@pytest.fixture
def srv(storaged):
    return storaged()


def test_changed_object_seen_after_ttl(srv, ecfs_mount):
    c, b = client_bucket(srv)
    c.put_object(Bucket=b, Key="d/f", Body=b"one")
    m = mount_of(srv, ecfs_mount, b, opts=["list_ttl=1", "attr_timeout=0.5"])
    p = os.path.join(m.path, "d/f")
    assert os.listdir(os.path.join(m.path, "d")) == ["f"]
    with open(p, "rb") as f:
        assert f.read() == b"one"
    c.put_object(Bucket=b, Key="d/f", Body=b"TWO!")  # other size
    c.put_object(Bucket=b, Key="d/g", Body=b"new")
    time.sleep(1.3)
    assert sorted(os.listdir(os.path.join(m.path, "d"))) == ["f", "g"]
    assert os.stat(p).st_size == 4
    with open(p, "rb") as f:
        assert f.read() == b"TWO!"
    c.put_object(Bucket=b, Key="d/f", Body=b"3333")  # same size
    time.sleep(1.3)
    with open(p, "rb") as f:
        assert f.read() == b"3333"
    c.delete_object(Bucket=b, Key="d/f")
    time.sleep(1.3)
    assert not os.path.exists(p)
    assert os.listdir(os.path.join(m.path, "d")) == ["g"]


def test_change_seen_under_steady_lookups(srv, ecfs_mount):
    """A file opened by path again and again (a DataLoader with a file
    list) must see an overwrite once list_ttl has passed: lookups of a live
    inode must not keep renewing its attributes' age."""
    c, b = client_bucket(srv)
    c.put_object(Bucket=b, Key="d/f", Body=b"one")
    for listed in (False, True):
        m = mount_of(srv, ecfs_mount, b, opts=["list_ttl=1.5",
                                               "attr_timeout=0.2",
                                               "negative_timeout=0.2"])
        p = os.path.join(m.path, "d/f")
        if listed:
            os.listdir(os.path.join(m.path, "d"))
        with open(p, "rb") as f:
            body0 = f.read()
        new = b"TWO!" if body0 == b"one" else b"one"
        c.put_object(Bucket=b, Key="d/f", Body=new)
        deadline = time.monotonic() + 6
        got = None
        while time.monotonic() < deadline:
            with open(p, "rb") as f:
                got = f.read()
            if got == new:
                break
            time.sleep(0.1)
        assert got == new


def test_old_dir_snapshot_does_not_shrink_a_file(srv, ecfs_mount):
    """readdirplus from a directory handle opened before an overwrite must
    not hand the kernel the old size of an inode that already knows the new
    one (the kernel bounds reads by it: the read came back short)."""
    c, b = client_bucket(srv)
    c.put_object(Bucket=b, Key="d/f", Body=b"one")
    m = mount_of(srv, ecfs_mount, b, opts=["list_ttl=1", "attr_timeout=0.3",
                                           "negative_timeout=0.3"])
    d = os.path.join(m.path, "d")
    it = os.scandir(d)  # opendir: the snapshot says 3 bytes
    c.put_object(Bucket=b, Key="d/f", Body=b"TWO!!")
    time.sleep(1.2)
    assert os.stat(os.path.join(d, "f")).st_size == 5  # HEAD: 5 bytes
    names = [e.name for e in it]  # readdirplus from the old snapshot
    it.close()
    assert names == ["f"]
    with open(os.path.join(d, "f"), "rb") as f:
        assert f.read() == b"TWO!!"
    assert os.stat(os.path.join(d, "f")).st_size == 5
