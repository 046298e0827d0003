/*
 * shm_board.h - the one-shot board: a segment all local ranks share, for
 * small collectives.
 *
 * Each rank writes its input into its own slot and increments an arrival
 * counter; when the counter shows every rank arrived, each rank reads all
 * slots. A small allreduce then costs one synchronisation instead of the
 * ring's 2(n-1) sequential hops, which matters most when ranks outnumber
 * cores and every hop is a context switch. Two banks alternate (by call
 * parity) so a fast rank's next call never overwrites slots a slow rank is
 * still reading: starting call g+2 on a bank requires everyone to have
 * arrived at g+1, i.e. to have finished reading call g.
 */
#ifndef CCL_TRANSPORT_SHM_BOARD_H
#define CCL_TRANSPORT_SHM_BOARD_H

#include "ccl.h"
#include "core/wait.h"
#include "transport/shm.h"

#include <stddef.h>
#include <stdint.h>

typedef struct shm_board_hdr shm_board_hdr_t;

typedef struct {
    shm_board_hdr_t *hdr;
    size_t map_len;
    char *slots;       /* [2 banks][nranks][slot_bytes] */
    int nranks, rank;
    size_t slot_bytes;
    uint32_t calls;    /* calls made on this board by this rank */
} shm_board_t;

/* Rank 0 creates (and later unlinks), the others open by name. */
ccl_result_t shm_board_create(shm_board_t *b, int nranks, size_t slot_bytes, char name[SHM_NAME_MAX]);
ccl_result_t shm_board_open(shm_board_t *b, const char *name, int nranks, int rank);
void shm_board_close(shm_board_t *b);
void shm_board_poison(shm_board_t *b);

/* Publishes `bytes` of `data` as this rank's slot for the next call, waits
 * until every rank has, and returns the bank: slot q is bank + q*slot_bytes.
 * On timeout the message names the ranks that never arrived. */
ccl_result_t shm_board_exchange(shm_board_t *b, const void *data, size_t bytes,
                                const wait_policy_t *policy, const char **bank);

#endif
