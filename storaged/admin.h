/* storaged/admin.h - `storaged admin ...`, the client of the admin API
 * (users and their policies; storaged/s3/iam_api.c). */
#ifndef STORAGED_ADMIN_H
#define STORAGED_ADMIN_H

/* Runs `storaged admin` with @argv[0] = "admin". Returns the exit status:
 * 0, 1 (the call failed: reported on stderr) or 2 (usage). */
int stor_admin_main(int argc, char **argv);

#endif /* STORAGED_ADMIN_H */
