#!/bin/sh
# scripts/check-banned.sh - the banned-function grep (STYLE.md 8.12, after
# curl's checksrc), run by `make check`.
#
# Banned, with what to use instead:
#   strcpy, strcat     -> memcpy with a known length, cm_buf, snprintf
#   sprintf, vsprintf  -> snprintf / vsnprintf (bounded) or cm_buf_appendf
#   strtok             -> strtok_r or explicit memchr parsing (not reentrant)
#   atoi, atol, atoll  -> strtol/strtoul with errno and end-pointer checks
#                         (atoi has undefined behaviour on overflow and no
#                         way to report garbage)
#   gets               -> fgets / getline
#
# Usage: scripts/check-banned.sh [FILE...]   (default: every .c/.h under
# common/ storaged/ fuse/ tests/unit/ tests/fuzz/). Run from the repository
# root. Prints FILE:LINE:text for each use and exits 1 if there is any.
set -u

if [ $# -eq 0 ]; then
    set -- $(find common storaged fuse tests/unit tests/fuzz \
        -name '*.[ch]' 2>/dev/null | sort)
fi
[ $# -gt 0 ] || { echo "check-banned: no sources" >&2; exit 1; }

# A call is the name as a whole word followed by '(' (so snprintf, fgets
# and strtok_r pass). Lines whose first non-blank characters open or
# continue a comment are skipped, so prose may name the functions.
pattern='(^|[^A-Za-z0-9_])(strcpy|strcat|sprintf|vsprintf|strtok|atoi|atol|atoll|gets)[[:space:]]*\('
hits=$(grep -nE "$pattern" "$@" /dev/null | grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/\*|\*|//)')
if [ -n "$hits" ]; then
    echo "check-banned: banned functions in use (see scripts/check-banned.sh):" >&2
    printf '%s\n' "$hits" >&2
    exit 1
fi
echo "check-banned: $# files, no banned functions"
exit 0
