/* fuse/perm.c - POSIX permission checks made by ecfs itself (see perm.h).
 * The rules follow the kernel's generic_permission(), may_delete() and
 * setattr_prepare(): one class of bits applies (owner, else group, else
 * other), never the union. */
#include "fuse/perm.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

void fc_cred_init(struct fc_cred *c, fuse_req_t req)
{
    const struct fuse_ctx *ctx = fuse_req_ctx(req);

    c->uid = ctx->uid;
    c->gid = ctx->gid;
    c->req = req;
    c->ngroups = -1;
    c->groups_unknown = false;
    c->groups = c->inline_groups;
}

void fc_cred_fini(struct fc_cred *c)
{
    if (c->groups != c->inline_groups)
        free(c->groups);
    c->groups = c->inline_groups;
    c->ngroups = -1;
}

/* Reads @c's supplementary groups (fuse_req_getgroups reads the caller's
 * /proc/PID/task/PID/status). A failure (the caller exited, /proc not
 * mounted) leaves none: group bits then only apply to the fsgid. */
static void load_groups(struct fc_cred *c)
{
    int n;

    c->ngroups = 0;
    if (c->req == NULL)
        return;
    n = fuse_req_getgroups(c->req, FC_CRED_GROUPS_INLINE, c->inline_groups);
    if (n < 0) {
        c->groups_unknown = true;
        return;
    }
    if (n <= FC_CRED_GROUPS_INLINE) {
        c->ngroups = n;
        return;
    }
    /* more than fit inline: ask again with room for all (they may have
     * changed meanwhile: take what the second answer fits) */
    gid_t *g = malloc((size_t)n * sizeof(*g));
    if (g == NULL) {
        c->groups_unknown = true;
        return;
    }
    int m = fuse_req_getgroups(c->req, n, g);
    if (m < 0) {
        free(g);
        c->groups_unknown = true;
        return;
    }
    c->groups = g;
    c->ngroups = m < n ? m : n;
}

bool fc_cred_in_group(struct fc_cred *c, gid_t gid)
{
    if (gid == c->gid)
        return true;
    if (c->ngroups < 0)
        load_groups(c);
    for (int i = 0; i < c->ngroups; i++)
        if (c->groups[i] == gid)
            return true;
    return false;
}

int fc_perm_check(struct fc_cred *c, const struct stat *st, int mask)
{
    mode_t mode = st->st_mode;
    int bits;

    mask &= R_OK | W_OK | X_OK;
    if (c->uid == 0) {
        /* CAP_DAC_OVERRIDE: everything but executing a file no one may
         * execute */
        if ((mask & X_OK) && !S_ISDIR(mode) &&
            !(mode & (S_IXUSR | S_IXGRP | S_IXOTH)))
            return -EACCES;
        return 0;
    }
    if (c->uid == st->st_uid) {
        bits = (int)(mode >> 6) & 7;
    } else {
        int grp = (int)(mode >> 3) & 7, oth = (int)mode & 7;
        /* the groups are only read when the answer depends on them */
        if ((mask & ~grp) == (mask & ~oth))
            bits = oth;
        else if (fc_cred_in_group(c, st->st_gid))
            bits = grp;
        else
            bits = c->groups_unknown ? (grp & oth) : oth;
    }
    return (mask & ~bits) ? -EACCES : 0;
}

int fc_perm_sticky(const struct fc_cred *c, const struct stat *dir,
                   const struct stat *victim)
{
    if (!(dir->st_mode & S_ISVTX) || c->uid == 0)
        return 0;
    if (c->uid == victim->st_uid || c->uid == dir->st_uid)
        return 0;
    return -EPERM;
}

int fc_perm_setattr(struct fc_cred *c, const struct stat *cur,
                    const struct stat *attr, int to_set, bool has_fh,
                    mode_t *mode)
{
    const int all_now = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW |
                        FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW;
    int times = to_set & all_now;
    bool root = c->uid == 0, owner = c->uid == cur->st_uid;

    *mode = attr->st_mode;
    /* truncate(2) by path: write permission (ftruncate's open had it) */
    if ((to_set & FUSE_SET_ATTR_SIZE) && !has_fh) {
        int ret = fc_perm_check(c, cur, W_OK);
        if (ret < 0)
            return ret;
    }
    /* chown: only root gives a file away (or "gives" it to its owner) */
    if ((to_set & FUSE_SET_ATTR_UID) && !root &&
        !(owner && attr->st_uid == cur->st_uid))
        return -EPERM;
    /* chgrp: the owner, to a group it is in or to the same group */
    if ((to_set & FUSE_SET_ATTR_GID) && !root &&
        !(owner &&
          (attr->st_gid == cur->st_gid || fc_cred_in_group(c, attr->st_gid))))
        return -EPERM;
    if (to_set & FUSE_SET_ATTR_MODE) {
        gid_t g = (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : cur->st_gid;
        mode_t was = cur->st_mode & 07777, now = attr->st_mode & 07777;
        /* a write (or chown) by another user makes the kernel clear the
         * file's set-id bits through a chmod of its own (no
         * handle_killpriv): a writer may drop those bits, nothing else */
        bool kill_only =
            now != was && (was & ~(mode_t)(S_ISUID | S_ISGID)) == now;
        if (!root && !owner && !(kill_only && fc_perm_check(c, cur, W_OK) == 0))
            return -EPERM;
        if (!root && !fc_cred_in_group(c, g))
            *mode &= ~(mode_t)S_ISGID;
    }
    if (times != 0 && !root && !owner) {
        /* utimes(NULL), touch: both to now, allowed to a writer; any
         * explicit time, or one of the two alone (UTIME_OMIT), needs the
         * owner */
        if (times != all_now)
            return -EPERM;
        return fc_perm_check(c, cur, W_OK);
    }
    return 0;
}
