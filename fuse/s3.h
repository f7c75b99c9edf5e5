/* fuse/s3.h - the mount's S3 client: one bounded pool of keep-alive libcurl
 * handles (DNS, TLS sessions and connections shared through a curl_share)
 * used by every FUSE thread and prefetch worker. Requests are SigV4-signed
 * (or anonymous when no key is set), retried with exponential backoff and
 * jitter on transient failures, and their outcome mapped to an errno.
 * Counters of every request kind are kept for tests and stats. */
#ifndef FUSE_S3_H
#define FUSE_S3_H
#include "common/compiler.h"
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#define FC_ETAG_MAX 128 /* quoted ETag incl. quotes and NUL */

struct fc_listpage;
struct cm_buf;

struct fc_s3_conf {
    const char *endpoint;   /* "http://host:port" (no path); borrowed */
    const char *bucket;     /* borrowed */
    const char *region;     /* "us-east-1"; borrowed */
    const char *access_key; /* NULL or "" = anonymous requests; borrowed */
    const char *secret_key; /* borrowed */
    /* temporary credentials: sent signed as x-amz-security-token;
     * NULL or "" = none; borrowed */
    const char *session_token;
    unsigned max_conns; /* pooled handles = max parallel requests */
    unsigned retries;   /* extra attempts after a transient failure */
    unsigned connect_timeout_ms;
    unsigned
        stall_timeout_s; /* abort an attempt that moves no byte this long */
    /* TLS: a PEM file of CA certificates that replaces the system trust
     * store for https:// endpoints (CURLOPT_CAINFO); NULL or "" = the
     * system store; borrowed */
    const char *ca_file;
    /* TLS: no certificate or host name check at all. For tests only
     * (-o insecure_skip_tls_verify_testing_only) */
    bool insecure;
};

/* Checks that @path can serve as a ca_file: a readable regular file.
 * 0, or -errno (-EINVAL: not a regular file). */
CM_MUST_CHECK int fc_s3_check_ca_file(const char *path);

/* Request counters, updated with relaxed atomics; read by fc_s3_stats_format.
 */
struct fc_s3_stats {
    atomic_ulong get;           /* GET object requests sent (attempts) */
    atomic_ulong head;          /* HEAD object */
    atomic_ulong list;          /* ListObjectsV2 pages */
    atomic_ulong retries;       /* attempts that were retries */
    atomic_ulong errors;        /* requests that failed for good */
    atomic_ulong bytes;         /* body bytes received by GETs */
    atomic_ulong etag_mismatch; /* 412 on an If-Match GET */
    atomic_ulong put;           /* PUT object (single-request uploads) */
    atomic_ulong parts;         /* UploadPart and UploadPartCopy */
    atomic_ulong mpu;           /* Create/Complete/AbortMultipartUpload */
    atomic_ulong del;           /* DELETE object */
    atomic_ulong copy;          /* CopyObject */
    atomic_ulong bytes_up;      /* body bytes sent by PUTs and parts */
};

/* A request body: @len bytes at @data, or, when @data is NULL, at offset
 * @off of file @fd (read with pread, so one fd serves parallel parts).
 * Borrowed by the request; resent from the start by every retry. */
struct fc_s3_body {
    const void *data;
    int fd;
    uint64_t off;
    size_t len;
};

/* POSIX attributes kept as S3 user metadata, with s3fs's and rclone's
 * names: x-amz-meta-mode (decimal st_mode), x-amz-meta-uid, x-amz-meta-gid
 * (decimal), x-amz-meta-mtime (seconds, with a fraction when it has
 * nanoseconds: "1700000000.123456789"). @has says which are known. */
#define FC_META_MODE  1u
#define FC_META_UID   2u
#define FC_META_GID   4u
#define FC_META_MTIME 8u
/* x-amz-meta-ecfs-attrs ("0" or "1") of a directory marker made by ecfs:
 * whether entries of the directory may carry the attributes above
 * (fuse/README.md "Attributes"); absent on other tools' markers */
#define FC_META_DIRATTRS 16u
/* the POSIX attributes of a file or directory */
#define FC_META_POSIX (FC_META_MODE | FC_META_UID | FC_META_GID | FC_META_MTIME)
/* x-amz-meta-* headers meta_headers() may add to one request */
#define FC_META_NHDR 5
struct fc_s3_meta {
    unsigned has; /* FC_META_* bits */
    uint32_t mode, uid, gid;
    int64_t mtime;
    uint32_t mtime_ns;
    uint32_t dirattrs; /* 0 or 1, with FC_META_DIRATTRS */
};
/* Parses one x-amz-meta-* header (@name without the prefix, @v of @vlen
 * bytes) into @m; unknown names and malformed values are ignored. */
void fc_s3_meta_parse(struct fc_s3_meta *m, const char *name, size_t nlen,
                      const char *v, size_t vlen);

/* What a GET/HEAD told about the object. */
struct fc_s3_obj {
    uint64_t size;          /* whole object size */
    time_t mtime;           /* Last-Modified, 0 if absent */
    char etag[FC_ETAG_MAX]; /* as sent, with quotes; "" if absent */
    struct fc_s3_meta meta; /* x-amz-meta-mode/uid/gid/mtime */
};

struct fc_s3;

/* Creates the client; copies everything it needs from @conf.
 * 0 and *out set, or -ENOMEM / -EINVAL (bad endpoint). */
CM_MUST_CHECK int fc_s3_create(const struct fc_s3_conf *conf,
                               struct fc_s3 **out);
/* Makes every request in flight fail within about a second (-EIO) and
 * every later one at once: for unmount and exit, so a hung server cannot
 * hold them up. Async-safe with respect to other threads; lasts until
 * fc_s3_resume. */
void fc_s3_abort(struct fc_s3 *s);
/* Undoes fc_s3_abort for the last requests of an unmount (write.c's
 * aborts of open uploads and pending attributes), retrying each at most
 * once from now on. */
void fc_s3_resume(struct fc_s3 *s);
/* Frees the pool; no request may be in flight. */
void fc_s3_destroy(struct fc_s3 *s);
/* The client's counters (live; valid until fc_s3_destroy). */
struct fc_s3_stats *fc_s3_stats(struct fc_s3 *s);

/* GETs bytes [off, off+len) of @key into @dst (room for @len bytes); when
 * @len is 0 the whole object is fetched without a Range header into @dst of
 * @cap bytes (more than @cap is an error). With a non-empty @if_match the
 * request carries If-Match and a changed object fails with -ESTALE.
 * Returns the byte count received (>= 0; fewer than asked only at EOF) or
 * -ENOENT (404), -EACCES (403), -ESTALE (412), -EIO (other failures after
 * the retries). Fills @obj when non-NULL. */
CM_MUST_CHECK ssize_t fc_s3_get(struct fc_s3 *s, const char *key, uint64_t off,
                                size_t len, size_t cap, const char *if_match,
                                void *dst, struct fc_s3_obj *obj);
/* fc_s3_get into a scatter list: the body fills @iov[0], then @iov[1], ...
 * (room for the sum of their lengths, which must be at least @len, or
 * @cap when @len is 0), so each cache block gets its bytes straight from
 * the socket buffer, with no staging copy. Same returns as fc_s3_get. */
CM_MUST_CHECK ssize_t fc_s3_getv(struct fc_s3 *s, const char *key, uint64_t off,
                                 size_t len, size_t cap, const char *if_match,
                                 const struct iovec *iov, unsigned iovcnt,
                                 struct fc_s3_obj *obj);
/* HEAD @key. 0 with @obj filled, or -ENOENT, -EACCES, -EIO. */
CM_MUST_CHECK int fc_s3_head(struct fc_s3 *s, const char *key,
                             struct fc_s3_obj *obj);
/* One ListObjectsV2 page: prefix @prefix, delimiter "/", continuation
 * @token (NULL for the first page), up to @max_keys keys. Fills @page
 * (caller fc_listpage_init'ed it; entries are appended).
 * 0, or -ENOENT (no such bucket), -EACCES, -EIO. */
CM_MUST_CHECK int fc_s3_list(struct fc_s3 *s, const char *prefix,
                             const char *token, unsigned max_keys,
                             struct fc_listpage *page);
/* fc_s3_list without a delimiter: every key under @prefix, at any depth
 * (directory renames, emptiness checks). */
CM_MUST_CHECK int fc_s3_list_flat(struct fc_s3 *s, const char *prefix,
                                  const char *token, unsigned max_keys,
                                  struct fc_listpage *page);
/* Appends to @url a presigned GET URL of @key (SigV4 query auth, path
 * style, UNSIGNED-PAYLOAD, valid @expires seconds from @now, at most 7
 * days; a session token rides along as X-Amz-Security-Token). No request
 * is made. 0, -EINVAL (@expires out of range), -EPERM (anonymous: nothing
 * to sign with), -ENOMEM. */
CM_MUST_CHECK int fc_s3_presign_get(struct fc_s3 *s, const char *key,
                                    time_t now, unsigned expires,
                                    struct cm_buf *url);

/* PUTs @b as object @key. 0 with the new ETag in @etag (FC_ETAG_MAX
 * bytes; "" when the server sent none), or -EACCES, -ENOENT (no bucket),
 * -EIO. */
CM_MUST_CHECK int fc_s3_put(struct fc_s3 *s, const char *key,
                            const struct fc_s3_body *b, char *etag);
/* fc_s3_put with the attributes @m as x-amz-meta-* headers (NULL: none). */
CM_MUST_CHECK int fc_s3_put_meta(struct fc_s3 *s, const char *key,
                                 const struct fc_s3_body *b,
                                 const struct fc_s3_meta *m, char *etag);
/* CreateMultipartUpload of @key: 0 and *@upload_id (malloc'd), or -errno. */
CM_MUST_CHECK int fc_s3_mpu_create(struct fc_s3 *s, const char *key,
                                   char **upload_id);
/* fc_s3_mpu_create; the object gets the attributes @m (NULL: none). */
CM_MUST_CHECK int fc_s3_mpu_create_meta(struct fc_s3 *s, const char *key,
                                        const struct fc_s3_meta *m,
                                        char **upload_id);
/* UploadPart number @partno (1-based) of @b; 0 and its ETag in @etag, or
 * -errno. */
CM_MUST_CHECK int fc_s3_mpu_part(struct fc_s3 *s, const char *key,
                                 const char *upload_id, unsigned partno,
                                 const struct fc_s3_body *b, char *etag);
/* UploadPartCopy: part @partno is bytes [first, last] of object @src,
 * only while @src's ETag is @if_match (x-amz-copy-source-if-match; NULL
 * or "": any version). 0 and the part's ETag in @etag, or -errno
 * (-ESTALE: @src is no longer @if_match, 412). */
CM_MUST_CHECK int fc_s3_mpu_copy_part(struct fc_s3 *s, const char *key,
                                      const char *upload_id, unsigned partno,
                                      const char *src, const char *if_match,
                                      uint64_t first, uint64_t last,
                                      char *etag);
/* CompleteMultipartUpload with the ETags of parts 1..@nparts (each
 * FC_ETAG_MAX bytes, consecutive in @etags). 0 and the object's ETag in
 * @etag, or -errno (also for a 200 answer that carries an <Error>). */
CM_MUST_CHECK int fc_s3_mpu_complete(struct fc_s3 *s, const char *key,
                                     const char *upload_id, const char *etags,
                                     unsigned nparts, char *etag);
/* AbortMultipartUpload. 0 or -errno (-ENOENT: no such upload). */
CM_MUST_CHECK int fc_s3_mpu_abort(struct fc_s3 *s, const char *key,
                                  const char *upload_id);
/* DELETE @key (absent is success, as in S3). 0 or -errno. */
CM_MUST_CHECK int fc_s3_delete(struct fc_s3 *s, const char *key);
/* CopyObject @src -> @dst (sources up to 5 GiB). 0 and the new ETag in
 * @etag, or -errno (-ENOENT: no source). */
CM_MUST_CHECK int fc_s3_copy(struct fc_s3 *s, const char *src, const char *dst,
                             char *etag);
/* CopyObject @src -> @dst (may be the same key) with
 * x-amz-metadata-directive: REPLACE and the attributes @m (other user
 * metadata and Content-Type are dropped, as any REPLACE does; NULL: the
 * source's are copied, as fc_s3_copy). 0 and the new ETag in @etag, or
 * -errno. */
CM_MUST_CHECK int fc_s3_copy_meta(struct fc_s3 *s, const char *src,
                                  const char *dst, const struct fc_s3_meta *m,
                                  char *etag);

#define FC_S3_COPY_MAX ((uint64_t)5 << 30) /* CopyObject's size limit */

/* Server-side copy of @src (@size bytes) to @dst (which may be @src: a
 * copy onto itself that stores new attributes): CopyObject up to
 * FC_S3_COPY_MAX (fc_s3_copy_meta), else a multipart upload of
 * UploadPartCopy ranges of max(1 GiB, @size / 10000) bytes, aborted if a
 * step fails. @m: the copy's attributes (NULL: the source's). Up to 5 GiB,
 * @m is a REPLACE (other user metadata and Content-Type are dropped) and
 * NULL a plain copy of all the source's metadata. Above 5 GiB
 * UploadPartCopy copies bytes only, so the copy first HEADs @src (one
 * request more) and its CreateMultipartUpload carries the source's user
 * metadata (x-amz-meta-*) and Content-Type, with @m's attributes in place
 * of the source's: the source's other metadata are kept either way (-EIO,
 * nothing copied, if it has more than 59 such headers). Every part copy
 * carries x-amz-copy-source-if-match with the HEADed ETag, and a second
 * HEAD before the Complete checks that ETag again (for servers that ignore
 * the condition, as RGW 16.2 does), so a source overwritten during the
 * copy fails it with -ESTALE (as does a source that is no longer @size
 * bytes at the first HEAD), the upload aborted, instead of mixing two
 * versions. 0 and the new ETag in @etag ("" if the server sent none), or
 * -errno. The caller deletes the source for a move. */
CM_MUST_CHECK int fc_s3_copy_sized(struct fc_s3 *s, const char *src,
                                   const char *dst, uint64_t size,
                                   const struct fc_s3_meta *m, char *etag);
/* fc_s3_copy_sized, tied to version @if_match of @src (NULL or "": any):
 * up to 5 GiB the CopyObject carries x-amz-copy-source-if-match, above
 * the HEAD must find that ETag; another version is -ESTALE (nothing
 * copied). @copied (FC_ETAG_MAX bytes, or NULL) gets the ETag of the
 * version the copy is tied to: @if_match, or above 5 GiB the one HEADed;
 * "" for a CopyObject without condition (it copies whatever it finds).
 * A copy of @src onto itself that names a version there is that version's
 * bytes under the new ETag (ops.c, fc_copy_self). */
CM_MUST_CHECK int fc_s3_copy_sized_if(struct fc_s3 *s, const char *src,
                                      const char *dst, uint64_t size,
                                      const struct fc_s3_meta *m,
                                      const char *if_match, char *copied,
                                      char *etag);

/* Appends "get=N head=N list=N ..." (one line, NUL-terminated) to @out of
 * @cap bytes; returns the length written (snprintf semantics). */
int fc_s3_stats_format(struct fc_s3 *s, char *out, size_t cap);

/* Whether two ETags name the same version, ignoring quotes and a W/
 * prefix (listings and GET answers may quote differently). */
bool fc_s3_etag_equal(const char *a, const char *b);
/* Maps an HTTP status to the errno a filesystem reports (0 for 2xx). */
int fc_s3_status_errno(long status);
/* Whether a failed attempt with this status should be retried. */
bool fc_s3_status_is_transient(long status);
/* Backoff before retry number @attempt (0-based), in ms: exponential from
 * 50 ms, capped at 2 s, with "equal jitter" drawn from @rnd. */
unsigned fc_s3_backoff_ms(unsigned attempt, uint32_t rnd);

#endif /* FUSE_S3_H */
