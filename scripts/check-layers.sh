#!/bin/sh
# scripts/check-layers.sh - the layering rule of storaged/ (ARCHITECTURE.md
# "Layers"), run by `make check-fast` and `make check`: a file in one of
# storaged's folders (http/ the transport, s3/ the application, store/ the
# object layer) includes headers of another folder only through that
# folder's declared interface, and storaged/main.c (on top) only the
# folders' public headers. Includes by a relative path ("../x.h") are
# refused everywhere in storaged/: they would hide a crossing.
#
# Usage: scripts/check-layers.sh [FILE...]   (default: every storaged/ .c
# and .h). Run from the repository root. Exits 0 when every include keeps to
# the rule, 1 otherwise (each offending line is printed as file:line).
set -u

# The declared interfaces any folder may include from another.
INTERFACES="storaged/store/object.h storaged/store/obj_nb.h storaged/http/http.h"
# What main.c may include besides those: the folders' public headers (the
# S3 application's hook table, the store's entry points for the inspect
# subcommand and the drive-argument expansion, the transport's TLS context
# that --tls-cert/--tls-key build).
MAIN_PUBLIC="storaged/s3/s3.h storaged/store/inspect.h storaged/store/drive.h storaged/http/tls.h"

if [ $# -eq 0 ]; then
    set -- storaged/*.c storaged/*.h storaged/*/*.c storaged/*/*.h
fi

allowed() { # allowed WORD LIST...
    w=$1
    shift
    for a in "$@"; do
        [ "$w" = "$a" ] && return 0
    done
    return 1
}

fail=0
n=0
for f in "$@"; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    dir=$(dirname "$f")
    # every quoted include, as "LINE INCLUDED-PATH"
    out=$(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
        sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1 \2/')
    [ -n "$out" ] || continue
    while read -r line inc; do
        case $inc in
        ../* | */../* | ./*)
            echo "check-layers: $f:$line: relative include \"$inc\"" >&2
            fail=1
            continue
            ;;
        storaged/*) ;;
        *) continue ;; # common/, system-like project headers
        esac
        idir=$(dirname "$inc")
        [ "$idir" = "$dir" ] && continue # same folder
        if [ "$f" = storaged/main.c ]; then
            allowed "$inc" $INTERFACES $MAIN_PUBLIC && continue
        else
            allowed "$inc" $INTERFACES && continue
        fi
        echo "check-layers: $f:$line: includes \"$inc\" across folders" >&2
        fail=1
    done <<EOF
$out
EOF
done
if [ $fail -ne 0 ]; then
    echo "check-layers: across folders include only $INTERFACES" \
        "(main.c also: $MAIN_PUBLIC); see ARCHITECTURE.md, Layers" >&2
    exit 1
fi
echo "check-layers: $n files keep to the layers"
