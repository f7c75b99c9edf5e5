#!/bin/sh
# scripts/check-headers.sh - header discipline (STYLE.md 8.3), run by
# `make check`: every project header compiles on its own (it includes what
# it uses), survives being included twice (it has a guard), and its guard
# follows its path (common/buf.h -> COMMON_BUF_H).
#
# Usage: scripts/check-headers.sh [HEADER...]   (default: common/*.h
# storaged/*.h storaged/*/*.h fuse/*.h). Run from the repository root. Each header is
# compiled by cc and, when installed, clang (the fuzz build's compiler), or
# by $CC alone when set; CFLAGS_EXTRA may add flags. The flags match the
# Makefile's CSTD and include path, with -Wall -Wextra -Werror.
# Exits 0 when every header passes, 1 otherwise (each failure is printed).
set -u

if [ -n "${CC:-}" ]; then
    CCS=$CC
elif command -v clang >/dev/null 2>&1; then
    CCS="cc clang"
else
    CCS=cc
fi
PKGS="fuse3 libcurl openssl expat liburing"
PKG_CFLAGS=$(pkg-config --cflags $PKGS 2>/dev/null)
FLAGS="-std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -I. $PKG_CFLAGS -Wall -Wextra -Werror -fsyntax-only ${CFLAGS_EXTRA:-}"

if [ $# -eq 0 ]; then
    set -- common/*.h storaged/*.h storaged/*/*.h fuse/*.h
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0
n=0
for h in "$@"; do
    [ -f "$h" ] || continue
    n=$((n + 1))
    guard=$(printf '%s' "$h" | tr 'a-z/.-' 'A-Z___')
    if ! grep -q "^#ifndef $guard\$" "$h" ||
        ! grep -q "^#define $guard\$" "$h"; then
        echo "check-headers: $h: include guard is not $guard" >&2
        fail=1
    fi
    src="$tmp/one.c"
    printf '#include "%s"\n#include "%s"\n' "$h" "$h" >"$src"
    for cc in $CCS; do
        # shellcheck disable=SC2086 # FLAGS is a word list on purpose
        if ! $cc $FLAGS -c "$src" -o /dev/null 2>"$tmp/err"; then
            echo "check-headers: $h does not compile alone ($cc):" >&2
            sed 's/^/    /' "$tmp/err" >&2
            fail=1
        fi
    done
done
if [ $fail -eq 0 ]; then
    echo "check-headers: $n headers compile alone ($CCS), guards match paths"
fi
exit $fail
