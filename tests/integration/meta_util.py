"""Rewriting meta records on the drives behind a stopped server's back
(storaged/FORMAT.md, "The meta record"), for tests that play a writer
with access to the drives: a size, the one part's size and stored headers
are changed and the record's CRC is made right again, so the store takes
the record as genuine. Run ``storaged index rebuild`` afterwards: the
index is a copy of the metas and is trusted after a clean stop."""
import glob
import os
import struct


def crc64_xz(data, _table=[]):
    """isa-l's crc64_ecma_refl with seed 0 (CRC-64/XZ)."""
    if not _table:
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ (0xC96C5795D7870F42 if c & 1 else 0)
            _table.append(c)
    crc = 0xFFFFFFFFFFFFFFFF
    for b in data:
        crc = _table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFFFFFFFFFF


def _check_crc(rec):
    assert rec[:8] == b"ECFSMET1"
    stored = struct.unpack_from("<Q", rec, 16)[0]
    zeroed = bytes(rec[:16]) + b"\0" * 8 + bytes(rec[24:])
    assert crc64_xz(zeroed) == stored, "CRC model differs from FORMAT.md"


def rewrite(path, key, size=None, headers=None, parts=None):
    """Rewrites the meta record at @path when it is @key's (bytes): @size
    (also the one part's size, if it has one and @keep_parts is not
    given), @headers, a function from the list of (name, value) byte pairs
    to a new list, and @parts, one from the list of encoded part entries
    (number, size, data id, ETag) to a new list. True when it did."""
    rec = bytearray(open(path, "rb").read())
    _check_crc(rec)
    at = 56
    at += 1 + rec[at]                                   # ETag
    klen = struct.unpack_from("<H", rec, at)[0]
    if bytes(rec[at + 2:at + 2 + klen]) != key:
        return False
    at += 2 + klen
    h_at = at
    hs = []
    nh = struct.unpack_from("<H", rec, at)[0]
    at += 2
    for _ in range(nh):
        n = struct.unpack_from("<H", rec, at)[0]
        name = bytes(rec[at + 2:at + 2 + n])
        at += 2 + n
        n = struct.unpack_from("<I", rec, at)[0]
        hs.append((name, bytes(rec[at + 4:at + 4 + n])))
        at += 4 + n
    nparts = struct.unpack_from("<H", rec, at)[0]
    ps = []
    p_at = at + 2
    for _ in range(nparts):
        n = 4 + 8 + 8 + 1 + rec[p_at + 20]
        ps.append(bytearray(rec[p_at:p_at + n]))
        p_at += n
    tail = rec[p_at:]                                   # inline
    if size is not None:
        struct.pack_into("<Q", rec, 48, size)
        if parts is None:
            assert nparts <= 1  # one part, or none (inline)
            if nparts:
                struct.pack_into("<Q", ps[0], 4, size)
    if parts is not None:
        ps = parts(ps)
    if headers is not None:
        hs = headers(hs)
    out = bytearray(rec[:h_at]) + struct.pack("<H", len(hs))
    for name, value in hs:
        out += struct.pack("<H", len(name)) + name
        out += struct.pack("<I", len(value)) + value
    out += struct.pack("<H", len(ps)) + b"".join(ps) + tail
    struct.pack_into("<I", out, 8, len(out))
    out[16:24] = b"\0" * 8
    struct.pack_into("<Q", out, 16, crc64_xz(bytes(out)))
    open(path, "wb").write(bytes(out))
    return True


def rewrite_all(drives, bucket, key, **kw):
    """rewrite() on every drive's meta of @bucket/@key; how many."""
    n = 0
    for d in drives:
        for m in glob.glob(os.path.join(d, "b", bucket, "*", "*.m")):
            n += rewrite(m, key, **kw)
    return n
