/*
 * test_sim_static.c - the device executor's static order cannot deadlock.
 *
 * The device executor (src/exec/device.c) queues a whole call on a
 * CUDA stream in advance, in the static order of eng_static_next: it
 * cannot skip a slice whose connection is not ready, as the host engine
 * does. This simulates every rank of a communicator running its schedule
 * in that order over FIFOs of nslots slots (a slice waits for a free slot
 * to send and for a posted slot to receive, exactly what the stream waits
 * on) and checks, for the schedules the device executor uses (ring
 * allreduce, allgather, reduce-scatter; chain broadcast and reduce, every
 * root), 1..70 ranks, 2..8 slots, counts giving 1..many slices per step:
 *   - every rank reaches the end (a full pass without progress is a
 *     deadlock),
 *   - every receive finds a slice of the same size from the named peer,
 *   - every FIFO is empty at the end.
 * It also checks that the check can fail: with one slot, the ring
 * allreduce of 3 ranks deadlocks (every rank's second send waits for a
 * slot its successor frees only after its own second send), which is why
 * the P2P transport refuses FIFOs of fewer than two slots.
 */
#include "algos/engine.h"
#include "algos/schedule.h"
#include "algos/chain.h"
#include "algos/ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t *len;       /* [nslots] sizes of the slices in flight, by sequence number mod nslots */
    size_t posted, consumed;
} st_fifo_t;

typedef struct {
    sched_t sched;
    size_t round;
    int step;
    int done;
    int has_next; /* (round, step) is the next slice to run */
} st_rank_t;

static int st_mod(int a, int n) { return ((a % n) + n) % n; }

/* The executor's choice of schedule for each collective. */
static ccl_result_t st_schedule(sched_coll_t coll, size_t count, int n, int r, int root, sched_t *out)
{
    sched_op_t op = {coll, count, 4, n, r, root, NULL};
    if (coll == SCHED_BROADCAST || coll == SCHED_REDUCE)
        return chain_schedule(&op, out);
    return ring_schedule(&op, out);
}

/* Runs one call on n ranks; 0 when every rank finished, else a message. */
static int st_run(sched_coll_t coll, size_t count, int n, int root, int nslots, size_t slot, char *err,
                  size_t errlen)
{
    int rc = -1;
    const size_t esz = 4;
    st_rank_t *ranks = calloc((size_t)n, sizeof *ranks);
    st_fifo_t *fifos = calloc((size_t)n * (size_t)n, sizeof *fifos); /* [from * n + to] */
    size_t *lens = NULL;
    if (!ranks || !fifos) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    size_t rounds = 0;
    for (int r = 0; r < n; r++) {
        if (st_schedule(coll, count, n, r, root, &ranks[r].sched) != CCL_SUCCESS) {
            snprintf(err, errlen, "no schedule for rank %d", r);
            goto out;
        }
        size_t k = sched_rounds(&ranks[r].sched, esz, slot);
        if (k > rounds)
            rounds = k;
    }
    if (!(lens = calloc((size_t)n * (size_t)n * (size_t)nslots, sizeof *lens))) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    for (int i = 0; i < n * n; i++)
        fifos[i].len = lens + (size_t)i * (size_t)nslots;
    for (int r = 0; r < n; r++) {
        ranks[r].step = -1;
        ranks[r].has_next = eng_static_next(&ranks[r].sched, esz, slot, rounds, &ranks[r].round, &ranks[r].step);
        ranks[r].done = !ranks[r].has_next;
    }
    int remaining = 0;
    for (int r = 0; r < n; r++)
        remaining += !ranks[r].done;
    while (remaining > 0) {
        int progress = 0;
        for (int r = 0; r < n; r++) {
            st_rank_t *R = &ranks[r];
            while (!R->done) {
                const sched_step_t *st = &R->sched.steps[R->step];
                size_t total = st->count * esz, off = R->round * slot;
                size_t bytes = total - off < slot ? total - off : slot;
                st_fifo_t *in = st->recv_peer >= 0 ? &fifos[st->recv_peer * n + r] : NULL;
                st_fifo_t *out = st->send_peer >= 0 ? &fifos[r * n + st->send_peer] : NULL;
                if ((in && in->posted == in->consumed) || (out && out->posted - out->consumed >= (size_t)nslots))
                    break; /* the stream waits here */
                if (in) {
                    size_t got = in->len[in->consumed % (size_t)nslots];
                    if (got != bytes) {
                        snprintf(err, errlen, "rank %d expected %zu bytes from rank %d, got %zu", r, bytes,
                                 st->recv_peer, got);
                        goto out;
                    }
                    in->consumed++;
                }
                if (out)
                    out->len[out->posted++ % (size_t)nslots] = bytes;
                progress = 1;
                R->has_next = eng_static_next(&R->sched, esz, slot, rounds, &R->round, &R->step);
                if (!R->has_next) {
                    R->done = 1;
                    remaining--;
                }
            }
        }
        if (!progress) {
            int r = 0;
            while (ranks[r].done)
                r++;
            snprintf(err, errlen, "deadlock: rank %d waits at round %zu step %d (%s)", r, ranks[r].round,
                     ranks[r].step, sched_action_name(ranks[r].sched.steps[ranks[r].step].action));
            goto out;
        }
    }
    for (int i = 0; i < n * n; i++)
        if (fifos[i].posted != fifos[i].consumed) {
            snprintf(err, errlen, "FIFO %d -> %d holds %zu slices at the end", i / n, i % n,
                     fifos[i].posted - fifos[i].consumed);
            goto out;
        }
    rc = 0;
out:
    for (int r = 0; ranks && r < n; r++)
        sched_free(&ranks[r].sched);
    free(lens);
    free(ranks);
    free(fifos);
    return rc;
}

int main(void)
{
    static const sched_coll_t colls[] = {SCHED_ALLREDUCE, SCHED_ALLGATHER, SCHED_REDUCE_SCATTER, SCHED_BROADCAST,
                                         SCHED_REDUCE};
    static const int slots[] = {2, 3, 8};
    const size_t slot = 64; /* bytes: 16 elements */
    int passed = 0, failed = 0;
    char err[256];
    for (int n = 1; n <= 70; n += n < 12 ? 1 : 7) {
        for (size_t c = 0; c < sizeof colls / sizeof colls[0]; c++) {
            /* Counts: less than one element per rank, a few slices, many. */
            size_t counts[] = {1, (size_t)n * 16 + 3, (size_t)n * 16 * 9 + 5};
            for (size_t k = 0; k < 3; k++) {
                for (size_t s = 0; s < sizeof slots / sizeof slots[0]; s++) {
                    int nroots = colls[c] == SCHED_BROADCAST || colls[c] == SCHED_REDUCE ? (n < 5 ? n : 3) : 1;
                    for (int ri = 0; ri < nroots; ri++) {
                        int root = st_mod(ri * 7 + 1, n);
                        if (st_run(colls[c], counts[k], n, root, slots[s], slot, err, sizeof err) == 0) {
                            passed++;
                        } else {
                            failed++;
                            printf("FAIL %s n=%d count=%zu slots=%d root=%d: %s\n", sched_coll_name(colls[c]), n,
                                   counts[k], slots[s], root, err);
                        }
                    }
                }
            }
        }
    }
    /* The check itself: one slot is not enough for the ring. */
    if (st_run(SCHED_ALLREDUCE, 3 * 16 * 4, 3, 0, 1, slot, err, sizeof err) == 0 || !strstr(err, "deadlock")) {
        failed++;
        printf("FAIL self-check: a 1-slot ring allreduce of 3 ranks did not deadlock\n");
    } else {
        passed++;
        printf("self-check: 1 slot, ring allreduce of 3 ranks: %s (as expected)\n", err);
    }
    printf("static order: %d cases passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
