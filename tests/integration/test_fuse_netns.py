"""Many clients on one server: 4 ecfs mounts, each in a network namespace
of its own (netns_util.NetnsLab: a veth pair to the host, 10.213.A.x/30
addresses of this test), read one storaged at the same time. storaged
listens on the host end of pair 0 only; every byte read through every mount
is checked, and each mount's connections are seen to come from its own
namespace's address."""

import hashlib
import os
import random
import subprocess
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from netns_util import NetnsLab, available

pytestmark = pytest.mark.needs_net_ns

NMOUNTS = 4


def dataset(seed=11, n=160):
    """{key: bytes}: small files of JPEG-like sizes, and two multi-MiB ones
    (readahead and parallel range GETs)."""
    rnd = random.Random(seed)
    data = {}
    for i in range(n):
        data["train/c%d/%04d.jpg" % (i % 4, i)] = rnd.randbytes(
            rnd.choice([0, 1, 4096, 9000, 30000, 70000, 150000]))
    data["big/a.bin"] = rnd.randbytes(9 * 1024 * 1024 + 5)
    data["big/b.bin"] = rnd.randbytes(3 * 1024 * 1024 + 4097)
    return data


@pytest.fixture
def lab():
    why = available()
    if why:
        pytest.skip(why)
    with NetnsLab(NMOUNTS) as lab:
        yield lab


def read_all(root, keys, threads=4):
    """{key: sha256} of every file under @root, read with @threads."""
    def one(k):
        h = hashlib.sha256()
        with open(os.path.join(root, k), "rb") as f:
            for b in iter(lambda: f.read(256 * 1024), b""):
                h.update(b)
        return k, h.hexdigest()

    keys = list(keys)
    random.Random(hash(root)).shuffle(keys)
    with ThreadPoolExecutor(threads) as ex:
        return dict(ex.map(one, keys))


def test_four_mounts_in_own_namespaces_read_one_storaged(lab, storaged,
                                                         ecfs_mount):
    srv = storaged(start=False)
    srv.host = lab.server_addr
    srv.endpoint = "http://%s:%d" % (srv.host, srv.port)
    srv.start()
    data = dataset()
    want = {k: hashlib.sha256(v).hexdigest() for k, v in data.items()}
    c = srv.client()
    bucket = "nn-" + uuid.uuid4().hex[:8]
    c.create_bucket(Bucket=bucket)
    with ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda kv: c.put_object(Bucket=bucket, Key=kv[0],
                                            Body=kv[1]), data.items()))

    mounts = []
    for i in range(NMOUNTS):
        m = ecfs_mount(srv.endpoint, bucket, access_key=srv.access_key,
                       secret_key=srv.secret_key, start=False,
                       opts=["ro", "max_conns=8"])
        m.argv = lab.wrap(i, m.argv)
        m.start()
        mounts.append(m)

    # all four read the whole bucket at the same time
    got, errs = {}, {}
    barrier = threading.Barrier(NMOUNTS)

    def client(i):
        try:
            barrier.wait(30)
            got[i] = read_all(mounts[i].path, data)
        except Exception as e:  # reported below, with the mount's number
            errs[i] = e

    ths = [threading.Thread(target=client, args=(i,))
           for i in range(NMOUNTS)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(180)
    assert not any(t.is_alive() for t in ths), "a reader hung"
    assert not errs, errs
    for i in range(NMOUNTS):
        bad = [k for k in want if got[i].get(k) != want[k]]
        assert not bad, "mount %d: wrong bytes in %s" % (i, bad[:5])

    for i, m in enumerate(mounts):
        s = m.stats()
        assert s["errors"] == 0 and s["etag_mismatch"] == 0, (i, s)
        assert s["bytes"] >= sum(len(v) for v in data.values()), (i, s)
        # the mount's kept-alive connections start in its own namespace
        conns = lab.established(i, srv.port)
        assert conns, "mount %d: no connection to storaged from its ns" % i
        assert {loc for loc, _ in conns} == {lab.client_addr(i)}, (i, conns)
        assert {peer for _, peer in conns} == {lab.server_addr}, (i, conns)
    # and the server saw four distinct clients (besides the host's own
    # boto3 uploader, whose source address is the server's)
    r = subprocess.run(["ss", "-tnH", "state", "established", "src",
                        "%s:%d" % (lab.server_addr, srv.port)],
                       capture_output=True, check=True)
    peers = {line.split()[-1].rsplit(":", 1)[0]
             for line in r.stdout.decode().splitlines() if line.strip()}
    peers.discard(lab.server_addr)
    assert peers == {lab.client_addr(i) for i in range(NMOUNTS)}, peers
