/* storaged/s3/attrs.c - GetObjectAttributes (GET /bucket/key?attributes
 * with x-amz-object-attributes: ETag, Checksum, ObjectParts, StorageClass,
 * ObjectSize), also of a version and of an SSE-C object (its key is
 * required, as for HEAD).
 *
 * What it answers comes from the object's info: the ETag without quotes,
 * the full-object checksum stored with a PutObject (x-amz-checksum-*,
 * type FULL_OBJECT), the parts of a multipart object (numbered by their
 * position in the completed list, with their sizes, paged with
 * x-amz-max-parts and x-amz-part-number-marker), STANDARD and the size.
 * A multipart upload created with x-amz-checksum-algorithm answers its
 * composite checksum ("...-N", type COMPOSITE) and each part's own. */
#include "storaged/s3/tagging.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "storaged/s3/cksum.h"
#include "storaged/s3/s3_i.h"
#include "storaged/s3/sse.h"
#include "storaged/s3/versioning.h"
#include "storaged/s3/xout.h"

enum {
    A_ETAG = 1,
    A_CKSUM = 2,
    A_PARTS = 4,
    A_CLASS = 8,
    A_SIZE = 16,
};

/* The attributes x-amz-object-attributes asks for (a comma list), or -1
 * for a name S3 does not define; 0 when the header is missing. */
static int wanted(const struct stor_s3_req *r)
{
    static const char *const names[] = {"ETag", "Checksum", "ObjectParts",
                                        "StorageClass", "ObjectSize"};
    size_t n = 0, i, l;
    const char *v = stor_s3_hdr(r, "x-amz-object-attributes", &n), *e;
    int m = 0;

    if (v == NULL)
        return 0;
    for (e = v + n; v < e;) {
        const char *c = memchr(v, ',', (size_t)(e - v));
        const char *t = c ? c : e;
        bool ok = false;

        while (v < t && *v == ' ')
            v++;
        l = (size_t)(t - v);
        while (l > 0 && v[l - 1] == ' ')
            l--;
        for (i = 0; i < CM_ARRAY_SIZE(names) && l > 0; i++)
            if (strlen(names[i]) == l && memcmp(v, names[i], l) == 0) {
                m |= 1 << i;
                ok = true;
            }
        if (!ok && l > 0)
            return -1;
        v = c ? c + 1 : e;
    }
    return m;
}

/* A non-negative integer header, @def when absent; -1 when malformed. */
static long num_hdr(const struct stor_s3_req *r, const char *name, long def)
{
    size_t n = 0;
    const char *v = stor_s3_hdr(r, name, &n);
    uint64_t x;

    if (v == NULL)
        return def;
    if (stor_http_parse_u64(v, n, &x) < 0 || x > 1000000)
        return -1;
    return (long)x;
}

/* The <Checksum> of a stored full-object checksum, or of a multipart
 * object's composite one, if any. */
static void checksum_xml(struct cm_buf *b, const struct stor_obj_info *in)
{
    char comp[128];
    bool full;
    size_t i;
    int k;

    k = (int)stor_s3_cksum_of_mpu(in->hdrs, in->nhdrs, in->nparts, NULL, comp,
                                  sizeof(comp), &full);
    if (k != STOR_CKSUM_NONE) {
        x_lit(b, "<Checksum>");
        x_str(b, stor_s3_cksum_xml((enum stor_cksum)k), comp, false);
        x_fmt(b, "<ChecksumType>%s</ChecksumType></Checksum>",
              full ? "FULL_OBJECT" : "COMPOSITE");
        return;
    }
    for (i = 0; i < in->nhdrs; i++)
        for (k = 1; k < STOR_CKSUM_COUNT; k++)
            if (strcmp(in->hdrs[i].name,
                       stor_s3_cksum_hdr((enum stor_cksum)k)) == 0) {
                x_lit(b, "<Checksum>");
                x_str(b, stor_s3_cksum_xml((enum stor_cksum)k),
                      in->hdrs[i].value, false);
                x_lit(b, "<ChecksumType>FULL_OBJECT</ChecksumType>"
                         "</Checksum>");
                return;
            }
}

static void parts_xml(struct cm_buf *b, const struct stor_obj_info *in,
                      long max, long marker)
{
    long i, end;
    char comp[128];
    const char *joined = NULL, *pv;
    bool full;
    enum stor_cksum k = stor_s3_cksum_of_mpu(
        in->hdrs, in->nhdrs, in->nparts, &joined, comp, sizeof(comp), &full);

    x_fmt(b, "<ObjectParts><PartsCount>%d</PartsCount>", in->nparts);
    if (in->nparts == 0 || in->part_size == NULL) {
        x_lit(b, "</ObjectParts>");
        return;
    }
    end = marker + max < in->nparts ? marker + max : in->nparts;
    x_fmt(b,
          "<PartNumberMarker>%ld</PartNumberMarker><MaxParts>%ld</MaxParts>"
          "<IsTruncated>%s</IsTruncated>",
          marker, max, end < in->nparts ? "true" : "false");
    if (end < in->nparts)
        x_fmt(b, "<NextPartNumberMarker>%ld</NextPartNumberMarker>", end);
    pv = joined;
    for (i = 0; pv && i < marker; i++) /* the marker's part's checksum */
        pv = strchr(pv, ',') ? strchr(pv, ',') + 1 : NULL;
    for (i = marker; i < end; i++) {
        x_fmt(b, "<Part><PartNumber>%ld</PartNumber><Size>%llu</Size>", i + 1,
              (unsigned long long)in->part_size[i]);
        if (k != STOR_CKSUM_NONE && pv) { /* each part's own */
            size_t n = strcspn(pv, ",");

            x_fmt(b, "<%s>%.*s</%s>", stor_s3_cksum_xml(k), (int)n, pv,
                  stor_s3_cksum_xml(k));
            pv = pv[n] ? pv + n + 1 : NULL;
        }
        x_lit(b, "</Part>");
    }
    x_lit(b, "</ObjectParts>");
}

/* See tagging.h. */
void stor_s3_attributes_op(struct stor_s3_req *r)
{
    struct stor_obj_info info;
    struct stor_get *g = NULL;
    struct stor_sse *x = NULL;
    struct cm_buf *b = &r->http.resp.body;
    char bucket[64], lm[CM_TIME_HTTP_LEN + 1];
    char *key = NULL;
    size_t klen = 0;
    const char *vid;
    enum stor_s3_err e;
    int want = wanted(r), ret;
    long max = num_hdr(r, "x-amz-max-parts", 1000);
    long marker = num_hdr(r, "x-amz-part-number-marker", 0);

    if (want <= 0 || max < 0 || marker < 0) {
        stor_s3_error(r,
                      want == 0 ? S3E_INVALID_REQUEST : S3E_INVALID_ARGUMENT);
        return;
    }
    if (max > 1000)
        max = 1000;
    e = stor_s3_locate_version(r, stor_s3_query(r, "versionId"), bucket, &key,
                               &klen);
    if (e != S3E_NONE) {
        stor_s3_error(r, e);
        return;
    }
    memset(&info, 0, sizeof(info));
    /* part sizes come with an open reader (stor_obj_stat leaves them out) */
    ret = stor_get_open(r->s3->store, bucket, key, klen, &info, &g);
    free(key);
    if (ret < 0) {
        stor_s3_error(r, stor_s3_err_from_errno(ret));
        return;
    }
    stor_get_close(g);
    stor_ver_info_fix(&info);
    e = stor_sse_read_open(r, &info, false, &x);
    if (e != S3E_NONE) {
        stor_s3_error(r, e);
        goto out;
    }
    x_lit(b,
          S3_XML_DECL "<GetObjectAttributesResponse xmlns=\"" S3_XMLNS "\">");
    if (want & A_ETAG)
        x_str(b, "ETag", info.etag, false);
    if (want & A_CKSUM)
        checksum_xml(b, &info);
    if ((want & A_PARTS) && info.nparts > 0)
        parts_xml(b, &info, max, marker);
    if (want & A_CLASS)
        x_lit(b, "<StorageClass>STANDARD</StorageClass>");
    if (want & A_SIZE)
        x_fmt(b, "<ObjectSize>%llu</ObjectSize>",
              (unsigned long long)info.size);
    x_lit(b, "</GetObjectAttributesResponse>");
    cm_time_http(info.mtime, lm);
    vid = stor_ver_info_vid(&info);
    if (stor_resp_hdr(&r->http.resp, "Last-Modified", "%s", lm) < 0 ||
        (strcmp(vid, "null") != 0 &&
         stor_resp_hdr(&r->http.resp, "x-amz-version-id", "%s", vid) < 0) ||
        stor_sse_resp_headers(x, &r->http.resp) < 0) {
        stor_s3_error(r, S3E_INTERNAL);
        goto out;
    }
    xml_done(r);
out:
    stor_sse_free(x);
    stor_obj_info_fini(&info);
}
