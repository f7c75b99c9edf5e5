#!/bin/sh
# scripts/check-headers.sh - header discipline (STYLE.md 8.3), run by
# `make check-fast` and `make check`:
#
# 1. every project header compiles on its own (it includes what it uses),
#    survives being included twice (it has a guard), and its guard follows
#    its path (common/buf.h -> COMMON_BUF_H);
# 2. no .c file declares a non-static function (STYLE.md 8.13: a prototype
#    copied into a .c is never checked against the definition, and the two
#    drift apart silently; declare it once, in the module's header or
#    *_i.h). gcc's -aux-info lists every function declaration a
#    translation unit makes, with its file:line and whether it is a
#    definition (F) or a declaration (C); a non-static declaration whose
#    line is in the .c itself fails, at file scope or in a block.
#
# Usage: scripts/check-headers.sh [FILE...]   (default: the headers
# common/*.h storaged/*.h storaged/*/*.h fuse/*.h tests/fuzz/*.h, and the
# sources common/ storaged/ fuse/ tests/unit/ tests/fuzz/ *.c; the unit
# tests' helper headers are written to follow cmocka's prelude and are not
# compiled alone). Run from the repository root. Each header is compiled
# by cc and, when installed, clang (the fuzz build's compiler), or by $CC
# alone when set; the prototype rule needs gcc (skipped, with a note,
# without it). CFLAGS_EXTRA may add flags. The flags match the Makefile's
# CSTD and include path, with -Wall -Wextra -Werror.
# Exits 0 when every file passes, 1 otherwise (each failure is printed).
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
    set -- common/*.h storaged/*.h storaged/*/*.h fuse/*.h tests/fuzz/*.h \
        common/*.c storaged/*.c storaged/*/*.c fuse/*.c \
        tests/unit/*.c tests/fuzz/*.c
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0
n=0
nc=0
for h in "$@"; do
    [ -f "$h" ] || continue
    case $h in
    *.c) continue ;;
    esac
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

# Rule 2: no non-static function declared in a .c file.
GCC=
for g in ${CC:-} gcc; do
    if $g --version 2>/dev/null | grep -qi 'free software foundation'; then
        GCC=$g
        break
    fi
done
if [ -z "$GCC" ]; then
    echo "check-headers: no gcc: the no-prototype-in-a-.c rule is skipped" >&2
fi
for c in "$@"; do
    [ -n "$GCC" ] && [ -f "$c" ] || continue
    case $c in
    *.c) ;;
    *) continue ;;
    esac
    nc=$((nc + 1))
    # shellcheck disable=SC2086 # FLAGS is a word list on purpose
    if ! $GCC $FLAGS -aux-info "$tmp/aux" "$c" -o /dev/null 2>"$tmp/err"; then
        echo "check-headers: $c does not compile ($GCC):" >&2
        sed 's/^/    /' "$tmp/err" >&2
        fail=1
        continue
    fi
    # lines look like: /* FILE:LINE:NC */ extern int f (int);
    bad=$(grep -F "/* $c:" "$tmp/aux" | grep -E '^/\* [^ ]+:[0-9]+:[NOI]C \*/' |
        grep -vE '^/\* [^ ]+ \*/ static ')
    if [ -n "$bad" ]; then
        echo "check-headers: $c declares non-static functions; declare them" \
            "once in the module's header:" >&2
        printf '%s\n' "$bad" | sed -E 's|^/\* ([^ ]+):([A-Z]+) \*/ (extern )?|    \1: |' >&2
        fail=1
    fi
done

if [ $fail -eq 0 ]; then
    echo "check-headers: $n headers compile alone ($CCS), guards match paths;" \
        "$nc .c files declare no non-static function (${GCC:-skipped})"
fi
exit $fail
