/* fuse/perm.c - POSIX permission checks made by ecfs itself (see perm.h).
 * The rules follow the kernel's generic_permission(), may_delete() and
 * setattr_prepare(): one class of bits applies (owner, else group, else
 * other), never the union. */
#include "fuse/perm.h"

#include <errno.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    c->caps_state = 0;
    c->caps = 0;
    c->pid = ctx->pid;
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

/* Reads @c's effective capabilities from the CapEff line of
 * /proc/PID/task/PID/status (the requesting thread's); caps_state -1 when
 * it cannot be read (the caller exited, /proc hides it). */
static void load_caps(struct fc_cred *c)
{
    char path[64], *line = NULL;
    size_t cap = 0;
    FILE *f;

    c->caps_state = -1;
    if (c->req == NULL || c->pid <= 0)
        return;
    snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)c->pid,
             (int)c->pid);
    if ((f = fopen(path, "re")) == NULL)
        return;
    while (getline(&line, &cap, f) > 0) {
        if (strncmp(line, "CapEff:", 7) == 0) {
            char *end;
            uint64_t v = strtoull(line + 7, &end, 16);
            if (end != line + 7) {
                c->caps = v;
                c->caps_state = 1;
            }
            break;
        }
    }
    free(line);
    fclose(f);
}

bool fc_cred_capable(struct fc_cred *c, int cap)
{
    if (c->caps_state == 0)
        load_caps(c);
    if (c->caps_state < 0)
        return c->uid == 0;
    return cap >= 0 && cap < 64 && (c->caps >> cap) & 1;
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

/* What the mode bits refused @c (@mask on a file of @mode), allowed by
 * its capabilities as the kernel's generic_permission(): CAP_DAC_READ_SEARCH
 * reads anything and searches directories, CAP_DAC_OVERRIDE all but
 * executing a file no one may execute. 0 or -EACCES. */
static int perm_capable(struct fc_cred *c, mode_t mode, int mask)
{
    if (S_ISDIR(mode)) {
        if (!(mask & W_OK) && fc_cred_capable(c, CAP_DAC_READ_SEARCH))
            return 0;
        return fc_cred_capable(c, CAP_DAC_OVERRIDE) ? 0 : -EACCES;
    }
    if ((!(mask & X_OK) || (mode & (S_IXUSR | S_IXGRP | S_IXOTH))) &&
        fc_cred_capable(c, CAP_DAC_OVERRIDE))
        return 0;
    if (mask == R_OK && fc_cred_capable(c, CAP_DAC_READ_SEARCH))
        return 0;
    return -EACCES;
}

int fc_perm_check(struct fc_cred *c, const struct stat *st, int mask)
{
    mode_t mode = st->st_mode;
    int bits;

    mask &= R_OK | W_OK | X_OK;
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
    if ((mask & ~bits) == 0)
        return 0;
    return perm_capable(c, mode, mask);
}

int fc_perm_sticky(struct fc_cred *c, const struct stat *dir,
                   const struct stat *victim)
{
    if (!(dir->st_mode & S_ISVTX))
        return 0;
    if (c->uid == victim->st_uid || c->uid == dir->st_uid)
        return 0;
    return fc_cred_capable(c, CAP_FOWNER) ? 0 : -EPERM;
}

mode_t fc_perm_kill_bits(struct fc_cred *c, mode_t mode, gid_t gid, bool chown)
{
    mode_t kill = 0;

    if (!S_ISREG(mode))
        return 0;
    if (mode & S_ISUID)
        kill |= S_ISUID;
    /* setattr_should_drop_sgid(): with group x, or for a caller outside
     * the group without CAP_FSETID */
    if ((mode & S_ISGID) &&
        ((mode & S_IXGRP) ||
         (!fc_cred_in_group(c, gid) && !fc_cred_capable(c, CAP_FSETID))))
        kill |= S_ISGID;
    if (kill == 0 || chown)
        return kill;
    return fc_cred_capable(c, CAP_FSETID) ? 0 : kill;
}

int fc_perm_setattr(struct fc_cred *c, const struct stat *cur,
                    const struct stat *attr, int to_set, bool has_fh,
                    mode_t *mode)
{
    const int all_now = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW |
                        FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW;
    int times = to_set & all_now;
    bool owner = c->uid == cur->st_uid;

    *mode = attr->st_mode;
    /* truncate(2) by path: write permission (ftruncate's open had it) */
    if ((to_set & FUSE_SET_ATTR_SIZE) && !has_fh) {
        int ret = fc_perm_check(c, cur, W_OK);
        if (ret < 0)
            return ret;
    }
    /* chown: only CAP_CHOWN gives a file away (or "gives" it to its
     * owner) */
    if ((to_set & FUSE_SET_ATTR_UID) &&
        !(owner && attr->st_uid == cur->st_uid) &&
        !fc_cred_capable(c, CAP_CHOWN))
        return -EPERM;
    /* chgrp: the owner, to a group it is in or to the same group */
    if ((to_set & FUSE_SET_ATTR_GID) &&
        !(owner &&
          (attr->st_gid == cur->st_gid || fc_cred_in_group(c, attr->st_gid))) &&
        !fc_cred_capable(c, CAP_CHOWN))
        return -EPERM;
    if (to_set & FUSE_SET_ATTR_MODE) {
        gid_t g = (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : cur->st_gid;
        mode_t was = cur->st_mode & 07777, now = attr->st_mode & 07777;
        /* a truncate (or chown) by another user makes the kernel clear
         * the file's set-id bits through a chmod of its own (libfuse
         * 3.14 does not pass FUSE_HANDLE_KILLPRIV on to the kernel, and
         * has no KILLPRIV_V2): a writer may drop those bits, nothing
         * else */
        const mode_t sid = S_ISUID | S_ISGID;
        bool kill_only =
            now != was && (now & ~was) == 0 && (now & ~sid) == (was & ~sid);
        if (!owner && !(kill_only && fc_perm_check(c, cur, W_OK) == 0) &&
            !fc_cred_capable(c, CAP_FOWNER))
            return -EPERM;
        if (!fc_cred_in_group(c, g) && !fc_cred_capable(c, CAP_FSETID))
            *mode &= ~(mode_t)S_ISGID;
    }
    if (times != 0 && !owner && !fc_cred_capable(c, CAP_FOWNER)) {
        /* utimes(NULL), touch: both to now, allowed to a writer; any
         * explicit time, or one of the two alone (UTIME_OMIT), needs the
         * owner */
        if (times != all_now)
            return -EPERM;
        return fc_perm_check(c, cur, W_OK);
    }
    return 0;
}
