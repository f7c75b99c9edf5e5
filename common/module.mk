# common/ -> $(BUILD)/libcommon.a
COMMON_SRCS += $(wildcard common/*.c)
