# tests/fuzz/fuzz_NAME.c -> build/fuzz/fuzz_NAME (libFuzzer) and a replayer
FUZZ_TARGETS += $(basename $(notdir $(wildcard tests/fuzz/fuzz_*.c)))
