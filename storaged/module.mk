# storaged/ -> $(BUILD)/libstoraged.a (+ main.c -> bin/storaged)
# Three layers that call one way: http/ (transport), s3/ (the application),
# store/ (the object layer); main.c on top.
STORAGED_MAIN := storaged/main.c storaged/admin.c
STORAGED_SRCS += $(wildcard storaged/http/*.c storaged/s3/*.c storaged/store/*.c)
