/* common/isal_compat.h - ISA-L functions newer than the oldest isa-l
 * headers we build against (Debian 12 ships 2.30), declared here rather
 * than in the .c that uses them. Each is weak: its address is NULL when the
 * running library lacks it, and the caller falls back to its own code. */
#ifndef COMMON_ISAL_COMPAT_H
#define COMMON_ISAL_COMPAT_H
#include <stdint.h>

/* CRC-64/NVME, reflected; exported by isa-l >= 2.31. */
uint64_t crc64_rocksoft_refl(uint64_t init_crc, const unsigned char *buf,
                             uint64_t len) __attribute__((weak));
#endif /* COMMON_ISAL_COMPAT_H */
