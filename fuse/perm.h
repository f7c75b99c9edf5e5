/* fuse/perm.h - POSIX permission checks made by ecfs itself: a writable
 * mount without -o default_permissions (main.c). The kernel then sends
 * every request on without checking modes, and ecfs answers as the
 * kernel's generic_permission() would for the caller's fsuid, fsgid and
 * supplementary groups against the attributes it shows (fc_fill_stat):
 * owner, else group, else other bits; uid 0 reads and writes anything and
 * searches any directory, but executes only a file with some x bit. The
 * handlers in ops.c call these; they do no I/O except reading the
 * caller's groups from /proc once per request, only when the answer
 * depends on them. */
#ifndef FUSE_PERM_H
#define FUSE_PERM_H
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>

#define FC_CRED_GROUPS_INLINE 32

/* Who asks. fc_cred_init fills it from a request; tests fill it by hand
 * (req NULL, ngroups >= 0). */
struct fc_cred {
    uid_t uid;           /* fsuid */
    gid_t gid;           /* fsgid */
    fuse_req_t req;      /* where supplementary groups come from; NULL: none */
    int ngroups;         /* -1: not read yet */
    bool groups_unknown; /* they could not be read: see fc_perm_check */
    gid_t *groups;
    gid_t inline_groups[FC_CRED_GROUPS_INLINE];
};

/* Fills @c from @req's context. */
void fc_cred_init(struct fc_cred *c, fuse_req_t req);
/* Frees the groups read for @c, if they did not fit inline. */
void fc_cred_fini(struct fc_cred *c);
/* Whether @c is in group @gid (its fsgid or a supplementary group). A
 * caller whose groups cannot be read (it exited, /proc hides it) has none
 * here, and sets groups_unknown. */
bool fc_cred_in_group(struct fc_cred *c, gid_t gid);

/* Whether @c may @mask (R_OK | W_OK | X_OK, as access(2)) the file or
 * directory @st. A caller whose supplementary groups cannot be read gets
 * only what both the group and the other bits allow (never more than
 * its real class). 0 or -EACCES. */
int fc_perm_check(struct fc_cred *c, const struct stat *st, int mask);

/* The sticky-bit rule of unlink, rmdir and rename: in a directory @dir
 * with S_ISVTX, only the owner of @victim, the owner of @dir or root may
 * remove or replace it. 0 or -EPERM. */
int fc_perm_sticky(const struct fc_cred *c, const struct stat *dir,
                   const struct stat *victim);

/* setattr of @cur by @c with FUSE_SET_ATTR_* @to_set (values in @attr),
 * @has_fh when it came through an open file (ftruncate: the kernel
 * checked the open was writable). chmod, explicit times and chown need
 * the owner or root (EPERM); chgrp by the owner only to one of its
 * groups; touching both times to now, or truncate(2), needs the owner,
 * root or write permission (EACCES). A chmod by a non-root caller outside
 * the file's group drops S_ISGID from *@mode (as the kernel does); @mode
 * starts as @attr's mode. 0 or -errno. */
int fc_perm_setattr(struct fc_cred *c, const struct stat *cur,
                    const struct stat *attr, int to_set, bool has_fh,
                    mode_t *mode);

#endif /* FUSE_PERM_H */
