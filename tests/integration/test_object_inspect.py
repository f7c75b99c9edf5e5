"""`storaged inspect PATH` on real drive files written by a real server:
it decodes object metas (key, version, geometry, headers, parts), the drive
format record, and reports a corrupt record with a non-zero exit."""

import glob
import os
import subprocess

from conftest import STORAGED


def inspect(path):
    return subprocess.run([STORAGED, "inspect", path], capture_output=True,
                          text=True, timeout=10)


def test_inspect_meta_format_and_corruption(storaged):
    srv = storaged(ndrives=4)
    c = srv.client()
    c.create_bucket(Bucket="insp")
    c.put_object(Bucket="insp", Key="dir/../we\u00efrd key", Body=b"x" * 5000,
                 ContentType="image/jpeg")
    c.put_object(Bucket="insp", Key="big", Body=b"y" * 300000)
    srv.stop()
    metas = glob.glob(os.path.join(srv.drives[0], "b", "insp", "*", "*.m"))
    metas += glob.glob(os.path.join(srv.drives[1], "b", "insp", "*", "*.m"))
    outs = [inspect(m) for m in metas]
    assert outs and all(o.returncode == 0 for o in outs)
    text = "\n".join(o.stdout for o in outs)
    assert "CRC-64 ok" in text
    assert "dir/../we\u00efrd key" in text
    assert "content-type: image/jpeg" in text
    assert "inline shard" in text or "part:" in text
    fmt = inspect(os.path.join(srv.drives[2], ".ecfs.sys", "format"))
    assert fmt.returncode == 0 and "deployment=" in fmt.stdout
    with open(metas[0], "r+b") as f:
        f.seek(40)
        b = f.read(1)
        f.seek(40)
        f.write(bytes([b[0] ^ 1]))
    bad = inspect(metas[0])
    assert bad.returncode != 0
    assert "corrupt" in (bad.stdout + bad.stderr)
