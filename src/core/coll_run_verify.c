/*
 * coll_run_verify.c - CCL_VERIFY=N: every N-th allreduce, allgather and broadcast,
 * ranks compare a hash of their results, which must be identical bit for
 * bit (every algorithm makes all ranks' results equal: a reduced chunk is
 * computed once and copied, or in the same order everywhere). A rank whose
 * hash differs from the majority is named: its memory, its link or its
 * reduction went wrong, and silent corruption becomes an error
 * (CCL_ERR_CORRUPT) on every rank, while the communicator stays usable.
 */
#include "core/coll_run.h"
#include "base/err.h"
#include "device/reduce.h"

#include <stdlib.h>
#include <string.h>

/* Four independent multiply-xor lanes: a full pass over the result costs
 * about as much as reading it, not a multiply latency per word. */
static uint64_t verify_hash(const void *buf, size_t bytes)
{
    const unsigned char *p = buf;
    const uint64_t k = 0x9e3779b97f4a7c15ull;
    uint64_t h[4] = {bytes, 1, 2, 3};
    size_t i = 0;
    for (; i + 32 <= bytes; i += 32)
        for (int l = 0; l < 4; l++) {
            uint64_t w;
            memcpy(&w, p + i + 8 * l, 8);
            h[l] = (h[l] ^ w) * k;
        }
    for (int l = 0; i + 8 <= bytes; i += 8, l++) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h[l] = (h[l] ^ w) * k;
    }
    uint64_t tail = 0;
    memcpy(&tail, p + i, bytes - i);
    uint64_t r = (h[0] ^ tail) * k;
    for (int l = 1; l < 4; l++)
        r = (r ^ (h[l] >> 29) ^ h[l]) * k;
    return r ^ (r >> 32);
}

int verify_due(struct ccl_comm *comm, const coll_args_t *a)
{
    if (!comm->verify_every || a->internal)
        return 0;
    if (a->coll != SCHED_ALLREDUCE && a->coll != SCHED_ALLGATHER && a->coll != SCHED_BROADCAST)
        return 0;
    return ++comm->verify_calls % (uint64_t)comm->verify_every == 0;
}

ccl_result_t verify_result(struct ccl_comm *comm, const coll_args_t *a, uint64_t seq)
{
    ccl_result_t res = CCL_SUCCESS;
    int n = comm->nranks;
    uint64_t *all = calloc((size_t)n, sizeof *all);
    if (!all)
        return err_set(CCL_ERR_SYSTEM, "out of memory for CCL_VERIFY's %d hashes", n);
    all[comm->rank] = verify_hash(a->recvbuf, a->recv_bytes);
    coll_args_t g = {.coll = SCHED_ALLGATHER, .sendbuf = &all[comm->rank], .recvbuf = all, .count = 1,
                     .dtype = CCL_UINT64, .op = CCL_SUM, .kop = CCL_SUM, .comm = comm, .internal = 1};
    coll_args_size(&g);
    CCL_TRY(coll_run(&g, 1));
    /* The majority's hash is the right one; a tie goes to the lowest rank's. */
    int best = 0, best_votes = 0;
    for (int i = 0; i < n; i++) {
        int votes = 0;
        for (int j = 0; j < n; j++)
            votes += all[j] == all[i];
        if (votes > best_votes) {
            best = i;
            best_votes = votes;
        }
    }
    if (best_votes == n)
        goto out;
    char list[256];
    size_t len = 0;
    int bad = 0;
    list[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (all[i] == all[best])
            continue;
        if (bad++ < 16 && len < sizeof list - 16)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", len ? ", " : "", i);
    }
    if (bad > 16 && len < sizeof list - 8)
        snprintf(list + len, sizeof list - len, ", ...");
    CCL_FAIL(CCL_ERR_CORRUPT, "CCL_VERIFY: %s #%llu: the result on rank%s %s differs from the one %d of %d ranks "
             "hold (%zu bytes, hash %016llx on rank %d, %016llx here)",
             sched_coll_name(a->coll), (unsigned long long)seq, bad > 1 ? "s" : "", list, best_votes, n,
             a->recv_bytes, (unsigned long long)all[best], best, (unsigned long long)all[comm->rank]);
out:
    free(all);
    return res;
}
