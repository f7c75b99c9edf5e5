/* storaged/store/inspect.c - `storaged inspect PATH`: print one metadata file.
 *
 * Recognises a meta record (magic ECFSMET1: object, tombstone, multipart
 * upload or part), a drive format record and, failing those, a shard file,
 * whose block CRCs cannot be checked without the data id in its name: the
 * name HEX.DATAID gives it, so shard files are verified when named so. */
#include "storaged/store/inspect.h"

#include "storaged/store/drive.h"
#include "storaged/store/meta.h"
#include "storaged/store/obj_i.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Readable name of a meta record type. */
static const char *type_name(int t)
{
    switch (t) {
    case STOR_META_OBJECT:
        return "object";
    case STOR_META_TOMBSTONE:
        return "tombstone";
    case STOR_META_PART:
        return "multipart part";
    case STOR_META_UPLOAD:
        return "multipart upload";
    default:
        return "?";
    }
}

/* Prints bytes as a C-like escaped string (keys may hold any byte). */
static void put_escaped(FILE *out, const char *p, size_t n)
{
    fputc('"', out);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];

        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            fprintf(out, "\\x%02x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

/* Prints @ns as an ISO-8601 UTC time with milliseconds. */
static void put_time(FILE *out, int64_t ns)
{
    time_t t = (time_t)(ns / 1000000000LL);
    struct tm tm;
    char buf[64];

    gmtime_r(&t, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(out, "%s.%03dZ", buf, (int)((ns / 1000000LL) % 1000));
}

/* Decodes and prints one meta record; -EBADMSG when corrupt. */
static int print_meta(const char *path, const uint8_t *p, size_t n, FILE *out)
{
    struct stor_meta m;
    int ret = stor_meta_decode(p, n, &m);

    if (ret < 0) {
        fprintf(out, "%s: corrupt meta record (%zu bytes): %s\n", path, n,
                ret == -EBADMSG ? "bad length, CRC-64 or field"
                                : strerror(-ret));
        return ret;
    }
    fprintf(out, "file:      %s\n", path);
    fprintf(out, "record:    %s (ECFSMET1, %zu bytes, CRC-64 ok)\n",
            type_name(m.type), n);
    fprintf(out, "key:       ");
    put_escaped(out, m.key ? m.key : "", m.key_len);
    fprintf(out, " (%zu bytes)\n", m.key_len);
    fprintf(out, "version:   %llu (", (unsigned long long)m.version);
    put_time(out, (int64_t)m.version);
    fprintf(out, ")\nmtime:     ");
    put_time(out, m.mtime_ns);
    fprintf(out, "\nsize:      %llu\n", (unsigned long long)m.size);
    fprintf(out, "%s %s\n",
            m.type == STOR_META_UPLOAD ? "upload id:" : "etag:     ", m.etag);
    fprintf(out, "geometry:  %d data + %d parity, this drive holds shard %d\n",
            m.k, m.m, m.shard);
    if (m.block)
        fprintf(out, "block:     %u bytes per shard block (+8 CRC-64)\n",
                m.block);
    if (m.has_inline && m.has_xref)
        fprintf(out,
                "data:      shard of %zu bytes in extent file "
                ".ecfs.sys/ext/%08x.x at offset %llu\n",
                m.inl_len, (unsigned)m.xfile, (unsigned long long)m.xoff);
    else if (m.has_inline)
        fprintf(out, "data:      inline shard, %zu bytes\n", m.inl_len);
    for (size_t i = 0; i < m.nhdrs; i++)
        fprintf(out, "header:    %s: %s\n", m.hdrs[i].name, m.hdrs[i].value);
    for (size_t i = 0; i < m.nparts; i++)
        fprintf(out, "part:      #%d size %llu data id %016llx etag %s\n",
                m.parts[i].number, (unsigned long long)m.parts[i].size,
                (unsigned long long)m.parts[i].dataid, m.parts[i].etag);
    stor_meta_fini(&m);
    return 0;
}

/* Contract in inspect.h. */
int stor_inspect(const char *path, FILE *out)
{
    struct stat st;
    uint8_t *p = NULL;
    ssize_t got;
    int fd, ret;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        ret = -errno;
        fprintf(out, "%s: %s\n", path, strerror(-ret));
        return ret;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
        st.st_size > STOR_META_MAX) {
        close(fd);
        fprintf(out, "%s: not a metadata file\n", path);
        return -EINVAL;
    }
    p = malloc((size_t)st.st_size + 1);
    if (p == NULL) {
        close(fd);
        return -ENOMEM;
    }
    got = pread(fd, p, (size_t)st.st_size, 0);
    close(fd);
    if (got != st.st_size) {
        free(p);
        fprintf(out, "%s: short read\n", path);
        return -EIO;
    }
    p[got] = 0;
    if (got >= 8 && memcmp(p, STOR_META_MAGIC, 8) == 0) {
        ret = print_meta(path, p, (size_t)got, out);
    } else if (strstr(path, "format") && strstr((char *)p, "deployment=")) {
        fprintf(out, "file:      %s\nrecord:    drive format\n%s", path,
                (char *)p);
        ret = 0;
    } else {
        fprintf(out,
                "%s: not an ecfs metadata record (%zu bytes; shard "
                "files hold [CRC-64][block] pairs, see FORMAT.md)\n",
                path, (size_t)got);
        ret = -EBADMSG;
    }
    free(p);
    return ret;
}
