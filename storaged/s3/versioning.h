/* storaged/s3/versioning.h - S3 bucket versioning on top of the object
 * layer: the bucket's versioning state, version ids, delete markers, the
 * by-version operations and ListObjectVersions.
 *
 * Layout (storaged/FORMAT.md "Versions"): a key's current version is the
 * ordinary object of the bucket, so GET, LIST, the index and ecfs see
 * exactly what they saw before; non-current versions and delete markers
 * are ordinary objects of a companion bucket no client can name
 * (stor_ver_hidden_bucket), keyed KEY "\x01" VID FLAG, so the scanner,
 * healing and the stale-drive rules cover every version unchanged.
 *
 * Threads: every function that reads or writes the store runs on a worker;
 * stor_ver_state_peek and stor_ver_info_fix never block (loop-safe). */
#ifndef STORAGED_S3_VERSIONING_H
#define STORAGED_S3_VERSIONING_H
#include "common/compiler.h"
#include "storaged/s3/err.h"
#include "storaged/store/object.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct stor_store;
struct stor_s3_req;
struct stor_obj_info;
struct stor_put;
struct stor_hdr;

/* STOR_HDR_VERSION_ID, STOR_VID_LEN, STOR_VER_SEP, STOR_VER_SUFFIX and the
 * companion naming: storaged/store/object.h (the store keeps versions too).
 * the longest key a versioned bucket takes (its hidden keys must fit) */
#define STOR_VER_MAX_KEY (1024 - STOR_VER_SUFFIX)

enum stor_ver_state {
    STOR_VER_OFF = 0, /* never enabled: one "null" version per key */
    STOR_VER_ENABLED,
    STOR_VER_SUSPENDED,
};

struct stor_ver;

/* Server-wide versioning state (the per-bucket state cache and the key
 * locks). 0 or -ENOMEM. @st is borrowed and outlives it. */
CM_MUST_CHECK int stor_ver_create(struct stor_store *st, struct stor_ver **out);
void stor_ver_destroy(struct stor_ver *v);

/* The companion bucket of @bucket: BUCKET "..v" (a hashed form for names
 * over 60 characters). Two dots: no S3 request can name it. */
void stor_ver_hidden_bucket(const char *bucket, char out[64]);
/* true for names of companion and system buckets (never listed). */
bool stor_ver_is_internal_bucket(const char *name);

/* The state of @bucket (read from the store once, then cached). 0, or
 * -errno (the store's). Worker only. */
CM_MUST_CHECK int stor_ver_state(struct stor_ver *v, const char *bucket,
                                 enum stor_ver_state *out);
/* The cached state, STOR_VER_OFF when not cached yet. Never blocks. */
enum stor_ver_state stor_ver_state_peek(struct stor_ver *v, const char *bucket);
/* Forgets @bucket's cached state (its bucket was deleted). */
void stor_ver_forget(struct stor_ver *v, const char *bucket);

/* true for "null" and for ids this server makes. */
bool stor_ver_id_ok(const char *vid);
/* The version id stored in @i ("null" when none). Borrowed from @i. */
const char *stor_ver_info_vid(const struct stor_obj_info *i);
/* Puts back the ETag a moved version had (STOR_HDR_ETAG). Never blocks. */
void stor_ver_info_fix(struct stor_obj_info *i);

/* ---- operations (ops.c calls these for versioned buckets) ---- */

/* GET/PUT /bucket?versioning. */
void stor_ver_op_versioning(struct stor_s3_req *r);
/* GET /bucket?versions for a bucket that has (had) versioning on; false
 * when the bucket never had it (ops.c answers with one "null" version a
 * key). */
bool stor_ver_op_list(struct stor_s3_req *r);
/* GET/HEAD /bucket/key?versionId=, and the 404 of a key whose current
 * version is a delete marker. true when it answered (the request's
 * response is set); false: not versioned, serve the current object. */
bool stor_ver_op_get(struct stor_s3_req *r);
/* DELETE /bucket/key[?versionId=] in a bucket with versioning on (or any
 * bucket with a versionId). true when it answered. */
bool stor_ver_op_delete(struct stor_s3_req *r);
/* One key of DeleteObjects (and DeleteObject): 0 or -errno; *dm and
 * @vid_out (>= 20 bytes) say what was deleted or made (vid_out "" when
 * unversioned). With conditions @c (NULL: none) the version deleted (the
 * one named, or the current one: its object or the marker over it) must
 * meet them, checked under the key's lock: -STOR_EPRECOND if it does not;
 * no such version is 0 and changes nothing (no marker is made). */
struct stor_del_cond;
CM_MUST_CHECK int stor_ver_delete_key(struct stor_s3_req *r, const char *key,
                                      size_t key_len, const char *vid,
                                      const struct stor_del_cond *c, bool *dm,
                                      char *vid_out);
/* Sets @c's ETag (quotes stripped) or size from text @v (@n bytes), as a
 * header or a DeleteObjects element carries it: S3E_NONE or
 * S3E_INVALID_ARGUMENT. */
enum stor_s3_err stor_ver_del_cond_etag(struct stor_del_cond *c, const char *v,
                                        size_t n);
enum stor_s3_err stor_ver_del_cond_size(struct stor_del_cond *c, const char *v,
                                        size_t n);
/* Commits @p (PutObject, CopyObject) as the key's new current version:
 * in a versioned bucket the old current version is kept (moved to the
 * companion bucket) under the key's lock. Always frees @p. On success
 * @vid_out (>= 20 bytes) is the new version's id to answer with ("" when
 * unversioned or suspended: S3 sends none then).
 * Returns what stor_put_commit returns. */
CM_MUST_CHECK int stor_ver_put_commit(struct stor_s3_req *r, const char *key,
                                      size_t key_len, struct stor_put *p,
                                      const uint8_t *md5,
                                      struct stor_obj_info *info,
                                      char *vid_out);
/* CompleteMultipartUpload under the same rules (stor_mpu_complete's
 * arguments). */
struct stor_part;
CM_MUST_CHECK int stor_ver_mpu_complete(struct stor_s3_req *r,
                                        const char *upload_id,
                                        const struct stor_part *parts, size_t n,
                                        struct stor_obj_info *info);
/* The header a new object (CreateMultipartUpload) gets: @name/@value set
 * when the bucket is versioned (value: a fresh id or "null"), else
 * name[0] = 0. 0 or -errno. */
CM_MUST_CHECK int stor_ver_new_header(struct stor_s3_req *r, char name[32],
                                      char value[24]);
/* Opens version @vid of @key (CopyObject's source): like stor_get_open.
 * -STOR_ENOKEY: no such version; -EISDIR: it is a delete marker. */
struct stor_get;
CM_MUST_CHECK int stor_ver_open(struct stor_s3_req *r, const char *bucket,
                                const char *key, size_t key_len,
                                const char *vid, struct stor_obj_info *info,
                                struct stor_get **g);
/* DeleteBucket: -STOR_ENOTEMPTY while versions remain; else deletes the
 * companion bucket after @bucket. 0 or -errno. */
CM_MUST_CHECK int stor_ver_bucket_delete(struct stor_s3_req *r);

/* ---- bucket configuration records (kept in the companion bucket) ---- */
/* Reads record @name (a name starting with "\x01\x01") of @bucket into
 * *out (malloc'd, NUL-terminated; at most @cap bytes). Its length, or
 * -STOR_ENOKEY when there is none, or -errno. */
CM_MUST_CHECK long stor_ver_cfg_read(struct stor_store *st, const char *bucket,
                                     const char *name, size_t cap, char **out);
/* Writes (replaces) record @name. 0 or -errno. */
CM_MUST_CHECK int stor_ver_cfg_write(struct stor_store *st, const char *bucket,
                                     const char *name, const void *data,
                                     size_t len);
/* Deletes record @name (absent: 0). 0 or -errno. */
CM_MUST_CHECK int stor_ver_cfg_delete(struct stor_store *st, const char *bucket,
                                      const char *name);

/* ---- for lifecycle.c ---- */
struct stor_list_result;
/* Paging a listing: *after (freed first) becomes a copy of @res's last
 * key when @res is truncated (1), else NULL (0); -ENOMEM. */
CM_MUST_CHECK int stor_ver_list_next(const struct stor_list_result *res,
                                     char **after);
/* One version of a key, newest first. */
struct stor_ver_entry {
    char vid[STOR_VID_LEN + 1]; /* or "null" */
    bool dm;                    /* a delete marker */
    bool latest;
    uint64_t size;
    time_t mtime;
    char *hkey; /* owned; its key in the companion bucket, NULL: current */
    size_t hkey_len;
};
/* Every version of @key in @bucket, newest first. *out malloc'd, free with
 * stor_ver_entries_free. 0 or -errno. */
CM_MUST_CHECK int stor_ver_versions(struct stor_ver *v, const char *bucket,
                                    const char *key, size_t key_len,
                                    struct stor_ver_entry **out, size_t *n);
void stor_ver_entries_free(struct stor_ver_entry *e, size_t n);
/* Deletes version @vid of @key as DeleteObject?versionId does (the next
 * version becomes current). 0 or -errno. */
CM_MUST_CHECK int stor_ver_delete_version(struct stor_ver *v,
                                          const char *bucket, const char *key,
                                          size_t key_len, const char *vid);
/* Deletes @key as DeleteObject without a version id does in @bucket's
 * state (a delete marker when versioned). 0 or -errno. */
CM_MUST_CHECK int stor_ver_delete_current(struct stor_ver *v,
                                          const char *bucket, const char *key,
                                          size_t key_len);
/* Keys of the companion bucket: splits hidden key @h (@n bytes) into
 * the user key's length, the id and the flags. false: not a version. */
bool stor_ver_parse_hidden(const char *h, size_t n, size_t *key_len,
                           char vid[STOR_VID_LEN + 1], bool *dm, bool *null,
                           bool *etag_hdr);

#endif /* STORAGED_S3_VERSIONING_H */
