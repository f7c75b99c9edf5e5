/* fuse/creds.h - where the mount's S3 credentials come from:
 * -o passwd_file= (s3fs format), -o profile= (~/.aws/credentials),
 * AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), the
 * [default] profile, or none (anonymous, unsigned requests), in that order.
 * Temporary credentials carry a session token (AWS_SESSION_TOKEN, or
 * aws_session_token in the profile), sent as x-amz-security-token. */
#ifndef FUSE_CREDS_H
#define FUSE_CREDS_H
#include "common/compiler.h"

struct fc_creds {
    char *access_key;    /* owned; NULL = anonymous */
    char *secret_key;    /* owned */
    char *session_token; /* owned; NULL = none (long-term keys) */
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
/* Reads [profile] from an AWS credentials file (aws_access_key_id,
 * aws_secret_access_key, optional aws_session_token). 0, -ENOENT (no such
 * file or profile), -EINVAL (profile without both keys), -ENOMEM. */
CM_MUST_CHECK int fc_creds_read_profile(const char *path, const char *profile,
                                        struct fc_creds *out);
void fc_creds_fini(struct fc_creds *c);

#endif /* FUSE_CREDS_H */
