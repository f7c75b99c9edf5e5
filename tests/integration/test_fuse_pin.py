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
  reads to EOF at the other version's size."""

import errno
import os
import uuid

import pytest


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


def mount(srv, ecfs_mount, bucket, extra):
    return ecfs_mount(srv.endpoint, bucket, access_key=srv.access_key,
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
