"""chmod/chown/utimens of a closed file are stored about a second later by
ecfs's janitor (a CopyObject of the object onto itself carrying
x-amz-meta-*). A rename of the file, or of a directory above it, while that
store is under way must not lose them: before, the rename's copies went
without them and the store then met the deleted source (404), so the file
kept its old attributes under the new name (the CI failure of
test_user_tools_on_every_server[storaged] was this class).

A proxy in front of the real storaged holds the janitor's copy onto
itself until the test lets it go, so the rename starts while the store is
under way every time."""

import os
import threading
import time
import urllib.parse

import pytest

from fuse_util import ForwardProxy, client_bucket


class _HoldProxy:
    """A ForwardProxy to @upstream that holds the first CopyObject of
    @bucket/@key onto itself until .release is set (.held is set when it
    came), and sets .copied once a CopyObject from @key to another key (a
    rename's copy) was answered."""

    def __init__(self, upstream, bucket, key):
        self.held = threading.Event()
        self.release = threading.Event()
        self.copied = threading.Event()
        self.copied_while_held = False
        self.lock = threading.Lock()
        self.holding = False
        src = "%s/%s" % (bucket, key)

        def names(path, headers):
            cs = headers.get("x-amz-copy-source")
            if cs is None:
                return None, None
            return (urllib.parse.unquote(cs.split("?")[0]).lstrip("/"),
                    urllib.parse.unquote(path.split("?")[0]).lstrip("/"))

        def before(method, path, headers):
            cs, to = names(path, headers)
            with self.lock:
                hold = cs == src and to == src and not self.held.is_set()
                if hold:
                    self.holding = True
                    self.held.set()
            if hold:
                self.release.wait(30)
                with self.lock:
                    self.holding = False
            return None

        def after(method, path, headers, status):
            cs, to = names(path, headers)
            if cs == src and to != src:
                with self.lock:
                    self.copied_while_held |= self.holding
                self.copied.set()

        self.px = ForwardProxy(upstream, before, after)
        self.endpoint = self.px.endpoint

    def close(self):
        self.release.set()
        self.px.close()


def _rename_during_store(storaged, ecfs_mount, key, src, dst, new_key):
    """Puts @key, chmods it 0640 through a mount, renames @src -> @dst
    (paths in the mount) while the janitor's store of the mode is held,
    then returns (boto3 client, bucket, whether the rename copied while
    the store was held)."""
    srv = storaged()
    c, b = client_bucket(srv)
    c.put_object(Bucket=b, Key=key, Body=b"x" * 100)
    px = _HoldProxy(srv.endpoint, b, key)
    try:
        m = ecfs_mount(px.endpoint, b, access_key=srv.access_key,
                       secret_key=srv.secret_key)
        os.chmod(os.path.join(m.path, key), 0o640)
        # the janitor took it (about a second later) and is storing it
        assert px.held.wait(20), "no store of the chmod"
        err = []

        def mv():
            try:
                os.rename(os.path.join(m.path, src),
                          os.path.join(m.path, dst))
            except OSError as e:
                err.append(e)

        t = threading.Thread(target=mv)
        t.start()
        # before the fix the rename copies at once (and the store, let go
        # once that copy was answered, comes too late); with it, the rename
        # waits for the store, so this bound passes and the store goes on
        px.copied.wait(3)
        px.release.set()
        t.join(30)
        assert not t.is_alive() and not err, err
        assert px.copied.is_set()
        held = px.copied_while_held
    finally:
        px.close()
    mode = int(c.head_object(Bucket=b, Key=new_key)["Metadata"]["mode"])
    assert mode & 0o7777 == 0o640, oct(mode)
    assert "Contents" not in c.list_objects_v2(Bucket=b, Prefix=key)
    return held


def test_dir_rename_waits_for_an_attribute_store_under_way(storaged,
                                                           ecfs_mount):
    held = _rename_during_store(storaged, ecfs_mount, "d/sub/f", "d", "e",
                                "e/sub/f")
    assert not held, "the rename copied while the store was under way"


def test_file_rename_waits_for_an_attribute_store_under_way(storaged,
                                                            ecfs_mount):
    held = _rename_during_store(storaged, ecfs_mount, "d/f", "d/f", "d/g",
                                "d/g")
    assert not held, "the rename copied while the store was under way"


@pytest.mark.parametrize("ttl", ["0", "60"])
def test_rmdir_during_attribute_store_brings_no_marker_back(storaged,
                                                            ecfs_mount, ttl):
    """chmod of a directory, then rmdir while the janitor stores the mode
    (its copy of the marker onto itself, held by the proxy until the rmdir
    returned): the copy meets no marker (404), and the store must not PUT
    a new one, which would bring the removed directory back. It checked for
    the rmdir through the mount's notes as a lookup does, only while they
    are fresh, i.e. never with list_ttl=0 (-o list_ttl=0, the setting for
    buckets that other clients change)."""
    srv = storaged()
    c, b = client_bucket(srv)
    removed, seen = threading.Event(), []

    def before(method, path, headers):
        if headers.get("x-amz-copy-source") and path.split("?")[0] == \
                "/%s/d/" % b and not seen:
            seen.append(path)
            removed.wait(30)  # the rmdir runs meanwhile

    px = ForwardProxy(srv.endpoint, before)
    try:
        m = ecfs_mount(px.endpoint, b, access_key=srv.access_key,
                       secret_key=srv.secret_key,
                       opts=["list_ttl=" + ttl, "attr_timeout=0",
                             "negative_timeout=0"])
        d = os.path.join(m.path, "d")
        os.mkdir(d)
        os.chmod(d, 0o750)
        deadline = time.monotonic() + 10
        while not seen:  # the janitor's store began (a second later)
            assert time.monotonic() < deadline, "no store of the chmod"
            time.sleep(0.05)
        os.rmdir(d)
        removed.set()
        m.unmount()  # the store is over
        assert "Contents" not in c.list_objects_v2(Bucket=b, Prefix="d")
    finally:
        removed.set()
        px.close()
