/* storaged/s3/sse.h - server-side encryption at rest (SSE-C and SSE-S3),
 * done by the S3 layer around the object layer's streams, so the store
 * keeps ciphertext and stays format-agnostic (FORMAT.md "Encrypted
 * objects"). An object's plaintext is cut into packages of 64 KiB, each
 * sealed alone with AES-256-GCM under the object's own data key and bound
 * to its index and to whether it is the last, so a range GET decrypts
 * only the packages it touches and a cut-short object fails; the ciphertext has
 * the plaintext's length (the GCM tags are kept in a stored header), so sizes
 * in listings are right without the store knowing.
 *
 * Ownership: a struct stor_sse belongs to one request (r->sse, freed in
 * req_fini) and is used by one thread at a time, as the request is. */
#ifndef STORAGED_S3_SSE_H
#define STORAGED_S3_SSE_H
#include "common/compiler.h"
#include "storaged/s3/err.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define STOR_SSE_PKG (64 * 1024) /* plaintext bytes per sealed package */

struct stor_s3;
struct stor_s3_req;
struct stor_sse;
struct stor_get;
struct stor_put;
struct stor_obj_info;
struct stor_resp;
struct stor_hdr;

/* The server-wide key state: created with the S3 state; @kms_key (32
 * bytes, copied) or NULL to seal the master key under a key derived from
 * the root credentials. 0 or -ENOMEM. */
CM_MUST_CHECK int stor_sse_keys_create(const uint8_t *kms_key,
                                       struct stor_s3 *s3);
void stor_sse_keys_destroy(struct stor_s3 *s3);
/* Unseals a stored master key now (PBKDF2: tens of ms), so the first
 * SSE-S3 GET, which the event loop may serve, does not. No-op while the
 * state is not loaded yet (an index rebuild at start): then on first use. */
void stor_sse_keys_warm(struct stor_s3 *s3);
/* Registers the Complete hook that seals an encrypted multipart object's
 * part list (stor_store_set_mpu_hook); once s3->store is set. */
void stor_sse_attach(struct stor_s3 *s3);
/* stor_sse_read_key_file (--kms-key-file): declared in s3/s3.h, the
 * S3 layer's interface, which main.c may include. */

/* Worker, before a new object's (or copy's) data is written: the
 * encryption the request asks for (SSE-C headers, x-amz-server-side-
 * encryption) or else the bucket's default. S3E_NONE with *out NULL: stored
 * as plaintext. */
enum stor_s3_err stor_sse_write_begin(struct stor_s3_req *r,
                                      struct stor_sse **out);
/* Stores the object's encryption headers (x-ecfs-sse*) with @p. 0/-errno */
CM_MUST_CHECK int stor_sse_put_headers(struct stor_sse *x, struct stor_put *p);
/* Appends plaintext (stor_put_write when @x is NULL). 0 or -errno. */
CM_MUST_CHECK int stor_sse_put_write(struct stor_sse *x, struct stor_put *p,
                                     const void *data, size_t len);
/* Seals the last package, stores the tags and the plaintext's MD5 as the
 * ETag; -STOR_EBADDIGEST when @expect_md5 (or NULL) differs from it. The
 * caller then commits with no MD5 of its own. */
CM_MUST_CHECK int stor_sse_put_finish(struct stor_sse *x, struct stor_put *p,
                                      const uint8_t *expect_md5);

/* Worker, CreateMultipartUpload: the encryption asked for (or the
 * bucket's default) as for a PUT; when there is one, its stored headers
 * (mode, sealed data key, SSE-C key MD5) are appended to the upload's
 * headers *@h (*@n) and *out is set (for the response headers only). */
enum stor_s3_err stor_sse_mpu_create(struct stor_s3_req *r, struct stor_hdr **h,
                                     size_t *n, struct stor_sse **out);
/* Worker, UploadPart(Copy) to @upload_id: *out NULL for a plaintext upload
 * (refusing SSE-C headers), else an encryptor for the part under its own
 * key (HMAC of the data key and a fresh random salt), used like a PUT's
 * (stor_sse_put_write, stor_sse_put_finish; no stor_sse_put_headers).
 * An SSE-C upload needs the same key on every part. */
enum stor_s3_err stor_sse_part_begin(struct stor_s3_req *r,
                                     const char *upload_id,
                                     struct stor_sse **out);
/* Worker, CompleteMultipartUpload of @upload_id: an SSE-C upload needs
 * its key here too (400 InvalidRequest without it or with another, as
 * s3-tests expects of S3). S3E_NONE for other uploads and for an upload
 * that is gone (a retried Complete is answered by the caller). */
enum stor_s3_err stor_sse_mpu_complete_check(struct stor_s3_req *r,
                                             const char *upload_id);
/* Adds the SSE response headers for stored object @in (its x-ecfs-sse
 * headers), e.g. on CompleteMultipartUpload. 0 or -ENOMEM. */
CM_MUST_CHECK int stor_sse_info_resp_headers(const struct stor_obj_info *in,
                                             struct stor_resp *rs);

/* Worker or loop (no I/O): opens stored object @in for reading by @r:
 * checks the SSE-C key of the request (the copy source's with @source)
 * against the object's. S3E_NONE with *out NULL for a plaintext object
 * (refusing SSE-C headers on it). */
enum stor_s3_err stor_sse_read_open(struct stor_s3_req *r,
                                    const struct stor_obj_info *in, bool source,
                                    struct stor_sse **out);
/* Plaintext at @off (stor_get_read when @x is NULL): bytes, 0 at EOF, or
 * -errno (-EIO when a package fails its tag). */
CM_MUST_CHECK ssize_t stor_sse_get_read(struct stor_sse *x, struct stor_get *g,
                                        uint64_t off, void *buf, size_t len);
/* Opens, in place, the packages of @body (the whole stored object, e.g.
 * an inline reader's own buffer, stor_get_inline_take) that bytes
 * [@first, @first + @len) touch, so the caller sends that range without
 * a copy. 0 or -errno (-EIO: a package fails its tag). */
CM_MUST_CHECK int stor_sse_open_inplace(struct stor_sse *x, uint8_t *body,
                                        uint64_t first, uint64_t len);
/* Whether stored object @in is SSE-S3 (the server holds its key): the
 * only kind whose plaintext the zero-copy body cache may keep, once a GET
 * has opened and authenticated it. Never SSE-C: the server keeps no
 * usable copy of such an object past the request that brought its key
 * (storaged/README.md "Encryption at rest", the body cache). */
bool stor_sse_info_is_s3(const struct stor_obj_info *in);
/* Whether @x (an opened object's, or NULL) is SSE-S3. */
bool stor_sse_is_s3(const struct stor_sse *x);
/* Adds the response headers S3 sends for an encrypted object. 0/-ENOMEM */
CM_MUST_CHECK int stor_sse_resp_headers(const struct stor_sse *x,
                                        struct stor_resp *rs);
void stor_sse_free(struct stor_sse *x);

/* Worker: Get/Put/DeleteBucketEncryption (r->op S3_OP_BUCKET_ENCRYPTION). */
void stor_sse_bucket_op(struct stor_s3_req *r);
/* A PutBucketEncryption body (fuzzed): exactly one rule whose
 * SSEAlgorithm is AES256, copied into @alg (8 bytes: "AES256"). S3E_NONE,
 * S3E_MALFORMED_XML, S3E_SSE_KMS_NOT_IMPLEMENTED (aws:kms) or
 * S3E_INTERNAL. */
enum stor_s3_err stor_sse_config_parse(const char *xml, size_t len, char *alg);

/* The package parser's core, exposed for the fuzz target and unit test:
 * decodes the stored tag list @hex (@n chars) for an object of @size
 * bytes into a malloc'd array of 16-byte tags (*ntags: one per started
 * package, and one for the empty package of a 0-byte object). 0 or
 * -EBADMSG (wrong count or a bad digit) or -ENOMEM. */
CM_MUST_CHECK int stor_sse_tags_decode(const char *hex, size_t n, uint64_t size,
                                       uint8_t **tags, size_t *ntags);
/* The multipart parser's core (fuzzed): the joined tag lists @tags and
 * salts @salts of @nparts parts of sizes @psize (summing to @size) into
 * one tag array and one segment per part. 0, -EBADMSG or -ENOMEM. */
struct stor_sse_seg;
CM_MUST_CHECK int stor_sse_segs_decode(const char *tags, const char *salts,
                                       const uint64_t *psize, size_t nparts,
                                       uint64_t size, uint8_t **tags_out,
                                       struct stor_sse_seg **segs_out,
                                       size_t *nseg);
/* Seals package @idx (@len <= STOR_SSE_PKG bytes; @final: the object's
 * last) in place with @key; its tag to @tag. 0 or -EIO/-ENOMEM. */
CM_MUST_CHECK int stor_sse_pkg_seal(const uint8_t key[32], uint64_t idx,
                                    bool final, uint8_t *buf, size_t len,
                                    uint8_t tag[16]);
/* Opens package @idx (sealed with @final) of @len ciphertext bytes in
 * place with @key and @tag; 0 or -EBADMSG. */
CM_MUST_CHECK int stor_sse_pkg_open(const uint8_t key[32], uint64_t idx,
                                    bool final, uint8_t *buf, size_t len,
                                    const uint8_t tag[16]);

#endif /* STORAGED_S3_SSE_H */
