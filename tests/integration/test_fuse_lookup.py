"""ecfs lookups without a fresh listing (HEAD key + LIST key/ in parallel)
run on a fixed pool of probe threads: a storm of stats of uncached paths
creates no thread per lookup, and answers stay right (file, directory,
absent)."""

import os
import threading
import time
import uuid


N = 1500
PAR = 32


def tids(pid):
    try:
        return set(os.listdir("/proc/%d/task" % pid))
    except OSError:
        return set()


def test_stat_storm_uses_bounded_threads(storaged, ecfs_mount):
    srv = storaged(ndrives=4)
    c = srv.client()
    bucket = "lk-" + uuid.uuid4().hex[:8]
    c.create_bucket(Bucket=bucket)
    for i in range(20):
        c.put_object(Bucket=bucket, Key="f%d" % i, Body=b"x" * i)
        c.put_object(Bucket=bucket, Key="d%d/inner" % i, Body=b"y")
    m = ecfs_mount(srv.endpoint, bucket, access_key=srv.access_key,
                   secret_key=srv.secret_key, opts=["threads=16"])
    pid = m.pids()[0]
    seen = tids(pid)
    stop = threading.Event()

    def monitor():
        while not stop.is_set():
            seen.update(tids(pid))
            time.sleep(0.0005)

    wrong = []

    def work(k):
        for j in range(k, N, PAR):
            name = ("f%d" % (j % 20), "d%d" % (j % 20), "nope%d" % j)[j % 3]
            p = os.path.join(m.path, name)
            try:
                st = os.stat(p)
            except FileNotFoundError:
                if not name.startswith("nope"):
                    wrong.append(name)
                continue
            if name.startswith("nope") or \
                    (name[0] == "d") != os.path.isdir(p) or \
                    (name[0] == "f" and st.st_size != j % 20):
                wrong.append(name)

    mt = threading.Thread(target=monitor)
    mt.start()
    s0 = m.stats()
    ths = [threading.Thread(target=work, args=(k,)) for k in range(PAR)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    stop.set()
    mt.join()
    s1 = m.stats()
    assert wrong == []
    lookups = s1["head"] - s0["head"]
    assert lookups >= N // 3, (s0, s1)  # every "nope" went to S3
    assert s1["list"] - s0["list"] == lookups
    # a thread per lookup would show hundreds of thread ids; the pool, the
    # FUSE workers and the prefetch workers stay a few dozen
    assert len(seen) < 80, (len(seen), lookups)
