/* tests/fuzz/fuzz.h - the libFuzzer entry points, declared once for every
 * target (tests/fuzz/fuzz_NAME.c defines LLVMFuzzerTestOneInput) and for
 * replay_main.c, which calls them without libFuzzer. A target must not
 * assume its input is NUL-terminated. */
#ifndef TESTS_FUZZ_FUZZ_H
#define TESTS_FUZZ_FUZZ_H
#include <stddef.h>
#include <stdint.h>

/* Runs one input; returns 0 (libFuzzer reserves other values). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional per-target setup; weak, so replay_main.c sees NULL when a target
 * does not define it. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));
#endif /* TESTS_FUZZ_FUZZ_H */
