#!/usr/bin/env bash
# tests/bench/bench_policy.sh - builds and runs tests/bench/bench_policy.c
# (the cost of one policy decision) against the release build.
#   tests/bench/bench_policy.sh [ROUNDS [EVALS_PER_ROUND]]
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
make -s -j2 build/rel/libstoraged.a build/rel/libcommon.a
mkdir -p build/rel/bench
cc -O2 -g -std=c11 -D_GNU_SOURCE -I. -pthread -o build/rel/bench/bench_policy \
    tests/bench/bench_policy.c build/rel/libstoraged.a build/rel/libcommon.a \
    $(pkg-config --libs jansson) -lm
exec build/rel/bench/bench_policy "$@"
