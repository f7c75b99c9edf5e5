"""A new bucket's first PUTs make the object directories DRIVE/b/BUCKET/hh/
they are the first to use. The entry of each new directory in its parent
must be as durable as the renames into it, so the commit's second barrier
covers it: in the same io_uring batch as the object directories' fsyncs
(file mode) or by the same syncfs round (fs mode), never by a serial fsync
per shard outside the barrier (storaged/FORMAT.md "Writes")."""

import glob
import os

import pytest

from test_object_medium import sync_counts


@pytest.mark.parametrize("mode", ["fs", "file"])
def test_first_put_of_a_bucket_syncs_new_dirs_in_its_barrier(storaged, mode):
    srv = storaged(ndrives=16, env={"STORAGED_SYNC_MODE": mode})
    c = srv.client()
    c.create_bucket(Bucket="newdirs")
    body = os.urandom(16 * 1024)  # inline, one meta per shard
    before = sync_counts(srv)
    c.put_object(Bucket="newdirs", Key="first", Body=body)
    d = {k: v - before.get(k, 0) for k, v in sync_counts(srv).items()}
    metas = [m for drv in srv.drives
             for m in glob.glob(os.path.join(drv, "b", "newdirs", "*", "*.m"))]
    shards = len(metas)
    assert shards >= 2
    # one hh directory per drive, each new: the bucket had none
    assert len({os.path.dirname(m) for m in metas}) == shards
    assert d["barriers"] == 2 and d["failures"] == 0, d
    if mode == "file":
        # temp metas, object directories, and the new directories'
        # entries in the bucket directories: all inside the two barriers
        assert d["rounds"] == 0, d
        assert d["fsyncs"] == 3 * shards, (d, shards)
    else:
        assert d["fsyncs"] == 0 and d["rounds"] >= 1, d
    assert c.get_object(Bucket="newdirs", Key="first")["Body"].read() == body
    # a second PUT of the same key finds its directories: no new entries
    before = sync_counts(srv)
    c.put_object(Bucket="newdirs", Key="first", Body=body[::-1])
    d = {k: v - before.get(k, 0) for k, v in sync_counts(srv).items()}
    if mode == "file":
        # temp metas + the HEX.p links' directories, then the renames'
        assert d["fsyncs"] == 3 * shards, (d, shards)
    srv.kill9()
    srv.start()
    got = c.get_object(Bucket="newdirs", Key="first")["Body"].read()
    assert got == body[::-1]
