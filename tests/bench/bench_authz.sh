#!/usr/bin/env bash
# tests/bench/bench_authz.sh - builds and runs tests/bench/bench_authz.c (a
# presigned GET's parse, SigV4 and authorisation, root against a user with
# a 10-statement policy) against the release build.
#   tests/bench/bench_authz.sh [ROUNDS [REQUESTS_PER_ROUND]]
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
make -s -j2 build/rel/libstoraged.a build/rel/libcommon.a
mkdir -p build/rel/bench
cc -O2 -g -std=c11 -D_GNU_SOURCE -I. -pthread -o build/rel/bench/bench_authz \
    tests/bench/bench_authz.c build/rel/libstoraged.a build/rel/libcommon.a \
    $(pkg-config --libs libcurl openssl expat liburing jansson) -lisal -llmdb -lm
exec build/rel/bench/bench_authz "$@" 2> >(grep -v ' INFO ' >&2)
