/*
 * shm_help.h - the poster of a whole-step reference copies part of it.
 *
 * A whole-step reference (exec/host.c) names a whole step of the
 * poster's registered buffer; the reader copies it slice by slice while the
 * poster, its own steps done, only waits in its drain. When the reader's
 * destination is a registered buffer as well, the poster can map it and
 * copy slices too: the reader takes slices from the front, the poster from
 * the back, each slice claimed in one atomic word kept in the reference's
 * slot, so no slice is copied twice and neither side waits for the other
 * to decide how to split. A poster that never comes leaves every slice to
 * the reader; one that comes early may take all but the first. A reader
 * whose call fails closes the block (shm_help_close) before it returns, so
 * that no poster writes into its buffer after that. With two
 * ranks on two cores a broadcast, scatter or gather then copies on both
 * cores instead of one.
 *
 * Twin: a poster that must also copy the same bytes into a buffer of its
 * own (a broadcast root out of place: send to receive buffer) names that
 * buffer in the block. A reader that offers its destination maps the twin
 * too, and whoever copies a slice writes it to both places (large steps,
 * from 16 MiB or the call's lower streaming size: streamed, both from one
 * read, dev_copy_stream2; smaller ones with plain stores, also from one
 * read, dev_copy2, which leaves both in the cache). The poster then has no copy of its own to make before it
 * helps. A poster whose call fails closes the block from its side
 * (shm_help_poster_close) and waits for the reader's slice in flight, so
 * that nothing writes into its buffer after it returns.
 *
 * Layout: the help block sits SHM_HELP_OFFSET bytes into the slot, after
 * the shm_ref_t, one cache line per word that the two sides write.
 */
#ifndef CCL_TRANSPORT_SHM_HELP_H
#define CCL_TRANSPORT_SHM_HELP_H

#include "transport/shm_peer.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

/* What the reader decided at its first slice. */
enum { SHM_HELP_UNDECIDED = 0, SHM_HELP_OFFERED = 1, SHM_HELP_DECLINED = 2 };

typedef struct {
    /* (slices the reader took) << 32 | (slices the poster took): the
     * reader took [0, front), the poster [n - back, n). */
    alignas(64) _Atomic uint64_t claims;
    _Atomic uint32_t state; /* SHM_HELP_*, written once by the reader */
    uint32_t stream;        /* the reader writes its results non-temporally: so does the poster
                             * (with a twin, each side's own twin size decides, the same on both) */
    shm_ref_t dst;          /* the reader's destination for the whole step (when OFFERED) */
    alignas(64) shm_ref_t twin; /* the poster's own destination of the same bytes; len 0: none */
    alignas(64) _Atomic uint32_t state_waiters;
    alignas(64) _Atomic uint32_t done; /* slices the poster finished copying, | SHM_HELP_CLOSED */
    alignas(64) _Atomic uint32_t done_waiters;
    alignas(64) _Atomic uint32_t reader_done; /* twin: slices the reader finished copying */
} shm_help_t;

/* In `done`: the poster closed the block (its call failed) and copies no
 * more; the slices it took from the reader then stay unwritten. */
#define SHM_HELP_CLOSED (1u << 31)

#define SHM_HELP_OFFSET 64
_Static_assert(sizeof(shm_ref_t) <= SHM_HELP_OFFSET, "the help block follows the reference in its slot");
/* Slots must hold the reference and the help block. */
#define SHM_HELP_SLOT_MIN (SHM_HELP_OFFSET + sizeof(shm_help_t))

static inline shm_help_t *shm_help_of(void *slot)
{
    return (shm_help_t *)((char *)slot + SHM_HELP_OFFSET);
}

/* Poster, before it publishes the slot. */
void shm_help_init(shm_help_t *h);
/* Reader, at its first slice: offers its destination (dst != NULL) or
 * declines, and wakes a poster that waits for the decision. Returns 0 when
 * it had to decline an offer because the poster closed the block first. */
int shm_help_decide(shm_help_t *h, const shm_ref_t *dst, int stream);
/* Reader, at slice k of n, in order: 1 when it copies slice k itself, 0
 * when the poster took it (then so are all later ones). */
int shm_help_reader_claim(shm_help_t *h, uint32_t k, uint32_t n);
/* Poster: 1 with the next slice from the back in *slice, 0 when the
 * reader has taken or is about to take everything left. */
int shm_help_poster_claim(shm_help_t *h, uint32_t n, uint32_t *slice);
/* Reader whose call failed before its last slice: takes every slice left,
 * so the poster claims no more, and returns how many the poster took (the
 * reader then waits for those it has not finished). */
uint32_t shm_help_close(shm_help_t *h, uint32_t n);
/* Poster whose call failed, copying no more: takes every slice the reader
 * has not, so the reader claims no more (nor offers any, if it has not
 * decided yet), marks `done` closed (waking a reader that waits for it:
 * its call must fail, as those slices stay unwritten), and returns how
 * many slices the reader took (the poster then waits for the reader_done
 * count of a twin). */
uint32_t shm_help_poster_close(shm_help_t *h, uint32_t n);
/* Reader with a twin, after copying a claimed slice (its stores visible
 * first). */
void shm_help_reader_done(shm_help_t *h);
/* Poster, after copying a claimed slice (its stores visible first). */
void shm_help_poster_done(shm_help_t *h);
/* Reader, after its last slice: how many slices the poster took (final
 * once the reader's claims are over). */
uint32_t shm_help_poster_taken(const shm_help_t *h);

#endif
