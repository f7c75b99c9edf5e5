"""ecfs pack + the mount of a packed prefix (fuse/PACK.md).

A generated tree (nested and empty dirs, 0-byte files, a file larger than a
shard, a file of exactly one pack block, unicode/space/255-byte names, a
300-character path, odd modes and nanosecond mtimes) is packed from disk and
from a bucket; the mount must equal the source (find, stat, cmp, random
preads), the shards must be plain tar (tarfile lists and extracts them), the
mount must LIST nothing and GET at most one request per pack block, a
corrupted shard byte must fail only its member (EIO, never wrong bytes), and
bad input must fail with a message and leave no pack visible.
"""

import hashlib
import io
import os
import random
import re
import shutil
import struct
import subprocess
import tarfile
import tempfile
import time

import pytest

from conftest import BIN_DIR
from fuse_util import upload_tree

ECFS = os.path.join(BIN_DIR, "ecfs")
BLOCK = 1 << 20  # default pack_block
SHARD = "1M"     # small shards: several of them, one file bigger than one


def crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_T = crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def make_tree(root, nsmall=60):
    """The tree every round trip packs; returns it."""
    rnd = random.Random(7)
    os.makedirs(root)

    def put(rel, data, mode=0o644, mtime_ns=None):
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, mode)
        if mtime_ns is not None:
            os.utime(p, ns=(mtime_ns, mtime_ns))

    for i in range(nsmall):
        cls = "class%d" % (i % 3)
        put("train/%s/img%03d.jpg" % (cls, i),
            rnd.randbytes(rnd.randint(1, 40000)),
            mtime_ns=1600000000_123456789 + i * 1000)
    put("zero", b"")
    put("deep/a/b/c/zero2", b"", mode=0o600)
    put("big.bin", rnd.randbytes(3 * BLOCK + 12345))       # > a shard
    put("one block.bin", rnd.randbytes(BLOCK))              # = pack_block
    put("ünïcödé ñame.txt", "héllo wörld\n".encode())
    put("with space/file name.txt", b"spaces\n", mode=0o755)
    put("n" * 255, b"255-byte name\n")
    long_dir = "/".join(["d" * 60] * 4)  # 243 chars of dirs
    put(long_dir + "/" + "f" * 56, b"300-char path\n")
    assert len(long_dir + "/" + "f" * 56) == 300
    os.makedirs(os.path.join(root, "empty/dir"))
    os.chmod(os.path.join(root, "empty"), 0o750)
    return root


def tree_listing(root, dirs_mtime=True):
    """(relpath, kind, size, mode, mtime_ns) of everything under @root."""
    out = []
    for d, dnames, fnames in os.walk(root):
        for n in dnames + fnames:
            p = os.path.join(d, n)
            st = os.lstat(p)
            isdir = os.path.isdir(p)
            out.append((os.path.relpath(p, root), "d" if isdir else "f",
                        0 if isdir else st.st_size, st.st_mode & 0o7777,
                        st.st_mtime_ns if (dirs_mtime or not isdir) else 0))
    return sorted(out)


def run_pack(srv, src, dest, *extra, expect=0):
    env = dict(os.environ, AWS_ACCESS_KEY_ID=srv.access_key,
               AWS_SECRET_ACCESS_KEY=srv.secret_key)
    r = subprocess.run([ECFS, "pack", src, dest, "-o",
                        "endpoint=" + srv.endpoint] + list(extra),
                       env=env, capture_output=True, timeout=120)
    out = r.stdout.decode() + r.stderr.decode()
    assert r.returncode == expect, out
    return out


def keys(client, bucket, prefix=""):
    r = client.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for o in r.get("Contents", []))


def files_equal(a, b):
    for d, _, fnames in os.walk(a):
        for n in fnames:
            pa = os.path.join(d, n)
            pb = os.path.join(b, os.path.relpath(pa, a))
            with open(pa, "rb") as fa, open(pb, "rb") as fb:
                assert fa.read() == fb.read(), pa


def random_preads(a, b, rnd, n=60):
    files = [os.path.relpath(os.path.join(d, f), a)
             for d, _, fs in os.walk(a) for f in fs]
    for _ in range(n):
        rel = rnd.choice(files)
        size = os.path.getsize(os.path.join(a, rel))
        off = rnd.randint(0, max(0, size))
        ln = rnd.randint(0, 70000)
        fa = os.open(os.path.join(a, rel), os.O_RDONLY)
        fb = os.open(os.path.join(b, rel), os.O_RDONLY)
        try:
            assert os.pread(fa, ln, off) == os.pread(fb, ln, off), (rel, off)
        finally:
            os.close(fa)
            os.close(fb)


def test_pack_round_trip(s3_backend, ecfs_mount, tmp_path):
    """Disk -> pack -> mount equals the source; shards are plain tar."""
    srv = s3_backend
    src = make_tree(str(tmp_path / "src"))
    bucket = srv.new_bucket("pk")
    out = run_pack(srv, src, bucket + ":ds", "--shard-size", SHARD)
    assert "shards" in out and "index" in out, out
    c = srv.client()
    ks = keys(c, bucket)
    assert "ds/.ecfs-pack/index" in ks
    shards = [k for k in ks if k.startswith("ds/.ecfs-pack/shard-")]
    assert len(shards) >= 3 and all(k.endswith(".tar") for k in shards), ks
    assert set(ks) == set(shards) | {"ds/.ecfs-pack/index"}

    m = ecfs_mount(srv.endpoint, bucket, prefix="ds", opts=["ro"],
                   access_key=srv.access_key, secret_key=srv.secret_key)
    assert tree_listing(m.path) == tree_listing(src)
    files_equal(src, m.path)
    random_preads(src, m.path, random.Random(3))

    # every shard is plain tar: tarfile lists and extracts them all
    ext = tmp_path / "extract"
    ext.mkdir()
    names = set()
    for k in shards:
        p = tmp_path / os.path.basename(k)
        p.write_bytes(c.get_object(Bucket=bucket, Key=k)["Body"].read())
        with tarfile.open(str(p)) as t:
            for mem in t.getmembers():
                names.add(mem.name.rstrip("/"))
            t.extractall(str(ext))
    want = {r[0] for r in tree_listing(src)}
    assert names == want
    files_equal(src, str(ext))

    # read-only
    with pytest.raises(OSError) as e:
        open(os.path.join(m.path, "zero"), "w")
    assert e.value.errno == 30  # EROFS
    with pytest.raises(OSError) as e:
        os.mkdir(os.path.join(m.path, "newdir"))
    assert e.value.errno == 30


def test_pack_request_economy(storaged, ecfs_mount, tmp_path):
    """0 LIST; one GET per pack block at most; a second pass on a ro
    mount costs nothing."""
    srv = storaged()
    c = srv.client()
    bucket = "pe-" + os.urandom(4).hex()
    c.create_bucket(Bucket=bucket)
    src = make_tree(str(tmp_path / "src"), nsmall=300)
    run_pack(srv, src, bucket, "--shard-size", SHARD, "--order", "shuffled",
             "--seed", "5")
    m = ecfs_mount(srv.endpoint, bucket, opts=["ro"],
                   access_key=srv.access_key, secret_key=srv.secret_key)
    assert tree_listing(m.path) == tree_listing(src)
    s0 = m.stats()
    assert s0["list"] == 0 and s0["get"] == 0 and s0["head"] == 0, s0
    files_equal(src, m.path)
    s1 = m.stats()
    shard_bytes = sum(o["Size"] for o in c.list_objects_v2(
        Bucket=bucket, Prefix=".ecfs-pack/shard-")["Contents"])
    nshards = s1["pack_shards"]
    assert s1["list"] == 0 and s1["head"] == 0, s1
    assert s1["get"] == s1["pack_block_gets"], s1
    assert s1["get"] <= shard_bytes // BLOCK + nshards, (s1, shard_bytes)
    assert s1["pack_crc_errors"] == 0
    files_equal(src, m.path)
    s2 = m.stats()
    assert s2["get"] == s1["get"] and s2["list"] == 0, (s1, s2)
    # -o pack_fetch=shard: one GET per shard
    w = ecfs_mount(srv.endpoint, bucket, opts=["ro", "pack_fetch=shard"],
                   access_key=srv.access_key, secret_key=srv.secret_key)
    files_equal(src, w.path)
    s3 = w.stats()
    assert s3["get"] == nshards and s3["list"] == 0, s3
    # ... unless the shards do not fit in cache_size: then pack_block
    # blocks (whole shards would be fetched again and again)
    assert shard_bytes > 2 * 2**20
    x = ecfs_mount(srv.endpoint, bucket,
                   opts=["ro", "pack_fetch=shard", "cache_size=2M"],
                   access_key=srv.access_key, secret_key=srv.secret_key)
    files_equal(src, x.path)
    s4 = x.stats()
    assert s4["pack_block_gets"] > nshards, s4
    assert "do not fit in cache_size" in x.log_text(), x.log_text()
    assert s4["pack_block_size"] == BLOCK and s4["pack_ahead"] == 0, s4
    # the pack being larger than the cache, the default is read-ahead
    # (test_pack_read_ahead), unless pack_block or pack_fetch is given
    y = ecfs_mount(srv.endpoint, bucket, opts=["ro", "cache_size=2M"],
                   access_key=srv.access_key, secret_key=srv.secret_key)
    assert y.stats()["pack_ahead"] == 1
    for o in ("pack_block=1M", "pack_fetch=block"):
        z = ecfs_mount(srv.endpoint, bucket, opts=["ro", "cache_size=2M", o],
                       access_key=srv.access_key, secret_key=srv.secret_key)
        assert z.stats()["pack_ahead"] == 0, o


def shuffled_epoch(src, mnt, seed, threads=4):
    """Reads every file below @mnt once in a shuffled order, @threads at a
    time (a DataLoader's workers), and compares it with @src. Returns the
    number of files."""
    from concurrent.futures import ThreadPoolExecutor
    rels = sorted(os.path.relpath(os.path.join(d, f), src)
                  for d, _, fs in os.walk(src) for f in fs)
    random.Random(seed).shuffle(rels)

    def one(rel):
        with open(os.path.join(src, rel), "rb") as a, \
                open(os.path.join(mnt, rel), "rb") as b:
            assert a.read() == b.read(), rel
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(one, rels))
    return len(rels)


def test_pack_read_ahead(storaged, ecfs_mount, tmp_path):
    """A pack larger than cache_size, read in a shuffled order: each miss
    GETs a range from its member on and keeps the members in it not yet
    read, until their read; the epoch makes far fewer GETs than files and
    than blocks through an LRU (the same order with pack_fetch=block), and
    keeps nothing once every member is read. A member larger than the
    range goes through the blocks."""
    srv = storaged()
    c = srv.client()
    bucket = "pa-" + os.urandom(4).hex()
    c.create_bucket(Bucket=bucket)
    src = str(tmp_path / "src")
    rnd = random.Random(11)
    for i in range(500):
        p = os.path.join(src, "c%d" % (i % 4), "f%03d.bin" % i)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(rnd.randbytes(rnd.randint(1, 16000)))
    with open(os.path.join(src, "huge.bin"), "wb") as f:
        f.write(rnd.randbytes((4 << 20) + 999))  # > FC_PAHEAD_RANGE
    run_pack(srv, src, bucket, "--shard-size", "2M", "--order", "shuffled",
             "--seed", "3")
    opts = ["ro", "cache_size=2M"]  # the pack: about 8.3 MiB
    m = ecfs_mount(srv.endpoint, bucket, opts=opts,
                   access_key=srv.access_key, secret_key=srv.secret_key)
    n = shuffled_epoch(src, m.path, seed=1)
    s = m.stats()
    assert s["pack_ahead"] == 1 and s["list"] == 0, s
    assert s["get"] == s["pack_block_gets"], s
    assert s["pack_ahead_kept"] > n // 2 and s["pack_ahead_hits"] > n // 2, s
    # a miss is one GET: files / GETs >= 2.5 (the bound for a budget of a
    # quarter of the pack is (1-f) - f ln(1/f) = 0.40 misses per member)
    assert s["get"] * 5 <= n * 2, s
    assert s["pack_ahead_bytes"] == 0 and s["pack_ahead_epochs"] == 1, s
    assert s["pack_crc_errors"] == 0 and s["pack_ahead_stale"] == 0, s
    # the same epoch through an LRU of 1 MiB blocks
    b = ecfs_mount(srv.endpoint, bucket, opts=opts + ["pack_fetch=block"],
                   access_key=srv.access_key, secret_key=srv.secret_key)
    shuffled_epoch(src, b.path, seed=1)
    sb = b.stats()
    assert sb["pack_ahead"] == 0 and sb["get"] > s["get"], (s, sb)
    # partial reads of a fresh mount: a member read short of its end stays
    # kept (and is dropped stale once a whole epoch of reads passed)
    r = ecfs_mount(srv.endpoint, bucket, opts=opts,
                   access_key=srv.access_key, secret_key=srv.secret_key)
    random_preads(src, r.path, random.Random(5), n=200)
    assert r.stats()["pack_crc_errors"] == 0


def test_pack_from_bucket(storaged, ecfs_mount, tmp_path):
    """BUCKET:PREFIX as the source: streamed from the store, no local
    copy; the mount shows the same files and bytes."""
    srv = storaged()
    c = srv.client()
    bucket = "pb-" + os.urandom(4).hex()
    c.create_bucket(Bucket=bucket)
    src = make_tree(str(tmp_path / "src"))
    n = upload_tree(c, bucket, src, prefix="raw/")
    assert n > 60
    run_pack(srv, bucket + ":raw", bucket + ":packed", "--shard-size", SHARD)
    m = ecfs_mount(srv.endpoint, bucket, prefix="packed", opts=["ro"],
                   access_key=srv.access_key, secret_key=srv.secret_key)
    got = [(r[0], r[1], r[2]) for r in tree_listing(m.path)]
    # a bucket has no empty directories
    want = [(r[0], r[1], r[2]) for r in tree_listing(src)
            if not r[0].startswith("empty")]
    assert got == want
    files_equal(src, m.path)
    # -o pack=off shows the raw objects
    raw = ecfs_mount(srv.endpoint, bucket, prefix="packed",
                     opts=["ro", "pack=off"], access_key=srv.access_key,
                     secret_key=srv.secret_key)
    assert os.listdir(raw.path) == [".ecfs-pack"]
    assert "index" in os.listdir(os.path.join(raw.path, ".ecfs-pack"))


def test_pack_imagefolder(storaged, ecfs_mount, tmp_path):
    torch = pytest.importorskip("torch")
    datasets = pytest.importorskip("torchvision.datasets")
    srv = storaged()
    c = srv.client()
    bucket = "pi-" + os.urandom(4).hex()
    c.create_bucket(Bucket=bucket)
    src = make_tree(str(tmp_path / "src"))
    run_pack(srv, os.path.join(src, "train"), bucket + ":train",
             "--shard-size", "256K")
    m = ecfs_mount(srv.endpoint, bucket, prefix="train", opts=["ro"],
                   access_key=srv.access_key, secret_key=srv.secret_key)

    def raw_loader(path):
        with open(path, "rb") as f:
            return f.read()

    def epoch(root):
        ds = datasets.ImageFolder(root, loader=raw_loader)
        g = torch.Generator()
        g.manual_seed(99)
        dl = torch.utils.data.DataLoader(ds, batch_size=None, shuffle=True,
                                         num_workers=4, generator=g)
        return ds.classes, [(hashlib.sha256(b).hexdigest(), int(y))
                            for b, y in dl]

    lc, lout = epoch(os.path.join(src, "train"))
    mc, mout = epoch(m.path)
    assert mc == lc and len(lc) == 3
    assert mout == lout and len(lout) == 60
    assert m.stats()["list"] == 0


def patch_index_etag(idx, shard_no, etag):
    """The index with shard @shard_no's ETag replaced, CRCs redone
    (fuse/PACK.md): as if the shard's bytes rotted under an index that
    still trusts them."""
    b = bytearray(idx)
    assert b[:8] == b"ECFSPACK"
    off = 64 + 64 * shard_no + 8
    e = etag.encode()
    b[off:off + 56] = e + b"\0" * (56 - len(e))
    struct.pack_into("<I", b, 52, crc32c(bytes(b[64:])))
    struct.pack_into("<I", b, 56, crc32c(bytes(b[:56])))
    return bytes(b)


def test_pack_corrupt_member_is_eio(storaged, ecfs_mount, tmp_path):
    srv = storaged()
    c = srv.client()
    bucket = "pc-" + os.urandom(4).hex()
    c.create_bucket(Bucket=bucket)
    src = str(tmp_path / "src")
    os.makedirs(src)
    for i in range(5):
        with open(os.path.join(src, "f%d" % i), "wb") as f:
            f.write(bytes([65 + i]) * 5000)
    run_pack(srv, src, bucket)
    key = ".ecfs-pack/shard-000000.tar"
    tar = bytearray(c.get_object(Bucket=bucket, Key=key)["Body"].read())
    pos = tar.find(b"C" * 5000)  # f2's bytes
    assert pos > 0
    tar[pos + 100] ^= 0xFF
    et = c.put_object(Bucket=bucket, Key=key, Body=bytes(tar))["ETag"]
    idx = c.get_object(Bucket=bucket, Key=".ecfs-pack/index")["Body"].read()
    c.put_object(Bucket=bucket, Key=".ecfs-pack/index",
                 Body=patch_index_etag(idx, 0, et))
    # by blocks, then through read-ahead (one range GET brings all five):
    # f2 alone fails its check, at every read
    for opts in (["ro"], ["ro", "pack_fetch=ahead"]):
        m = ecfs_mount(srv.endpoint, bucket, opts=opts,
                       access_key=srv.access_key, secret_key=srv.secret_key)
        for i in (0, 1, 3, 4):
            with open(os.path.join(m.path, "f%d" % i), "rb") as f:
                assert f.read() == bytes([65 + i]) * 5000
        for _ in range(2):
            with pytest.raises(OSError) as e:
                with open(os.path.join(m.path, "f2"), "rb") as f:
                    f.read()
            assert e.value.errno == 5  # EIO
        s = m.stats()
        assert s["pack_crc_errors"] == 1, s
        assert s["pack_ahead"] == (len(opts) == 2), s
        assert len(opts) == 1 or s["pack_block_gets"] == 1, s
        assert "f2: CRC-32C" in m.log_text()


def test_pack_bad_input(storaged, ecfs_mount, request):
    srv = storaged()
    c = srv.client()
    bucket = "px-" + os.urandom(4).hex()
    c.create_bucket(Bucket=bucket)
    # outside tmp_path: its parents are 0700, and the packer runs as nobody
    top = tempfile.mkdtemp(prefix="ecfs-pack-")
    request.addfinalizer(lambda: shutil.rmtree(top, ignore_errors=True))
    os.chmod(top, 0o755)
    src = os.path.join(top, "src")
    os.makedirs(os.path.join(src, "sub"))
    for i in range(3):
        with open(os.path.join(src, "sub", "f%d" % i), "wb") as f:
            f.write(b"x" * 1000)
    for d, dn, fn in os.walk(src):
        os.chmod(d, 0o755)
        for n in fn:
            os.chmod(os.path.join(d, n), 0o644)

    # an unreadable file (the packer runs as nobody: root reads anything)
    bad = os.path.join(src, "sub", "secret")
    with open(bad, "wb") as f:
        f.write(b"no")
    os.chmod(bad, 0)
    env = dict(os.environ, AWS_ACCESS_KEY_ID=srv.access_key,
               AWS_SECRET_ACCESS_KEY=srv.secret_key)
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534",
                        "--clear-groups", ECFS, "pack", src, bucket, "-o",
                        "endpoint=" + srv.endpoint], env=env,
                       capture_output=True, timeout=60)
    assert r.returncode == 1, r
    assert b"cannot read" in r.stderr and b"secret" in r.stderr, r.stderr
    assert keys(c, bucket) == []
    os.unlink(bad)

    # a path over 4 KiB (made with dir fds: longer than PATH_MAX)
    fd = os.open(src, os.O_RDONLY)
    for i in range(17):
        name = "%03d" % i + "L" * 252
        os.mkdir(name, dir_fd=fd)
        nfd = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    os.close(fd)
    out = run_pack(srv, src, bucket, expect=1)
    assert "over the 4 KiB limit" in out, out
    assert keys(c, bucket) == []
    subprocess.run(["rm", "-rf", os.path.join(src, "000" + "L" * 252)],
                   check=True)

    # a destination that holds a pack: refused without --replace
    run_pack(srv, src, bucket)
    first = keys(c, bucket)
    with open(os.path.join(src, "sub", "f0"), "wb") as f:
        f.write(b"changed")
    out = run_pack(srv, src, bucket, expect=1)
    assert "already holds a pack" in out and "--replace" in out, out
    assert keys(c, bucket) == first
    old = ecfs_mount(srv.endpoint, bucket, opts=["ro"],
                     access_key=srv.access_key, secret_key=srv.secret_key)
    held = open(os.path.join(old.path, "sub", "f1"), "rb")
    out = run_pack(srv, src, bucket, "--replace")
    assert "old pack replaced" in out, out
    # the replaced pack's shard stays (mounts of its index keep reading)
    ks = keys(c, bucket)
    assert [k for k in ks if "/retired-" not in k] == [
        ".ecfs-pack/index", ".ecfs-pack/shard-000000.tar",
        ".ecfs-pack/shard-000001.tar"], ks
    # the index was replaced while mounted: open files and new reads of
    # the old mount see the old pack, byte for byte (nothing was cached)
    assert held.read() == b"x" * 1000
    held.close()
    with open(os.path.join(old.path, "sub", "f0"), "rb") as f:
        assert f.read() == b"x" * 1000
    assert old.stats()["errors"] == 0
    # a new mount sees the new pack
    m = ecfs_mount(srv.endpoint, bucket, opts=["ro"],
                   access_key=srv.access_key, secret_key=srv.secret_key)
    with open(os.path.join(m.path, "sub", "f0"), "rb") as f:
        assert f.read() == b"changed"
    # replaced packs are kept for --keep-replaced (1h), each with its marker
    run_pack(srv, src, bucket, "--replace")
    ks = keys(c, bucket)
    assert [k for k in ks if "shard" in k] == [
        ".ecfs-pack/shard-%06d.tar" % i for i in range(3)], ks
    assert len([k for k in ks if "/retired-" in k]) == 2, ks
    # --keep-replaced 0: every replaced pack's shards and markers go
    run_pack(srv, src, bucket, "--replace", "--keep-replaced", "0")
    assert keys(c, bucket) == [".ecfs-pack/index",
                               ".ecfs-pack/shard-000003.tar"]
    out = run_pack(srv, src, bucket, "--replace", "--keep-replaced", "1y",
                   expect=1)
    assert "--keep-replaced" in out, out

    # no such bucket, bad option
    out = run_pack(srv, src, "nosuchbucket-zz", expect=1)
    assert "no such bucket" in out, out
    out = run_pack(srv, src, bucket, "--order", "random", expect=1)
    assert "--order" in out


def test_pack_resume_after_server_kill(storaged, ecfs_mount, tmp_path):
    """The server dies during a pack: the run fails, keeps its completed
    shards and its checkpoint, no pack is visible; --resume then packs only
    the rest and the mount equals the source."""
    srv = storaged()
    c = srv.client()
    bucket = "pr-" + os.urandom(4).hex()
    c.create_bucket(Bucket=bucket)
    src = str(tmp_path / "src")
    os.makedirs(src)
    rnd = random.Random(11)
    for i in range(120):
        with open(os.path.join(src, "f%03d.bin" % i), "wb") as f:
            f.write(rnd.randbytes(1 << 20))
    env = dict(os.environ, AWS_ACCESS_KEY_ID=srv.access_key,
               AWS_SECRET_ACCESS_KEY=srv.secret_key)
    argv = [ECFS, "pack", src, bucket, "-o",
            "endpoint=%s,retries=1" % srv.endpoint, "--shard-size", "4M"]
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while ".ecfs-pack/resume" not in keys(c, bucket, ".ecfs-pack/"):
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        srv.kill9()
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 1, (out, err)
    assert b"--resume" in err, err
    srv.start()
    ks = keys(c, bucket)
    assert ".ecfs-pack/index" not in ks and ".ecfs-pack/resume" in ks, ks
    kept = [k for k in ks if "shard-" in k]
    assert kept, ks
    r = subprocess.run(argv + ["--resume"], env=env, capture_output=True,
                       timeout=120)
    assert r.returncode == 0, r
    assert b"resuming after shard-" in r.stderr, r.stderr
    ks = keys(c, bucket)
    assert ".ecfs-pack/index" in ks and ".ecfs-pack/resume" not in ks, ks
    m = ecfs_mount(srv.endpoint, bucket, opts=["ro"],
                   access_key=srv.access_key, secret_key=srv.secret_key)
    assert tree_listing(m.path) == tree_listing(src)
    files_equal(src, m.path)
    assert m.stats()["pack_crc_errors"] == 0


def test_pack_multipart_shard(s3_backend, ecfs_mount, tmp_path):
    """A shard over one 16 MiB part goes up as a multipart upload with its
    parts in parallel; the mount reads it back byte for byte."""
    srv = s3_backend
    src = str(tmp_path / "src")
    os.makedirs(src)
    rnd = random.Random(5)
    with open(os.path.join(src, "big"), "wb") as f:
        f.write(rnd.randbytes(40 << 20))
    for i in range(20):
        with open(os.path.join(src, "s%02d" % i), "wb") as f:
            f.write(rnd.randbytes(rnd.randint(0, 3000)))
    bucket = srv.new_bucket("pm")
    run_pack(srv, src, bucket + ":mp")
    c = srv.client()
    head = c.head_object(Bucket=bucket, Key="mp/.ecfs-pack/shard-000000.tar")
    if srv.kind != "s3rver":  # s3rver's multipart ETags are plain MD5s
        assert head["ETag"].strip('"').endswith("-3"), head["ETag"]
    m = ecfs_mount(srv.endpoint, bucket, prefix="mp", opts=["ro"],
                   access_key=srv.access_key, secret_key=srv.secret_key)
    assert tree_listing(m.path) == tree_listing(src)
    files_equal(src, m.path)
    random_preads(src, m.path, random.Random(8), n=30)


def test_pack_replaced_twice_while_mounted(storaged, ecfs_mount, tmp_path):
    """Two --replace runs under a live mount: a file opened before them
    keeps its version (its bytes were never cached), new lookups see the
    newest pack once list_ttl passes, and a ro mount keeps its pack."""
    srv = storaged()
    c = srv.client()
    bucket = "pr-" + os.urandom(4).hex()
    c.create_bucket(Bucket=bucket)
    src = str(tmp_path / "src")
    os.makedirs(os.path.join(src, "sub"))

    def version(v):
        for i in range(3):
            with open(os.path.join(src, "sub", "f%d" % i), "wb") as f:
                f.write(v * (1000 + i))
        if v == b"3":
            with open(os.path.join(src, "sub", "new"), "wb") as f:
                f.write(b"only in 3")

    version(b"1")
    run_pack(srv, src, bucket)
    m = ecfs_mount(srv.endpoint, bucket, opts=["list_ttl=1", "attr_timeout=1"],
                   access_key=srv.access_key, secret_key=srv.secret_key)
    ro = ecfs_mount(srv.endpoint, bucket, opts=["ro"],
                    access_key=srv.access_key, secret_key=srv.secret_key)
    held = open(os.path.join(m.path, "sub", "f1"), "rb")
    held_ro = open(os.path.join(ro.path, "sub", "f2"), "rb")
    st_held = os.fstat(held.fileno())
    for v in (b"2", b"3"):
        version(v)
        run_pack(srv, src, bucket, "--replace")
    # open files read the version they opened, byte for byte
    assert held.read() == b"1" * 1001
    assert held_ro.read() == b"1" * 1002
    # new lookups: the newest pack once list_ttl (and the kernel's
    # attr_timeout) passed
    deadline = time.monotonic() + 10
    while True:
        with open(os.path.join(m.path, "sub", "f0"), "rb") as f:
            got = f.read()
        if got == b"3" * 1000 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert got == b"3" * 1000
    assert sorted(os.listdir(os.path.join(m.path, "sub"))) == [
        "f0", "f1", "f2", "new"]
    st_new = os.stat(os.path.join(m.path, "sub", "f1"))
    assert st_new.st_ino != st_held.st_ino  # no page cache shared
    with open(os.path.join(m.path, "sub", "f1"), "rb") as f:
        assert f.read() == b"3" * 1001
    assert held.read() == b""  # still the old file's end
    st = m.stats()
    assert st["pack_reloads"] >= 1 and st["errors"] == 0, st
    # the ro mount keeps the pack it mounted (until remount)
    with open(os.path.join(ro.path, "sub", "f0"), "rb") as f:
        assert f.read() == b"1" * 1000
    assert not os.path.exists(os.path.join(ro.path, "sub", "new"))
    assert ro.stats()["pack_reloads"] == 0
    held.close()
    held_ro.close()
    # once the kernel forgets the old inodes, the old versions are freed
    deadline = time.monotonic() + 10
    while m.stats()["pack_versions"] > 1 and time.monotonic() < deadline:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2")
        time.sleep(0.3)
    assert m.stats()["pack_versions"] == 1


def test_pack_index_and_blocks_in_cache_dir(storaged, ecfs_mount, tmp_path):
    """-o cache_dir: the index is kept as a file in CACHE_DIR/pack/ and
    mapped (a remount of the same version reuses it, a corrupted copy is
    fetched again), and shard blocks go through the disk cache: a remount
    reads the tree with no shard GET."""
    srv = storaged()
    c = srv.client()
    bucket = "pc-" + os.urandom(4).hex()
    c.create_bucket(Bucket=bucket)
    src = make_tree(str(tmp_path / "src"), nsmall=20)
    run_pack(srv, src, bucket, "--shard-size", SHARD)
    cache = str(tmp_path / "cache")

    def mount():
        return ecfs_mount(srv.endpoint, bucket, opts=["ro", "cache_dir=" + cache],
                          access_key=srv.access_key, secret_key=srv.secret_key)

    def index_files():
        d = os.path.join(cache, "pack")
        return sorted(os.path.join(d, n) for n in os.listdir(d))

    m = mount()
    files_equal(src, m.path)
    st = m.stats()
    assert st["pack_index_mapped"] == 1 and st["pack_block_gets"] > 0, st
    m.unmount()
    (idx,) = index_files()
    first = os.stat(idx)
    # a remount maps the same file (not written again) and GETs no block
    m = mount()
    files_equal(src, m.path)
    st = m.stats()
    assert st["pack_index_mapped"] == 1, st
    assert st["pack_block_gets"] == 0 and st["get"] == 0, st
    assert st["pack_dcache_hits"] > 0, st
    m.unmount()
    again = os.stat(idx)
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino,
                                                 first.st_mtime_ns)
    # a corrupted copy fails its checks: fetched again, reads exact
    with open(idx, "r+b") as f:
        f.seek(first.st_size // 2)
        b = f.read(1)
        f.seek(first.st_size // 2)
        f.write(bytes([b[0] ^ 0x40]))
    m = mount()
    files_equal(src, m.path)
    assert m.stats()["pack_index_mapped"] == 1
    m.unmount()
    (idx2,) = index_files()
    with open(idx2, "rb") as f:  # written again, whole
        f.seek(first.st_size // 2)
        assert f.read(1) == b
    # a new pack version: its own file, the old one removed
    with open(os.path.join(src, "zero"), "wb") as f:
        f.write(b"now not empty")
    run_pack(srv, src, bucket, "--shard-size", SHARD, "--replace")
    m = mount()
    with open(os.path.join(m.path, "zero"), "rb") as f:
        assert f.read() == b"now not empty"
    assert len(index_files()) == 1 and index_files()[0] != idx2


def server_gets(srv):
    """GetObject requests storaged has answered (its /metrics)."""
    import urllib.request
    with urllib.request.urlopen(srv.endpoint + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(int(float(v)) for v in re.findall(
        r'^storaged_requests_total\{api="GetObject",[^}]*\} (\S+)$', text,
        re.M))


def test_pack_index_in_ranges(storaged, ecfs_mount, tmp_path):
    """The mount reads the index in ranges (a quarter of it, whole 64 KiB,
    64 KiB..8 MiB; up to 4 at a time): ceil(index size / range) GETs, then
    none while the tree is scanned."""
    srv = storaged()
    c = srv.client()
    bucket = "px-" + os.urandom(4).hex()
    c.create_bucket(Bucket=bucket)
    src = str(tmp_path / "src")
    for d in range(4):
        os.makedirs(os.path.join(src, "d%d" % d))
        for i in range(700):  # long names: a 4-range index, few files
            open(os.path.join(src, "d%d" % d, "%s-%05d" % ("n" * 36, i)),
                 "w").close()
    run_pack(srv, src, bucket)
    size = c.head_object(Bucket=bucket, Key=".ecfs-pack/index")[
        "ContentLength"]
    quarter = -(-(size // 4) // 65536) * 65536
    rng = max(65536, min(8 << 20, quarter))
    assert size > 3 * 65536  # several ranges
    g0 = server_gets(srv)
    m = ecfs_mount(srv.endpoint, bucket, opts=["ro"],
                   access_key=srv.access_key, secret_key=srv.secret_key)
    g1 = server_gets(srv)
    assert g1 - g0 == -(-size // rng), (size, rng, g0, g1)
    assert tree_listing(m.path) == tree_listing(src)
    assert server_gets(srv) == g1 and m.stats()["list"] == 0


def test_pack_read_ahead_disk_cache(storaged, ecfs_mount, tmp_path):
    """-o cache_dir under read-ahead (a pack larger than cache_size): every
    member a range GET brings lands in the disk cache, ranges are aligned
    4 MiB windows, so a shuffled cold epoch makes at most one GET per window
    (bytes / 4 MiB + shards) and a remount's epoch none. A re-pack with the
    same layout (other bytes, other shard ETags) is never served from the
    old pack's disk copies; a corrupt member is EIO at every mount and never
    reaches the disk."""
    srv = storaged()
    c = srv.client()
    bucket = "pd-" + os.urandom(4).hex()
    c.create_bucket(Bucket=bucket)
    src = str(tmp_path / "src")
    rnd = random.Random(21)
    sizes = [rnd.randint(1, 24000) for _ in range(800)]

    def write_tree(seed):
        r = random.Random(seed)
        for i, n in enumerate(sizes):
            p = os.path.join(src, "c%d" % (i % 4), "f%03d.bin" % i)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(r.randbytes(n))
    write_tree(1)
    run_pack(srv, src, bucket, "--shard-size", "6M")
    cache = str(tmp_path / "cache")
    opts = ["ro", "cache_size=1M", "cache_dir=" + cache]

    def mount():
        return ecfs_mount(srv.endpoint, bucket, opts=opts,
                          access_key=srv.access_key, secret_key=srv.secret_key)
    m = mount()
    g0 = server_gets(srv)
    n = shuffled_epoch(src, m.path, seed=1)
    s = m.stats()
    windows = -(-s["pack_shard_bytes"] // (4 << 20)) + s["pack_shards"]
    assert s["pack_ahead"] == 1 and s["list"] == 0, s
    assert s["pack_shards"] == 2, s
    assert server_gets(srv) - g0 == s["pack_block_gets"], s
    assert s["pack_block_gets"] <= windows, (windows, s)
    assert s["pack_ahead_disk_puts"] == n and s["dcache_stores"] >= n, s
    m.unmount()
    # a remount (page cache gone): the epoch comes from the disk
    m = mount()
    g0 = server_gets(srv)
    shuffled_epoch(src, m.path, seed=2)
    s = m.stats()
    assert server_gets(srv) == g0 and s["get"] == 0, s
    assert s["pack_ahead_disk_hits"] + s["pack_ahead_hits"] >= n, s
    m.unmount()
    # the same sizes, other bytes: the same offsets in new shards
    write_tree(2)
    run_pack(srv, src, bucket, "--shard-size", "6M", "--replace")
    # and one member's bytes rot in shard 0 under an index trusting them
    idx = c.get_object(Bucket=bucket, Key=".ecfs-pack/index")["Body"].read()
    first = struct.unpack_from("<I", idx, 48)[0]  # first_shard
    key = ".ecfs-pack/shard-%06d.tar" % first
    tar = bytearray(c.get_object(Bucket=bucket, Key=key)["Body"].read())
    with tarfile.open(fileobj=io.BytesIO(bytes(tar))) as t:
        mem = next(x for x in t.getmembers() if x.isfile() and x.size > 100)
    tar[mem.offset_data + 50] ^= 0xFF
    et = c.put_object(Bucket=bucket, Key=key, Body=bytes(tar))["ETag"]
    c.put_object(Bucket=bucket, Key=".ecfs-pack/index",
                 Body=patch_index_etag(idx, 0, et))
    for rep in range(2):
        m = mount()
        for d, _, fs in os.walk(src):
            for f in fs:
                rel = os.path.relpath(os.path.join(d, f), src)
                with open(os.path.join(src, rel), "rb") as a:
                    want = a.read()
                if rel == mem.name:
                    with pytest.raises(OSError) as e:
                        with open(os.path.join(m.path, rel), "rb") as b:
                            b.read()
                    assert e.value.errno == 5  # EIO
                    continue
                with open(os.path.join(m.path, rel), "rb") as b:
                    assert b.read() == want, rel  # never the old bytes
        s = m.stats()
        assert s["pack_crc_errors"] == 1, s
        # the second mount GETs only the corrupt member's window again
        assert s["pack_block_gets"] <= (windows if rep == 0 else 1), s
        assert "%s: CRC-32C" % mem.name in m.log_text()
        m.unmount()
