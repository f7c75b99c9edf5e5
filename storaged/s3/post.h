/* storaged/s3/post.h - POST Object (browser-based uploads): a streaming
 * multipart/form-data parser, the POST policy checker, and the hooks
 * s3.c calls for a POST to a bucket with a form body.
 *
 * The parser allocates nothing and holds nothing of a part's data: file
 * bytes go to the caller's callback as they arrive (at most one delimiter's
 * worth is ever held back, and that is the delimiter's own prefix). The
 * policy checker borrows the form and allocates only jansson's tree. */
#ifndef STORAGED_S3_POST_H
#define STORAGED_S3_POST_H
#include "common/compiler.h"
#include "storaged/s3/err.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

struct stor_s3_req;

/* ---- multipart/form-data (RFC 7578, RFC 2046 5.1) ---- */
#define STOR_MP_BOUNDARY_MAX 70   /* RFC 2046's limit */
#define STOR_MP_HEAD_MAX     4096 /* one part's header block */
#define STOR_MP_PAUSE        1    /* a callback's "stop after this byte" */

/* The headers of one part; the strings borrow the parser's buffer and are
 * valid during the part callback only. */
struct stor_mp_part {
    const char *name; /* Content-Disposition name= (decoded quotes) */
    size_t name_len;
    const char *filename; /* filename=, or NULL */
    size_t filename_len;
    const char *ctype; /* Content-Type, or NULL */
    size_t ctype_len;
};

/* Callbacks: 0 to go on, STOR_MP_PAUSE (part only) to make
 * stor_mp_feed() return right after the part's header block, or a
 * negative errno to stop (returned by stor_mp_feed). */
struct stor_mp_cb {
    int (*part)(void *arg, const struct stor_mp_part *p);
    int (*data)(void *arg, const char *p, size_t n);
    int (*part_end)(void *arg);
};

struct stor_mp {
    char delim[4 + STOR_MP_BOUNDARY_MAX]; /* "\r\n--" boundary */
    size_t dlen;
    size_t match; /* delim[0..match) seen, not yet passed on */
    int state;
    bool in_part; /* a part callback ran and its part_end is due */
    size_t hlen;
    char head[STOR_MP_HEAD_MAX + 1];
};

/* The boundary parameter of a Content-Type value @ct ("multipart/form-data;
 * boundary=..."; quoted or not) into @out (STOR_MP_BOUNDARY_MAX + 1
 * bytes, NUL-terminated). 0, or -EINVAL when @ct is not form-data or the
 * boundary is missing, empty, too long or has a byte RFC 2046 does not
 * allow in one. */
CM_MUST_CHECK int stor_mp_boundary(const char *ct, size_t n, char *out);
/* Starts parsing a body delimited by @boundary (as stor_mp_boundary gave). */
void stor_mp_init(struct stor_mp *m, const char *boundary);
/* Feeds @n bytes. Returns the bytes consumed: @n, or fewer when a part
 * callback answered STOR_MP_PAUSE (feed the rest later); -EBADMSG on
 * malformed input (a part header block over STOR_MP_HEAD_MAX, a part
 * without a form-data name, garbage after a delimiter), or a callback's
 * negative return. Bytes after the closing delimiter are ignored. */
CM_MUST_CHECK ssize_t stor_mp_feed(struct stor_mp *m, const char *p, size_t n,
                                   const struct stor_mp_cb *cb, void *arg);
/* true once the closing delimiter ("--boundary--") was read. */
bool stor_mp_done(const struct stor_mp *m);

/* ---- the form ---- */
#define STOR_POST_MAX_FIELDS 64          /* fields before the file */
#define STOR_POST_FIELDS_MAX (64 * 1024) /* their names and values */

struct stor_post_field {
    char *name; /* owned, NUL-terminated */
    char *value;
    size_t value_len;
};

/* The fields before the file part (values exactly as sent). */
struct stor_post_form {
    struct stor_post_field f[STOR_POST_MAX_FIELDS];
    size_t n;
    size_t bytes; /* names + values, against STOR_POST_FIELDS_MAX */
};

/* The value of field @name (ASCII case-insensitive, as S3 matches form
 * field names), or NULL; *len its length. */
const char *stor_post_field(const struct stor_post_form *f, const char *name,
                            size_t *len);
/* Adds a field (copies). 0, -EEXIST (a field of that name is there
 * already), -E2BIG (over the limits), -ENOMEM. */
CM_MUST_CHECK int stor_post_form_add(struct stor_post_form *f, const char *name,
                                     size_t nlen, const char *value,
                                     size_t vlen);
void stor_post_form_fini(struct stor_post_form *f);

/* ---- the policy document ---- */
struct stor_post_limits {
    uint64_t min, max; /* content-length-range; 0..UINT64_MAX when none */
};

/* Checks the decoded policy @json (@len bytes) against form @f at @now,
 * as S3 does: "expiration" (ISO 8601, UTC) not past, "conditions" an array
 * of {"field": "value"} (exact), ["eq", "$field", "value"], ["starts-with",
 * "$field", "prefix"] and ["content-length-range", min, max]; field names
 * match case-insensitively, "bucket" is @bucket and "key" is @key (after
 * ${filename}); every form field other than those S3 exempts (policy,
 * signature fields, file, x-ignore-*) has a condition. S3E_NONE,
 * S3E_POST_BAD_POLICY (400: not a policy document), or S3E_ACCESS_DENIED
 * with @why ("Invalid according to Policy: ...") filled. @lim gets the
 * content-length-range. */
enum stor_s3_err stor_post_policy_check(const char *json, size_t len,
                                        time_t now,
                                        const struct stor_post_form *f,
                                        const char *bucket, const char *key,
                                        struct stor_post_limits *lim, char *why,
                                        size_t why_len);

/* ---- the request (s3.c's hooks) ---- */
/* on_head, after routing to S3_OP_POST_OBJECT: the boundary from
 * Content-Type and the parser. S3E_NONE or the error to answer. */
enum stor_s3_err stor_s3_post_setup(struct stor_s3_req *r);
/* on_body: feeds the form. 0, or a negative errno with the error response
 * set. While the object is being opened (a job) the bytes are kept and fed
 * when it is back. */
int stor_s3_post_body(struct stor_s3_req *r, const char *p, size_t n);
/* The body ended and no job is busy: checks the form was complete and the
 * size within the policy's range. S3E_NONE when the object may be
 * committed. */
enum stor_s3_err stor_s3_post_end(struct stor_s3_req *r);
/* Loop, after a successful commit: turns PutObject's 200 into POST's
 * answer (success_action_redirect 303, success_action_status 200/201 with
 * its XML, else 204). */
void stor_s3_post_reply(struct stor_s3_req *r);
/* Whether the transport must stop reading: the object is being opened. */
bool stor_s3_post_paused(const struct stor_s3_req *r);
/* Frees the form state (req_fini). */
void stor_s3_post_free(struct stor_s3_req *r);

#endif /* STORAGED_S3_POST_H */
