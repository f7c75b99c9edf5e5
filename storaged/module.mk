# storaged/ -> $(BUILD)/libstoraged.a (+ main.c -> bin/storaged)
STORAGED_MAIN := storaged/main.c
STORAGED_SRCS += $(filter-out $(STORAGED_MAIN),$(wildcard storaged/*.c))
