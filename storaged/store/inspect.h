/* storaged/store/inspect.h - operator view of one on-disk metadata file
 * (`storaged inspect PATH`): decodes and verifies a meta record, a format
 * record or a shard file and prints it in readable form. Reads only. */
#ifndef STORAGED_STORE_INSPECT_H
#define STORAGED_STORE_INSPECT_H
#include "common/compiler.h"
#include <stdio.h>

/* Prints @path to @out. 0, or -errno (-EBADMSG for a corrupt record, whose
 * problem is printed too). */
CM_MUST_CHECK int stor_inspect(const char *path, FILE *out);

#endif /* STORAGED_STORE_INSPECT_H */
