# fuse/ -> $(BUILD)/libecfs.a (+ main.c -> bin/ecfs)
ECFS_MAIN := fuse/main.c
ECFS_SRCS += $(filter-out $(ECFS_MAIN),$(wildcard fuse/*.c))
