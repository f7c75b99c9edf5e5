#!/usr/bin/env bash
# tests/bench/bench_ec.sh - builds and runs tests/bench/bench_ec.c against
# the release build of the object layer and prints its tables (markdown).
#   tests/bench/bench_ec.sh [PUTS_PER_FIGURE [OBJECTS_FOR_LISTING [CODEC_SECONDS]]]
# Defaults: 2000 4 KiB PUTs per figure, 100000 objects, 1 s per codec figure.
# BENCH_DIR picks where the temp drive directories go (default /tmp).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
make -s -j2 build/rel/libstoraged.a build/rel/libcommon.a
mkdir -p build/rel/bench
cc -O2 -g -std=c11 -D_GNU_SOURCE -I. -pthread -o build/rel/bench/bench_ec \
    tests/bench/bench_ec.c build/rel/libstoraged.a build/rel/libcommon.a \
    $(pkg-config --libs libcurl openssl expat liburing) -lisal -llmdb -lm
exec build/rel/bench/bench_ec "$@" 2> >(grep -v ' INFO ' >&2)
