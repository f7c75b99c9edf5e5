"""How ecfs shows a bucket's keys as a tree, against a real storaged and a
real FUSE mount: odd key names (spaces, %, +, #, ?, unicode, 255 bytes) list,
stat and read; a key that is both a file and a directory prefix; keys with
control characters XML 1.0 cannot carry; a directory over one LIST page;
prefix mounts in their several spellings and with odd characters; a real
object named like the stats file; ENOTDIR / EISDIR where a path crosses a
file."""

import concurrent.futures
import errno
import os
import uuid

import pytest


@pytest.fixture
def srv(storaged):
    return storaged()


def new_bucket(srv):
    c = srv.client()
    name = "rv-" + uuid.uuid4().hex[:10]
    c.create_bucket(Bucket=name)
    return c, name


def mount(srv, ecfs_mount, bucket, **kw):
    return ecfs_mount(srv.endpoint, bucket, access_key=srv.access_key,
                      secret_key=srv.secret_key, **kw)


ODD = ["a b.txt", "pct%20x", "plus+sign", "hash#tag", "q?uery", "amp&eq=1",
       "ünï cödé 日本.bin", "tilde~star*", "semi;colon,comma", "back\\slash",
       "quote'\"", "[brackets]{}", "caret^`pipe|", "L" * 255]


def test_odd_names_list_stat_read(srv, ecfs_mount):
    c, b = new_bucket(srv)
    want = {}
    for i, n in enumerate(ODD):
        for d in ("", "dir %+#?/"):
            body = (d + n).encode() * (i + 1)
            c.put_object(Bucket=b, Key=d + n, Body=body)
            want[d + n] = body
    # a key longer than a file name: never shown, never breaks the listing
    c.put_object(Bucket=b, Key="M" * 300, Body=b"x")
    m = mount(srv, ecfs_mount, b)
    assert sorted(os.listdir(m.path)) == sorted(ODD + ["dir %+#?"])
    assert sorted(os.listdir(os.path.join(m.path, "dir %+#?"))) == sorted(ODD)
    for k, body in want.items():
        p = os.path.join(m.path, k)
        assert os.stat(p).st_size == len(body), k
        with open(p, "rb") as f:
            assert f.read() == body, k
    with pytest.raises(OSError) as ei:
        os.stat(os.path.join(m.path, "M" * 300))
    assert ei.value.errno == errno.ENAMETOOLONG
    # the same names through a fresh mount with no listing (HEAD + LIST)
    m2 = mount(srv, ecfs_mount, b)
    for k, body in want.items():
        with open(os.path.join(m2.path, k), "rb") as f:
            assert f.read() == body, k


def test_file_and_dir_same_name(srv, ecfs_mount):
    c, b = new_bucket(srv)
    c.put_object(Bucket=b, Key="x", Body=b"file")
    c.put_object(Bucket=b, Key="x/y", Body=b"yy")
    for listed in (True, False):
        m = mount(srv, ecfs_mount, b)
        if listed:
            assert os.listdir(m.path) == ["x"]
        assert os.path.isdir(os.path.join(m.path, "x"))
        with open(os.path.join(m.path, "x/y"), "rb") as f:
            assert f.read() == b"yy"


@pytest.mark.parametrize("prefix", ["data", "data/", "/data//"])
def test_prefix_forms(srv, ecfs_mount, prefix):
    c, b = new_bucket(srv)
    c.put_object(Bucket=b, Key="data/a", Body=b"A")
    c.put_object(Bucket=b, Key="data/s/b", Body=b"B")
    c.put_object(Bucket=b, Key="database", Body=b"no")
    c.put_object(Bucket=b, Key="data", Body=b"no")
    m = mount(srv, ecfs_mount, b, prefix=prefix)
    assert sorted(os.listdir(m.path)) == ["a", "s"]
    with open(os.path.join(m.path, "s/b"), "rb") as f:
        assert f.read() == b"B"


def test_odd_prefix_mount(srv, ecfs_mount):
    c, b = new_bucket(srv)
    pre = "we ird%+#?é,x"
    c.put_object(Bucket=b, Key=pre + "/a", Body=b"A")
    c.put_object(Bucket=b, Key=pre + "/s/b", Body=b"B")
    c.put_object(Bucket=b, Key=pre + "x/no", Body=b"no")
    m = mount(srv, ecfs_mount, b, prefix=pre + "/")
    assert sorted(os.listdir(m.path)) == ["a", "s"]
    with open(os.path.join(m.path, "s/b"), "rb") as f:
        assert f.read() == b"B"
    assert "get" in m.stats()


def test_directory_over_one_page(srv, ecfs_mount):
    c, b = new_bucket(srv)
    names = ["f%05d" % i for i in range(1203)]
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda n: c.put_object(Bucket=b, Key="big/" + n,
                                           Body=n.encode()), names))
    m = mount(srv, ecfs_mount, b)
    got = os.listdir(os.path.join(m.path, "big"))
    assert sorted(got) == names
    # scandir with stat (readdirplus) twice: same inodes, right sizes
    ino1 = {e.name: e.inode() for e in os.scandir(os.path.join(m.path, "big"))}
    for e in os.scandir(os.path.join(m.path, "big")):
        assert e.stat().st_size == 6 and ino1[e.name] == e.inode()
    with open(os.path.join(m.path, "big", names[-1]), "rb") as f:
        assert f.read() == names[-1].encode()


def test_control_characters_do_not_break_a_directory(srv, ecfs_mount):
    """Keys XML 1.0 cannot carry (LIST asks for encoding-type=url): the
    directory lists, and every name opens with its own bytes."""
    c, b = new_bucket(srv)
    keys = ["w/ok", "w/ctl\x01x", "w/cr\rx", "w/nl\nx", "w/tab\tx",
            "w/sp ace+plus%25", "w/sub\x02dir/f"]
    for k in keys:
        c.put_object(Bucket=b, Key=k, Body=k.encode())
    m = mount(srv, ecfs_mount, b, opts=["umask=022"])
    assert sorted(os.listdir(os.path.join(m.path, "w"))) == sorted(
        ["ok", "ctl\x01x", "cr\rx", "nl\nx", "tab\tx", "sp ace+plus%25",
         "sub\x02dir"])
    for k in keys:
        with open(os.path.join(m.path, k), "rb") as f:
            assert f.read() == k.encode(), repr(k)


@pytest.mark.parametrize("prefix", [None, "p"])
def test_real_stats_object_is_not_hidden(srv, ecfs_mount, prefix):
    c, b = new_bucket(srv)
    pre = "" if prefix is None else prefix + "/"
    c.put_object(Bucket=b, Key=pre + ".ecfs-stats", Body=b"my own data")
    c.put_object(Bucket=b, Key=pre + "a", Body=b"a")
    m = mount(srv, ecfs_mount, b, prefix=prefix)
    p = os.path.join(m.path, ".ecfs-stats")
    with open(p, "rb") as f:
        assert f.read() == b"my own data"
    assert sorted(os.listdir(m.path)) == [".ecfs-stats", "a"]
    # -o nostats: no stats file where there is no such object either
    c.delete_object(Bucket=b, Key=pre + ".ecfs-stats")
    m2 = mount(srv, ecfs_mount, b, prefix=prefix, opts=["nostats"])
    with pytest.raises(FileNotFoundError):
        os.stat(os.path.join(m2.path, ".ecfs-stats"))
    # default: the counters are there
    m3 = mount(srv, ecfs_mount, b, prefix=prefix)
    assert "get" in m3.stats()


def test_errno_mapping(srv, ecfs_mount):
    c, b = new_bucket(srv)
    c.put_object(Bucket=b, Key="f", Body=b"x")
    m = mount(srv, ecfs_mount, b)
    with pytest.raises(NotADirectoryError):
        os.listdir(os.path.join(m.path, "f"))
    with pytest.raises(NotADirectoryError):
        os.stat(os.path.join(m.path, "f/g"))
    with pytest.raises(IsADirectoryError):
        open(m.path, "rb").read()
    # a name under a file is not a directory, for writes too
    with pytest.raises(NotADirectoryError):
        os.mkdir(os.path.join(m.path, "f", "new"))
