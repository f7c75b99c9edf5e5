/* common/list.h - an intrusive doubly-linked list: circular, with a
 * sentinel head (the kernel's list_head, cut down). A struct embeds one
 * struct cm_list per list it can be on and gets back to itself with
 * CM_LIST_ENTRY. Nothing here allocates or locks; whoever owns a list
 * keeps its linked nodes alive and serialises access. */
#ifndef COMMON_LIST_H
#define COMMON_LIST_H
#include <stdbool.h>
#include <stddef.h>

struct cm_list {
    struct cm_list *prev, *next;
};

/* Makes @l an empty list, or a node that is on none (cm_list_del's
 * state). A zeroed node must be initialised before it is deleted. */
static inline void cm_list_init(struct cm_list *l)
{
    l->prev = l;
    l->next = l;
}

/* true when list @l is empty, or node @l is on no list. */
static inline bool cm_list_empty(const struct cm_list *l)
{
    return l->next == l;
}

/* Links node @n (on no list) right after @at: after a head, first. */
static inline void cm_list_insert_after(struct cm_list *at, struct cm_list *n)
{
    n->prev = at;
    n->next = at->next;
    at->next->prev = n;
    at->next = n;
}

/* Links node @n (on no list) first / last in list @h. */
static inline void cm_list_push_front(struct cm_list *h, struct cm_list *n)
{
    cm_list_insert_after(h, n);
}

static inline void cm_list_push_back(struct cm_list *h, struct cm_list *n)
{
    cm_list_insert_after(h->prev, n);
}

/* Unlinks node @n and leaves it on no list; a node on none stays so. */
static inline void cm_list_del(struct cm_list *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    cm_list_init(n);
}

/* Moves node @n (on list @h) to @h's front. */
static inline void cm_list_move_front(struct cm_list *h, struct cm_list *n)
{
    cm_list_del(n);
    cm_list_push_front(h, n);
}

/* The node after / before @n in list @h, NULL past either end. */
static inline struct cm_list *cm_list_next(const struct cm_list *h,
                                           const struct cm_list *n)
{
    return n->next == h ? NULL : n->next;
}

static inline struct cm_list *cm_list_prev(const struct cm_list *h,
                                           const struct cm_list *n)
{
    return n->prev == h ? NULL : n->prev;
}

/* The first / last node of list @h, NULL when it is empty. */
static inline struct cm_list *cm_list_first(const struct cm_list *h)
{
    return cm_list_next(h, h);
}

static inline struct cm_list *cm_list_last(const struct cm_list *h)
{
    return cm_list_prev(h, h);
}

/* The struct that holds node @n at @off, or NULL for a NULL @n. */
static inline void *cm_list_obj(struct cm_list *n, size_t off)
{
    return n ? (void *)((char *)n - off) : NULL;
}

/* The struct @type whose member @member is node @n: ENTRY for a node
 * that is not NULL, OBJ also takes NULL (and gives NULL). Then the structs
 * first / last in list @h, and after / before struct @e in it (NULL past
 * either end). */
#define CM_LIST_ENTRY(n, type, member)                                         \
    ((type *)(void *)((char *)(n)-offsetof(type, member)))
#define CM_LIST_OBJ(n, type, member)                                           \
    ((type *)cm_list_obj((n), offsetof(type, member)))
#define CM_LIST_FIRST(h, type, member)                                         \
    CM_LIST_OBJ(cm_list_first(h), type, member)
#define CM_LIST_LAST(h, type, member) CM_LIST_OBJ(cm_list_last(h), type, member)
#define CM_LIST_NEXT(h, e, type, member)                                       \
    CM_LIST_OBJ(cm_list_next((h), &(e)->member), type, member)
#define CM_LIST_PREV(h, e, type, member)                                       \
    CM_LIST_OBJ(cm_list_prev((h), &(e)->member), type, member)

#endif /* COMMON_LIST_H */
