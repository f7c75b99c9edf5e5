/* fuse/perm.h - POSIX permission checks made by ecfs itself: a writable
 * mount without -o default_permissions (main.c). The kernel then sends
 * every request on without checking modes, and ecfs answers as the
 * kernel's generic_permission() would for the caller's fsuid, fsgid and
 * supplementary groups against the attributes it shows (fc_fill_stat):
 * owner, else group, else other bits; then, for what those refuse, the
 * caller's capabilities as the kernel's capable() would (CAP_DAC_OVERRIDE
 * reads and writes anything and searches any directory, but executes
 * only a file with some x bit; CAP_DAC_READ_SEARCH reads and searches;
 * CAP_FOWNER, CAP_CHOWN and CAP_FSETID in setattr and the sticky bit):
 * a root process that dropped them is refused like anyone else. The
 * handlers in ops.c call these; they do no I/O except reading the
 * caller's groups, and its effective capabilities, from /proc once per
 * request, each only when the answer depends on it. */
#ifndef FUSE_PERM_H
#define FUSE_PERM_H
#include <stdbool.h>
#include <stdint.h>
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
    /* effective capabilities (CapEff bits): 0 not read yet, 1 read into
     * @caps (tests set both by hand), -1 unreadable: uid 0 then counts
     * as having all of them and anyone else none */
    int caps_state;
    uint64_t caps;
    pid_t pid; /* the requesting thread: where capabilities come from */
};

/* Fills @c from @req's context. */
void fc_cred_init(struct fc_cred *c, fuse_req_t req);
/* Frees the groups read for @c, if they did not fit inline. */
void fc_cred_fini(struct fc_cred *c);
/* Whether @c has capability @cap (CAP_* of <linux/capability.h>), read
 * from /proc/PID/status at the first question. */
bool fc_cred_capable(struct fc_cred *c, int cap);
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
 * with S_ISVTX, only the owner of @victim, the owner of @dir or a caller
 * with CAP_FOWNER may remove or replace it. 0 or -EPERM. */
int fc_perm_sticky(struct fc_cred *c, const struct stat *dir,
                   const struct stat *victim);

/* setattr of @cur by @c with FUSE_SET_ATTR_* @to_set (values in @attr),
 * @has_fh when it came through an open file (ftruncate: the kernel
 * checked the open was writable). chmod and explicit times need the
 * owner or CAP_FOWNER, chown CAP_CHOWN (EPERM); chgrp by the owner only
 * to one of its groups (else CAP_CHOWN); touching both times to now, or
 * truncate(2), needs the owner, CAP_FOWNER or write permission (EACCES).
 * A chmod by a caller outside the file's group and without CAP_FSETID
 * drops S_ISGID from *@mode (as the kernel does); @mode starts as
 * @attr's mode. 0 or -errno. */
int fc_perm_setattr(struct fc_cred *c, const struct stat *cur,
                    const struct stat *attr, int to_set, bool has_fh,
                    mode_t *mode);

/* The set-id bits of a regular file of @mode that @c's write, truncate
 * or O_TRUNC open (@chown false), or its chown or chgrp (@chown true),
 * clears, as the kernel's setattr_should_drop_suidgid() and
 * notify_change(): S_ISUID, and S_ISGID with group x or for a caller
 * outside group @gid without CAP_FSETID; a write keeps them all for a
 * caller with CAP_FSETID, a chown does not. 0 when none. */
mode_t fc_perm_kill_bits(struct fc_cred *c, mode_t mode, gid_t gid, bool chown);

#endif /* FUSE_PERM_H */
