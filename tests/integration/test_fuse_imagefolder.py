"""torchvision ImageFolder + DataLoader(num_workers=4, shuffle=True) over an
ecfs mount yields the same samples and labels as over the local copy, on
every ``s3_backend`` (storaged, s3rver, Ceph RGW)."""

import hashlib
import os
import subprocess
import sys

import pytest

from conftest import REPO
from fuse_util import upload_tree

torch = pytest.importorskip("torch")
datasets = pytest.importorskip("torchvision.datasets")


def raw_loader(path):
    with open(path, "rb") as f:
        return f.read()


def epoch(root, seed):
    ds = datasets.ImageFolder(root, loader=raw_loader)
    g = torch.Generator()
    g.manual_seed(seed)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, shuffle=True,
                                     num_workers=4, generator=g)
    out = [(hashlib.sha256(b).hexdigest(), int(y)) for b, y in dl]
    rel = [(os.path.relpath(p, root), y) for p, y in ds.samples]
    return ds.classes, rel, out


def test_imagefolder_dataloader(s3_backend, ecfs_mount, tmp_path):
    srv = s3_backend
    local = str(tmp_path / "data")
    r = subprocess.run([sys.executable, os.path.join(REPO, "scripts",
                                                     "gen-dataset"),
                        local, "--preset", "tiny", "--quiet"],
                       capture_output=True)
    assert r.returncode == 0, r.stderr
    c = srv.client()
    bucket = srv.new_bucket("if")
    n = upload_tree(c, bucket, local, prefix="train/")
    assert n >= 40
    m = ecfs_mount(srv.endpoint, bucket, opts=["ro"],
                   access_key=srv.access_key, secret_key=srv.secret_key)
    mroot = os.path.join(m.path, "train")

    lclasses, lrel, lout = epoch(local, 1234)
    mclasses, mrel, mout = epoch(mroot, 1234)
    assert mclasses == lclasses and len(lclasses) >= 2
    assert mrel == lrel
    # same shuffled order for the same seed, same bytes, same labels
    assert mout == lout
    s = m.stats()
    # no HEAD per file: the only HEAD is the lookup of "train" itself
    # (the mount root was never listed), done with a one-key LIST probe
    assert s["errors"] == 0 and s["head"] <= 1, s
    # a second epoch through the kernel page cache: no new GET
    mclasses, mrel, mout2 = epoch(mroot, 99)
    assert sorted(mout2) == sorted(lout)
    assert m.stats()["get"] == s["get"]
