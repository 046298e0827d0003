/*
 * coll_run_check.c - CCL_CHECK_ARGS=1: before anything is sent, the ranks of a
 * communicator compare what they were called with.
 *
 * Mismatched calls (one rank in allreduce, another in broadcast; different
 * counts, types, operators or roots) otherwise hang or corrupt memory. With
 * the check on, each rank contributes a small descriptor of its calls on
 * the comm (the first collective in clear, the count of collectives and a
 * hash of all of them) to an allgather, and every rank compares all
 * descriptors with rank 0's. Every rank therefore reaches the same verdict
 * and names the same first rank that differs, and no user data moved. The
 * allgather runs through the executor like any call, so one thread driving
 * several ranks (ccl_comm_init_all) works too. Point-to-point calls are not
 * compared (they involve two ranks, not all).
 */
#include "core/coll_run.h"
#include "base/err.h"
#include "algos/ring.h"
#include "device/reduce.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_MAGIC 0x63636b61u

typedef struct {
    uint32_t magic;
    int32_t ncolls;  /* collectives on this comm in the call or group */
    int32_t coll, dtype, op, root;
    uint64_t count;
    uint64_t hash;   /* over every collective's (coll, count, dtype, op, root) */
    uint8_t pad[24];
} check_desc_t;

_Static_assert(sizeof(check_desc_t) == 64, "check descriptor is one cache line");

static uint64_t check_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static int check_is_coll(const coll_args_t *a)
{
    return a->coll != SCHED_P2P_SEND && a->coll != SCHED_P2P_RECV;
}

static void check_describe(const exec_job_t *job, check_desc_t *d)
{
    memset(d, 0, sizeof *d);
    d->magic = CHECK_MAGIC;
    d->hash = 1;
    for (int c = 0; c < job->ncalls; c++) {
        const coll_args_t *a = &job->calls[c];
        if (!check_is_coll(a))
            continue;
        /* A premulsum handle differs between ranks; what must agree is that
         * everyone uses premulsum. Roots matter only where there is one. */
        int op = sched_coll_reduces(a->coll) ? (a->premul ? CCL_NUM_OPS : (int)a->op) : -1;
        int rooted = a->coll == SCHED_BROADCAST || a->coll == SCHED_REDUCE || a->coll == SCHED_GATHER ||
                     a->coll == SCHED_SCATTER;
        int root = rooted ? a->root : -1;
        if (d->ncolls++ == 0) {
            d->coll = (int32_t)a->coll;
            d->dtype = (int32_t)a->dtype;
            d->op = op;
            d->root = root;
            d->count = a->count;
        }
        d->hash = check_mix(d->hash, (uint64_t)a->coll);
        d->hash = check_mix(d->hash, a->count);
        d->hash = check_mix(d->hash, (uint64_t)a->dtype);
        d->hash = check_mix(d->hash, (uint64_t)(int64_t)op);
        d->hash = check_mix(d->hash, (uint64_t)(int64_t)root);
    }
}

static void check_format(const check_desc_t *d, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s(count %llu, %s", sched_coll_name((sched_coll_t)d->coll),
                     (unsigned long long)d->count, dev_dtype_name((ccl_datatype_t)d->dtype));
    if (n > 0 && (size_t)n < len && d->op >= 0)
        n += snprintf(buf + n, len - (size_t)n, ", %s",
                      d->op == CCL_NUM_OPS ? "premulsum" : dev_op_name((ccl_redop_t)d->op));
    if (n > 0 && (size_t)n < len && d->root >= 0)
        n += snprintf(buf + n, len - (size_t)n, ", root %d", d->root);
    if (n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ")%s", d->ncolls > 1 ? " first in a group" : "");
}

/* The verdict, identical on every rank. */
static ccl_result_t check_compare(const exec_job_t *job, const check_desc_t *all)
{
    int n = job->comm->nranks;
    for (int q = 0; q < n; q++)
        if (all[q].magic != CHECK_MAGIC)
            return err_set(CCL_ERR_MISMATCH, "CCL_CHECK_ARGS: rank %d did not run the argument check "
                           "(is CCL_CHECK_ARGS set on every rank?)", q);
    for (int q = 1; q < n; q++) {
        const check_desc_t *a = &all[0], *b = &all[q];
        if (a->ncolls == b->ncolls && a->hash == b->hash && a->coll == b->coll && a->count == b->count &&
            a->dtype == b->dtype && a->op == b->op && a->root == b->root)
            continue;
        char wa[160], wb[160];
        check_format(a, wa, sizeof wa);
        check_format(b, wb, sizeof wb);
        if (a->ncolls != b->ncolls)
            return err_set(CCL_ERR_MISMATCH, "CCL_CHECK_ARGS: rank %d called %d collectives where rank 0 "
                           "called %d (rank %d: %s; rank 0: %s)", q, b->ncolls, a->ncolls, q, wb, wa);
        if (!strcmp(wa, wb))
            return err_set(CCL_ERR_MISMATCH, "CCL_CHECK_ARGS: rank %d's group of %d collectives differs "
                           "from rank 0's after the first, %s", q, b->ncolls, wa);
        return err_set(CCL_ERR_MISMATCH, "CCL_CHECK_ARGS: rank %d called %s but rank 0 called %s", q, wb, wa);
    }
    return CCL_SUCCESS;
}

ccl_result_t check_args_run(exec_job_t *jobs, int njobs, int *failed)
{
    ccl_result_t res = CCL_SUCCESS;
    exec_job_t *xjobs = calloc((size_t)njobs, sizeof *xjobs);
    coll_args_t *xcalls = calloc((size_t)njobs, sizeof *xcalls);
    sched_t *xscheds = calloc((size_t)njobs, sizeof *xscheds);
    check_desc_t **bufs = calloc((size_t)njobs, sizeof *bufs);
    int *which = calloc((size_t)njobs, sizeof *which);
    int nx = 0;
    if (!xjobs || !xcalls || !xscheds || !bufs || !which)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for the argument check");
    for (int j = 0; j < njobs; j++) {
        int colls = 0;
        for (int c = 0; c < jobs[j].ncalls; c++)
            colls += check_is_coll(&jobs[j].calls[c]);
        if (!colls)
            continue;
        struct ccl_comm *comm = jobs[j].comm;
        int n = comm->nranks;
        if (!(bufs[nx] = calloc((size_t)n, sizeof(check_desc_t))))
            CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for the argument check");
        check_desc_t *mine = &bufs[nx][comm->rank];
        check_describe(&jobs[j], mine);
        xcalls[nx] = (coll_args_t){.coll = SCHED_ALLGATHER, .sendbuf = mine, .recvbuf = bufs[nx],
                                   .count = sizeof(check_desc_t), .dtype = CCL_UINT8, .op = CCL_SUM,
                                   .kop = CCL_SUM, .comm = comm};
        coll_args_size(&xcalls[nx]);
        sched_op_t op = {SCHED_ALLGATHER, sizeof(check_desc_t), 1, n, comm->rank, 0, NULL};
        CCL_TRY(ring_schedule(&op, &xscheds[nx]));
        xjobs[nx] = (exec_job_t){comm, &xcalls[nx], &xscheds[nx], 1};
        which[nx++] = j;
    }
    if (nx) {
        int f = 0;
        res = exec_host_run(xjobs, nx, &f);
        if (res != CCL_SUCCESS) {
            *failed = which[f];
            err_prefix("CCL_CHECK_ARGS exchange: ");
            goto out;
        }
    }
    for (int x = 0; x < nx; x++) {
        res = check_compare(&jobs[which[x]], bufs[x]);
        if (res != CCL_SUCCESS) {
            *failed = which[x];
            goto out;
        }
    }
out:
    for (int x = 0; bufs && x < njobs; x++)
        free(bufs[x]);
    for (int x = 0; xscheds && x < njobs; x++)
        sched_free(&xscheds[x]);
    free(xjobs);
    free(xcalls);
    free(xscheds);
    free(bufs);
    free(which);
    return res;
}
