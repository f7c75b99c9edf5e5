"""One object version per open file, step by step (deterministic versions of
what test_fuse_soak.py's overwrite variant finds by chance):

- a read that the block cache can only partly serve once the object has
  changed fails with EIO; it used to return the cached part as a short
  count, which the kernel takes for EOF: it zero-filled the rest of the page
  and shrank the file for every reader;
- an open of a new version while an old one is still open must not share
  the kernel page cache with it: the new handle filled pages the old one
  then read (a splice of two versions in one open file);
- an open that finds the object grew must not be cut at the old size the
  kernel still caches (attr_timeout): the new bytes at the old length;
- while a page-cache handle of one version is open, an attribute reply that
  saw another version must not set the kernel's size: it cut that handle's
  reads to EOF at the other version's size;
- a chmod/chown/touch made through the mount is a copy of the object onto
  itself, which gives a multipart-made object a new ETag (its bytes are the
  same): handles opened before it keep reading, with no EIO, and the blocks
  already cached serve them; an overwrite by another client before or after
  that copy still fails their reads with EIO."""

import errno
import os
import threading
import time
import uuid

import pytest

from conftest import mpu_one_part
from fuse_util import ForwardProxy


SIZE = 1 << 20
BLOCK = 64 * 1024


def body(ver):
    rec = [b"v%d-%012d\n" % (ver, i) for i in range(SIZE // 16)]
    return b"".join(rec)


@pytest.fixture
def one(storaged):
    srv = storaged(ndrives=4)
    c = srv.client()
    bucket = "pin-" + uuid.uuid4().hex[:8]
    c.create_bucket(Bucket=bucket)
    c.put_object(Bucket=bucket, Key="f.bin", Body=body(0))
    return srv, c, bucket


def mount(srv, ecfs_mount, bucket, extra, endpoint=None):
    return ecfs_mount(endpoint or srv.endpoint, bucket,
                      access_key=srv.access_key,
                      secret_key=srv.secret_key,
                      # whole_max=0: the 1 MiB file is read block by
                      # block, so a read can find some blocks of one
                      # version cached and fetch the others
                      opts=["block_size=64K", "whole_max=0",
                            "readahead_max=0", "list_ttl=0",
                            "attr_timeout=0", "negative_timeout=0"] + extra)


def test_partly_cached_read_of_changed_object_is_eio(one, ecfs_mount):
    srv, c, bucket = one
    # attributes cached: no getattr refreshes i_size or drops pages behind
    # the test's back
    m = mount(srv, ecfs_mount, bucket, ["read_ahead_kb=16", "attr_timeout=60"])
    fd = os.open(os.path.join(m.path, "f.bin"), os.O_RDONLY)
    try:
        # block 0 (64 KiB) is now in ecfs's block cache; the kernel holds
        # only the first 16 KiB in its page cache
        assert os.pread(fd, 4096, 0) == body(0)[:4096]
        c.put_object(Bucket=bucket, Key="f.bin", Body=body(1))
        # one FUSE read of pages 60K..76K: block 0 cached, block 1 not.
        # The kernel may hand out the pages it got before the error (a
        # short count, POSIX allows it); the rest must then fail, not be
        # zeros or EOF
        off = BLOCK - 4096
        try:
            got = os.pread(fd, 8192, off)
        except OSError as e:
            assert e.errno == errno.EIO
        else:
            assert got == body(0)[off:off + len(got)]
            if len(got) < 8192:
                with pytest.raises(OSError) as ei:
                    os.pread(fd, 8192 - len(got), off + len(got))
                assert ei.value.errno == errno.EIO
        # the file did not shrink, and nothing reads as zeros
        assert os.fstat(fd).st_size == SIZE
        try:
            got = os.pread(fd, 4096, BLOCK - 4096)
        except OSError as e:
            assert e.errno == errno.EIO
        else:
            assert got == body(0)[BLOCK - 4096:BLOCK], got[-32:]
    finally:
        os.close(fd)
    # a new open reads the new version whole
    with open(os.path.join(m.path, "f.bin"), "rb") as f:
        assert f.read() == body(1)
    assert m.stats()["etag_mismatch"] >= 1


def test_new_version_open_does_not_share_page_cache(one, ecfs_mount):
    srv, c, bucket = one
    m = mount(srv, ecfs_mount, bucket, ["read_ahead_kb=16"])
    p = os.path.join(m.path, "f.bin")
    a = os.open(p, os.O_RDONLY)
    try:
        assert os.pread(a, 4096, 0) == body(0)[:4096]
        c.put_object(Bucket=bucket, Key="f.bin", Body=body(1))
        # a second open sees the new version and reads it all; had it used
        # the page cache, its pages would now be under the first handle
        with open(p, "rb") as f:
            assert f.read() == body(1)
        for off in range(0, SIZE, 256 * 1024):
            try:
                got = os.pread(a, 4096, off)
            except OSError as e:
                assert e.errno == errno.EIO
            else:
                assert got == body(0)[off:off + 4096], (off, got[:16])
    finally:
        os.close(a)
    # both closed: the next open uses the page cache for the new version
    with open(p, "rb") as f:
        assert f.read() == body(1)


@pytest.mark.parametrize("grow", [True, False])
def test_open_after_size_change_reads_one_whole_version(one, ecfs_mount,
                                                        grow):
    """The kernel may still hold the old size (attr_timeout) when an open
    pins the new version: the read must still return one version whole,
    not the new bytes cut at the old size (or the old size padded)."""
    srv, c, bucket = one
    m = mount(srv, ecfs_mount, bucket, ["attr_timeout=30"])
    p = os.path.join(m.path, "f.bin")
    assert os.stat(p).st_size == SIZE  # the kernel caches this size
    new = body(1) + b"Z" * 5000 if grow else body(1)[:SIZE - 5000]
    c.put_object(Bucket=bucket, Key="f.bin", Body=new)
    with open(p, "rb") as f:
        got = f.read()
    assert got in (body(0), new), (len(got), got[:16], got[-16:])


@pytest.mark.parametrize("grow", [False, True])
def test_attr_reply_of_other_version_does_not_cut_open_file(one, ecfs_mount,
                                                            grow):
    """A page-cache handle of one version stays whole while attribute
    replies (getattr, lookup, readdirplus) see another version: the kernel
    cuts page-cache reads at the i_size they set. An open of the new
    version meanwhile (direct_io) reads it whole too, whatever i_size the
    kernel holds (what test_fuse_soak.py's resize variant hits by chance:
    reads to EOF ending 4099 bytes early)."""
    srv, c, bucket = one
    m = mount(srv, ecfs_mount, bucket, [])  # attr_timeout=0, list_ttl=0
    p = os.path.join(m.path, "f.bin")
    old = body(0)
    new = body(1) + b"Z" * 5000 if grow else body(1)[:SIZE - 5000]
    a = os.open(p, os.O_RDONLY)
    try:
        assert os.pread(a, SIZE, 0) == old  # pages and blocks of version 0
        c.put_object(Bucket=bucket, Key="f.bin", Body=new)
        # attributes of the new version reach the kernel: a HEAD (getattr),
        # a listing (readdirplus, lookup)
        os.stat(p)
        os.listdir(m.path)
        os.stat(p)
        # the old handle reads its version to EOF, not cut at the new size
        # (nor padded to it)
        with os.fdopen(os.dup(a), "rb") as f:
            got = f.read()
        assert len(got) == SIZE and got == old, (len(got), got[-16:])
        assert os.fstat(a).st_size == SIZE
        # a new open pins the new version (direct_io: pages of the old one
        # are in use) and reads it whole, even past the size the kernel
        # holds for the old one
        with open(p, "rb") as f:
            got = f.read()
        assert got == new, (len(got), len(new), got[-16:])
    finally:
        os.close(a)
    # all closed: attributes follow the object again
    assert os.stat(p).st_size == len(new)
    with open(p, "rb") as f:
        assert f.read() == new


def wait_meta(c, bucket, key, name, value, timeout=10):
    """Waits until the object carries x-amz-meta-NAME: VALUE (the mount's
    janitor stores attributes a second after the call); returns its
    HEAD."""
    deadline = time.monotonic() + timeout
    while True:
        h = c.head_object(Bucket=bucket, Key=key)
        if h["Metadata"].get(name) == value:
            return h
        assert time.monotonic() < deadline, h["Metadata"]
        time.sleep(0.1)


def wait_stored(m, timeout=20):
    """Waits until mount @m holds no attribute change still to store
    (.ecfs-stats attrs_pending 0): the janitor's copy onto itself was
    answered and the mount took the answer in (its handles, cached blocks
    and inode moved to the copy's ETag). The server has the attributes
    before that: a read between the two may send the replaced ETag and
    meet a 412 that the read then retries."""
    deadline = time.monotonic() + timeout
    while True:
        st = m.stats()
        if st["attrs_pending"] == 0:
            return st
        assert time.monotonic() < deadline, st
        time.sleep(0.05)


def change_meta(p, how):
    """chmod, chown (to the same owner: still a stored change, as
    ``chown -R``'s) or touch of @p; returns the x-amz-meta-* name and value
    it stores."""
    if how == "chmod":
        os.chmod(p, 0o640)
        return "mode", str(0o100640)
    if how == "chown":
        os.chmod(p, 0o600)
        os.chown(p, os.getuid(), os.getgid())
        return "mode", str(0o100600)
    os.utime(p, (1500000000, 1500000000))
    return "mtime", "1500000000"


@pytest.mark.parametrize("ttl", ["ttl0", "ttl60"])
@pytest.mark.parametrize("how", ["chmod", "chown", "touch"])
@pytest.mark.parametrize("made", ["multipart", "put"])
def test_own_metadata_change_keeps_open_reads(one, ecfs_mount, made, how,
                                              ttl):
    """chmod -R / chown -R / touch / rsync -a over a tree that a loader or
    cp reads: the copy onto itself that stores the attributes changes a
    multipart-made object's ETag (storaged: "md5-1" becomes the plain MD5;
    a single PUT's stays), and a handle opened before it read EIO. This
    mount made the copy, conditioned on the ETag it knew: the bytes are the
    same, so its handles and cached blocks take the new ETag. ttl60: the
    default list_ttl, where nothing HEADs the object again, so a later
    open pins the ETag the mount holds for it."""
    srv, c, bucket = one
    if made == "multipart":
        mpu_one_part(c, bucket, "f.bin", body(0))
    etag0 = c.head_object(Bucket=bucket, Key="f.bin")["ETag"]
    ttl_opts = [] if ttl == "ttl0" else ["list_ttl=60", "attr_timeout=1"]
    m = mount(srv, ecfs_mount, bucket, ["read_ahead_kb=16"] + ttl_opts)
    p = os.path.join(m.path, "f.bin")
    fd = os.open(p, os.O_RDONLY)
    try:
        # block 0 in ecfs's block cache, 16 KiB of it in the page cache
        assert os.pread(fd, 4096, 0) == body(0)[:4096]
        name, value = change_meta(p, how)
        wait_stored(m)
        h = wait_meta(c, bucket, "f.bin", name, value)
        if made == "multipart":
            assert h["ETag"] != etag0  # the case this test is about
        fetched = m.stats()["bytes"]
        got = b""
        while len(got) < SIZE - 4096:
            chunk = os.pread(fd, 64 * 1024, 4096 + len(got))
            assert chunk, len(got)
            got += chunk
        assert got == body(0)[4096:]
        # block 0 came from the cache under the new ETag: only the other
        # blocks were fetched (readahead_max=0, whole_max=0)
        assert m.stats()["bytes"] - fetched == SIZE - BLOCK
    finally:
        os.close(fd)
    with open(p, "rb") as f:
        assert f.read() == body(0)
    assert m.stats()["etag_mismatch"] == 0
    st = os.stat(p)
    if how == "touch":
        assert st.st_mtime == 1500000000
    else:
        assert oct(st.st_mode) == oct(int(value))


@pytest.mark.parametrize("when", ["before_copy", "after_copy"])
@pytest.mark.parametrize("made", ["multipart", "put"])
def test_overwrite_around_own_metadata_copy_is_eio(s3_backend, ecfs_mount,
                                                   made, when):
    """An overwrite by another client is still detected by the handles
    opened before it, whether it lands between the chmod and the mount's
    copy onto itself (the copy, conditioned on the ETag the mount knew,
    fails; the attributes then go onto the new version, as before, and no
    handle takes its ETag) or after that copy. On every server: Ceph RGW
    16.2 and s3rver ignore the CopyObject condition (the copy copies the
    other client's bytes), so there no copy may count as tied."""
    srv, c = s3_backend, s3_backend.s3
    bucket = s3_backend.new_bucket()
    if made == "multipart":
        mpu_one_part(c, bucket, "f.bin", body(0))
    else:
        c.put_object(Bucket=bucket, Key="f.bin", Body=body(0))
    ran = []

    def before(method, path, headers):
        # before_copy: the other client's PUT runs just before the first
        # CopyObject of f.bin (the janitor's, or its probe) is forwarded
        if when == "before_copy" and not ran and \
                headers.get("x-amz-copy-source") and "/f.bin" in path:
            ran.append(path)
            c.put_object(Bucket=bucket, Key="f.bin", Body=body(1))

    px = ForwardProxy(srv.endpoint, before)
    try:
        m = mount(srv, ecfs_mount, bucket, ["read_ahead_kb=16"], px.endpoint)
        p = os.path.join(m.path, "f.bin")
        fd = os.open(p, os.O_RDONLY)
        try:
            assert os.pread(fd, 4096, 0) == body(0)[:4096]
            os.chmod(p, 0o640)
            wait_stored(m)
            wait_meta(c, bucket, "f.bin", "mode", str(0o100640))
            if when == "before_copy":
                assert ran, "no copy onto itself"
            else:
                c.put_object(Bucket=bucket, Key="f.bin", Body=body(1))
            # every block but the first is fetched now: the new version's
            # bytes must never come back
            for off in range(BLOCK, SIZE, BLOCK):
                with pytest.raises(OSError) as ei:
                    os.pread(fd, 4096, off)
                assert ei.value.errno == errno.EIO, off
        finally:
            os.close(fd)
        assert m.stats()["etag_mismatch"] >= 1
        with open(p, "rb") as f:
            assert f.read() == body(1)
        if when == "before_copy":
            # the attributes went onto the other client's version
            h = c.head_object(Bucket=bucket, Key="f.bin")
            assert h["Metadata"].get("mode") == str(0o100640)
    finally:
        px.close()


@pytest.mark.parametrize("listed", ["plain", "ls_between"])
@pytest.mark.parametrize("how", ["chmod", "touch"])
def test_open_after_own_metadata_change_reads(one, ecfs_mount, how, listed):
    """With the default list_ttl nothing HEADs the file again for a minute
    after a chmod or touch through the mount: an open then pins the ETag
    the mount holds, which the copy onto itself replaced (a multipart-made
    object). That open read EIO (cat after chmod -R), even with no handle
    open during the chmod. ls_between: ``chmod f; ls -l; ...; ls -l; cat
    f``: the listing fetched between the call and the janitor's copy names
    the ETag the copy replaced and is newer than the inode's attributes;
    served from the cache after the copy it put that ETag back on the
    inode, so the cat pinned it and read EIO (fixed in session 16). The
    proxy holds the janitor's copy until that ls is done, however slow."""
    srv, c, bucket = one
    mpu_one_part(c, bucket, "f.bin", body(0))
    listed_done = threading.Event()
    if listed == "plain":
        listed_done.set()

    def before(method, path, headers):
        if headers.get("x-amz-copy-source") and "/f.bin" in path:
            assert listed_done.wait(20), "no ls"

    px = ForwardProxy(srv.endpoint, before)
    try:
        m = mount(srv, ecfs_mount, bucket, ["list_ttl=60", "attr_timeout=1"],
                  px.endpoint)
        p = os.path.join(m.path, "f.bin")
        with open(p, "rb") as f:
            assert f.read(4096) == body(0)[:4096]
        name, value = change_meta(p, how)
        if listed == "ls_between":
            for e in os.scandir(m.path):  # ls -l, before the copy
                e.stat()
            h = c.head_object(Bucket=bucket, Key="f.bin")
            assert h["Metadata"].get(name) != value, "the copy ran already"
            listed_done.set()
        wait_stored(m)
        wait_meta(c, bucket, "f.bin", name, value)
        time.sleep(1.2)  # attr_timeout: the kernel looks the name up again
        for e in os.scandir(m.path):  # ls -l within list_ttl
            assert e.stat().st_size == SIZE
        with open(p, "rb") as f:
            assert f.read() == body(0)
        assert m.stats()["etag_mismatch"] == 0
    finally:
        px.close()


@pytest.mark.parametrize("other", ["none", "between"])
def test_commit_copy_is_tied_to_the_completed_version(one, ecfs_mount, other):
    """cp -a: a file written in parts and chmodded before close is
    completed, then copied onto itself with its attributes. Another client
    that PUTs the key between the Complete and the copy must not have its
    version taken for this commit's: the copy carried no condition, so it
    copied the other version and the mount named this file by that copy's
    ETag, with this file's size: an open then read the other client's bytes
    under this file's size (two versions mixed in one open file). Tied to
    the Complete's ETag, the copy fails (412), the attributes are left to
    the janitor, and the mount's reads of its version get EIO, as for any
    overwrite by another client. none: with no other client the copy
    stores the attributes before close returns."""
    srv, c, bucket = one
    theirs = b"other client\n" * 20000
    ran = []

    def before(method, path, headers):
        # the copy onto itself, forwarded once this has run
        if headers.get("x-amz-copy-source") and not ran and "/f.bin" in path:
            ran.append(path)
            if other == "between":
                c.put_object(Bucket=bucket, Key="f.bin", Body=theirs)

    px = ForwardProxy(srv.endpoint, before)
    try:
        m = ecfs_mount(px.endpoint, bucket, access_key=srv.access_key,
                       secret_key=srv.secret_key,
                       opts=["list_ttl=60", "attr_timeout=0",
                             "negative_timeout=0"])
        ours = os.urandom(9 << 20)  # two parts of 8 MiB: a multipart upload
        p = os.path.join(m.path, "f.bin")
        with open(p, "wb") as f:
            f.write(ours)
            os.fchmod(f.fileno(), 0o640)  # after the upload began
        assert ran, "no copy onto itself after the Complete"
        if other == "none":
            h = c.head_object(Bucket=bucket, Key="f.bin")
            assert h["Metadata"].get("mode") == str(0o100640), h
            assert h["ContentLength"] == len(ours)
            with open(p, "rb") as f:
                assert f.read() == ours
            return
        fd = os.open(p, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            try:
                got = os.pread(fd, 4096, 0)
            except OSError as e:
                got = e.errno
        finally:
            os.close(fd)
        assert (size, got) in ((len(ours), errno.EIO),
                               (len(theirs), theirs[:4096])), \
            (size, got[:32] if isinstance(got, bytes) else got)
    finally:
        px.close()


def test_open_racing_own_metadata_copy_reads(one, ecfs_mount):
    """An open while the janitor's copy onto itself runs: its HEAD
    (list_ttl=0) is answered with the ETag the copy replaces, and the
    answer arrives after the mount moved its handles to the copy's ETag
    (the proxy holds it until then). That handle was pinned to the old
    ETag after the move and read EIO (412) for the same bytes; now its
    first failed read takes the ETag the mount adopted for that one."""
    srv, c, bucket = one
    mpu_one_part(c, bucket, "f.bin", body(0))
    copied, armed = threading.Event(), threading.Event()
    held = []

    mounted = []

    def after(method, path, headers, status):
        if "/f.bin" not in path:
            return
        if headers.get("x-amz-copy-source") and status == 200:
            copied.set()
        elif method == "HEAD" and armed.is_set() and not copied.is_set():
            held.append(path)
            assert copied.wait(20), "no copy onto itself"
            # the mount takes the copy's answer first (moves its handles)
            wait_stored(mounted[0])

    px = ForwardProxy(srv.endpoint, None, after)
    try:
        m = mount(srv, ecfs_mount, bucket, [], px.endpoint)
        mounted.append(m)
        p = os.path.join(m.path, "f.bin")
        fd1 = os.open(p, os.O_RDONLY)
        fdp = os.open(p, os.O_PATH)
        try:
            assert os.pread(fd1, 4096, 0) == body(0)[:4096]
            os.chmod(p, 0o640)
            armed.set()
            # no lookup: the open's own HEAD is the one held
            fd2 = os.open("/proc/self/fd/%d" % fdp, os.O_RDONLY)
            try:
                assert held and copied.is_set(), (held, copied.is_set())
                got = b""
                while len(got) < SIZE:
                    chunk = os.pread(fd2, BLOCK, len(got))
                    assert chunk, len(got)
                    got += chunk
                assert got == body(0)
            finally:
                os.close(fd2)
            assert os.pread(fd1, SIZE, 0) == body(0)
        finally:
            os.close(fd1)
            os.close(fdp)
        assert m.stats()["etag_mismatch"] <= 1  # the read retried once
    finally:
        px.close()
