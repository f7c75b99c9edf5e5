/* tests/unit/fc_listxml_test.c - ListObjectsV2/Error parsing and the
 * directory snapshot built from pages (names, dedup, sort, markers). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fuse/inode.h"
#include "fuse/listxml.h"

static const char page1[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
    "<Name>b</Name><Prefix>d/</Prefix><KeyCount>4</KeyCount>"
    "<MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter>"
    "<IsTruncated>true</IsTruncated>"
    "<NextContinuationToken>tok+/=1</NextContinuationToken>"
    "<Contents><Key>d/</Key><Size>0</Size><ETag>&quot;m&quot;</ETag>"
    "<LastModified>2026-01-02T03:04:05.000Z</LastModified></Contents>"
    "<Contents><Key>d/b &amp; c.jpg</Key><Size>12345678901</Size>"
    "<ETag>&quot;e1&quot;</ETag>"
    "<LastModified>2026-01-02T03:04:05.000Z</LastModified></Contents>"
    "<Contents><Key>d/sub</Key><Size>3</Size><ETag>\"e2\"</ETag></Contents>"
    "<CommonPrefixes><Prefix>d/sub/</Prefix></CommonPrefixes>"
    "<CommonPrefixes><Prefix>d/\xc3\xbc/</Prefix></CommonPrefixes>"
    "</ListBucketResult>";

static const char page2[] =
    "<ListBucketResult><IsTruncated>false</IsTruncated>"
    "<Contents><Key>d/a.txt</Key><Size>1</Size><ETag>\"e3\"</ETag>"
    "</Contents><Contents><Key>d/..</Key><Size>1</Size></Contents>"
    "</ListBucketResult>";

static void test_parse_page(void **state)
{
    struct fc_listpage p;

    (void)state;
    fc_listpage_init(&p);
    assert_int_equal(fc_listxml_parse(page1, strlen(page1), &p), 0);
    assert_true(p.truncated);
    assert_string_equal(p.next_token, "tok+/=1");
    assert_int_equal(p.nobjs, 3);
    assert_string_equal(p.objs[1].key, "d/b & c.jpg");
    assert_true(p.objs[1].size == 12345678901ull);
    assert_string_equal(p.objs[1].etag, "\"e1\"");
    assert_int_equal((long)p.objs[1].mtime, 1767323045L);
    assert_int_equal(p.nprefixes, 2);
    assert_string_equal(p.prefixes[1], "d/\xc3\xbc/");
    assert_null(p.error_code);
    fc_listpage_fini(&p);
}

static void test_parse_error_and_garbage(void **state)
{
    static const char err[] = "<?xml version=\"1.0\"?><Error><Code>"
                              "NoSuchBucket</Code><Message>x</Message>"
                              "</Error>";
    struct fc_listpage p;

    (void)state;
    fc_listpage_init(&p);
    assert_int_equal(fc_listxml_parse(err, strlen(err), &p), 0);
    assert_string_equal(p.error_code, "NoSuchBucket");
    assert_int_equal(p.nobjs, 0);
    fc_listpage_fini(&p);
    assert_int_equal(fc_listxml_parse("<a><b></a>", 10, &p), -EBADMSG);
    fc_listpage_fini(&p);
    assert_int_equal(fc_listxml_parse("", 0, &p), -EBADMSG);
    fc_listpage_fini(&p);
}

/* encoding-type=url answers: keys and prefixes are decoded ('+' is a
 * space, as AWS encodes it), the token is not; without EncodingType the
 * same text is taken raw; a decoded NUL or bad escape leaves "". */
static void test_url_encoded_page(void **state)
{
    static const char enc[] =
        "<ListBucketResult><EncodingType>url</EncodingType>"
        "<NextContinuationToken>a%2B</NextContinuationToken>"
        "<Contents><Key>d/ctl%01x</Key><Size>1</Size></Contents>"
        "<Contents><Key>d/a+b%2Bc%25</Key><Size>1</Size></Contents>"
        "<Contents><Key>d/nul%00x</Key><Size>1</Size></Contents>"
        "<Contents><Key>d/bad%zz</Key><Size>1</Size></Contents>"
        "<CommonPrefixes><Prefix>d/cr%0D/</Prefix></CommonPrefixes>"
        "</ListBucketResult>";
    static const char raw[] =
        "<ListBucketResult>"
        "<Contents><Key>d/a+b%2Bc%25</Key><Size>1</Size></Contents>"
        "</ListBucketResult>";
    struct fc_listpage p;

    (void)state;
    fc_listpage_init(&p);
    assert_int_equal(fc_listxml_parse(enc, strlen(enc), &p), 0);
    assert_string_equal(p.next_token, "a%2B");
    assert_int_equal(p.nobjs, 4);
    assert_string_equal(p.objs[0].key, "d/ctl\x01x");
    assert_string_equal(p.objs[1].key, "d/a b+c%");
    assert_string_equal(p.objs[2].key, "");
    assert_string_equal(p.objs[3].key, "");
    assert_int_equal(p.nprefixes, 1);
    assert_string_equal(p.prefixes[0], "d/cr\r/");
    fc_listpage_fini(&p);
    assert_int_equal(fc_listxml_parse(raw, strlen(raw), &p), 0);
    assert_string_equal(p.objs[0].key, "d/a+b%2Bc%25");
    fc_listpage_fini(&p);
}

static void test_build_listing(void **state)
{
    struct fc_listpage pages[2];
    struct fc_listing *l;
    const struct fc_dirent *d;

    (void)state;
    fc_listpage_init(&pages[0]);
    fc_listpage_init(&pages[1]);
    assert_int_equal(fc_listxml_parse(page1, strlen(page1), &pages[0]), 0);
    assert_int_equal(fc_listxml_parse(page2, strlen(page2), &pages[1]), 0);
    l = fc_listing_build("d/", pages, 2, 1.0);
    assert_non_null(l);
    /* marker "d/" and ".." dropped; "sub" file shadowed by "sub/" dir */
    assert_int_equal(l->n, 4);
    assert_true(l->has_marker); /* "d/" itself was listed */
    assert_string_equal(l->ents[0].name, "a.txt");
    assert_string_equal(l->ents[1].name, "b & c.jpg");
    assert_string_equal(l->ents[2].name, "sub");
    assert_true(l->ents[2].is_dir);
    assert_string_equal(l->ents[3].name, "\xc3\xbc");
    d = fc_listing_find(l, "b & c.jpg");
    assert_non_null(d);
    assert_false(d->is_dir);
    assert_true(d->size == 12345678901ull);
    assert_null(fc_listing_find(l, "zzz"));
    assert_null(fc_listing_find(l, ""));
    fc_listing_unref(l);
    l = fc_listing_build("e/", NULL, 0, 1.0);
    assert_non_null(l);
    assert_false(l->has_marker);
    fc_listing_unref(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_page),
        cmocka_unit_test(test_parse_error_and_garbage),
        cmocka_unit_test(test_url_encoded_page),
        cmocka_unit_test(test_build_listing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
