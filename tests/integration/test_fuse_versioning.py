"""ecfs on a versioned bucket of a real storaged: the mount shows each
key's current version only (no old versions, no delete markers, no
companion bucket), writes through the mount make versions that boto3 can
read back by id, and an unlink leaves a delete marker over the data."""
import os

from fuse_util import client_bucket, mount_of


def test_mount_shows_current_versions(storaged, ecfs_mount):
    srv = storaged()
    c, b = client_bucket(srv, "fv")
    c.put_bucket_versioning(Bucket=b,
                            VersioningConfiguration={"Status": "Enabled"})
    v1 = c.put_object(Bucket=b, Key="d/f", Body=b"old bytes")["VersionId"]
    c.put_object(Bucket=b, Key="d/f", Body=b"current")
    c.put_object(Bucket=b, Key="d/gone", Body=b"x")
    c.delete_object(Bucket=b, Key="d/gone")
    m = mount_of(srv, ecfs_mount, b, opts=["list_ttl=0.5"])
    d = os.path.join(m.path, "d")
    assert os.listdir(d) == ["f"]
    with open(os.path.join(d, "f"), "rb") as f:
        assert f.read() == b"current"
    # a write through the mount is a new version; the old ones stay
    with open(os.path.join(d, "f"), "wb") as f:
        f.write(b"from ecfs")
    vs = c.list_object_versions(Bucket=b, Prefix="d/f")["Versions"]
    assert len(vs) == 3 and vs[0]["IsLatest"]
    assert c.get_object(Bucket=b, Key="d/f")["Body"].read() == b"from ecfs"
    assert c.get_object(Bucket=b, Key="d/f",
                        VersionId=v1)["Body"].read() == b"old bytes"
    # unlink: a delete marker, the data kept
    os.unlink(os.path.join(d, "f"))
    assert not os.path.exists(os.path.join(d, "f"))
    r = c.list_object_versions(Bucket=b, Prefix="d/f")
    assert r["DeleteMarkers"][0]["IsLatest"] and len(r["Versions"]) == 3
