/* fuse/creds.h - where the mount's S3 credentials come from:
 * -o passwd_file= (s3fs format), -o profile= (~/.aws/credentials),
 * AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, the [default] profile, or none
 * (anonymous, unsigned requests), in that order. */
#ifndef FUSE_CREDS_H
#define FUSE_CREDS_H
#include "common/compiler.h"

struct fc_creds {
    char *access_key; /* owned; NULL = anonymous */
    char *secret_key; /* owned */
};

/* Loads credentials (see above); prints a message and returns -errno when
 * an explicitly named source is missing or malformed. @passwd_file and
 * @profile may be NULL; @bucket selects BUCKET:KEY:SECRET lines. */
CM_MUST_CHECK int fc_creds_load(const char *passwd_file, const char *profile,
                                const char *bucket, struct fc_creds *out);
/* Parses one passwd_file line for @bucket into @out. 1 if it matched, 0 if
 * it did not apply (comment, other bucket), -EINVAL if malformed. */
CM_MUST_CHECK int fc_creds_parse_passwd_line(const char *line,
                                             const char *bucket,
                                             struct fc_creds *out);
/* Reads [profile] from an AWS credentials file. 0, -ENOENT (no such file
 * or profile), -EINVAL (profile without both keys). */
CM_MUST_CHECK int fc_creds_read_profile(const char *path, const char *profile,
                                        struct fc_creds *out);
void fc_creds_fini(struct fc_creds *c);

#endif /* FUSE_CREDS_H */
