# ecfs - top-level, non-recursive Makefile. Each folder adds its sources in
# its module.mk; every object lands under $(BUILD) so a sanitized build
# (make SAN=address ...) never mixes with the normal one.
#
#   make            bin/storaged bin/ecfs
#   make test       install deps, build, unit tests, integration tests
#   make check-fast the quick gates (CI runs it after make test): ASan+UBSan
#                   unit tests and corpus replay, header/layer/banned-function
#                   checks, format-check
#   make check      check-fast's checks plus the sanitized integration run
#   make fuzz       libFuzzer targets with clang, each run FUZZ_SECONDS
#   make run/stop   the main job (see README.md)

CC      ?= cc
PREFIX  ?= /usr/local
PYTHON  ?= /usr/bin/python3
FUZZ_SECONDS ?= 20

CSTD  := -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64
WARN  := -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
         -Wold-style-definition -Wpointer-arith -Wcast-qual -Wwrite-strings -Wformat=2 \
         -Wundef -Wvla -Wimplicit-fallthrough -Wnull-dereference
ifneq (,$(findstring clang,$(shell $(CC) --version 2>/dev/null)))
  # uthash's Jenkins hash (HASH_JEN) falls through between switch labels, and clang, unlike
  # gcc, reports that inside the system header's macro at every HASH_FIND. gcc, which CI
  # uses, keeps -Wimplicit-fallthrough for our own code.
  WARN += -Wcomma -Wno-implicit-fallthrough
else
  WARN += -Wduplicated-cond -Wduplicated-branches -Wlogical-op -Wjump-misses-init
endif

ifeq ($(SAN),address)
  SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
  BUILD    ?= build/asan
else ifeq ($(SAN),thread)
  SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer
  BUILD    ?= build/tsan
else ifneq ($(SAN),)
  $(error unknown SAN=$(SAN); use address or thread)
else
  BUILD    ?= build/rel
endif

# Where the binaries go: bin/ for the normal build, $(BUILD)/bin otherwise.
ifeq ($(SAN),)
  BINDIR := bin
else
  BINDIR := $(BUILD)/bin
endif

PKGS      := fuse3 libcurl openssl expat liburing jansson
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

CFLAGS  ?= -O2 -g
CFLAGS  += $(CSTD) $(WARN) $(SANFLAGS) $(if $(WERROR),-Werror) -MMD -MP -I. $(PKG_CFLAGS) -pthread
LDFLAGS += $(SANFLAGS) -pthread
LDLIBS  := $(PKG_LIBS) -lisal -llmdb -lm

.PHONY: check-clang all test check check-fast check-static unit integration fuzz replay format \
        format-check install clean run stop bench deps
all: $(BINDIR)/storaged $(BINDIR)/ecfs

COMMON_SRCS :=
STORAGED_SRCS :=
STORAGED_MAIN :=
ECFS_SRCS :=
ECFS_MAIN :=
UNIT_TESTS :=
FUZZ_TARGETS :=
include common/module.mk
include storaged/module.mk
include fuse/module.mk
include tests/unit/module.mk
include tests/fuzz/module.mk

obj = $(patsubst %.c,$(BUILD)/%.o,$(1))

LIBCOMMON   := $(BUILD)/libcommon.a
LIBSTORAGED := $(BUILD)/libstoraged.a
LIBECFS     := $(BUILD)/libecfs.a

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(LIBCOMMON): $(call obj,$(COMMON_SRCS))
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^
$(LIBSTORAGED): $(call obj,$(STORAGED_SRCS))
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^
$(LIBECFS): $(call obj,$(ECFS_SRCS))
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(BINDIR)/storaged: $(call obj,$(STORAGED_MAIN)) $(LIBSTORAGED) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BINDIR)/ecfs: $(call obj,$(ECFS_MAIN)) $(LIBECFS) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Unit tests: tests/unit/NAME.c -> $(BUILD)/tests/NAME, linked with every
# library (the linker pulls only what the test uses) and cmocka.
UNIT_BINS := $(patsubst %,$(BUILD)/tests/%,$(UNIT_TESTS))
$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(LIBSTORAGED) $(LIBECFS) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

# common/'s own tests link libcommon alone, so they keep building while
# another folder is mid-change (a static pattern rule beats the one above).
COMMON_UNIT_BINS := $(filter $(BUILD)/tests/common_%_test $(BUILD)/tests/sigv4_test,$(UNIT_BINS))
$(COMMON_UNIT_BINS): $(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

deps:
	@scripts/install-deps

# Unit tests run from the repository root; each binary prints cmocka's summary.
unit: $(UNIT_BINS)
	@fail=0; for t in $(UNIT_BINS); do \
	  echo "== $$t"; $$t || fail=1; done; exit $$fail

integration: all
	ECFS_BIN_DIR=$(abspath $(BINDIR)) $(PYTHON) -m pytest -q -p no:cacheprovider tests/integration $(PYTEST_ARGS)

test: deps
	$(MAKE) all
	$(MAKE) unit
	$(MAKE) integration

# make check: the unit tests, the corpus replay and the integration suite on
# a sanitized build (SAN=address by default: ASan+UBSan+LSan; SAN=thread for
# TSan), plus the header and banned-function checks. Any sanitizer report
# fails it: foreground programs abort (-fno-sanitize-recover, halt_on_error),
# and the background daemons (storaged, ecfs) write reports to
# $(CHECK_SANLOG)/san.PID, which tests/integration/sanitizer_check.py turns
# into a failed test and the last step below re-checks.
CHECK_SAN    := $(or $(SAN),address)
CHECK_BUILD  := $(if $(filter thread,$(CHECK_SAN)),build/tsan,build/asan)
CHECK_SANLOG := $(abspath $(CHECK_BUILD)/san-logs)
SAN_MARKERS  := ERROR: AddressSanitizer|ERROR: LeakSanitizer|ThreadSanitizer|runtime error:
SAN_ENV = ECFS_SAN=$(CHECK_SAN) \
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1$(1) \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$(abspath tests/ubsan.supp)$(1) \
  LSAN_OPTIONS=suppressions=$(abspath tests/lsan.supp):print_suppressions=0 \
  TSAN_OPTIONS=second_deadlock_stack=1:history_size=4:suppressions=$(abspath tests/tsan.supp)$(1)
check: deps
	$(MAKE) SAN=$(CHECK_SAN) all
	$(call SAN_ENV,) $(MAKE) SAN=$(CHECK_SAN) unit replay
	$(MAKE) check-static
	rm -rf $(CHECK_SANLOG) && mkdir -p $(CHECK_SANLOG)
	$(call SAN_ENV,:log_path=$(CHECK_SANLOG)/san) ECFS_SAN_LOG_DIR=$(CHECK_SANLOG) \
	  $(MAKE) SAN=$(CHECK_SAN) integration
	@if grep -lE '$(SAN_MARKERS)' $(CHECK_SANLOG)/* 2>/dev/null; then \
	  echo "check: sanitizer reports above in $(CHECK_SANLOG)" >&2; exit 1; fi
	@echo "check: OK ($(CHECK_SAN))"

# make check-fast: the gates CI runs after make test, in a few minutes (see
# tests/README.md for the time): the unit tests and every fuzz corpus on an
# ASan+UBSan build (a report aborts), then check-static. No integration run:
# that is make check.
check-fast: deps
	$(call SAN_ENV,) $(MAKE) SAN=address unit replay
	$(MAKE) check-static
	$(MAKE) check-clang
	@echo "check-fast: OK"

# Both programs built by clang with every warning an error (clang's -Wcomma
# and its own flow checks see what gcc does not), into build/clang, so bin/
# keeps the gcc build.
check-clang:
	$(MAKE) CC=clang WERROR=1 BUILD=build/clang BINDIR=build/clang/bin all

# The checks that build nothing: every header compiles alone and no .c
# declares a non-static function (check-headers.sh), storaged's folders
# include each other only through their interfaces (check-layers.sh), the
# object layer's files call one way (check-obj-chain.sh: nm of objects it
# compiles into a temp dir), no banned function (check-banned.sh), every
# source as .clang-format says.
check-static:
	scripts/check-headers.sh
	scripts/check-layers.sh
	scripts/check-obj-chain.sh
	scripts/check-banned.sh
	$(MAKE) format-check

# Fuzzing: libFuzzer targets built with clang; corpora replayed by replay.
# Sources are instrumented once into build/fuzz/obj and archived, so a
# target links only the objects it uses (an unrelated half-finished file in
# storaged/ cannot break the SigV4 fuzzer's link).
FUZZ_CFLAGS := $(CSTD) -I. $(PKG_CFLAGS) -g -O1 -MMD -MP -pthread \
               -fsanitize=fuzzer-no-link,address,undefined
FUZZ_LDFLAGS := -fsanitize=fuzzer,address,undefined -pthread
fuzzobj = $(patsubst %.c,build/fuzz/obj/%.o,$(1))
FUZZ_BINS := $(patsubst %,build/fuzz/%,$(FUZZ_TARGETS))
build/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -c -o $@ $<
build/fuzz/libcommon.a: $(call fuzzobj,$(COMMON_SRCS))
	$(AR) rcs $@ $^
build/fuzz/libstoraged.a: $(call fuzzobj,$(STORAGED_SRCS))
	$(AR) rcs $@ $^
build/fuzz/libecfs.a: $(call fuzzobj,$(ECFS_SRCS))
	$(AR) rcs $@ $^
$(FUZZ_BINS): build/fuzz/%: build/fuzz/obj/tests/fuzz/%.o build/fuzz/libstoraged.a build/fuzz/libecfs.a build/fuzz/libcommon.a
	clang $(FUZZ_LDFLAGS) -o $@ $^ $(LDLIBS)
# Each target runs FUZZ_SECONDS on a scratch corpus (build/fuzz/corpus-NAME,
# where new inputs go) seeded from tests/fuzz/corpus/NAME when present, with
# tests/fuzz/NAME.dict (else http.dict) as its dictionary when present.
# Crash inputs land in build/fuzz/artifacts/; the first crash fails the run.
fuzz: deps $(FUZZ_BINS)
	@mkdir -p build/fuzz/artifacts
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p build/fuzz/corpus-$$t; \
	  seed=tests/fuzz/corpus/$$t; [ -d $$seed ] || seed=; \
	  dict=tests/fuzz/$$t.dict; [ -f $$dict ] || dict=tests/fuzz/http.dict; \
	  if [ -f $$dict ]; then dict=-dict=$$dict; else dict=; fi; \
	  echo "== fuzz $$t for $(FUZZ_SECONDS)s $$dict"; \
	  build/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
	    -print_final_stats=1 -artifact_prefix=build/fuzz/artifacts/$$t- \
	    $$dict build/fuzz/corpus-$$t $$seed || exit 1; done

REPLAY_BINS := $(patsubst %,$(BUILD)/fuzz/replay-%,$(FUZZ_TARGETS))
$(BUILD)/fuzz/replay-%: $(BUILD)/tests/fuzz/%.o $(BUILD)/tests/fuzz/replay_main.o $(LIBSTORAGED) $(LIBECFS) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
# keep the replay objects (make would delete them as intermediates)
.SECONDARY: $(patsubst %,$(BUILD)/tests/fuzz/%.o,$(FUZZ_TARGETS) replay_main)
# make replay: every saved input (tests/fuzz/corpus/NAME/*) through its
# target, built with $(CC) and no libFuzzer; a target without a corpus
# yet is skipped with a note, a crash or sanitizer report fails.
replay: $(REPLAY_BINS)
	@for t in $(FUZZ_TARGETS); do \
	  if [ ! -d tests/fuzz/corpus/$$t ]; then \
	    echo "== replay $$t: no tests/fuzz/corpus/$$t, skipped"; continue; fi; \
	  echo "== replay $$t: $$(ls tests/fuzz/corpus/$$t | wc -l) inputs"; \
	  $(BUILD)/fuzz/replay-$$t tests/fuzz/corpus/$$t || exit 1; done

# make format rewrites FORMAT_FILES (default: every C source and header) with
# .clang-format; make format-check changes nothing, names each file that
# differs with its number of differing spots, and fails if any does
# (FORMAT_VERBOSE=1 prints clang-format's diagnostics too).
SRC_FILES = $(wildcard common/*.[ch] storaged/*.[ch] storaged/*/*.[ch] fuse/*.[ch] tests/unit/*.[ch] tests/fuzz/*.[ch])
FORMAT_FILES ?= $(SRC_FILES)
format:
	clang-format -i $(FORMAT_FILES)
format-check:
	@bad=0; for f in $(FORMAT_FILES); do \
	  out=$$(clang-format --dry-run --Werror $$f 2>&1); rc=$$?; \
	  n=$$(printf '%s\n' "$$out" | grep -c 'clang-format-violations'); \
	  if [ $$rc != 0 ]; then bad=$$((bad + 1)); \
	    if [ $$n = 0 ]; then echo "format-check: $$f: clang-format failed:"; \
	      printf '%s\n' "$$out" | head -5; \
	    else echo "format-check: $$f: $$n spot(s) differ from .clang-format"; fi; \
	    [ -z "$(FORMAT_VERBOSE)" ] || clang-format --dry-run $$f; fi; \
	done; \
	if [ $$bad != 0 ]; then echo "format-check: $$bad file(s) need make format" >&2; exit 1; fi; \
	echo "format-check: $(words $(FORMAT_FILES)) files clean"

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
	  $(DESTDIR)$(PREFIX)/share/man/man8 $(DESTDIR)/sbin
	install -m 755 bin/storaged bin/ecfs $(DESTDIR)$(PREFIX)/bin/
	install -m 644 man/ecfs.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 man/storaged.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	install -m 755 scripts/mount.fuse.ecfs $(DESTDIR)/sbin/mount.fuse.ecfs

run: deps all
	@scripts/run
stop:
	@scripts/stop
bench: deps all
	@scripts/bench $(BENCH_ARGS)

clean:
	rm -rf build bin

-include $(shell find build -name '*.d' 2>/dev/null)
