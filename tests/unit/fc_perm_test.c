/* tests/unit/fc_perm_test.c - ecfs's own permission checks (fuse/perm.c)
 * against the kernel's rules: one class of bits (owner, else group, else
 * other), supplementary groups, root's bypass (but not of a file no one
 * may execute), the sticky bit, and setattr's owner/root rules (chmod,
 * chown, chgrp, explicit times versus touch, truncate, the set-id bits a
 * writer's chmod may drop). The integration test test_fuse_perm.py
 * compares whole mounts with tmpfs. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <linux/capability.h>

#include "fuse/perm.h"

/* @c: a caller @uid/@gid with @n supplementary groups from @g. */
static void cred(struct fc_cred *c, uid_t uid, gid_t gid, const gid_t *g, int n)
{
    memset(c, 0, sizeof(*c));
    c->uid = uid;
    c->gid = gid;
    c->req = NULL;
    c->ngroups = n;
    c->groups = c->inline_groups;
    for (int i = 0; i < n; i++)
        c->inline_groups[i] = g[i];
}

static struct stat file(mode_t mode, uid_t uid, gid_t gid)
{
    struct stat st;

    memset(&st, 0, sizeof(st));
    st.st_mode = mode;
    st.st_uid = uid;
    st.st_gid = gid;
    return st;
}

static void test_classes(void **state)
{
    const gid_t sup[] = {300, 301};
    struct fc_cred owner;
    cred(&owner, 100, 200, NULL, 0);
    struct fc_cred grp;
    cred(&grp, 101, 200, NULL, 0);
    struct fc_cred sgrp;
    cred(&sgrp, 102, 250, sup, 2);
    struct fc_cred other;
    cred(&other, 103, 250, NULL, 0);
    /* owner may nothing, group and others may all: the owner is refused
     * (one class applies, never the union) */
    struct stat f = file(S_IFREG | 0077, 100, 200);
    struct stat g = file(S_IFREG | 0640, 100, 301);

    (void)state;
    assert_int_equal(fc_perm_check(&owner, &f, R_OK), -EACCES);
    assert_int_equal(fc_perm_check(&grp, &f, R_OK | W_OK | X_OK), 0);
    assert_int_equal(fc_perm_check(&other, &f, W_OK), 0);
    /* group 301 is a supplementary group of sgrp */
    assert_int_equal(fc_perm_check(&sgrp, &g, R_OK), 0);
    assert_int_equal(fc_perm_check(&sgrp, &g, W_OK), -EACCES);
    assert_int_equal(fc_perm_check(&other, &g, R_OK), -EACCES);
    /* a group refused what others may: the group member is refused */
    struct stat h = file(S_IFREG | 0604, 100, 200);
    assert_int_equal(fc_perm_check(&grp, &h, R_OK), -EACCES);
    assert_int_equal(fc_perm_check(&other, &h, R_OK), 0);
    assert_int_equal(fc_perm_check(&owner, &h, R_OK | W_OK), 0);
    assert_int_equal(fc_perm_check(&owner, &h, X_OK), -EACCES);
    /* F_OK (0) asks nothing */
    assert_int_equal(fc_perm_check(&other, &g, F_OK), 0);
}

static void test_root(void **state)
{
    struct fc_cred root;
    cred(&root, 0, 0, NULL, 0);
    struct stat none = file(S_IFREG | 0000, 100, 200);
    struct stat ox = file(S_IFREG | 0001, 100, 200);
    struct stat dir = file(S_IFDIR | 0000, 100, 200);

    (void)state;
    assert_int_equal(fc_perm_check(&root, &none, R_OK | W_OK), 0);
    assert_int_equal(fc_perm_check(&root, &none, X_OK), -EACCES);
    assert_int_equal(fc_perm_check(&root, &ox, X_OK), 0);
    assert_int_equal(fc_perm_check(&root, &dir, R_OK | W_OK | X_OK), 0);
}

/* REVIEW-perm S2: capabilities decide, not uid 0. A root caller that
 * dropped them is refused like anyone; CAP_DAC_READ_SEARCH reads and
 * searches only; a non-root caller with CAP_DAC_OVERRIDE or CAP_FOWNER
 * gets what they give. */
static void test_caps(void **state)
{
    struct fc_cred bare, rs, ovr, fown;
    cred(&bare, 0, 0, NULL, 0);
    bare.caps_state = 1; /* read: none */
    cred(&rs, 0, 0, NULL, 0);
    rs.caps_state = 1;
    rs.caps = 1u << CAP_DAC_READ_SEARCH;
    cred(&ovr, 103, 250, NULL, 0);
    ovr.caps_state = 1;
    ovr.caps = 1u << CAP_DAC_OVERRIDE;
    cred(&fown, 103, 250, NULL, 0);
    fown.caps_state = 1;
    fown.caps = 1u << CAP_FOWNER;
    struct stat priv = file(S_IFREG | 0600, 100, 200);
    struct stat pdir = file(S_IFDIR | 0700, 100, 200);
    struct stat tmp = file(S_IFDIR | 01777, 102, 0);
    struct stat attr = file(S_IFREG | 0644, 100, 200);
    mode_t mode;

    (void)state;
    assert_int_equal(fc_perm_check(&bare, &priv, R_OK), -EACCES);
    assert_int_equal(fc_perm_check(&bare, &pdir, X_OK), -EACCES);
    assert_int_equal(fc_perm_sticky(&bare, &tmp, &priv), -EPERM);
    assert_int_equal(
        fc_perm_setattr(&bare, &priv, &attr, FUSE_SET_ATTR_MODE, false, &mode),
        -EPERM);
    assert_int_equal(fc_perm_check(&rs, &priv, R_OK), 0);
    assert_int_equal(fc_perm_check(&rs, &priv, W_OK), -EACCES);
    assert_int_equal(fc_perm_check(&rs, &pdir, R_OK | X_OK), 0);
    assert_int_equal(fc_perm_check(&rs, &pdir, W_OK), -EACCES);
    assert_int_equal(fc_perm_check(&ovr, &priv, R_OK | W_OK), 0);
    assert_int_equal(fc_perm_check(&ovr, &priv, X_OK), -EACCES);
    assert_int_equal(fc_perm_check(&ovr, &pdir, W_OK | X_OK), 0);
    assert_int_equal(fc_perm_sticky(&fown, &tmp, &priv), 0);
    assert_int_equal(
        fc_perm_setattr(&fown, &priv, &attr, FUSE_SET_ATTR_MODE, false, &mode),
        0);
    assert_int_equal(
        fc_perm_setattr(&fown, &priv, &attr, FUSE_SET_ATTR_UID, false, &mode),
        -EPERM); /* giving away needs CAP_CHOWN */
}

/* The set-id bits a write, truncate or chown clears (the kernel's
 * setattr_should_drop_suidgid and notify_change), and the kernel's own
 * kill-priv chmod that may drop only some of them. */
static void test_kill_bits(void **state)
{
    struct fc_cred oth, ingrp, fsetid;
    cred(&oth, 103, 250, NULL, 0);
    oth.caps_state = 1;
    cred(&ingrp, 104, 100, NULL, 0);
    ingrp.caps_state = 1;
    cred(&fsetid, 103, 250, NULL, 0);
    fsetid.caps_state = 1;
    fsetid.caps = 1u << CAP_FSETID;
    struct stat sid = file(S_IFREG | 06666, 100, 100);
    struct stat at = file(S_IFREG | 02666, 100, 100);
    mode_t m;

    (void)state;
    assert_int_equal(fc_perm_kill_bits(&oth, S_IFREG | 06666, 100, false),
                     S_ISUID | S_ISGID); /* outside the group */
    assert_int_equal(fc_perm_kill_bits(&ingrp, S_IFREG | 06666, 100, false),
                     S_ISUID); /* set-gid without group x stays */
    assert_int_equal(fc_perm_kill_bits(&ingrp, S_IFREG | 06755, 100, false),
                     S_ISUID | S_ISGID);
    assert_int_equal(fc_perm_kill_bits(&fsetid, S_IFREG | 06755, 100, false),
                     0);
    assert_int_equal(fc_perm_kill_bits(&fsetid, S_IFREG | 06755, 100, true),
                     S_ISUID | S_ISGID); /* a chown clears anyway */
    assert_int_equal(fc_perm_kill_bits(&oth, S_IFDIR | 06755, 100, false), 0);
    assert_int_equal(fc_perm_kill_bits(&oth, S_IFREG | 0755, 100, true), 0);
    /* the kernel's kill-priv chmod may drop the set-uid bit alone */
    assert_int_equal(
        fc_perm_setattr(&oth, &sid, &at, FUSE_SET_ATTR_MODE, false, &m), 0);
    at = file(S_IFREG | 04666, 100, 100);
    assert_int_equal(
        fc_perm_setattr(&oth, &sid, &at, FUSE_SET_ATTR_MODE, false, &m), 0);
    at = file(S_IFREG | 07666, 100, 100); /* adding a bit is not a kill */
    assert_int_equal(
        fc_perm_setattr(&oth, &sid, &at, FUSE_SET_ATTR_MODE, false, &m),
        -EPERM);
}

static void test_sticky(void **state)
{
    struct fc_cred a, b;
    cred(&a, 100, 100, NULL, 0);
    cred(&b, 101, 100, NULL, 0);
    struct fc_cred d, root;
    cred(&d, 102, 100, NULL, 0);
    cred(&root, 0, 0, NULL, 0);
    struct stat tmp = file(S_IFDIR | 01777, 102, 0);
    struct stat plain = file(S_IFDIR | 0777, 102, 0);
    struct stat fa = file(S_IFREG | 0666, 100, 100);

    (void)state;
    assert_int_equal(fc_perm_sticky(&a, &tmp, &fa), 0); /* its owner */
    assert_int_equal(fc_perm_sticky(&d, &tmp, &fa), 0); /* the dir's */
    assert_int_equal(fc_perm_sticky(&root, &tmp, &fa), 0);
    assert_int_equal(fc_perm_sticky(&b, &tmp, &fa), -EPERM);
    assert_int_equal(fc_perm_sticky(&b, &plain, &fa), 0);
}

static void test_setattr(void **state)
{
    const gid_t sup[] = {500};
    struct fc_cred own, oth;
    cred(&own, 100, 100, sup, 1);
    cred(&oth, 101, 101, NULL, 0);
    struct fc_cred root;
    cred(&root, 0, 0, NULL, 0);
    struct stat cur = file(S_IFREG | 0644, 100, 100);
    struct stat wr = file(S_IFREG | 0666, 100, 100);
    struct stat at;
    const int touch = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW |
                      FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW;
    mode_t m;

    (void)state;
    at = file(S_IFREG | 0600, 100, 100);
    /* chmod: owner or root */
    assert_int_equal(
        fc_perm_setattr(&own, &cur, &at, FUSE_SET_ATTR_MODE, false, &m), 0);
    assert_int_equal(m, S_IFREG | 0600);
    assert_int_equal(
        fc_perm_setattr(&oth, &cur, &at, FUSE_SET_ATTR_MODE, false, &m),
        -EPERM);
    assert_int_equal(
        fc_perm_setattr(&root, &cur, &at, FUSE_SET_ATTR_MODE, false, &m), 0);
    /* setgid kept only inside the file's group */
    at = file(S_IFREG | 02755, 100, 100);
    struct stat g7 = file(S_IFREG | 0644, 100, 700);
    assert_int_equal(
        fc_perm_setattr(&own, &g7, &at, FUSE_SET_ATTR_MODE, false, &m), 0);
    assert_int_equal(m, S_IFREG | 0755);
    assert_int_equal(
        fc_perm_setattr(&own, &cur, &at, FUSE_SET_ATTR_MODE, false, &m), 0);
    assert_int_equal(m, S_IFREG | 02755);
    /* a writer that is not the owner may drop set-id bits only (the
     * kernel's kill-priv after a write) */
    struct stat sid = file(S_IFREG | 06666, 100, 100);
    at = file(S_IFREG | 0666, 100, 100);
    assert_int_equal(
        fc_perm_setattr(&oth, &sid, &at, FUSE_SET_ATTR_MODE, false, &m), 0);
    at = file(S_IFREG | 0777, 100, 100);
    assert_int_equal(
        fc_perm_setattr(&oth, &sid, &at, FUSE_SET_ATTR_MODE, false, &m),
        -EPERM);
    struct stat sidro = file(S_IFREG | 06644, 100, 100);
    at = file(S_IFREG | 0644, 100, 100);
    assert_int_equal(
        fc_perm_setattr(&oth, &sidro, &at, FUSE_SET_ATTR_MODE, false, &m),
        -EPERM);
    /* chown: root only, or to the owner itself */
    at = file(S_IFREG | 0644, 101, 100);
    assert_int_equal(
        fc_perm_setattr(&own, &cur, &at, FUSE_SET_ATTR_UID, false, &m), -EPERM);
    assert_int_equal(
        fc_perm_setattr(&root, &cur, &at, FUSE_SET_ATTR_UID, false, &m), 0);
    at = file(S_IFREG | 0644, 100, 100);
    assert_int_equal(
        fc_perm_setattr(&own, &cur, &at, FUSE_SET_ATTR_UID, false, &m), 0);
    /* chgrp: the owner, to its own groups */
    at = file(S_IFREG | 0644, 100, 500);
    assert_int_equal(
        fc_perm_setattr(&own, &cur, &at, FUSE_SET_ATTR_GID, false, &m), 0);
    at = file(S_IFREG | 0644, 100, 501);
    assert_int_equal(
        fc_perm_setattr(&own, &cur, &at, FUSE_SET_ATTR_GID, false, &m), -EPERM);
    at = file(S_IFREG | 0644, 100, 500);
    assert_int_equal(
        fc_perm_setattr(&oth, &cur, &at, FUSE_SET_ATTR_GID, false, &m), -EPERM);
    /* times: explicit ones need the owner; touch needs write */
    assert_int_equal(
        fc_perm_setattr(&oth, &wr, &at, FUSE_SET_ATTR_MTIME, false, &m),
        -EPERM);
    assert_int_equal(fc_perm_setattr(&oth, &wr, &at, touch, false, &m), 0);
    assert_int_equal(fc_perm_setattr(&oth, &cur, &at, touch, false, &m),
                     -EACCES);
    assert_int_equal(
        fc_perm_setattr(&oth, &wr, &at,
                        FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW, false,
                        &m),
        -EPERM);
    assert_int_equal(
        fc_perm_setattr(&own, &cur, &at, FUSE_SET_ATTR_MTIME, false, &m), 0);
    /* truncate(2) needs write; ftruncate's open had it */
    assert_int_equal(
        fc_perm_setattr(&oth, &cur, &at, FUSE_SET_ATTR_SIZE, false, &m),
        -EACCES);
    assert_int_equal(
        fc_perm_setattr(&oth, &cur, &at, FUSE_SET_ATTR_SIZE, true, &m), 0);
    assert_int_equal(
        fc_perm_setattr(&oth, &wr, &at, FUSE_SET_ATTR_SIZE, false, &m), 0);
}

/* A caller whose supplementary groups could not be read (fuse_req_getgroups
 * failed) gets what both group and other allow: never the other bits where
 * its group would refuse (mode 0604 refuses group members). */
static void test_groups_unknown(void **state)
{
    struct fc_cred c;
    struct stat f = file(S_IFREG | 0604, 100, 300);
    struct stat g = file(S_IFREG | 0640, 100, 300);
    struct stat h = file(S_IFREG | 0644, 100, 300);

    (void)state;
    cred(&c, 101, 250, NULL, 0);
    c.groups_unknown = true;
    assert_int_equal(fc_perm_check(&c, &f, R_OK), -EACCES);
    assert_int_equal(fc_perm_check(&c, &g, R_OK), -EACCES);
    assert_int_equal(fc_perm_check(&c, &h, R_OK), 0);
    /* its own fsgid still counts: group bits apply */
    cred(&c, 101, 300, NULL, 0);
    c.groups_unknown = true;
    assert_int_equal(fc_perm_check(&c, &f, R_OK), -EACCES);
    assert_int_equal(fc_perm_check(&c, &g, R_OK), 0);
    /* known to have none: the other bits */
    cred(&c, 101, 250, NULL, 0);
    assert_int_equal(fc_perm_check(&c, &f, R_OK), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classes),        cmocka_unit_test(test_root),
        cmocka_unit_test(test_sticky),         cmocka_unit_test(test_setattr),
        cmocka_unit_test(test_groups_unknown), cmocka_unit_test(test_caps),
        cmocka_unit_test(test_kill_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
