"""ecfs lookups without a fresh listing (HEAD key + LIST key/ in parallel)
run on a fixed pool of probe threads: a storm of stats of uncached paths
creates no thread per lookup, and answers stay right (file, directory,
absent). A directory whose names are looked up by path (a manifest-driven
loader that never lists it) is listed once after lookup_list remote
lookups and answered from that listing."""

import os
import random
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
                   secret_key=srv.secret_key,
                   opts=["threads=16", "lookup_list=0"])
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


LOOKUP_LIST = 8  # ecfs's default -o lookup_list


def by_path_pass(m, names, bodies):
    """Opens and reads every name by path (no readdir); the request
    counters spent."""
    s0 = m.stats()
    for n in names:
        with open(os.path.join(m.path, "data", n), "rb") as f:
            assert f.read() == bodies[n], n
    s1 = m.stats()
    return {k: s1[k] - s0[k] for k in ("head", "list", "get", "lookup_lists")}


def test_opens_by_path_list_the_directory_once(storaged, ecfs_mount):
    """200 files of one directory opened by path in random order, never
    listed: after lookup_list remote lookups the directory is listed (one
    page) and the rest cost their GET alone; with lookup_list=0 each open
    costs a HEAD and a LIST of its name, as before."""
    srv = storaged(ndrives=4)
    c = srv.client()
    bucket = "lb-" + uuid.uuid4().hex[:8]
    c.create_bucket(Bucket=bucket)
    rnd = random.Random(14)
    bodies = {}
    for i in range(200):
        n = "f%03d.bin" % i
        bodies[n] = rnd.randbytes(100 + rnd.randrange(4000))
        c.put_object(Bucket=bucket, Key="data/" + n, Body=bodies[n])
    names = sorted(bodies)
    rnd.shuffle(names)
    cost = {}
    for ll in (0, LOOKUP_LIST):
        m = ecfs_mount(srv.endpoint, bucket, access_key=srv.access_key,
                       secret_key=srv.secret_key,
                       opts=["lookup_list=%d" % ll])
        cost[ll] = by_path_pass(m, names, bodies)
        m.unmount()
    print("requests for 200 opens by path:", cost)
    old, new = cost[0], cost[LOOKUP_LIST]
    # before: a HEAD and a LIST per name (and the "data" lookup)
    assert old["head"] >= 200 and old["list"] >= 200, old
    assert old["lookup_lists"] == 0, old
    # after: lookup_list - 1 names and "data" probed, one listing
    assert new["lookup_lists"] == 1, new
    assert new["head"] <= LOOKUP_LIST, new
    assert new["list"] <= LOOKUP_LIST + 2, new
    assert new["get"] == old["get"] == 200, (old, new)


def test_listing_from_lookups_keeps_ttl_and_dir_first(storaged, ecfs_mount):
    """The listing made for lookups by path is an ordinary one: a name
    another client adds is found after list_ttl, one it deletes is gone
    after it, absent names are answered from it, and a directory wins over
    a file of the same name. Past list_ttl it is refreshed by one LIST that
    answers the names after it too (not a HEAD + LIST per name)."""
    srv = storaged(ndrives=4)
    c = srv.client()
    bucket = "lt-" + uuid.uuid4().hex[:8]
    c.create_bucket(Bucket=bucket)
    for i in range(20):
        c.put_object(Bucket=bucket, Key="data/f%02d" % i, Body=b"%d" % i)
    c.put_object(Bucket=bucket, Key="data/both", Body=b"file")
    c.put_object(Bucket=bucket, Key="data/both/inner", Body=b"in")
    ttl = 3
    m = ecfs_mount(srv.endpoint, bucket, access_key=srv.access_key,
                   secret_key=srv.secret_key, opts=["list_ttl=%d" % ttl])
    d = os.path.join(m.path, "data")
    for i in range(12):
        with open(os.path.join(d, "f%02d" % i), "rb") as f:
            assert f.read() == b"%d" % i
    s0 = m.stats()
    assert s0["lookup_lists"] == 1, s0
    assert os.path.isdir(os.path.join(d, "both"))
    assert not os.path.exists(os.path.join(d, "absent"))
    with open(os.path.join(d, "f15"), "rb") as f:
        assert f.read() == b"15"
    s1 = m.stats()
    assert s1["head"] == s0["head"] and s1["list"] == s0["list"], (s0, s1)
    c.put_object(Bucket=bucket, Key="data/new", Body=b"from elsewhere")
    c.delete_object(Bucket=bucket, Key="data/f03")
    time.sleep(ttl + 0.5)  # the listing and the kernel's entries expire
    assert os.path.isdir(d)  # "data" itself is looked up again (root)
    s2 = m.stats()
    t0 = time.monotonic()
    with open(os.path.join(d, "new"), "rb") as f:
        assert f.read() == b"from elsewhere"
    assert not os.path.exists(os.path.join(d, "f03"))
    for i in range(4, 12):  # names the expired listing showed
        with open(os.path.join(d, "f%02d" % i), "rb") as f:
            assert f.read() == b"%d" % i
    quick = time.monotonic() - t0 < ttl  # else it expired once more
    s3 = m.stats()
    # the expired listing is refreshed once (one LIST) and answers every
    # name, shown or absent: no HEAD + LIST per name it shows
    cost = {k: s3[k] - s2[k] for k in ("head", "list", "stale_refetches")}
    assert cost["head"] == 0, cost
    assert cost["list"] == cost["stale_refetches"] >= 1, cost
    if quick:
        assert cost["list"] == 1, cost


def test_lookups_do_not_list_a_directory_of_many_pages(storaged,
                                                       ecfs_mount):
    """A directory of more than one LIST page is not listed for lookups:
    the listing that would be held is bounded by one page (the rest of a
    10^6-entry directory is never fetched); its names keep their HEAD +
    LIST, and it is not tried again within list_ttl."""
    srv = storaged(ndrives=4)
    c = srv.client()
    bucket = "lp-" + uuid.uuid4().hex[:8]
    c.create_bucket(Bucket=bucket)

    def put(k):
        for i in range(k, 1001, 8):
            c.put_object(Bucket=bucket, Key="big/f%04d" % i, Body=b"%d" % i)
    ths = [threading.Thread(target=put, args=(k,)) for k in range(8)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    m = ecfs_mount(srv.endpoint, bucket, access_key=srv.access_key,
                   secret_key=srv.secret_key)
    assert os.path.isdir(os.path.join(m.path, "big"))
    s0 = m.stats()
    n = 3 * LOOKUP_LIST
    for i in range(n):
        with open(os.path.join(m.path, "big", "f%04d" % (i * 37)), "rb") as f:
            assert f.read() == b"%d" % (i * 37)
    s1 = m.stats()
    assert s1["lookup_lists"] == s0["lookup_lists"] == 0, (s0, s1)
    assert s1["head"] - s0["head"] == n, (s0, s1)
    # one LIST per name, and the one page that showed it is too big
    assert s1["list"] - s0["list"] == n + 1, (s0, s1)
