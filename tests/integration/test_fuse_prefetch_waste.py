"""ecfs's directory prefetch wastes no GET (fuse/read.c dir_note), counted
by MOUNT/.ecfs-stats on a ro mount of a real storaged:
- a random 30% subset of two directories, read in random order by 4
  threads, costs at most 1.1x the GETs of the files read, and what was
  prefetched but not read shows in dir_prefetch_unread_bytes;
- a whole epoch in random order costs exactly one GET per file;
- a reader in listing order is prefetched ahead (dir_prefetch_gets > 0),
  still one GET per file."""

import os
import random
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import Storaged
from fuse_util import mount_of

DIRS, PER = 2, 300


@pytest.fixture(scope="module")
def srv_tree(request, tmp_path_factory):
    # one server for the module: three mounts of the same bucket
    srv = Storaged(tmp_path_factory.mktemp("pfw"), ndrives=4)
    srv.start()
    request.addfinalizer(srv.kill9)
    c = srv.client()
    bucket = "pfw-" + uuid.uuid4().hex[:10]
    c.create_bucket(Bucket=bucket)
    rnd = random.Random(7)
    bodies = {"c%d/img%04d.jpg" % (d, i): rnd.randbytes(200 + rnd.randrange(1800))
              for d in range(DIRS) for i in range(PER)}
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda kv: c.put_object(Bucket=bucket, Key=kv[0],
                                            Body=kv[1]), bodies.items()))
    return srv, bucket, bodies


def read_keys(m, bodies, keys, threads=4):
    def one(k):
        with open(os.path.join(m.path, k), "rb") as f:
            assert f.read() == bodies[k], k

    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(one, keys))


def scan(m):
    for d in range(DIRS):
        assert len(os.listdir(os.path.join(m.path, "c%d" % d))) == PER


def test_random_subset_wastes_at_most_10pct(srv_tree, ecfs_mount):
    srv, bucket, bodies = srv_tree
    m = mount_of(srv, ecfs_mount, bucket, opts=["ro"])
    scan(m)
    keys = random.Random(1).sample(sorted(bodies), len(bodies) * 3 // 10)
    s0 = m.stats()
    read_keys(m, bodies, keys)
    s = m.stats()
    gets = s["get"] - s0["get"]
    assert len(keys) <= gets <= 1.1 * len(keys), (gets, len(keys), s)
    prefetched = s["dir_prefetch_gets"]
    assert s["dir_prefetch_unread_bytes"] <= s["dir_prefetch_bytes"]
    if gets > len(keys):
        assert s["dir_prefetch_unread_bytes"] > 0, s
    assert prefetched <= 0.1 * len(keys) + 2 * DIRS, s
    m.unmount()


def test_random_epoch_one_get_per_file(srv_tree, ecfs_mount):
    srv, bucket, bodies = srv_tree
    m = mount_of(srv, ecfs_mount, bucket, opts=["ro"])
    scan(m)
    keys = sorted(bodies)
    random.Random(2).shuffle(keys)
    s0 = m.stats()
    read_keys(m, bodies, keys)
    s = m.stats()
    assert s["get"] - s0["get"] == len(keys), s
    assert s["dir_prefetch_unread_bytes"] == 0, s
    m.unmount()


def test_listing_order_is_prefetched(srv_tree, ecfs_mount):
    srv, bucket, bodies = srv_tree
    m = mount_of(srv, ecfs_mount, bucket, opts=["ro"])
    scan(m)
    s0 = m.stats()
    read_keys(m, bodies, sorted(bodies), threads=1)
    s = m.stats()
    assert s["get"] - s0["get"] == len(bodies), s
    # most of each directory came from prefetch, nothing is left unread
    assert s["dir_prefetch_gets"] >= len(bodies) // 2, s
    assert s["dir_prefetch_unread_bytes"] == 0, s
    m.unmount()
