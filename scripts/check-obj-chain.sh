#!/bin/sh
# scripts/check-obj-chain.sh - the object layer's files call one way
# (issue 12; storaged/README.md "The object layer's chain"), run by
# `make check-fast` and `make check`: each storaged/store/*.c has a rank,
# and a file may call (by an undefined symbol in its object, resolved to
# another file's definition) only files of a lower rank, so the calls form
# a chain with no cycle:
#
#   0 drive.c meta.c ec.c placement.c   drives, records, codec, placement
#   1 gsync.c inspect.c obj_ent.c       group commit; inspect; entries
#   2 obj_idx.c                         the LMDB index
#   3 obj_store.c                       the core: buckets, current entry
#   4 obj_ext.c obj_ver.c obj_jnl.c     extent files; versions kept in place;
#                                       the meta journal
#   5 obj_io.c                          PUT / GET / DELETE, commit
#   6 obj_mpu.c                         multipart
#   7 obj_list.c obj_heal.c obj_load.c  listing, heal + scanner, start-up
#   8 obj_open.c                        open / close, `storaged index`
#
# A file not in the table fails too (give a new file its rank here and in
# storaged/README.md). Each file is compiled at -O0 into a temp directory
# (the Makefile's CSTD and include path) and read with nm.
# Usage: scripts/check-obj-chain.sh   (from the repository root)
# Exits 0 when every call goes down the chain, 1 otherwise (each call that
# does not is printed with its symbol).
set -u

RANKS="drive:0 meta:0 ec:0 placement:0 gsync:1 inspect:1 obj_ent:1
obj_idx:2 obj_store:3 obj_ext:4 obj_ver:4 obj_jnl:4 obj_io:5 obj_mpu:6 obj_list:7
obj_heal:7 obj_load:7 obj_open:8"
PKGS="fuse3 libcurl openssl expat liburing"
PKG_CFLAGS=$(pkg-config --cflags $PKGS 2>/dev/null)
FLAGS="-std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -I. $PKG_CFLAGS -O0 -w"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
# shellcheck disable=SC2086 # FLAGS is a word list on purpose
if ! ls storaged/store/*.c | xargs -P 2 -I{} sh -c \
    'cc '"$FLAGS"' -c "$1" -o "$2/$(basename "$1" .c).o" || exit 255' _ {} "$tmp"; then
    echo "check-obj-chain: a storaged/store file does not compile" >&2
    exit 1
fi
rank() { # rank NAME -> prints the rank or nothing
    for r in $RANKS; do
        [ "${r%%:*}" = "$1" ] && echo "${r##*:}" && return
    done
}
fail=0
for o in "$tmp"/*.o; do
    n=$(basename "$o" .o)
    if [ -z "$(rank "$n")" ]; then
        echo "check-obj-chain: storaged/store/$n.c has no rank in" \
            "scripts/check-obj-chain.sh" >&2
        fail=1
    fi
    nm "$o" | awk -v f="$n" '$2 ~ /^[TDBR]$/ { print $3, f }'
done >"$tmp/defs"
[ $fail -eq 0 ] || exit 1
for o in "$tmp"/*.o; do
    n=$(basename "$o" .o)
    r=$(rank "$n")
    nm -u "$o" | awk '{ print $NF }' | sort -u >"$tmp/und"
    # symbol file: the calls of this file into another one
    sort -k1,1 "$tmp/defs" | join "$tmp/und" - | while read -r sym to; do
        [ "$to" = "$n" ] && continue
        tr=$(rank "$to")
        if [ "$tr" -ge "$r" ]; then
            echo "check-obj-chain: storaged/store/$n.c (rank $r) calls" \
                "$sym of $to.c (rank $tr): not down the chain" >&2
            echo x
        fi
    done >>"$tmp/bad"
done
if [ -s "$tmp/bad" ]; then
    echo "check-obj-chain: the object layer's files must call one way" \
        "(see the table in scripts/check-obj-chain.sh)" >&2
    exit 1
fi
echo "check-obj-chain: $(ls "$tmp"/*.o | wc -l) storaged/store files call" \
    "down the chain, no cycle"
