/* common/compiler.h - attributes and tiny macros used everywhere.
 * No code, no state: safe to include from any header. */
#ifndef COMMON_COMPILER_H
#define COMMON_COMPILER_H
#include <assert.h>
#include <stdint.h>

#define CM_MUST_CHECK      __attribute__((warn_unused_result))
#define CM_PRINTF(fmt, va) __attribute__((format(printf, fmt, va)))
#define CM_UNUSED          __attribute__((unused))
#define CM_NORETURN        __attribute__((noreturn))
#define cm_likely(x)       __builtin_expect(!!(x), 1)
#define cm_unlikely(x)     __builtin_expect(!!(x), 0)
#define CM_ARRAY_SIZE(a)   (sizeof(a) / sizeof((a)[0]))
#define CM_MIN(a, b)       ((a) < (b) ? (a) : (b))
#define CM_MAX(a, b)       ((a) > (b) ? (a) : (b))

/* A borrowed const pointer stored in a field that is owned (and freed)
 * when the struct is filled by a decoder, for a struct that is only read
 * (an encoder's input): drops const where -Wcast-qual can see it is on
 * purpose. Never use it to write through @p. */
#define CM_UNCONST(type, p) ((type)(uintptr_t)(const void *)(p))

/* Defensive check kept in release builds: evaluates to x; asserts in debug
 * builds (SQLite's NEVER()). Use as `if (CM_NEVER(p == NULL)) return -EINVAL;`
 */
#ifdef NDEBUG
#define CM_NEVER(x) (x)
#else
#define CM_NEVER(x) (assert(!(x)), (x))
#endif

#endif /* COMMON_COMPILER_H */
