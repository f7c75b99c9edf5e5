"""The session's Ceph RGW cluster (ceph_rgw.py, s3_backends.rgw_cluster) is
what the ecfs suites take it for: a healthy single-node Ceph (1 mon, 1 mgr,
1 BlueStore OSD on a sparse file), a radosgw that checks SigV4 signatures
(s3rver checks none), multipart and ranged GETs as ecfs uses them."""

import json
import os

import botocore.exceptions
import pytest

pytestmark = pytest.mark.rgw


def test_cluster_shape_and_health(rgw_cluster):
    c = rgw_cluster
    st = json.loads(c.ceph("status", "--format", "json"))
    assert st["fsid"] == c.fsid
    osdmap = st["osdmap"].get("osdmap", st["osdmap"])
    assert osdmap["num_osds"] == 1 and osdmap["num_up_osds"] == 1
    assert st["mgrmap"]["available"] is True
    mons = json.loads(c.ceph("mon", "dump", "--format", "json"))["mons"]
    assert [m["name"] for m in mons] == ["a"]
    md = json.loads(c.ceph("osd", "metadata", "0", "--format", "json"))
    assert md["osd_objectstore"] == "bluestore"
    # the OSD's device is a sparse file: far fewer blocks than its size
    blk = os.stat(os.path.join(c.dir, "osd0.block"))
    assert blk.st_size == 8 << 30
    assert blk.st_blocks * 512 < blk.st_size // 4
    for name, p in c.procs.items():
        assert p.poll() is None, name


def backend(c):
    from s3_backends import Backend
    return Backend("rgw", c, c.endpoint, c.access_key, c.secret_key)


def test_rgw_checks_signatures(rgw_cluster):
    be = backend(rgw_cluster)
    b = be.new_bucket("sig")
    be.s3.put_object(Bucket=b, Key="k", Body=b"v")
    from conftest import boto3_client
    bad = boto3_client(be.endpoint, be.access_key, "wrong" * 8)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        bad.get_object(Bucket=b, Key="k")
    assert e.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_rgw_multipart_and_ranges(rgw_cluster):
    be = backend(rgw_cluster)
    s3 = be.s3
    b = be.new_bucket("mp")
    parts = [os.urandom(5 << 20), os.urandom(5 << 20), os.urandom(1234)]
    up = s3.create_multipart_upload(Bucket=b, Key="big")
    done = []
    for i, p in enumerate(parts, 1):
        r = s3.upload_part(Bucket=b, Key="big", UploadId=up["UploadId"],
                           PartNumber=i, Body=p)
        done.append({"PartNumber": i, "ETag": r["ETag"]})
    r = s3.complete_multipart_upload(Bucket=b, Key="big",
                                     UploadId=up["UploadId"],
                                     MultipartUpload={"Parts": done})
    h = s3.head_object(Bucket=b, Key="big")
    assert h["ETag"].strip('"').endswith("-3")
    # RGW 16.2 answers CompleteMultipartUpload with an empty <ETag/>
    # (fuse/README.md, "Servers"): the ETag is the one HEAD gives
    assert r["ETag"] in ("", h["ETag"])
    whole = b"".join(parts)
    got = s3.get_object(Bucket=b, Key="big", Range="bytes=5242000-5243000")
    assert got["Body"].read() == whole[5242000:5243001]
    assert got["ContentRange"] == "bytes 5242000-5243000/%d" % len(whole)
    assert h["ContentLength"] == len(whole)


def test_failed_bringup_reports_logs_and_cleans_up(tmp_path):
    """A cluster that cannot come up (its monitor's port is taken) fails
    with a clear error, its daemons' logs say why, and stop() leaves no
    process and no directory behind."""
    import socket
    from ceph_rgw import CephCluster, CephError
    blocker = socket.socket()
    blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    wd = tmp_path / "ceph"
    c = CephCluster(wd)
    c.mon_port = blocker.getsockname()[1]
    try:
        with pytest.raises(CephError) as e:
            c.start()
        logs = c.logs()
        assert "mon.a exited" in str(e.value), e.value
        assert "unable to bind monitor" in logs, logs[-3000:]
    finally:
        procs = list(c.procs.values())
        c.stop()
        blocker.close()
    assert all(p.poll() is not None for p in procs)
    assert not wd.exists()
