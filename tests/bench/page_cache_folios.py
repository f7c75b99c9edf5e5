#!/usr/bin/python3
"""tests/bench/page_cache_folios.py - the folio sizes the kernel page cache
holds for a file (root: reads /proc/self/pagemap and /proc/kpageflags).

Why: a warm sequential read through FUSE costs the kernel ~4x the CPU per
MiB of ext4 on kernel 6.18 (bench_loader.py seq), because FUSE's page cache
holds 4 KiB folios where ext4 uses large ones (issue 14). This tells, on any
kernel, whether a FUSE mount's files now get large folios:

    tests/bench/page_cache_folios.py MNT/shard.tar /local/copy/shard.tar

For each file: it maps the file (private, read-only use: no page is
copied), touches every page (a file already read is not read again), and
prints how many of its pages sit in folios of each size. A page outside any
large folio counts as a 4 KiB folio."""

import collections
import ctypes
import mmap
import os
import struct
import sys

PAGE = os.sysconf("SC_PAGE_SIZE")
KPF_COMPOUND_HEAD = 1 << 15
KPF_COMPOUND_TAIL = 1 << 16


def folio_pages(path):
    """Counter {folio size in KiB: pages of @path in folios of that size}
    of the resident pages, and the number of pages not resident."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return collections.Counter(), 0
        m = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)
    try:
        npages = (size + PAGE - 1) // PAGE
        view = memoryview(m)
        for off in range(0, size, PAGE):  # fault every page in
            view[off]
        base = ctypes.addressof(ctypes.c_char.from_buffer(m))
        with open("/proc/self/pagemap", "rb") as pm:
            pm.seek(base // PAGE * 8)
            ents = struct.unpack("<%dQ" % npages, pm.read(8 * npages))
        flags = []
        with open("/proc/kpageflags", "rb") as kf:
            for e in ents:
                if not e >> 63 & 1:  # not present
                    flags.append(None)
                    continue
                kf.seek((e & ((1 << 55) - 1)) * 8)
                flags.append(struct.unpack("<Q", kf.read(8))[0])
        del view
    finally:
        m.close()
    out = collections.Counter()
    absent = 0
    i = 0
    while i < npages:
        fl = flags[i]
        if fl is None:
            absent += 1
            i += 1
            continue
        n = 1
        if fl & KPF_COMPOUND_HEAD:
            while (i + n < npages and flags[i + n] is not None
                   and flags[i + n] & KPF_COMPOUND_TAIL):
                n += 1
        # a run cut by the file's end or the start of the mapping still
        # counts as its visible length
        out[n * PAGE // 1024] += n
        i += n
    return out, absent


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) > 1 else 2
    for path in sys.argv[1:]:
        try:
            sizes, absent = folio_pages(path)
        except OSError as e:
            print("%s: %s" % (path, e), file=sys.stderr)
            return 1
        total = sum(sizes.values())
        parts = ", ".join("%d KiB folios %.1f%%" % (k, 100.0 * v / total)
                          for k, v in sorted(sizes.items()))
        print("%s: %d pages resident (%s)%s" % (
            path, total, parts or "none",
            "; %d not resident" % absent if absent else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
