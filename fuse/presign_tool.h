/* fuse/presign_tool.h - bin/ecfs presign (see presign_tool.c, man/ecfs.1). */
#ifndef FUSE_PRESIGN_TOOL_H
#define FUSE_PRESIGN_TOOL_H

/* Runs `ecfs presign` with argv[0] = "presign". Returns the exit status. */
int fc_presign_main(int argc, char **argv);

#endif /* FUSE_PRESIGN_TOOL_H */
