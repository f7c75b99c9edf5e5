/* fuse/pack_tool.h - bin/ecfs pack (see pack_tool.c, man/ecfs.1). */
#ifndef FUSE_PACK_TOOL_H
#define FUSE_PACK_TOOL_H

/* Runs `ecfs pack` with argv[0] = "pack". Returns the exit status. */
int fc_pack_main(int argc, char **argv);

#endif /* FUSE_PACK_TOOL_H */
