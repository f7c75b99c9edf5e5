"""Multipart durability steps (storaged/FORMAT.md "Multipart"): the upload's
own files (upload.m at CreateMultipartUpload, pNNNNN.m after each part's
shard files) are made durable by group-commit barriers, the temp files of
all drives in one barrier and their directories in a second, as a commit
does, never one drive after another (32 serial fsyncs per 8 MiB part at
12+4 held a 1 GiB upload to a third of its speed on a journaled ext4,
session 15). Counted with the storaged_sync_* counters in file mode (each
file fsynced, all in one io_uring batch); the upload then survives a
kill -9 and completes; a drive that cannot take the files is left out and
the part still completes with the others.
"""

import hashlib
import os
import shutil

import pytest

from test_object_medium import sync_counts

MIB = 1024 * 1024


def delta(srv, before):
    return {k: v - before.get(k, 0) for k, v in sync_counts(srv).items()}


@pytest.mark.parametrize("ndrives", [16, 4])
def test_upload_files_are_synced_by_barriers(storaged, ndrives):
    srv = storaged(ndrives=ndrives, env={"STORAGED_SYNC_MODE": "file"})
    c = srv.client()
    c.create_bucket(Bucket="mpu")
    c.put_object(Bucket="mpu", Key="warm", Body=b"w")
    n = ndrives  # shards per object: 12+4 on 16 drives, 2+2 on 4
    before = sync_counts(srv)
    u = c.create_multipart_upload(Bucket="mpu", Key="big")["UploadId"]
    d = delta(srv, before)
    # upload.m on every drive: its temp files, then the directories
    assert d["barriers"] == 2 and d["fsyncs"] == 2 * n, d
    parts = [os.urandom(5 * MIB + 3), os.urandom(MIB + 7)]
    etags = []
    for i, body in enumerate(parts):
        before = sync_counts(srv)
        etags.append(c.upload_part(Bucket="mpu", Key="big", UploadId=u,
                                   PartNumber=i + 1, Body=body)["ETag"])
        d = delta(srv, before)
        # the part's shard files, its temp metas, the upload directories
        assert d["barriers"] == 3 and d["fsyncs"] == 3 * n, d
    # every drive has both part metas and no temp file left (the spare
    # pool's "s..." files live there too)
    for drv in srv.drives:
        up = [f for _, _, fs in os.walk(os.path.join(drv, ".ecfs.sys", "mpu"))
              for f in fs]
        assert sorted(f for f in up if f.endswith(".m")) == [
            "p00001.m", "p00002.m", "upload.m"], (drv, up)
        tmp = os.path.join(drv, ".ecfs.sys", "tmp")
        assert [f for f in os.listdir(tmp) if not f.startswith("s")] == [], \
            drv
    # the upload and its parts come back from the drives after a kill -9
    srv.kill9()
    srv.start()
    c = srv.client()
    got = c.list_parts(Bucket="mpu", Key="big", UploadId=u)["Parts"]
    assert [(p["PartNumber"], p["ETag"], p["Size"]) for p in got] == [
        (i + 1, e, len(b)) for i, (e, b) in enumerate(zip(etags, parts))]
    c.complete_multipart_upload(
        Bucket="mpu", Key="big", UploadId=u,
        MultipartUpload={"Parts": [{"PartNumber": i + 1, "ETag": e}
                                   for i, e in enumerate(etags)]})
    body = c.get_object(Bucket="mpu", Key="big")["Body"].read()
    assert hashlib.md5(body).digest() == hashlib.md5(b"".join(parts)).digest()


def test_a_drive_that_cannot_take_upload_files_is_left_out(storaged):
    """A drive whose temp folder is a file (its opens fail ENOTDIR) takes
    no part meta and is marked offline; the upload goes on with the other
    15 and reads back whole."""
    srv = storaged(ndrives=16, env={"STORAGED_SYNC_MODE": "file"})
    c = srv.client()
    c.create_bucket(Bucket="mpu")
    u = c.create_multipart_upload(Bucket="mpu", Key="k")["UploadId"]
    bad = srv.drives[5]
    tmp = os.path.join(bad, ".ecfs.sys", "tmp")
    shutil.rmtree(tmp)
    with open(tmp, "w") as f:
        f.write("not a directory")
    body = os.urandom(6 * MIB + 1)
    e = c.upload_part(Bucket="mpu", Key="k", UploadId=u, PartNumber=1,
                      Body=body)["ETag"]
    metas = [os.path.exists(os.path.join(r, "p00001.m"))
             for drv in srv.drives
             for r, _, _ in os.walk(os.path.join(drv, ".ecfs.sys", "mpu"))]
    assert sum(metas) == 15, metas
    c.complete_multipart_upload(Bucket="mpu", Key="k", UploadId=u,
                                MultipartUpload={"Parts": [
                                    {"PartNumber": 1, "ETag": e}]})
    assert c.get_object(Bucket="mpu", Key="k")["Body"].read() == body
    assert "ENOTDIR" in srv.log_text() or "Not a directory" in \
        srv.log_text()
