/* storaged/s3/sse.c - server-side encryption at rest: SSE-C and SSE-S3
 * (contract in sse.h, layout in FORMAT.md "Encrypted objects").
 *
 * DESIGN: the crypto sits between the S3 operations and the object layer's
 * streams. A new encrypted object gets a random 256-bit data key. Its
 * plaintext is cut into 64 KiB packages; package i is sealed alone with
 * AES-256-GCM under the data key, nonce = 4 zero bytes + be64(i), AAD =
 * be64(i) + a final flag (1 on the last package only), so packages cannot
 * be swapped, and a cut at a package boundary (drive-side truncation of
 * the body and of the tag list together) fails: the new last package was
 * sealed as not final. So the writer holds a full package back until more
 * bytes or the end arrive, and a 0-byte object still has one (empty)
 * sealed package. A range GET reads and opens only the packages it
 * touches. GCM does not change the length, so the
 * store holds exactly as many bytes as the plaintext (listings stay
 * right); the 16-byte tags go, in package order, into a stored header
 * (x-ecfs-sse-tags, hex), as do the data key sealed (AES-256-GCM, random
 * nonce) under the customer's key (SSE-C, with the key's MD5 so a wrong
 * key is named as such) or under the master key (SSE-S3). The master key
 * is random, made at the first SSE-S3 write and kept in the state
 * document (iam.h), sealed under --kms-key-file's key or under a key
 * derived from the root credentials (PBKDF2-HMAC-SHA256, random salt), so
 * the drives alone never give plaintext away. The ETag is the MD5 of the
 * plaintext (stor_put_set_etag), as S3's for SSE-S3. */
#include "storaged/s3/sse.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/codec.h"
#include "common/hash.h"
#include "common/log.h"
#include "storaged/s3/iam.h"
#include "storaged/s3/s3_i.h"

#define HDR_MODE "x-ecfs-sse"      /* "AES256" (SSE-S3) or "SSE-C" */
#define HDR_DK   "x-ecfs-sse-dk"   /* sealed data key, hex */
#define HDR_KMD5 "x-ecfs-sse-kmd5" /* SSE-C: base64 MD5 of the key */
#define HDR_TAGS "x-ecfs-sse-tags" /* package tags, hex, in order */
#define HDR_FMT  "x-ecfs-sse-fmt"  /* layout: "2" (absent: v1, refused) */
#define HDR_SALT "x-ecfs-sse-salt" /* a part's key salt, hex */
/* a completed multipart object's: its parts' tag lists and salts, joined
 * by the store (STOR_HDR_PART_PFX) */
#define HDR_PTAGS    STOR_HDR_PART_PFX HDR_TAGS
#define HDR_PSALT    STOR_HDR_PART_PFX HDR_SALT
#define PART_INFO    "ecfs-sse-part-v2" /* HMAC input: a part's key */
#define HDR_PMAC     "x-ecfs-sse-pmac"  /* multipart: MAC of the part list */
#define PMAC_INFO    "ecfs-sse-mpu-v2"  /* HMAC input: the part-list key */
#define SEALED_LEN   (12 + 32 + 16)     /* nonce, data key, tag */
#define MASTER_FIELD "sse_master"
#define KDF_ITER     100000
#define DK_AAD       "ecfs-sse-dk-v2" /* v1's was "ecfs-sse-dk-v1" */
#define MK_AAD       "ecfs-sse-master-v1"

enum sse_mode { SSE_NONE = 0, SSE_S3, SSE_C };

/* Server-wide: the master key once unsealed. */
struct stor_sse_keys {
    pthread_mutex_t lock; /* protects master, have_master */
    bool have_kms;        /* immutable after creation */
    uint8_t kms[32];      /* immutable after creation */
    bool have_master;
    uint8_t master[32];
};

struct stor_sse {
    enum sse_mode mode;
    uint8_t dk[32]; /* the object's data key */
    uint8_t sealed[SEALED_LEN];
    char kmd5[CM_BASE64_LEN(16) + 1]; /* SSE-C */
    EVP_CIPHER_CTX *c;
    uint8_t *buf; /* one package; owned; allocated at first use */
    size_t blen;
    size_t bufhi; /* bytes of buf ever written (cleansed at free) */
    uint64_t pk;  /* write: the package being filled */
    /* write */
    EVP_MD_CTX *md5;
    struct cm_buf tags_hex;
    bool part;        /* write: a part of a multipart upload */
    uint8_t salt[16]; /* write: that part's key salt */
    /* read */
    uint64_t size;
    char *tags_copy;  /* owned copy of the tag list header */
    char *salts_copy; /* multipart: owned copy of the salts header */
    uint64_t *psize;  /* multipart: owned copy of the part sizes */
    size_t nparts;    /* multipart: how many (0: one stream) */
    uint8_t *tags;    /* decoded, owned */
    size_t ntags;
    struct stor_sse_seg *segs; /* decoded, owned: one, or one per part */
    size_t nseg;
    size_t kseg;       /* segment whose key is in c, or SIZE_MAX */
    char *pmac_copy;   /* multipart: owned copy of the part-list MAC */
    uint8_t pmkey[32]; /* multipart: the key of that MAC */
    uint64_t cached;   /* global package number in buf, or UINT64_MAX */
};

/* One independently sealed stream of packages: the whole object, or one
 * part of a multipart object (with its own key). */
struct stor_sse_seg {
    uint64_t start, size; /* plaintext offset and length */
    uint64_t tag0;        /* its package 0's index in x->tags */
    uint8_t salt[16];     /* multipart: the part key's salt */
};

/* ---- small crypto helpers ---- */

static pthread_once_t gcm_once = PTHREAD_ONCE_INIT;
static const EVP_CIPHER *gcm_cipher;

static void gcm_fetch(void)
{
    gcm_cipher = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
    if (gcm_cipher == NULL)
        gcm_cipher = EVP_aes_256_gcm();
}

/* AES-256-GCM, fetched once for the process: with EVP_aes_256_gcm() every
 * Init fetches it again in OpenSSL 3 (a locked lookup), and a GET pays
 * two Inits (the data key, the packages). */
static const EVP_CIPHER *gcm(void)
{
    pthread_once(&gcm_once, gcm_fetch);
    return gcm_cipher;
}

/* Nonce 0^4 + be64(@idx); AAD be64(@idx) + @final (0 or 1). */
static void pkg_iv(uint64_t idx, bool final, uint8_t iv[12], uint8_t aad[9])
{
    int i;

    memset(iv, 0, 4);
    for (i = 0; i < 8; i++) {
        iv[4 + i] = (uint8_t)(idx >> (56 - 8 * i));
        aad[i] = iv[4 + i];
    }
    aad[8] = final ? 1 : 0;
}

/* Seals the @len bytes at @buf in place as package @idx (the object's last
 * when @final); tag to @tag. */
static int pkg_seal(EVP_CIPHER_CTX *c, uint64_t idx, bool final, uint8_t *buf,
                    size_t len, uint8_t tag[16])
{
    uint8_t iv[12], aad[9];
    int outl = 0;

    pkg_iv(idx, final, iv, aad);
    if (EVP_EncryptInit_ex(c, NULL, NULL, NULL, iv) != 1 ||
        EVP_EncryptUpdate(c, NULL, &outl, aad, sizeof(aad)) != 1 ||
        (len > 0 && EVP_EncryptUpdate(c, buf, &outl, buf, (int)len) != 1) ||
        EVP_EncryptFinal_ex(c, buf + len, &outl) != 1 ||
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, tag) != 1)
        return -EIO;
    return 0;
}

/* Opens package @idx in place with context @c (key set). 0 or -EBADMSG. */
static int pkg_open_ctx(EVP_CIPHER_CTX *c, uint64_t idx, bool final,
                        uint8_t *buf, size_t len, const uint8_t tag[16])
{
    uint8_t iv[12], aad[9], t[16];
    int outl = 0;

    memcpy(t, tag, 16);
    pkg_iv(idx, final, iv, aad);
    if (EVP_DecryptInit_ex(c, NULL, NULL, NULL, iv) != 1 ||
        EVP_DecryptUpdate(c, NULL, &outl, aad, sizeof(aad)) != 1 ||
        (len > 0 && EVP_DecryptUpdate(c, buf, &outl, buf, (int)len) != 1) ||
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, 16, t) != 1 ||
        EVP_DecryptFinal_ex(c, buf + len, &outl) != 1)
        return -EBADMSG;
    return 0;
}

/* See sse.h. */
int stor_sse_pkg_seal(const uint8_t key[32], uint64_t idx, bool final,
                      uint8_t *buf, size_t len, uint8_t tag[16])
{
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int ret = -ENOMEM;

    if (c == NULL)
        return ret;
    ret = -EIO;
    if (len <= STOR_SSE_PKG &&
        EVP_EncryptInit_ex(c, gcm(), NULL, key, NULL) == 1)
        ret = pkg_seal(c, idx, final, buf, len, tag);
    EVP_CIPHER_CTX_free(c);
    return ret;
}

/* See sse.h. */
int stor_sse_pkg_open(const uint8_t key[32], uint64_t idx, bool final,
                      uint8_t *buf, size_t len, const uint8_t tag[16])
{
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int ret = -ENOMEM;

    if (c == NULL)
        return ret;
    ret = -EBADMSG;
    if (len <= STOR_SSE_PKG &&
        EVP_DecryptInit_ex(c, gcm(), NULL, key, NULL) == 1)
        ret = pkg_open_ctx(c, idx, final, buf, len, tag);
    EVP_CIPHER_CTX_free(c);
    return ret;
}

/* One-shot AES-256-GCM of 32 bytes @in under @kek into @out (nonce, ct,
 * tag) with a random nonce and AAD @aad. 0 or -EIO. */
static int seal32(const uint8_t kek[32], const char *aad, const uint8_t *in,
                  uint8_t out[SEALED_LEN])
{
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int outl = 0, ok;

    ok = c != NULL && RAND_bytes(out, 12) == 1 &&
         EVP_EncryptInit_ex(c, gcm(), NULL, kek, out) == 1 &&
         EVP_EncryptUpdate(c, NULL, &outl, (const uint8_t *)aad,
                           (int)strlen(aad)) == 1 &&
         EVP_EncryptUpdate(c, out + 12, &outl, in, 32) == 1 &&
         EVP_EncryptFinal_ex(c, out + 44, &outl) == 1 &&
         EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, out + 44) == 1;
    EVP_CIPHER_CTX_free(c);
    return ok ? 0 : -EIO;
}

/* Opens what seal32 made, in context @ctx (its cipher and key are set
 * anew; NULL: a context of its own); 0 or -EBADMSG (wrong key, altered). */
static int unseal32_ctx(EVP_CIPHER_CTX *ctx, const uint8_t kek[32],
                        const char *aad, const uint8_t in[SEALED_LEN],
                        uint8_t out[32])
{
    EVP_CIPHER_CTX *c = ctx ? ctx : EVP_CIPHER_CTX_new();
    uint8_t tag[16];
    int outl = 0, ok;

    memcpy(tag, in + 44, 16);
    ok = c != NULL && EVP_DecryptInit_ex(c, gcm(), NULL, kek, in) == 1 &&
         EVP_DecryptUpdate(c, NULL, &outl, (const uint8_t *)aad,
                           (int)strlen(aad)) == 1 &&
         EVP_DecryptUpdate(c, out, &outl, in + 12, 32) == 1 &&
         EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, 16, tag) == 1 &&
         EVP_DecryptFinal_ex(c, out + 32, &outl) == 1;
    if (ctx == NULL)
        EVP_CIPHER_CTX_free(c);
    return ok ? 0 : -EBADMSG;
}

static int unseal32(const uint8_t kek[32], const char *aad,
                    const uint8_t in[SEALED_LEN], uint8_t out[32])
{
    return unseal32_ctx(NULL, kek, aad, in, out);
}

/* The key of a multipart part: HMAC-SHA256(data key, PART_INFO ‖ salt),
 * so every part upload (a fresh random salt, also when a part number is
 * uploaded again) seals under its own key and nonces never repeat. */
static int part_key(const uint8_t dk[32], const uint8_t salt[16],
                    uint8_t out[32])
{
    uint8_t msg[sizeof(PART_INFO) - 1 + 16];
    unsigned len = 0;

    memcpy(msg, PART_INFO, sizeof(PART_INFO) - 1);
    memcpy(msg + sizeof(PART_INFO) - 1, salt, 16);
    return HMAC(EVP_sha256(), dk, 32, msg, sizeof(msg), out, &len) && len == 32
               ? 0
               : -EIO;
}

/* The part-list MAC of a multipart object: HMAC-SHA256 under @key of
 * be64(nparts) and, for each part in object order, be64(size) ‖ salt.
 * It binds the number, order and sizes of the parts, which the per-part
 * final flags cannot (whole trailing parts could be cut, or parts of one
 * size swapped, on the drives). 0 or -ENOMEM/-EIO. */
static int pmac_compute(const uint8_t key[32], const uint64_t *psize,
                        const uint8_t (*salts)[16], size_t nparts,
                        uint8_t out[32])
{
    size_t n = 8 + nparts * 24, i;
    uint8_t *m = malloc(n);
    unsigned len = 0;
    int ret;

    if (m == NULL)
        return -ENOMEM;
    for (i = 0; i < 8; i++)
        m[i] = (uint8_t)((uint64_t)nparts >> (56 - 8 * i));
    for (size_t p = 0; p < nparts; p++) {
        for (i = 0; i < 8; i++)
            m[8 + 24 * p + i] = (uint8_t)(psize[p] >> (56 - 8 * i));
        memcpy(m + 8 + 24 * p + 8, salts[p], 16);
    }
    ret = HMAC(EVP_sha256(), key, 32, m, n, out, &len) && len == 32 ? 0 : -EIO;
    free(m);
    return ret;
}

/* The key of the part-list MAC: HMAC-SHA256(master key, PMAC_INFO ‖ the
 * sealed data key's hex), from the master key, so the store's Complete
 * hook needs no SSE-C customer key. */
static int pmac_key(const uint8_t mk[32], const char *dk_hex, uint8_t out[32])
{
    uint8_t msg[sizeof(PMAC_INFO) - 1 + 2 * SEALED_LEN];
    unsigned len = 0;

    if (strlen(dk_hex) != 2 * SEALED_LEN)
        return -EBADMSG;
    memcpy(msg, PMAC_INFO, sizeof(PMAC_INFO) - 1);
    memcpy(msg + sizeof(PMAC_INFO) - 1, dk_hex, 2 * SEALED_LEN);
    return HMAC(EVP_sha256(), mk, 32, msg, sizeof(msg), out, &len) && len == 32
               ? 0
               : -EIO;
}

/* ---- the master key ---- */

/* See sse.h. */
int stor_sse_keys_create(const uint8_t *kms_key, struct stor_s3 *s3)
{
    struct stor_sse_keys *k = calloc(1, sizeof(*k));

    if (k == NULL)
        return -ENOMEM;
    pthread_mutex_init(&k->lock, NULL);
    if (kms_key) {
        k->have_kms = true;
        memcpy(k->kms, kms_key, 32);
    }
    s3->sse_keys = k;
    return 0;
}

/* See sse.h. */
void stor_sse_keys_destroy(struct stor_s3 *s3)
{
    struct stor_sse_keys *k = s3->sse_keys;

    if (k == NULL)
        return;
    if (s3->store)
        stor_store_set_mpu_hook(s3->store, NULL, NULL);
    pthread_mutex_destroy(&k->lock);
    OPENSSL_cleanse(k, sizeof(*k));
    free(k);
    s3->sse_keys = NULL;
}

/* See sse.h. */
int stor_sse_read_key_file(const char *path, uint8_t key[32], char *err,
                           size_t errlen)
{
    char buf[130];
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC), ret = -EINVAL;

    if (fd < 0) {
        ret = -errno;
        snprintf(err, errlen, "--kms-key-file %s: %s", path, strerror(-ret));
        return ret;
    }
    n = read(fd, buf, sizeof(buf));
    close(fd);
    if (n == 32) {
        memcpy(key, buf, 32);
        ret = 0;
    } else if (n >= 64 && n <= 66) {
        while (n > 64 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
            n--;
        if (n == 64 && cm_hex_decode(buf, 64, key) == 32)
            ret = 0;
    }
    OPENSSL_cleanse(buf, sizeof(buf));
    if (ret < 0)
        snprintf(err, errlen,
                 "--kms-key-file %s: must hold a 256-bit key: 32 bytes, or "
                 "64 hex digits",
                 path);
    return ret;
}

/* The key that seals the master key: the KMS file's ("kms") or one derived
 * from the root secret with @salt ("root"). 0 or -EINVAL/-EIO. */
static int master_kek(const struct stor_s3 *s3, const char *by,
                      const uint8_t salt[16], uint8_t kek[32])
{
    const struct stor_sse_keys *k = s3->sse_keys;

    if (strcmp(by, "kms") == 0) {
        if (!k->have_kms)
            return -EINVAL;
        memcpy(kek, k->kms, 32);
        return 0;
    }
    if (strcmp(by, "root") != 0)
        return -EINVAL;
    if (PKCS5_PBKDF2_HMAC(s3->root_secret, (int)strlen(s3->root_secret), salt,
                          16, KDF_ITER, EVP_sha256(), 32, kek) != 1)
        return -EIO;
    return 0;
}

/* Unseals the stored master key "v1:BY:SALT:SEALED". 0 or -errno. */
static int master_unseal(const struct stor_s3 *s3, const char *v,
                         uint8_t out[32])
{
    char by[8];
    uint8_t salt[16], sealed[SEALED_LEN], kek[32];
    const char *p = v, *c1, *c2, *c3;
    int ret;

    c1 = strchr(p, ':');
    c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    c3 = c2 ? strchr(c2 + 1, ':') : NULL;
    if (strncmp(v, "v1:", 3) != 0 || c3 == NULL ||
        (size_t)(c2 - c1 - 1) >= sizeof(by) || c3 - c2 - 1 != 32 ||
        strlen(c3 + 1) != 2 * SEALED_LEN ||
        cm_hex_decode(c2 + 1, 32, salt) != 16 ||
        cm_hex_decode(c3 + 1, 2 * SEALED_LEN, sealed) != SEALED_LEN)
        return -EBADMSG;
    memcpy(by, c1 + 1, (size_t)(c2 - c1 - 1));
    by[c2 - c1 - 1] = 0;
    ret = master_kek(s3, by, salt, kek);
    if (ret == 0)
        ret = unseal32(kek, MK_AAD, sealed, out);
    OPENSSL_cleanse(kek, sizeof(kek));
    return ret;
}

/* Makes, seals and stores a new master key. 0 or -errno. */
static int master_make(struct stor_s3 *s3, uint8_t out[32])
{
    uint8_t salt[16], kek[32], sealed[SEALED_LEN];
    char v[3 + 5 + 33 + 2 * SEALED_LEN + 4], sh[33], kh[2 * SEALED_LEN + 1];
    const char *by = s3->sse_keys->have_kms ? "kms" : "root";
    int ret;

    if (RAND_bytes(salt, 16) != 1 || RAND_bytes(out, 32) != 1)
        return -EIO;
    ret = master_kek(s3, by, salt, kek);
    if (ret == 0)
        ret = seal32(kek, MK_AAD, out, sealed);
    OPENSSL_cleanse(kek, sizeof(kek));
    if (ret < 0)
        return ret;
    cm_hex_encode(salt, 16, sh);
    cm_hex_encode(sealed, SEALED_LEN, kh);
    snprintf(v, sizeof(v), "v1:%s:%s:%s", by, sh, kh);
    return stor_iam_sys_conf_set(s3->iam, MASTER_FIELD, v);
}

/* The master key into @out, made when @create and there is none. Reads
 * and unseals once (PBKDF2: tens of ms), then memory. 0, -ENOENT (none and
 * !@create) or -errno (logged). */
static int master_get(struct stor_s3 *s3, bool create, uint8_t out[32])
{
    struct stor_sse_keys *k = s3->sse_keys;
    char *v;
    int ret = 0;

    pthread_mutex_lock(&k->lock);
    if (k->have_master)
        goto out_copy;
    v = stor_iam_sys_conf(s3->iam, MASTER_FIELD);
    if (v) {
        ret = master_unseal(s3, v, k->master);
        free(v);
        if (ret < 0)
            cm_log(CM_LOG_ERROR, -ret,
                   "sse: the SSE-S3 master key cannot be unsealed (were the "
                   "root credentials or --kms-key-file changed?)");
    } else if (create) {
        ret = master_make(s3, k->master);
        if (ret < 0)
            cm_log(CM_LOG_ERROR, -ret, "sse: cannot store a master key");
    } else {
        ret = -ENOENT;
    }
    if (ret < 0)
        goto out;
    k->have_master = true;
out_copy:
    memcpy(out, k->master, 32);
out:
    pthread_mutex_unlock(&k->lock);
    return ret;
}

/* See sse.h. */
void stor_sse_keys_warm(struct stor_s3 *s3)
{
    uint8_t k[32];

    if (s3->iam && stor_iam_ready(s3->iam) && master_get(s3, false, k) == 0)
        cm_log(CM_LOG_INFO, 0, "sse: SSE-S3 master key unsealed");
    OPENSSL_cleanse(k, sizeof(k));
}

/* ---- request headers ---- */

/* The SSE-C key of @r (the copy source's with @src): S3E_NONE and
 * *present false when none is named; else checks algorithm, key and MD5
 * as S3 does. */
static enum stor_s3_err ssec_parse(const struct stor_s3_req *r, bool src,
                                   uint8_t key[32], char *kmd5, bool *present)
{
    /* the names as constants: formatting them (three snprintf per GET)
     * showed in the 4 KiB GET profile */
#define SSEC_HDR(pfx, what) pfx "server-side-encryption-customer-" what
    static const char *const names[2][3] = {
        {SSEC_HDR("x-amz-", "algorithm"), SSEC_HDR("x-amz-", "key"),
         SSEC_HDR("x-amz-", "key-MD5")},
        {SSEC_HDR("x-amz-copy-source-", "algorithm"),
         SSEC_HDR("x-amz-copy-source-", "key"),
         SSEC_HDR("x-amz-copy-source-", "key-MD5")},
    };
#undef SSEC_HDR
    const char *const *name = names[src ? 1 : 0];
    const char *alg, *kv, *mv;
    size_t an = 0, kn = 0, mn = 0;
    uint8_t raw[48], md[16], given[24];

    alg = stor_s3_hdr(r, name[0], &an);
    kv = stor_s3_hdr(r, name[1], &kn);
    mv = stor_s3_hdr(r, name[2], &mn);
    *present = alg || kv || mv;
    if (!*present)
        return S3E_NONE;
    if (alg == NULL || kv == NULL || mv == NULL)
        return alg && !(an == 6 && memcmp(alg, "AES256", 6) == 0)
                   ? S3E_SSE_BAD_ALGORITHM
                   : S3E_SSE_BAD_KEY;
    if (!(an == 6 && memcmp(alg, "AES256", 6) == 0))
        return S3E_SSE_BAD_ALGORITHM;
    if (kn > 64 || cm_base64_decode(kv, kn, raw) != 32)
        return S3E_SSE_BAD_KEY;
    cm_md5(raw, 32, md);
    if (mn > 32 || cm_base64_decode(mv, mn, given) != 16 ||
        memcmp(given, md, 16) != 0) {
        OPENSSL_cleanse(raw, sizeof(raw));
        return S3E_SSE_BAD_KEY_MD5;
    }
    memcpy(key, raw, 32);
    OPENSSL_cleanse(raw, sizeof(raw));
    cm_base64_encode(md, 16, kmd5);
    return S3E_NONE;
}

static struct stor_sse *sse_alloc(enum sse_mode mode)
{
    struct stor_sse *x = calloc(1, sizeof(*x));

    if (x == NULL)
        return NULL;
    x->mode = mode;
    x->cached = UINT64_MAX;
    x->kseg = SIZE_MAX;
    cm_buf_init(&x->tags_hex, CM_BUF_NOLIMIT);
    x->c = EVP_CIPHER_CTX_new();
    if (x->c == NULL) {
        stor_sse_free(x);
        return NULL;
    }
    return x;
}

/* x->buf, allocated at first use (a read of whole packages never needs
 * it). 0 or -ENOMEM. */
static int need_buf(struct stor_sse *x)
{
    if (x->buf == NULL)
        x->buf = malloc(STOR_SSE_PKG + 16);
    return x->buf ? 0 : -ENOMEM;
}

/* See sse.h. */
void stor_sse_free(struct stor_sse *x)
{
    if (x == NULL)
        return;
    EVP_CIPHER_CTX_free(x->c);
    if (x->md5)
        EVP_MD_CTX_free(x->md5);
    if (x->buf) {
        /* only what was used, not 64 KiB for every small GET */
        OPENSSL_cleanse(x->buf, x->bufhi);
        free(x->buf);
    }
    cm_buf_fini(&x->tags_hex);
    free(x->tags);
    free(x->tags_copy);
    free(x->salts_copy);
    free(x->pmac_copy);
    free(x->psize);
    free(x->segs);
    OPENSSL_cleanse(x->dk, sizeof(x->dk));
    free(x);
}

/* See sse.h. */
enum stor_s3_err stor_sse_write_begin(struct stor_s3_req *r,
                                      struct stor_sse **out)
{
    uint8_t ckey[32], mk[32];
    char kmd5[CM_BASE64_LEN(16) + 1];
    const char *v;
    size_t n = 0, kn = 0;
    bool has_c = false;
    enum sse_mode mode = SSE_NONE;
    enum stor_s3_err e;
    struct stor_sse *x;
    char *def = NULL;
    int ret;

    *out = NULL;
    e = ssec_parse(r, false, ckey, kmd5, &has_c);
    if (e != S3E_NONE)
        return e;
    v = stor_s3_hdr(r, "x-amz-server-side-encryption", &n);
    if (has_c && v)
        return S3E_SSE_BAD_ALGORITHM; /* one or the other */
    if (v && n == 6 && memcmp(v, "AES256", 6) == 0)
        mode = SSE_S3;
    else if (v && n >= 7 && memcmp(v, "aws:kms", 7) == 0)
        return S3E_SSE_KMS_NOT_IMPLEMENTED;
    else if (v)
        return S3E_SSE_BAD_ALGORITHM;
    if (stor_s3_hdr(r, "x-amz-server-side-encryption-aws-kms-key-id", &kn) ||
        stor_s3_hdr(r, "x-amz-server-side-encryption-context", &kn))
        return S3E_SSE_KMS_NOT_IMPLEMENTED;
    if (has_c) {
        mode = SSE_C;
    } else if (mode == SSE_NONE) {
        def = stor_iam_bucket_conf(r->s3->iam, r->bucket, "encryption");
        if (def && strcmp(def, "AES256") == 0)
            mode = SSE_S3;
        free(def);
    }
    if (mode == SSE_NONE)
        return S3E_NONE;
    x = sse_alloc(mode);
    if (x == NULL)
        return S3E_INTERNAL;
    x->md5 = EVP_MD_CTX_new();
    if (need_buf(x) < 0 || x->md5 == NULL ||
        EVP_DigestInit_ex(x->md5, EVP_md5(), NULL) != 1 ||
        RAND_bytes(x->dk, 32) != 1 ||
        EVP_EncryptInit_ex(x->c, gcm(), NULL, x->dk, NULL) != 1) {
        stor_sse_free(x);
        return S3E_INTERNAL;
    }
    if (mode == SSE_C) {
        ret = seal32(ckey, DK_AAD, x->dk, x->sealed);
        memcpy(x->kmd5, kmd5, sizeof(kmd5));
        OPENSSL_cleanse(ckey, sizeof(ckey));
    } else {
        ret = master_get(r->s3, true, mk);
        if (ret == 0)
            ret = seal32(mk, DK_AAD, x->dk, x->sealed);
        OPENSSL_cleanse(mk, sizeof(mk));
    }
    if (ret < 0) {
        stor_sse_free(x);
        return S3E_INTERNAL;
    }
    *out = x;
    return S3E_NONE;
}

/* See sse.h. */
int stor_sse_put_headers(struct stor_sse *x, struct stor_put *p)
{
    char hex[2 * SEALED_LEN + 1];
    int ret;

    cm_hex_encode(x->sealed, SEALED_LEN, hex);
    ret =
        stor_put_add_header(p, HDR_MODE, x->mode == SSE_C ? "SSE-C" : "AES256");
    if (ret == 0)
        ret = stor_put_add_header(p, HDR_FMT, "2");
    if (ret == 0)
        ret = stor_put_add_header(p, HDR_DK, hex);
    if (ret == 0 && x->mode == SSE_C)
        ret = stor_put_add_header(p, HDR_KMD5, x->kmd5);
    return ret;
}

/* Appends header @name: @value to *@h (*@n). 0 or -ENOMEM. */
static int hdr_push(struct stor_hdr **h, size_t *n, const char *name,
                    const char *value)
{
    struct stor_hdr *nh = realloc(*h, (*n + 1) * sizeof(*nh));

    if (nh == NULL)
        return -ENOMEM;
    *h = nh;
    nh[*n].name = strdup(name);
    nh[*n].value = strdup(value);
    if (nh[*n].name == NULL || nh[*n].value == NULL) {
        free(nh[*n].name);
        free(nh[*n].value);
        return -ENOMEM;
    }
    (*n)++;
    return 0;
}

/* See sse.h. */
enum stor_s3_err stor_sse_mpu_create(struct stor_s3_req *r, struct stor_hdr **h,
                                     size_t *n, struct stor_sse **out)
{
    char hex[2 * SEALED_LEN + 1];
    uint8_t mk[32];
    struct stor_sse *x;
    enum stor_s3_err e = stor_sse_write_begin(r, &x);
    int ret;

    *out = NULL;
    if (e != S3E_NONE || x == NULL)
        return e;
    /* the part-list MAC at Complete is keyed from the master key, also
     * for SSE-C: made now, not under the Complete's lock */
    if (master_get(r->s3, true, mk) < 0) {
        stor_sse_free(x);
        return S3E_INTERNAL;
    }
    OPENSSL_cleanse(mk, sizeof(mk));
    cm_hex_encode(x->sealed, SEALED_LEN, hex);
    ret = hdr_push(h, n, HDR_MODE, x->mode == SSE_C ? "SSE-C" : "AES256");
    if (ret == 0)
        ret = hdr_push(h, n, HDR_FMT, "2");
    if (ret == 0)
        ret = hdr_push(h, n, HDR_DK, hex);
    if (ret == 0 && x->mode == SSE_C)
        ret = hdr_push(h, n, HDR_KMD5, x->kmd5);
    if (ret < 0) {
        stor_sse_free(x);
        return S3E_INTERNAL;
    }
    *out = x;
    return S3E_NONE;
}

/* The @n salts of the joined list @sp (32 hex digits each, ',' between)
 * into @out. 0 or -EBADMSG. */
static int salts_parse(const char *sp, size_t n, uint8_t (*out)[16])
{
    for (size_t i = 0; i < n; i++) {
        if (strspn(sp, "0123456789abcdefABCDEF") != 32 ||
            cm_hex_decode(sp, 32, out[i]) != 16)
            return -EBADMSG;
        sp += 32;
        if (*sp != (i + 1 < n ? ',' : '\0'))
            return -EBADMSG;
        if (*sp)
            sp++;
    }
    return 0;
}

static const char *hdrs_find(const struct stor_hdr *h, size_t n,
                             const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(h[i].name, name) == 0)
            return h[i].value;
    return NULL;
}

/* The store's Complete hook (stor_mpu_hook_fn): checks the part and
 * object checksums the Complete named and stores a FULL_OBJECT upload's
 * whole-body CRC (cksum.h), and for an encrypted upload adds the
 * part-list MAC (HDR_PMAC) to the object's headers. */
static int mpu_seal_hook(void *arg, struct stor_hdr **hdrs, size_t *nhdrs,
                         const uint64_t *psize, size_t nparts)
{
    struct stor_s3 *s3 = arg;
    const char *mode = hdrs_find(*hdrs, *nhdrs, HDR_MODE);
    const char *dk = hdrs_find(*hdrs, *nhdrs, HDR_DK);
    const char *salts = hdrs_find(*hdrs, *nhdrs, HDR_PSALT);
    uint8_t(*sl)[16], mk[32], k[32], mac[32];
    char hex[65], full[96];
    enum stor_cksum fk;
    int ret = stor_s3_cksum_complete(*hdrs, *nhdrs, psize, nparts, &fk, full,
                                     sizeof(full));

    if (ret == 0 && fk != STOR_CKSUM_NONE) /* the whole body's, as a PUT's */
        ret = hdr_push(hdrs, nhdrs, stor_s3_cksum_hdr(fk), full);
    if (ret < 0 || mode == NULL)
        return ret;
    sl = malloc(nparts * sizeof(*sl));
    if (sl == NULL)
        return -ENOMEM;
    ret = dk && salts ? salts_parse(salts, nparts, sl) : -EBADMSG;
    if (ret < 0)
        cm_log(CM_LOG_ERROR, 0,
               "sse: an encrypted upload lists a part that was not sealed");
    if (ret == 0)
        ret = master_get(s3, false, mk);
    if (ret == 0)
        ret = pmac_key(mk, dk, k);
    if (ret == 0)
        ret = pmac_compute(k, psize, (const uint8_t(*)[16])sl, nparts, mac);
    OPENSSL_cleanse(mk, sizeof(mk));
    OPENSSL_cleanse(k, sizeof(k));
    free(sl);
    if (ret < 0)
        return ret == -ENOMEM ? ret : -EIO;
    cm_hex_encode(mac, 32, hex);
    return hdr_push(hdrs, nhdrs, HDR_PMAC, hex);
}

/* See sse.h. */
void stor_sse_attach(struct stor_s3 *s3)
{
    stor_store_set_mpu_hook(s3->store, mpu_seal_hook, s3);
}

static enum stor_s3_err open_key(struct stor_s3_req *r,
                                 const struct stor_obj_info *in, bool source,
                                 struct stor_sse **out);

/* See sse.h. */
enum stor_s3_err stor_sse_mpu_complete_check(struct stor_s3_req *r,
                                             const char *upload_id)
{
    struct stor_obj_info ui;
    struct stor_sse *x = NULL;
    enum stor_s3_err e;
    int ret;

    memset(&ui, 0, sizeof(ui));
    ret = stor_mpu_upload_headers(r->s3->store, r->bucket, r->key, r->key_len,
                                  upload_id, &ui.hdrs, &ui.nhdrs);
    if (ret < 0) /* gone (perhaps completed: a retry), or no memory */
        return ret == -STOR_ENOUPLOAD ? S3E_NONE : S3E_INTERNAL;
    e = open_key(r, &ui, false, &x);
    stor_obj_info_fini(&ui);
    stor_sse_free(x);
    return e;
}

/* See sse.h. */
enum stor_s3_err stor_sse_part_begin(struct stor_s3_req *r,
                                     const char *upload_id,
                                     struct stor_sse **out)
{
    struct stor_obj_info ui;
    struct stor_sse *x = NULL;
    uint8_t k[32];
    enum stor_s3_err e;
    int ret;

    *out = NULL;
    memset(&ui, 0, sizeof(ui));
    ret = stor_mpu_upload_headers(r->s3->store, r->bucket, r->key, r->key_len,
                                  upload_id, &ui.hdrs, &ui.nhdrs);
    if (ret < 0)
        return stor_s3_err_from_errno(ret);
    e = open_key(r, &ui, false, &x);
    stor_obj_info_fini(&ui);
    if (e != S3E_NONE || x == NULL)
        return e;
    x->part = true;
    x->md5 = EVP_MD_CTX_new();
    ret = need_buf(x) == 0 && x->md5 != NULL &&
                  EVP_DigestInit_ex(x->md5, EVP_md5(), NULL) == 1 &&
                  RAND_bytes(x->salt, 16) == 1 &&
                  part_key(x->dk, x->salt, k) == 0 &&
                  EVP_EncryptInit_ex(x->c, gcm(), NULL, k, NULL) == 1
              ? 0
              : -EIO;
    OPENSSL_cleanse(k, sizeof(k));
    if (ret < 0) {
        stor_sse_free(x);
        return S3E_INTERNAL;
    }
    *out = x;
    return S3E_NONE;
}

/* Seals the filled package (the last one when @final) and writes it. */
static int put_package(struct stor_sse *x, struct stor_put *p, bool final)
{
    uint8_t tag[16];
    char th[33];
    int ret = pkg_seal(x->c, x->pk, final, x->buf, x->blen, tag);

    if (ret < 0)
        return ret;
    cm_hex_encode(tag, 16, th);
    if (cm_buf_append(&x->tags_hex, th, 32) < 0)
        return -ENOMEM;
    ret = x->blen ? stor_put_write(p, x->buf, x->blen) : 0;
    x->pk++;
    x->blen = 0;
    return ret;
}

/* See sse.h. */
int stor_sse_put_write(struct stor_sse *x, struct stor_put *p, const void *data,
                       size_t len)
{
    const uint8_t *d = data;
    int ret;

    if (x == NULL)
        return stor_put_write(p, data, len);
    if (EVP_DigestUpdate(x->md5, data, len) != 1)
        return -EIO;
    while (len > 0) {
        size_t n;

        if (x->blen == STOR_SSE_PKG) {
            /* held back until now: more bytes follow, so not the last */
            ret = put_package(x, p, false);
            if (ret < 0)
                return ret;
        }
        n = CM_MIN(len, (size_t)STOR_SSE_PKG - x->blen);
        memcpy(x->buf + x->blen, d, n);
        x->blen += n;
        x->bufhi = CM_MAX(x->bufhi, x->blen);
        d += n;
        len -= n;
    }
    return 0;
}

/* See sse.h. */
int stor_sse_put_finish(struct stor_sse *x, struct stor_put *p,
                        const uint8_t *expect_md5)
{
    uint8_t md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    char etag[33];
    int ret;

    /* the last package, held back (empty for a 0-byte object) */
    ret = put_package(x, p, true);
    if (ret < 0)
        return ret;
    if (EVP_DigestFinal_ex(x->md5, md, &mdlen) != 1)
        return -EIO;
    if (expect_md5 && memcmp(expect_md5, md, 16) != 0)
        return -STOR_EBADDIGEST;
    cm_hex_encode(md, 16, etag);
    ret = stor_put_add_header(p, HDR_TAGS,
                              x->tags_hex.data ? x->tags_hex.data : "");
    if (ret == 0 && x->part) { /* Complete joins it with the others' */
        char sh[33];

        cm_hex_encode(x->salt, 16, sh);
        ret = stor_put_add_header(p, HDR_SALT, sh);
    }
    if (ret == 0)
        ret = stor_put_set_etag(p, etag);
    return ret;
}

/* ---- reading ---- */

static const char *info_hdr(const struct stor_obj_info *in, const char *name)
{
    size_t i;

    for (i = 0; i < in->nhdrs; i++)
        if (strcmp(in->hdrs[i].name, name) == 0)
            return in->hdrs[i].value;
    return NULL;
}

/* See sse.h. */
int stor_sse_tags_decode(const char *hex, size_t n, uint64_t size,
                         uint8_t **tags, size_t *ntags)
{
    uint64_t want = size ? (size + STOR_SSE_PKG - 1) / STOR_SSE_PKG : 1;
    uint8_t *t;

    *tags = NULL;
    *ntags = 0;
    if (n % 32 != 0 || n / 32 != want)
        return -EBADMSG;
    t = malloc((size_t)want * 16);
    if (t == NULL)
        return -ENOMEM;
    if (cm_hex_decode(hex, n, t) != (long)(want * 16)) {
        free(t);
        return -EBADMSG;
    }
    *tags = t;
    *ntags = (size_t)want;
    return 0;
}

/* The stored key state of @in (an object's or an upload's headers) opened
 * for request @r (its SSE-C key, the copy source's with @source): *out
 * NULL for plaintext (refusing SSE-C headers on it), else a struct with
 * the data key and mode. @what names the thing in logs. */
static enum stor_s3_err open_key(struct stor_s3_req *r,
                                 const struct stor_obj_info *in, bool source,
                                 struct stor_sse **out)
{
    const char *mode = info_hdr(in, HDR_MODE), *dk = info_hdr(in, HDR_DK);
    const char *km = info_hdr(in, HDR_KMD5), *fmt = info_hdr(in, HDR_FMT);
    uint8_t ckey[32], sealed[SEALED_LEN], kek[32];
    char kmd5[CM_BASE64_LEN(16) + 1];
    bool has_c = false;
    enum stor_s3_err e;
    struct stor_sse *x;
    int ret;

    *out = NULL;
    e = ssec_parse(r, source, ckey, kmd5, &has_c);
    if (mode == NULL) /* plaintext: an SSE-C key does not apply */
        return e != S3E_NONE ? e : has_c ? S3E_SSE_NOT_APPLICABLE : S3E_NONE;
    if (e != S3E_NONE)
        return e;
    if (dk == NULL || strlen(dk) != 2 * SEALED_LEN ||
        cm_hex_decode(dk, 2 * SEALED_LEN, sealed) != SEALED_LEN) {
        cm_log(CM_LOG_ERROR, 0, "req=%016llX %s: encryption headers damaged",
               (unsigned long long)r->http.id, r->bucket);
        return S3E_INTERNAL;
    }
    if (fmt == NULL || strcmp(fmt, "2") != 0) {
        /* v1 (before the final-package flag) cannot tell a cut at a
         * package boundary from the real end: never read as if whole */
        cm_log(CM_LOG_ERROR, 0,
               "req=%016llX %s: object encrypted in layout %s, which storaged "
               "no longer reads (its end is not authenticated); refused",
               (unsigned long long)r->http.id, r->bucket,
               fmt ? fmt : "1 (no x-ecfs-sse-fmt)");
        return S3E_SSE_OLD_LAYOUT;
    }
    if (strcmp(mode, "SSE-C") == 0) {
        if (!has_c)
            return S3E_SSE_KEY_REQUIRED;
        if (km && strcmp(km, kmd5) != 0)
            return S3E_SSE_KEY_MISMATCH;
        memcpy(kek, ckey, 32);
    } else {
        if (has_c)
            return S3E_SSE_NOT_APPLICABLE;
        if (master_get(r->s3, false, kek) < 0)
            return S3E_INTERNAL;
    }
    OPENSSL_cleanse(ckey, sizeof(ckey));
    x = sse_alloc(strcmp(mode, "SSE-C") == 0 ? SSE_C : SSE_S3);
    if (x == NULL) {
        OPENSSL_cleanse(kek, sizeof(kek));
        return S3E_INTERNAL;
    }
    /* in the package context (seg_key sets it to the data key next): one
     * EVP context per GET, not two */
    ret = unseal32_ctx(x->c, kek, DK_AAD, sealed, x->dk);
    OPENSSL_cleanse(kek, sizeof(kek));
    if (ret < 0) {
        e = x->mode == SSE_C ? S3E_SSE_KEY_MISMATCH : S3E_INTERNAL;
        stor_sse_free(x);
        return e;
    }
    memcpy(x->sealed, sealed, SEALED_LEN);
    if (km)
        snprintf(x->kmd5, sizeof(x->kmd5), "%s", km);
    *out = x;
    return S3E_NONE;
}

static int open_package(struct stor_sse *x, struct stor_get *g, size_t si,
                        uint64_t pk, uint8_t *dst);

/* See sse.h. */
enum stor_s3_err stor_sse_read_open(struct stor_s3_req *r,
                                    const struct stor_obj_info *in, bool source,
                                    struct stor_sse **out)
{
    const char *tags = info_hdr(in, HDR_TAGS);
    const char *ptags = info_hdr(in, HDR_PTAGS),
               *psalt = info_hdr(in, HDR_PSALT);
    enum stor_s3_err e;
    struct stor_sse *x;
    uint8_t none[16]; /* the empty package's room: nothing */
    int ret;

    e = open_key(r, in, source, out);
    if (e != S3E_NONE || *out == NULL)
        return e;
    x = *out;
    *out = NULL;
    x->size = in->size;
    if (tags == NULL && ptags && psalt && in->nparts > 0 && in->part_size) {
        /* a multipart object: one sealed stream per part */
        const char *pmac = info_hdr(in, HDR_PMAC);
        uint8_t mk[32];

        x->nparts = (size_t)in->nparts;
        x->psize = malloc(x->nparts * sizeof(*x->psize));
        x->salts_copy = strdup(psalt);
        x->pmac_copy = pmac ? strdup(pmac) : NULL;
        if (x->psize)
            memcpy(x->psize, in->part_size, x->nparts * sizeof(*x->psize));
        tags = ptags;
        ret = pmac ? master_get(r->s3, false, mk) : -EBADMSG;
        if (ret == 0)
            ret = pmac_key(mk, info_hdr(in, HDR_DK), x->pmkey);
        OPENSSL_cleanse(mk, sizeof(mk));
        if (ret < 0 || x->pmac_copy == NULL) {
            cm_log(CM_LOG_ERROR, 0,
                   "req=%016llX %s: the part list of an encrypted multipart "
                   "object cannot be checked (no MAC, or no master key)",
                   (unsigned long long)r->http.id, r->bucket);
            stor_sse_free(x);
            return ret == -EBADMSG ? S3E_SSE_DAMAGED : S3E_INTERNAL;
        }
    } else if (tags == NULL) {
        cm_log(CM_LOG_ERROR, 0, "req=%016llX %s: encryption headers damaged",
               (unsigned long long)r->http.id, r->bucket);
        stor_sse_free(x);
        return S3E_INTERNAL;
    }
    x->tags_copy = strdup(tags);
    if (x->tags_copy == NULL ||
        (x->nparts && (x->psize == NULL || x->salts_copy == NULL))) {
        stor_sse_free(x);
        return S3E_INTERNAL;
    }
    if (x->size == 0 && (ret = open_package(x, NULL, 0, 0, none)) < 0) {
        /* nothing to read, but the empty package proves the end */
        stor_sse_free(x);
        return ret == -ENOMEM ? S3E_INTERNAL : S3E_SSE_DAMAGED;
    }
    *out = x;
    return S3E_NONE;
}

/* Packages of a stream of @size bytes (a 0-byte one has one, empty). */
static uint64_t pkg_count(uint64_t size)
{
    return size ? (size + STOR_SSE_PKG - 1) / STOR_SSE_PKG : 1;
}

/* See sse.h. */
int stor_sse_segs_decode(const char *tags, const char *salts,
                         const uint64_t *psize, size_t nparts, uint64_t size,
                         uint8_t **tags_out, struct stor_sse_seg **segs_out,
                         size_t *nseg)
{
    struct stor_sse_seg *sg = calloc(nparts, sizeof(*sg));
    uint64_t total = 0, ntag = 0;
    uint8_t *t = NULL, (*sl)[16];
    const char *tp = tags;
    size_t i;

    *tags_out = NULL;
    *segs_out = NULL;
    *nseg = 0;
    if (sg == NULL)
        return -ENOMEM;
    for (i = 0; i < nparts; i++) {
        if (psize[i] > UINT64_MAX - total)
            goto bad;
        sg[i].start = total;
        sg[i].size = psize[i];
        sg[i].tag0 = ntag;
        total += psize[i];
        ntag += pkg_count(psize[i]);
    }
    if (total != size || ntag > SIZE_MAX / 16)
        goto bad;
    t = malloc((size_t)ntag * 16);
    if (t == NULL) {
        free(sg);
        return -ENOMEM;
    }
    for (i = 0; i < nparts; i++) {
        size_t tn = strcspn(tp, ",");
        uint64_t want = pkg_count(sg[i].size);

        if (tn != want * 32 ||
            cm_hex_decode(tp, tn, t + sg[i].tag0 * 16) != (long)(want * 16))
            goto bad;
        tp += tn;
        if (i + 1 < nparts) {
            if (*tp != ',')
                goto bad;
            tp++;
        }
    }
    if (*tp)
        goto bad;
    sl = malloc(nparts * sizeof(*sl));
    if (sl == NULL || salts_parse(salts, nparts, sl) < 0) {
        free(sl);
        goto bad;
    }
    for (i = 0; i < nparts; i++)
        memcpy(sg[i].salt, sl[i], 16);
    free(sl);
    *tags_out = t;
    *segs_out = sg;
    *nseg = nparts;
    return 0;
bad:
    free(t);
    free(sg);
    return -EBADMSG;
}

/* Checks the part-list MAC of decoded multipart segments. 0, -ENOMEM or
 * -EIO (logged). */
static int pmac_check(struct stor_sse *x)
{
    uint8_t(*sl)[16] = malloc(x->nseg * sizeof(*sl)), mac[32], want[32];
    int ret = sl ? 0 : -ENOMEM;

    for (size_t i = 0; sl && i < x->nseg; i++)
        memcpy(sl[i], x->segs[i].salt, 16);
    if (ret == 0)
        ret = pmac_compute(x->pmkey, x->psize, (const uint8_t(*)[16])sl,
                           x->nseg, mac);
    free(sl);
    if (ret < 0)
        return ret;
    if (strlen(x->pmac_copy) != 64 ||
        cm_hex_decode(x->pmac_copy, 64, want) != 32 ||
        CRYPTO_memcmp(mac, want, 32) != 0) {
        cm_log(CM_LOG_ERROR, 0,
               "sse: the part list of an encrypted multipart object fails its "
               "MAC: parts were cut, swapped or resized on the drives");
        return -EIO;
    }
    return 0;
}

/* Decodes the tag list (and for a multipart object the parts) at first
 * use. 0, -ENOMEM or -EIO (damaged, logged). */
static int read_prepare(struct stor_sse *x)
{
    int ret;

    if (x->segs)
        return 0;
    if (x->nparts) {
        ret = stor_sse_segs_decode(x->tags_copy, x->salts_copy, x->psize,
                                   x->nparts, x->size, &x->tags, &x->segs,
                                   &x->nseg);
        if (ret == 0 && (ret = pmac_check(x)) < 0) {
            free(x->tags);
            free(x->segs);
            x->tags = NULL;
            x->segs = NULL;
            x->nseg = 0;
            return ret;
        }
    } else {
        ret = stor_sse_tags_decode(x->tags_copy, strlen(x->tags_copy), x->size,
                                   &x->tags, &x->ntags);
        if (ret == 0) {
            x->segs = calloc(1, sizeof(*x->segs));
            if (x->segs == NULL)
                return -ENOMEM;
            x->segs[0].size = x->size;
            x->nseg = 1;
        }
    }
    if (ret == -EBADMSG)
        cm_log(CM_LOG_ERROR, 0,
               "sse: the stored tag list does not fit the object's size%s",
               x->nparts ? " and parts" : "");
    return ret == -ENOMEM ? ret : ret < 0 ? -EIO : 0;
}

/* Puts segment @si's key in x->c. 0 or -EIO. */
static int seg_key(struct stor_sse *x, size_t si)
{
    uint8_t k[32];
    int ret = 0;

    if (x->kseg == si)
        return 0;
    if (x->nparts)
        ret = part_key(x->dk, x->segs[si].salt, k);
    else
        memcpy(k, x->dk, 32);
    if (ret == 0 && EVP_DecryptInit_ex(x->c, gcm(), NULL, k, NULL) != 1)
        ret = -EIO;
    OPENSSL_cleanse(k, sizeof(k));
    x->kseg = ret == 0 ? si : SIZE_MAX;
    return ret;
}

/* The segment holding plaintext offset @off (< size). */
static size_t seg_find(const struct stor_sse *x, uint64_t off)
{
    size_t lo = 0, hi = x->nseg;

    while (hi - lo > 1) { /* the last segment starting at or before off */
        size_t mid = lo + (hi - lo) / 2;

        if (x->segs[mid].start <= off)
            lo = mid;
        else
            hi = mid;
    }
    while (lo + 1 < x->nseg && x->segs[lo].size == 0) /* empty parts */
        lo++;
    return lo;
}

/* The plaintext length of package @pk of segment @si. */
static size_t pkg_len(const struct stor_sse *x, size_t si, uint64_t pk)
{
    const struct stor_sse_seg *sg = &x->segs[si];

    return (size_t)CM_MIN((uint64_t)STOR_SSE_PKG, sg->size - pk * STOR_SSE_PKG);
}

/* Opens package @pk of segment @si, whose ciphertext is at @dst, in
 * place (x prepared). 0 or -errno (-EIO: it fails its tag, logged). */
static int open_at(struct stor_sse *x, size_t si, uint64_t pk, uint8_t *dst)
{
    size_t len = pkg_len(x, si, pk);
    bool last = pk + 1 == pkg_count(x->segs[si].size);
    int ret = seg_key(x, si);

    if (ret < 0)
        return ret;
    if (pkg_open_ctx(x->c, pk, last, dst, len,
                     x->tags + (x->segs[si].tag0 + pk) * 16) < 0) {
        cm_log(CM_LOG_ERROR, 0,
               "sse: package %llu%s of part %zu fails its tag: the stored "
               "object or its tags were altered or cut short",
               (unsigned long long)pk, last ? " (the last)" : "", si + 1);
        return -EIO;
    }
    return 0;
}

/* Reads exactly @len stored bytes at @off into @dst. 0 or -errno (-EIO:
 * the object ended first). */
static int read_exact(struct stor_get *g, uint64_t off, uint8_t *dst,
                      size_t len)
{
    size_t got = 0;

    while (got < len) {
        ssize_t n = stor_get_read(g, off + got, dst + got, len - got);

        if (n <= 0)
            return n < 0 ? (int)n : -EIO;
        got += (size_t)n;
    }
    return 0;
}

/* Bytes of the whole packages of segment @si from package @pk on that fit
 * in @room (at least package @pk's, which the caller checked). */
static size_t read_run(const struct stor_sse *x, size_t si, uint64_t pk,
                       size_t room)
{
    const struct stor_sse_seg *sg = &x->segs[si];
    uint64_t left = sg->size - pk * STOR_SSE_PKG; /* to the part's end */

    if (left <= room)
        return (size_t)left;
    return room - room % STOR_SSE_PKG; /* only full packages before it */
}

/* Reads package @pk of segment @si's ciphertext into @dst (pkg_len bytes)
 * and opens it there. 0 or -errno (-EIO: it fails its tag). */
static int open_package(struct stor_sse *x, struct stor_get *g, size_t si,
                        uint64_t pk, uint8_t *dst)
{
    int ret = read_prepare(x);

    if (ret == 0)
        ret = read_exact(g, x->segs[si].start + pk * STOR_SSE_PKG, dst,
                         pkg_len(x, si, pk));
    return ret < 0 ? ret : open_at(x, si, pk, dst);
}

/* See sse.h. */
int stor_sse_open_inplace(struct stor_sse *x, uint8_t *body, uint64_t first,
                          uint64_t len)
{
    uint64_t off = first, end = first + len;
    int ret = read_prepare(x);

    while (ret == 0 && off < end && off < x->size) {
        size_t si = seg_find(x, off);
        uint64_t pk = (off - x->segs[si].start) / STOR_SSE_PKG;
        uint64_t at = x->segs[si].start + pk * STOR_SSE_PKG;

        ret = open_at(x, si, pk, body + at);
        off = at + pkg_len(x, si, pk);
    }
    x->cached = UINT64_MAX; /* nothing of this is in x->buf */
    return ret;
}

/* See sse.h. */
ssize_t stor_sse_get_read(struct stor_sse *x, struct stor_get *g, uint64_t off,
                          void *buf, size_t len)
{
    uint8_t *o = buf;
    size_t done = 0;
    int ret;

    if (x == NULL)
        return stor_get_read(g, off, buf, len);
    ret = read_prepare(x);
    if (ret < 0)
        return ret;
    while (done < len && off < x->size) {
        size_t si = seg_find(x, off), in, n, pl;
        uint64_t rel = off - x->segs[si].start, pk = rel / STOR_SSE_PKG;
        uint64_t gid = x->segs[si].tag0 + pk; /* the package's number */

        in = (size_t)(rel - pk * STOR_SSE_PKG);
        pl = pkg_len(x, si, pk);
        if (in == 0 && x->cached != gid && len - done >= pl) {
            /* whole packages: the run of them that fits, in this part,
             * read with one call (a stripe-sized stream read is one
             * store read, not one per 64 KiB package) and opened in the
             * caller's buffer, no copy */
            size_t run = read_run(x, si, pk, len - done);

            ret = read_exact(g, off, o + done, run);
            for (size_t at = 0; ret == 0 && at < run; pk++) {
                ret = open_at(x, si, pk, o + done + at);
                at += pkg_len(x, si, pk);
            }
            if (ret < 0)
                return ret;
            done += run;
            off += run;
            continue;
        }
        if (x->cached != gid) {
            x->cached = UINT64_MAX;
            ret = need_buf(x);
            if (ret == 0)
                ret = open_package(x, g, si, pk, x->buf);
            if (ret < 0)
                return ret;
            x->cached = gid;
            x->blen = pl;
            x->bufhi = CM_MAX(x->bufhi, pl);
        }
        n = CM_MIN(len - done, x->blen - in);
        memcpy(o + done, x->buf + in, n);
        done += n;
        off += n;
    }
    return (ssize_t)done;
}

/* See sse.h. */
bool stor_sse_info_is_s3(const struct stor_obj_info *in)
{
    const char *mode = info_hdr(in, HDR_MODE);

    return mode != NULL && strcmp(mode, "AES256") == 0;
}

/* See sse.h. */
bool stor_sse_is_s3(const struct stor_sse *x)
{
    return x != NULL && x->mode == SSE_S3;
}

/* See sse.h. */
int stor_sse_info_resp_headers(const struct stor_obj_info *in,
                               struct stor_resp *rs)
{
    const char *mode = info_hdr(in, HDR_MODE), *km = info_hdr(in, HDR_KMD5);
    int ret;

    if (mode == NULL)
        return 0;
    if (strcmp(mode, "SSE-C") != 0)
        return stor_resp_hdr(rs, "x-amz-server-side-encryption", "AES256");
    ret = stor_resp_hdr(rs, "x-amz-server-side-encryption-customer-algorithm",
                        "AES256");
    if (ret == 0 && km)
        ret = stor_resp_hdr(rs, "x-amz-server-side-encryption-customer-key-MD5",
                            "%s", km);
    return ret;
}

/* See sse.h. */
int stor_sse_resp_headers(const struct stor_sse *x, struct stor_resp *rs)
{
    int ret;

    if (x == NULL)
        return 0;
    if (x->mode == SSE_S3)
        return stor_resp_hdr(rs, "x-amz-server-side-encryption", "AES256");
    ret = stor_resp_hdr(rs, "x-amz-server-side-encryption-customer-algorithm",
                        "AES256");
    if (ret == 0)
        ret = stor_resp_hdr(rs, "x-amz-server-side-encryption-customer-key-MD5",
                            "%s", x->kmd5);
    return ret;
}

/* ---- bucket default encryption ---- */

struct enc_xml {
    int depth;
    struct cm_buf text;
    int rules;
    char alg[16];
    bool bad;
};

static void enc_start(void *ud, const char *name, const char **attrs)
{
    struct enc_xml *x = ud;
    const char *c = strrchr(name, ':');

    (void)attrs;
    x->depth++;
    cm_buf_reset(&x->text);
    if (strcmp(c ? c + 1 : name, "Rule") == 0)
        x->rules++;
}

static void enc_text(void *ud, const char *s, int len)
{
    struct enc_xml *x = ud;

    if (cm_buf_append(&x->text, s, (size_t)len) < 0)
        x->bad = true;
}

static void enc_end(void *ud, const char *name)
{
    struct enc_xml *x = ud;
    const char *c = strrchr(name, ':');

    x->depth--;
    if (strcmp(c ? c + 1 : name, "SSEAlgorithm") == 0) {
        if (x->alg[0] || x->text.len == 0 || x->text.len >= sizeof(x->alg))
            x->bad = true;
        else
            memcpy(x->alg, x->text.data, x->text.len);
    }
    cm_buf_reset(&x->text);
}

/* See sse.h. */
enum stor_s3_err stor_sse_config_parse(const char *xml, size_t len, char *alg)
{
    static const struct stor_s3_xml_cbs cb = {enc_start, enc_end, enc_text};
    struct enc_xml x;
    enum stor_s3_err e;

    memset(&x, 0, sizeof(x));
    e = stor_s3_xml_parse_conf(xml, len, &x, &cb, &x.text, 4096, &x.bad);
    if (e == S3E_NONE && (x.rules != 1 || x.alg[0] == 0))
        e = S3E_MALFORMED_XML;
    else if (e == S3E_NONE && strncmp(x.alg, "aws:kms", 7) == 0)
        e = S3E_SSE_KMS_NOT_IMPLEMENTED;
    else if (e == S3E_NONE && strcmp(x.alg, "AES256") != 0)
        e = S3E_MALFORMED_XML;
    if (e == S3E_NONE)
        memcpy(alg, x.alg, 7);
    return e;
}

/* See sse.h. */
void stor_sse_bucket_op(struct stor_s3_req *r)
{
    struct stor_bucket_info bi;
    struct stor_resp *rs = &r->http.resp;
    char alg[8] = "", *v;
    enum stor_s3_err e;
    int ret = stor_bucket_stat(r->s3->store, r->bucket, &bi);

    if (ret < 0) {
        stor_s3_error(r, stor_s3_err_from_errno(ret));
        return;
    }
    if (r->http.is_get || r->http.is_head) {
        v = stor_iam_bucket_conf(r->s3->iam, r->bucket, "encryption");
        if (v == NULL) {
            stor_s3_error(r, S3E_NO_SSE_CONFIG);
            return;
        }
        ret = cm_buf_appendf(
            &rs->body,
            S3_XML_DECL "<ServerSideEncryptionConfiguration xmlns=\"" S3_XMLNS
                        "\"><Rule><ApplyServerSideEncryptionByDefault>"
                        "<SSEAlgorithm>%s</SSEAlgorithm>"
                        "</ApplyServerSideEncryptionByDefault>"
                        "<BucketKeyEnabled>false</BucketKeyEnabled></Rule>"
                        "</ServerSideEncryptionConfiguration>",
            v);
        free(v);
        if (ret == 0)
            ret = stor_resp_hdr(rs, "Content-Type", "application/xml");
        if (ret < 0)
            stor_s3_error(r, S3E_INTERNAL);
        else
            rs->status = 200;
        return;
    }
    if (r->http.is_put) {
        e = stor_sse_config_parse(r->body.data ? r->body.data : "", r->body.len,
                                  alg);
        if (e != S3E_NONE) {
            stor_s3_error(r, e);
            return;
        }
    }
    ret =
        stor_iam_bucket_conf_set(r, "encryption", r->http.is_put ? alg : NULL);
    if (ret < 0) {
        cm_log(CM_LOG_ERROR, -ret, "req=%016llX %s: bucket encryption",
               (unsigned long long)r->http.id, r->bucket);
        stor_s3_error(r, S3E_INTERNAL);
        return;
    }
    rs->status = r->http.is_put ? 200 : 204;
}
