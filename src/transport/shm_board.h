/*
 * shm_board.h - the one-shot board: a segment all local ranks share, for
 * small collectives.
 *
 * Each rank writes its input into its own slot and announces the call
 * number in a line of its own; when every rank it needs has announced the
 * call, a rank reads their slots. A small allreduce then costs one synchronisation instead of the
 * ring's 2(n-1) sequential hops, which matters most when ranks outnumber
 * cores and every hop is a context switch. Calls rotate through many
 * announcement lines (small inputs travel inside them) and a few slot areas
 * for larger inputs, so a fast rank's next calls never overwrite what a slow
 * rank is still reading: a rank reuses a line or an area only after every
 * rank released the call that used it last. Rooted calls wait only for whom
 * they read: a broadcast's root posts and returns, the others wait for the
 * root alone.
 */
#ifndef CCL_TRANSPORT_SHM_BOARD_H
#define CCL_TRANSPORT_SHM_BOARD_H

#include "ccl.h"
#include "base/wait.h"
#include "transport/shm.h"

#include <stddef.h>
#include <stdint.h>

typedef struct shm_board_hdr shm_board_hdr_t;

/* Announcement lines per rank, and slot areas for calls whose inputs do
 * not fit a line: how far a rank may run ahead (shm_board.c). */
#define BOARD_POSTS 64
#define BOARD_AREAS 8
/* Inputs up to this size travel inside the line that announces them. */
#define BOARD_INLINE_BYTES 56

typedef struct {
    shm_board_hdr_t *hdr;
    size_t map_len;
    struct board_post *posts; /* [BOARD_POSTS][nranks] announcement lines */
    char *slots;       /* [BOARD_AREAS][nranks][slot_bytes] */
    int nranks, rank;
    size_t slot_bytes;
    uint32_t calls;    /* calls made on this board by this rank */
    uint32_t released_all; /* every rank released at least this call (last look) */
    uint32_t area_calls;   /* calls that used a slot area */
    uint32_t area_last[BOARD_AREAS]; /* per area: the last call that used it */
} shm_board_t;

/* Rank 0 creates it under a name that went round first (shm_name_new),
 * the others open it by name; every rank unlinks it once all have it. */
ccl_result_t shm_board_create(shm_board_t *b, int nranks, size_t slot_bytes, const char *name);
ccl_result_t shm_board_open(shm_board_t *b, const char *name, int nranks, int rank);
void shm_board_close(shm_board_t *b);
void shm_board_poison(shm_board_t *b);
/* Whether board rank q poisoned the board (it failed, or aborted): unlike
 * the board-wide flag, which any rank's teardown abort also sets. */
int shm_board_rank_failed(const shm_board_t *b, int q);

/* Whom a rank waits for before it reads the bank: everyone (allreduce,
 * allgather, ...; the root of reduce and gather), the root (the others of
 * broadcast and scatter) or nobody (the root of broadcast and scatter, the
 * others of reduce and gather: they only post). */
typedef enum { BOARD_WAIT_ALL, BOARD_WAIT_ROOT, BOARD_WAIT_NONE } board_wait_t;

/* Where one call's slots are: slot q is base + q * stride. */
typedef struct {
    const char *base;
    size_t stride;
} board_bank_t;

static inline const char *shm_board_slot(const board_bank_t *v, int q) { return v->base + (size_t)q * v->stride; }

/* Publishes `bytes` of `data` as this rank's slot for the next call, waits
 * as wait_for says, and says where the call's slots are. max_bytes is the
 * most any rank posts in this call, the same on every rank: it decides
 * whether the slots are inline (max_bytes <= BOARD_INLINE_BYTES) or in the
 * bank's slot area. Before writing, it waits until every rank released
 * the bank's previous call. On timeout the message names the ranks that
 * never arrived. */
ccl_result_t shm_board_exchange(shm_board_t *b, const void *data, size_t bytes, size_t max_bytes,
                                board_wait_t wait_for, int root, const wait_policy_t *policy, board_bank_t *out);
/* This rank is done reading the bank of its last exchange (every rank
 * calls it once per call, also when it read nothing). */
void shm_board_release(shm_board_t *b);

/* Progress beacons, for naming a rank that stopped calling collectives:
 * each rank publishes how many collectives it has entered, and a rank that
 * times out lists the ranks behind it (up to max; at[i]: their count). */
void shm_board_enter(shm_board_t *b, uint64_t ncoll);
int shm_board_behind(const shm_board_t *b, uint64_t ncoll, int *ranks, uint64_t *at, int max);

#endif
