/*
 * test_coll.c - buffers, call and verification of one collective test case;
 * see test_coll.h.
 */
#include "test_coll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tst_coll_name(tst_coll_t c)
{
    return c == TST_ALLREDUCE ? "allreduce" : "allgather";
}

void tst_case_str(const tst_case_t *c, int nranks, char *buf, size_t len)
{
    char align[32] = "";
    if (c->misalign)
        snprintf(align, sizeof(align), " misalign=%zu", c->misalign);
    if (c->coll == TST_ALLREDUCE)
        snprintf(buf, len, "allreduce dtype=%s op=%s count=%zu nranks=%d %s%s",
                 tst_dtype_name(c->dt), tst_op_name(c->op), c->count, nranks,
                 c->inplace ? "in-place" : "out-of-place", align);
    else
        snprintf(buf, len, "allgather dtype=%s count=%zu nranks=%d %s%s", tst_dtype_name(c->dt),
                 c->count, nranks, c->inplace ? "in-place" : "out-of-place", align);
}

/* The receive buffer of an out-of-place case sits at a different offset
 * from its send buffer, so the two are not co-aligned either. */
static size_t recv_misalign(const tst_case_t *c)
{
    size_t esz = tst_dtype_size(c->dt);
    return c->misalign ? (c->misalign * 3) % 64 / esz * esz : 0;
}

void tst_case_prepare(const tst_case_t *c, int rank, int nranks, tst_bufs_t *b, int use_ccl_mem)
{
    size_t esz = tst_dtype_size(c->dt);
    memset(b, 0, sizeof(*b));
    if (c->coll == TST_ALLREDUCE) {
        b->recvp = tst_gbuf_alloc(&b->recv, c->count * esz,
                                  c->inplace ? c->misalign : recv_misalign(c), use_ccl_mem);
        if (c->inplace) {
            b->sendp = b->recvp;
        } else {
            b->sendp = tst_gbuf_alloc(&b->send, c->count * esz, c->misalign, use_ccl_mem);
        }
        tst_fill_input(b->sendp, c->count, c->dt, c->op, nranks, c->seed, rank, 0);
    } else {
        b->recvp = tst_gbuf_alloc(&b->recv, (size_t)nranks * c->count * esz,
                                  c->inplace ? c->misalign : recv_misalign(c), use_ccl_mem);
        if (c->inplace)
            b->sendp = (char *)b->recvp + (size_t)rank * c->count * esz;
        else
            b->sendp = tst_gbuf_alloc(&b->send, c->count * esz, c->misalign, use_ccl_mem);
        tst_fill_input(b->sendp, c->count, c->dt, TST_OP_COPY, nranks, c->seed, rank, 0);
    }
}

ccl_result_t tst_case_issue(const tst_case_t *c, const tst_bufs_t *b, ccl_comm_t comm,
                            ccl_stream_t stream)
{
    if (c->coll == TST_ALLREDUCE)
        return ccl_allreduce(b->sendp, b->recvp, c->count, c->dt, c->op, comm, stream);
    return ccl_allgather(b->sendp, b->recvp, c->count, c->dt, comm, stream);
}

int tst_case_verify(const tst_case_t *c, int rank, int nranks, const tst_bufs_t *b, char *msg,
                    size_t len)
{
    char what[160], guard[160];
    tst_mismatch_t mm;
    size_t nbad;

    tst_case_str(c, nranks, what, sizeof(what));
    if (c->coll == TST_ALLREDUCE)
        nbad = tst_check_allreduce(b->recvp, c->count, c->dt, c->op, nranks, c->seed, &mm);
    else
        nbad = tst_check_allgather(b->recvp, c->count, c->dt, nranks, c->seed, &mm);
    if (nbad) {
        snprintf(msg, len, "%s rank=%d: %zu wrong elements, first at index %zu: expected %s, got %s",
                 what, rank, nbad, mm.index, mm.expected, mm.got);
        return 1;
    }
    if (tst_gbuf_check(&b->recv, guard, sizeof(guard))) {
        snprintf(msg, len, "%s rank=%d: recvbuf guard damaged: %s", what, rank, guard);
        return 1;
    }
    if (!c->inplace) {
        ccl_redop_t op = c->coll == TST_ALLREDUCE ? c->op : TST_OP_COPY;
        nbad = tst_check_input(b->sendp, c->count, c->dt, op, nranks, c->seed, rank, 0, &mm);
        if (nbad) {
            snprintf(msg, len,
                     "%s rank=%d: sendbuf modified: %zu elements, first at index %zu: was %s, now %s",
                     what, rank, nbad, mm.index, mm.expected, mm.got);
            return 1;
        }
        if (tst_gbuf_check(&b->send, guard, sizeof(guard))) {
            snprintf(msg, len, "%s rank=%d: sendbuf guard damaged: %s", what, rank, guard);
            return 1;
        }
    }
    return 0;
}

void tst_case_release(tst_bufs_t *b)
{
    tst_gbuf_free(&b->send);
    tst_gbuf_free(&b->recv);
}

void tst_run_case(tst_ctx_t *ctx, ccl_comm_t comm, const tst_case_t *c, int use_ccl_mem)
{
    char what[160], msg[512];
    tst_bufs_t b;
    tst_case_str(c, ctx->nranks, what, sizeof(what));
    tst_set_case(ctx, "%s", what);
    tst_case_prepare(c, ctx->rank, ctx->nranks, &b, use_ccl_mem);
    ccl_result_t rc = tst_case_issue(c, &b, comm, NULL);
    if (rc != CCL_SUCCESS)
        tst_fatal(ctx, "%s returned %d (%s): %s", what, (int)rc, ccl_get_error_string(rc),
                  ccl_get_last_error(comm));
    if (tst_case_verify(c, ctx->rank, ctx->nranks, &b, msg, sizeof(msg)))
        tst_fail(ctx, "%s", msg);
    tst_case_release(&b);
}

int tst_sweep_main(const char *name, int argc, char **argv, tst_rank_fn body, tst_sweep_cfg_t *cfg)
{
    static const int default_ranks[] = {1, 2, 3, 4, 5, 7, 8, 16};
    static const int mem_ranks[] = {2, 3, 4, 5};
    cfg->seed = (uint64_t)tst_env_long("CCL_TEST_SEED", 12345);
    cfg->use_ccl_mem = tst_env_long("CCL_TEST_CCL_MEM", 0) != 0;
    const int *ranks = cfg->use_ccl_mem ? mem_ranks : default_ranks;
    int nlist = argc > 1 ? argc - 1
                         : cfg->use_ccl_mem ? (int)(sizeof mem_ranks / sizeof mem_ranks[0])
                                            : (int)(sizeof default_ranks / sizeof default_ranks[0]);
    int failed = 0;
    printf("test_%s: seed %llu%s\n", name, (unsigned long long)cfg->seed,
           cfg->use_ccl_mem ? ", ccl_mem_alloc buffers" : "");
    for (int k = 0; k < nlist; k++) {
        int n = argc > 1 ? atoi(argv[k + 1]) : ranks[k];
        failed += tst_run_ranks(name, n, 60, body, NULL) != 0;
    }
    printf("test_%s: %s\n", name, failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
