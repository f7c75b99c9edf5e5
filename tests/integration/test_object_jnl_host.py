"""The journal of a filesystem whose host drive goes away or fails
(storaged/FORMAT.md "The meta journal": one journal per filesystem, kept
by its first drive, the host).

- A checkpoint whose header write fails stops the host's journal; a
  versioned DELETE queued before it (its barrier runs outside the journal
  lock) still settles: its barrier never fdatasyncs a closed fd number."""

import os
import re
import subprocess
import time
import urllib.request

from test_object_journal import JENV, versioned_store
from test_object_new_dirs import metas_of


def drives_online(srv):
    text = urllib.request.urlopen(srv.endpoint + "/metrics").read().decode()
    m = re.search(r"^storaged_drives_online ([0-9.]+)$", text, re.M)
    return float(m.group(1)) if m else None


def wait_for(pred, timeout=20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def test_a_failed_checkpoint_leaves_a_queued_versioned_delete_its_journal(
        storaged):
    # a checkpoint once a record is 1 s old; each versioned DELETE's batch
    # held back 6 s (STORAGED_TEST_VDEL_MS), so the checkpoint runs while
    # the DELETE is queued
    env = dict(JENV, STORAGED_TEST_JOURNAL_CP_SECS="1",
               STORAGED_TEST_VDEL_MS="6000")
    srv, c, rng = versioned_store(storaged, "vdh", 5, ndrives=4, env=env)
    # the host's idle file (journal.1 at a start) refuses writes: the
    # checkpoint's header write fails (EPERM), as on a failing disk
    idle = os.path.join(srv.drives[0], ".ecfs.sys", "journal.1")
    subprocess.run(["chattr", "+i", idle], check=True)
    try:
        body = rng.randbytes(3000)
        v1 = c.put_object(Bucket="vdh", Key="k", Body=body)["VersionId"]
        cur = [p for p, _ in metas_of(srv, "vdh", "k")]
        assert len(cur) >= 3, cur
        mk = c.delete_object(Bucket="vdh", Key="k")
        assert mk["DeleteMarker"] is True
        assert wait_for(lambda: "header write failed" in srv.log_text())
        # the queue settles the DELETE: the key's metas go (or stay, with
        # a WARN, where its barrier failed)
        assert wait_for(lambda: not any(map(os.path.exists, cur)) or
                        "its metas stay" in srv.log_text(), 30)
        log = srv.log_text()
        assert "its metas stay" not in log, log[-3000:]
        assert "failed (errno 9" not in log, log[-3000:]
        assert not any(map(os.path.exists, cur))
        assert drives_online(srv) == 4
        # the drives commit without the journal now, and serve
        assert c.get_object(Bucket="vdh", Key="k",
                            VersionId=v1)["Body"].read() == body
        c.put_object(Bucket="vdh", Key="k2", Body=b"x" * 100)
        assert c.get_object(Bucket="vdh", Key="k2")["Body"].read() == \
            b"x" * 100
        srv.stop()
    finally:
        subprocess.run(["chattr", "-i", idle], check=True)
