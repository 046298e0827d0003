/*
 * test_argcheck.c - argument checks of every collective and of send/recv
 * across forked ranks (3 of them, so there is a root, a middle and a last
 * rank). One refusal per check, each asserting the exact code, that the
 * message of ccl_get_last_error names the argument, that the buffers were
 * not written (receive area still the fill pattern, send area unchanged,
 * guards intact) and that the call returned at once. Refusals are made by
 * some ranks only (alternating), and after each collective's checks every
 * rank runs a correct call of it and checks the result: a refused call that
 * sent anything, or counted as a step of the sequence, derails that call.
 *
 *   argcheck     NULL and destroyed comm (CCL_ERR_NULL_COMM), NULL buffers
 *                with count > 0 (CCL_ERR_NULL_BUFFER; NULL with count 0 must
 *                work on every collective), invalid dtypes, invalid ops
 *                (built-in range, a premulsum op of another comm, destroyed,
 *                or used with another dtype), roots and peers out of range
 *                (CCL_ERR_INVALID_RANK), counts whose bytes overflow (also
 *                only once multiplied by nranks), in-place layouts that
 *                break ccl.h's rule of each collective
 *   check-args   CCL_CHECK_ARGS=1: ranks 2 and 3 (or only 3) of 4 call a
 *                different collective, count, dtype, op or root; every rank
 *                must get CCL_ERR_MISMATCH (without hanging and without
 *                writing recvbuf) and a message naming the first rank that
 *                differs, and the comm must then work for a matching call
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_coll.h"
#include "test_common.h"
#include "test_launch.h"

/* A refused call must not wait for anyone. */
#define REFUSE_FAST_S 2.0

static uint64_t base_seed;

/* The entry points: tst_coll_t's collectives, with TST_SENDRECV standing
 * for ccl_send and API_RECV for ccl_recv. */
#define API_SEND TST_SENDRECV
#define API_RECV TST_NUM_COLLS
#define NUM_API (TST_NUM_COLLS + 1)

static const char *api_name(int api)
{
    return api == API_SEND ? "ccl_send" : api == API_RECV ? "ccl_recv" : tst_coll_name(api);
}

typedef struct {
    int api;
    const void *send;
    void *recv; /* ccl_bcast's buffer, ccl_recv's buffer */
    size_t count;
    ccl_datatype_t dt;
    ccl_redop_t op;
    int root; /* root or peer */
    ccl_comm_t comm;
} call_t;

static ccl_result_t do_call(const call_t *c)
{
    switch (c->api) {
    case TST_ALLREDUCE: return ccl_allreduce(c->send, c->recv, c->count, c->dt, c->op, c->comm, NULL);
    case TST_ALLGATHER: return ccl_allgather(c->send, c->recv, c->count, c->dt, c->comm, NULL);
    case TST_REDUCE_SCATTER:
        return ccl_reduce_scatter(c->send, c->recv, c->count, c->dt, c->op, c->comm, NULL);
    case TST_BROADCAST:
        return ccl_broadcast(c->send, c->recv, c->count, c->dt, c->root, c->comm, NULL);
    case TST_BCAST: return ccl_bcast(c->recv, c->count, c->dt, c->root, c->comm, NULL);
    case TST_REDUCE:
        return ccl_reduce(c->send, c->recv, c->count, c->dt, c->op, c->root, c->comm, NULL);
    case TST_ALLTOALL: return ccl_alltoall(c->send, c->recv, c->count, c->dt, c->comm, NULL);
    case TST_GATHER: return ccl_gather(c->send, c->recv, c->count, c->dt, c->root, c->comm, NULL);
    case TST_SCATTER: return ccl_scatter(c->send, c->recv, c->count, c->dt, c->root, c->comm, NULL);
    case API_SEND: return ccl_send(c->send, c->count, c->dt, c->root, c->comm, NULL);
    case API_RECV: return ccl_recv(c->recv, c->count, c->dt, c->root, c->comm, NULL);
    default: return CCL_ERR_INTERNAL;
    }
}

static int api_reduces(int api)
{
    return api < TST_NUM_COLLS && tst_coll_reduces((tst_coll_t)api);
}

static int api_rooted(int api)
{
    return api != API_SEND && api != API_RECV && tst_coll_rooted((tst_coll_t)api);
}

/* Whether the API reads a send buffer / writes a receive buffer at all. */
static int api_has_send(int api)
{
    return api != TST_BCAST && api != API_RECV;
}

static int api_has_recv(int api)
{
    return api != API_SEND;
}

/* ---- the work area ----------------------------------------------------------------- */

#define AREA_ELEMS 4096 /* 8-byte elements: room for every layout below */

typedef struct {
    tst_gbuf_t sg, rg;
    unsigned char *s, *r; /* send area (known bytes), receive area (fill pattern) */
    unsigned char saved[AREA_ELEMS * 8];
} area_t;

static void area_init(area_t *a)
{
    a->s = tst_gbuf_alloc(&a->sg, AREA_ELEMS * 8, 0, 0);
    a->r = tst_gbuf_alloc(&a->rg, AREA_ELEMS * 8, 0, 0);
    for (size_t k = 0; k < sizeof(a->saved); k++)
        a->saved[k] = (unsigned char)tst_mix64(k);
    memcpy(a->s, a->saved, sizeof(a->saved));
}

/* Empty when both areas are as they were; else what changed. */
static void area_damage(area_t *a, char *out, size_t len)
{
    char guard[160];
    size_t at;
    out[0] = '\0';
    if (tst_gbuf_check(&a->sg, guard, sizeof(guard)) || tst_gbuf_check(&a->rg, guard, sizeof(guard)))
        snprintf(out, len, "guard damaged: %s", guard);
    else if ((at = tst_check_bytes(a->r, a->rg.bytes, TST_FILL_BYTE)) < a->rg.bytes)
        snprintf(out, len, "receive area written at byte %zu", at);
    else if (memcmp(a->s, a->saved, sizeof(a->saved)) != 0)
        snprintf(out, len, "send area modified");
    if (out[0]) { /* restore for the next check */
        memset(a->r, TST_FILL_BYTE, a->rg.bytes);
        memcpy(a->s, a->saved, sizeof(a->saved));
    }
}

/* ---- one refusal ----------------------------------------------------------------------- */

typedef struct {
    tst_ctx_t *ctx;
    area_t *area;
    int nchecks;
} checker_t;

/* Calls c and expects `want` with a message containing one of the
 * '|'-separated words; the message is the comm's, or the thread's when the
 * call has no live comm (thread_msg). */
static void expect_refusal(checker_t *ck, const char *what, const call_t *c, ccl_result_t want,
                           const char *words, int thread_msg)
{
    tst_ctx_t *ctx = ck->ctx;
    char full[256], damage[200];
    snprintf(full, sizeof(full), "%s: %s", api_name(c->api), what);
    tst_set_case(ctx, "refusal: %s", full);
    ck->nchecks++;
    double t0 = tst_now();
    ccl_result_t rc = do_call(c);
    double dt = tst_now() - t0;
    if (rc != want) {
        tst_fail(ctx, "%s returned %d (%s), expected %s", full, (int)rc, ccl_get_error_string(rc),
                 ccl_get_error_string(want));
    } else {
        const char *m = ccl_get_last_error(thread_msg ? NULL : c->comm);
        int named = 0;
        char w[64];
        for (const char *p = words; !named && *p;) {
            size_t n = strcspn(p, "|");
            snprintf(w, sizeof(w), "%.*s", (int)n, p);
            named = m && strcasestr(m, w) != NULL;
            p += n + (p[n] == '|');
        }
        if (!named)
            tst_fail(ctx, "%s: the message does not name the argument (%s): \"%s\"", full, words,
                     m ? m : "(NULL)");
    }
    if (dt > REFUSE_FAST_S)
        tst_fail(ctx, "%s took %.1f s to return", full, dt);
    area_damage(ck->area, damage, sizeof(damage));
    if (damage[0])
        tst_fail(ctx, "%s: %s", full, damage);
}

/* A call of `api` on comm with valid, disjoint buffers from the areas. */
static call_t good_call(checker_t *ck, ccl_comm_t comm, int api)
{
    call_t c;
    memset(&c, 0, sizeof(c));
    c.api = api;
    c.send = ck->area->s;
    c.recv = ck->area->r;
    c.count = 8;
    c.dt = CCL_FLOAT32;
    c.op = CCL_SUM;
    c.root = api == API_SEND || api == API_RECV ? (ck->ctx->rank + 1) % ck->ctx->nranks : 0;
    c.comm = comm;
    return c;
}

/* Every rank runs a correct call of `api` and checks it. */
static void still_works(tst_ctx_t *ctx, ccl_comm_t comm, int api, int k)
{
    tst_case_t c;
    memset(&c, 0, sizeof(c));
    c.coll = api == API_RECV ? TST_SENDRECV : (tst_coll_t)api;
    c.dt = tst_dtypes[k % tst_num_dtypes];
    c.op = tst_coll_reduces(c.coll) ? tst_ops[k % tst_num_ops] : TST_OP_COPY;
    c.count = 1021;
    c.root = k % ctx->nranks;
    c.seed = tst_case_seed(base_seed, (uint64_t)ctx->nranks, (uint64_t)api, (uint64_t)k, 51);
    tst_run_case(ctx, comm, &c, 0);
}

/* ---- the checks, by argument --------------------------------------------------------- */

static void check_comm(checker_t *ck, int api)
{
    call_t c = good_call(ck, NULL, api);
    ccl_comm_t dead;
    expect_refusal(ck, "comm NULL", &c, CCL_ERR_NULL_COMM, "comm", 1);
    TST_CCL(ck->ctx, NULL, ccl_comm_init_all(&dead, 1, NULL));
    TST_CCL(ck->ctx, dead, ccl_comm_destroy(dead));
    c.comm = dead;
    c.root = 0;
    expect_refusal(ck, "comm destroyed", &c, CCL_ERR_NULL_COMM, "comm", 1);
}

/* As the root where there is one, so that every buffer is one this rank
 * uses (a non-root may pass NULL for the ones it does not use: the sweeps
 * do that). */
static void check_null_buffers(checker_t *ck, ccl_comm_t comm, int api)
{
    call_t c = good_call(ck, comm, api);
    if (api_rooted(api))
        c.root = ck->ctx->rank;
    if (api_has_send(api)) {
        call_t n = c;
        n.send = NULL;
        expect_refusal(ck, "sendbuf NULL, count 8", &n, CCL_ERR_NULL_BUFFER, "sendbuf", 0);
    }
    if (api_has_recv(api)) {
        call_t n = c;
        n.recv = NULL;
        expect_refusal(ck, "recvbuf NULL, count 8", &n, CCL_ERR_NULL_BUFFER,
                       api == TST_BCAST ? "buf" : "recvbuf", 0);
    }
}

/* The call with one argument set to each of the bad values. */
typedef enum { ARG_DTYPE, ARG_OP, ARG_ROOT } arg_t;

static void refuse_values(checker_t *ck, ccl_comm_t comm, int api, arg_t arg, const int *bad,
                          int nbad, ccl_result_t want, const char *label, const char *words)
{
    for (int k = 0; k < nbad; k++) {
        char what[64];
        call_t c = good_call(ck, comm, api);
        if (arg == ARG_DTYPE)
            c.dt = (ccl_datatype_t)bad[k];
        else if (arg == ARG_OP)
            c.op = (ccl_redop_t)bad[k];
        else
            c.root = bad[k];
        snprintf(what, sizeof(what), "%s %d (of %d ranks)", label, bad[k], ck->ctx->nranks);
        expect_refusal(ck, what, &c, want, words, 0);
    }
}

static void check_dtype(checker_t *ck, ccl_comm_t comm, int api)
{
    static const int bad[] = {CCL_NUM_DTYPES, -1, 255};
    refuse_values(ck, comm, api, ARG_DTYPE, bad, 3, CCL_ERR_INVALID_DTYPE, "dtype",
                  "datatype|dtype");
}

static void check_op(checker_t *ck, ccl_comm_t comm, int api)
{
    static const int bad[] = {CCL_NUM_OPS, -1, CCL_NUM_OPS + 1000};
    tst_ctx_t *ctx = ck->ctx;
    refuse_values(ck, comm, api, ARG_OP, bad, 3, CCL_ERR_INVALID_OP, "op", "op");
    float scalar = 2.0f;
    call_t c = good_call(ck, comm, api);
    /* A premulsum op of another communicator (this one has none). */
    ccl_comm_t other;
    ccl_redop_t op;
    TST_CCL(ctx, NULL, ccl_comm_init_all(&other, 1, NULL));
    TST_CCL(ctx, other, ccl_redop_create_premulsum(&op, &scalar, CCL_FLOAT32,
                                                   CCL_SCALAR_HOST_IMMEDIATE, other));
    c.op = op;
    expect_refusal(ck, "a premulsum op created on another comm", &c, CCL_ERR_INVALID_OP, "op", 0);
    TST_CCL(ctx, other, ccl_redop_destroy(op, other));
    TST_CCL(ctx, other, ccl_comm_destroy(other));
    /* One of this comm, for another dtype. */
    TST_CCL(ctx, comm, ccl_redop_create_premulsum(&op, &scalar, CCL_FLOAT32,
                                                  CCL_SCALAR_HOST_IMMEDIATE, comm));
    c.op = op;
    c.dt = CCL_INT32;
    expect_refusal(ck, "a float32 premulsum op used with int32", &c, CCL_ERR_INVALID_OP, "op", 0);
    /* Destroyed. */
    TST_CCL(ctx, comm, ccl_redop_destroy(op, comm));
    c.dt = CCL_FLOAT32;
    expect_refusal(ck, "a destroyed premulsum op", &c, CCL_ERR_INVALID_OP, "op", 0);
}

static void check_rank(checker_t *ck, ccl_comm_t comm, int api)
{
    int n = ck->ctx->nranks;
    const int bad[] = {n, -1, INT_MIN, INT_MAX};
    int p2p = api == API_SEND || api == API_RECV;
    refuse_values(ck, comm, api, ARG_ROOT, bad, 4, CCL_ERR_INVALID_RANK, p2p ? "peer" : "root",
                  p2p ? "peer" : "root");
}

static void check_count(checker_t *ck, ccl_comm_t comm, int api)
{
    int n = ck->ctx->nranks;
    call_t c = good_call(ck, comm, api);
    if (api_rooted(api))
        c.root = ck->ctx->rank;
    c.count = SIZE_MAX / 2; /* times 4 bytes overflows */
    expect_refusal(ck, "count SIZE_MAX/2 of float32", &c, CCL_ERR_COUNT_OVERFLOW, "count", 0);
    c.dt = CCL_FLOAT64;
    c.count = SIZE_MAX / 8 + 1;
    expect_refusal(ck, "count SIZE_MAX/8+1 of float64", &c, CCL_ERR_COUNT_OVERFLOW, "count", 0);
    /* Fits for one rank's block but not for nranks of them, where a buffer
     * holds nranks blocks on this rank (the root's, for gather and scatter). */
    int blocks = api == TST_ALLGATHER || api == TST_REDUCE_SCATTER || api == TST_ALLTOALL ||
                 api == TST_GATHER || api == TST_SCATTER;
    if (blocks && n > 1) {
        c.dt = CCL_FLOAT32;
        c.count = (size_t)PTRDIFF_MAX / 4 / 2 + 1;
        expect_refusal(ck, "count whose bytes overflow only times nranks", &c,
                       CCL_ERR_COUNT_OVERFLOW, "count", 0);
    }
}

/* Overlaps that break ccl.h's in-place rule; offsets in elements of 8
 * bytes (float64), count 8. Both buffers lie in the send area, whose
 * pseudo-random bytes any copy or reduction at a shifted offset changes;
 * rooted collectives have this rank as root, where the rule binds. */
static void refuse_layout(checker_t *ck, ccl_comm_t comm, int api, long send_at, long recv_at,
                          const char *what)
{
    unsigned char *base = ck->area->s + 64 * 8;
    call_t c = good_call(ck, comm, api);
    c.dt = CCL_FLOAT64;
    c.send = base + send_at * 8;
    c.recv = base + recv_at * 8;
    if (api_rooted(api))
        c.root = ck->ctx->rank;
    expect_refusal(ck, what, &c, CCL_ERR_INPLACE_LAYOUT, "place|overlap", 0);
}

static void check_layout(checker_t *ck, ccl_comm_t comm, int api)
{
    long r = ck->ctx->rank, n = ck->ctx->nranks, cnt = 8;
    long other = (r + 1) % n; /* a block that is not this rank's */
    switch (api) {
    case TST_ALLREDUCE:
    case TST_BROADCAST:
    case TST_REDUCE:
        refuse_layout(ck, comm, api, 0, 1, "recvbuf = sendbuf + 1 element");
        refuse_layout(ck, comm, api, 3, 0, "sendbuf = recvbuf + 3 elements");
        break;
    case TST_ALLGATHER:
    case TST_GATHER:
        refuse_layout(ck, comm, api, r * cnt + 1, 0, "sendbuf = recvbuf + (rank*count + 1)");
        if (n > 1)
            refuse_layout(ck, comm, api, other * cnt, 0, "sendbuf at another rank's block of recvbuf");
        break;
    case TST_REDUCE_SCATTER:
    case TST_SCATTER:
        refuse_layout(ck, comm, api, 0, r * cnt + 1, "recvbuf = sendbuf + (rank*count + 1)");
        if (n > 1)
            refuse_layout(ck, comm, api, 0, other * cnt, "recvbuf at another rank's block of sendbuf");
        break;
    case TST_ALLTOALL:
        refuse_layout(ck, comm, api, 0, 0, "sendbuf == recvbuf");
        refuse_layout(ck, comm, api, 0, n * cnt - 1, "recvbuf overlapping the end of sendbuf");
        break;
    default: break;
    }
}

/* count 0 with NULL buffers is a valid call: every rank makes it. */
static void count_zero_null(tst_ctx_t *ctx, ccl_comm_t comm, int api)
{
    call_t c;
    int n = ctx->nranks;
    memset(&c, 0, sizeof(c));
    c.api = api;
    c.dt = CCL_INT32;
    c.op = CCL_SUM;
    c.comm = comm;
    tst_set_case(ctx, "%s with count 0 and NULL buffers", api_name(api));
    ccl_result_t rc;
    if (api == API_SEND) {
        /* A ring of empty messages, in a group. */
        TST_CCL(ctx, comm, ccl_group_start());
        c.root = (ctx->rank + 1) % n;
        ccl_result_t r1 = do_call(&c);
        c.api = API_RECV;
        c.root = (ctx->rank - 1 + n) % n;
        ccl_result_t r2 = do_call(&c);
        rc = ccl_group_end();
        rc = r1 != CCL_SUCCESS ? r1 : r2 != CCL_SUCCESS ? r2 : rc;
    } else {
        rc = do_call(&c);
    }
    if (rc != CCL_SUCCESS)
        tst_fatal(ctx, "%s with count 0 and NULL buffers returned %s: %s", api_name(api),
                  ccl_get_error_string(rc), ccl_get_last_error(comm));
}

static int argcheck_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    area_t *area = calloc(1, sizeof(*area));
    if (!area)
        tst_fatal(ctx, "out of memory");
    area_init(area);
    checker_t ck = {.ctx = ctx, .area = area, .nchecks = 0};
    ccl_comm_t comm = tst_comm_init(ctx);
    for (int api = 0; api < NUM_API; api++) {
        if (api == API_RECV)
            continue; /* checked with API_SEND, whose correct call is the ring */
        for (int pass = 0; pass < 2; pass++) {
            int a = pass == 0 ? api : API_RECV;
            if (pass == 1 && api != API_SEND)
                break;
            /* Alternate which ranks make the refused calls. */
            if ((ctx->rank + a) % 2 == 0 || ctx->nranks == 1) {
                check_comm(&ck, a);
                check_null_buffers(&ck, comm, a);
                check_dtype(&ck, comm, a);
                if (api_reduces(a))
                    check_op(&ck, comm, a);
                if (api_rooted(a) || a == API_SEND || a == API_RECV)
                    check_rank(&ck, comm, a);
                check_count(&ck, comm, a);
                check_layout(&ck, comm, a);
            }
        }
        count_zero_null(ctx, comm, api);
        still_works(ctx, comm, api, 0);
        still_works(ctx, comm, api, 1);
    }
    if (ctx->rank == 0)
        printf("  rank 0 made %d refused calls\n", ck.nchecks);
    tst_comm_destroy(ctx, comm);
    tst_gbuf_free(&area->sg);
    tst_gbuf_free(&area->rg);
    free(area);
    return 0;
}

/* ---- CCL_CHECK_ARGS=1 -------------------------------------------------------------------- */

/* One side of a mismatch: what a rank passes. */
typedef struct {
    int api;
    size_t count;
    ccl_datatype_t dt;
    ccl_redop_t op;
    int root;
} side_t;

typedef struct {
    const char *what;
    int first;          /* ranks from this one on make `theirs` */
    side_t mine, theirs;
} mismatch_t;

static const mismatch_t mismatches[] = {
    {"allreduce against broadcast", 2, {TST_ALLREDUCE, 64, CCL_FLOAT32, CCL_SUM, 0},
     {TST_BROADCAST, 64, CCL_FLOAT32, CCL_SUM, 0}},
    {"allreduce count 64 against 63", 2, {TST_ALLREDUCE, 64, CCL_FLOAT32, CCL_SUM, 0},
     {TST_ALLREDUCE, 63, CCL_FLOAT32, CCL_SUM, 0}},
    {"allreduce float32 against int32", 2, {TST_ALLREDUCE, 64, CCL_FLOAT32, CCL_SUM, 0},
     {TST_ALLREDUCE, 64, CCL_INT32, CCL_SUM, 0}},
    {"allreduce sum against max", 3, {TST_ALLREDUCE, 64, CCL_FLOAT32, CCL_SUM, 0},
     {TST_ALLREDUCE, 64, CCL_FLOAT32, CCL_MAX, 0}},
    {"broadcast root 0 against root 1", 2, {TST_BROADCAST, 64, CCL_FLOAT32, CCL_SUM, 0},
     {TST_BROADCAST, 64, CCL_FLOAT32, CCL_SUM, 1}},
    {"reduce root 3 against root 0", 3, {TST_REDUCE, 64, CCL_INT64, CCL_MIN, 3},
     {TST_REDUCE, 64, CCL_INT64, CCL_MIN, 0}},
    {"allgather count 64 against 65", 2, {TST_ALLGATHER, 64, CCL_FLOAT32, CCL_SUM, 0},
     {TST_ALLGATHER, 65, CCL_FLOAT32, CCL_SUM, 0}},
    {"reduce_scatter uint8 against int8", 3, {TST_REDUCE_SCATTER, 64, CCL_UINT8, CCL_SUM, 0},
     {TST_REDUCE_SCATTER, 64, CCL_INT8, CCL_SUM, 0}},
    {"gather against scatter", 2, {TST_GATHER, 64, CCL_FLOAT32, CCL_SUM, 1},
     {TST_SCATTER, 64, CCL_FLOAT32, CCL_SUM, 1}},
    {"alltoall float16 against bfloat16", 2, {TST_ALLTOALL, 64, CCL_FLOAT16, CCL_SUM, 0},
     {TST_ALLTOALL, 64, CCL_BFLOAT16, CCL_SUM, 0}},
};
#define NMISMATCH (int)(sizeof(mismatches) / sizeof(mismatches[0]))

static int check_args_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    static float sendb[1024], recvb[1024]; /* room for 4 blocks of 65 */
    ccl_comm_t comm = tst_comm_init(ctx);
    for (int k = 0; k < NMISMATCH; k++) {
        const mismatch_t *mc = &mismatches[k];
        const side_t *sd = ctx->rank >= mc->first ? &mc->theirs : &mc->mine;
        call_t c = {.api = sd->api, .send = sendb, .recv = recvb, .count = sd->count,
                    .dt = sd->dt, .op = sd->op, .root = sd->root, .comm = comm};
        char want[16];
        snprintf(want, sizeof(want), "rank %d", mc->first);
        memset(recvb, 0, sizeof(recvb));
        tst_set_case(ctx, "CCL_CHECK_ARGS=1: %s", mc->what);
        ccl_result_t rc = do_call(&c);
        const char *m = ccl_get_last_error(comm);
        if (rc != CCL_ERR_MISMATCH)
            tst_fail(ctx, "%s: returned %s, expected CCL_ERR_MISMATCH", mc->what,
                     ccl_get_error_string(rc));
        else if (!m || !strstr(m, want))
            tst_fail(ctx, "%s: the message does not name %s (the first that differs): \"%s\"",
                     mc->what, want, m ? m : "(NULL)");
        else if (ctx->rank == 0)
            printf("  %s: %s\n", mc->what, m);
        if (rc == CCL_ERR_MISMATCH && tst_check_bytes(recvb, sizeof(recvb), 0) < sizeof(recvb))
            tst_fail(ctx, "%s: refused as a mismatch, but recvbuf was written", mc->what);
        /* A matching call afterwards works. */
        tst_case_t ok;
        memset(&ok, 0, sizeof(ok));
        ok.coll = TST_ALLREDUCE;
        ok.dt = CCL_INT64;
        ok.op = CCL_SUM;
        ok.count = 1021;
        ok.seed = tst_case_seed(base_seed, 4, (uint64_t)k, 61, 61);
        tst_run_case(ctx, comm, &ok, 0);
    }
    tst_comm_destroy(ctx, comm);
    return 0;
}

/* ccl reads its parameters once per process, and this one already has (the
 * launcher made unique ids): the CCL_CHECK_ARGS=1 runs go to a fresh copy of
 * this program with the variable set. */
static int run_check_args_in_child(char **argv)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        setenv("CCL_CHECK_ARGS", "1", 1);
        execv("/proc/self/exe", argv);
        perror("execv /proc/self/exe");
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return 1;
    return !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(int argc, char **argv)
{
    (void)argc;
    int failed = 0;
    const char *ca = getenv("CCL_CHECK_ARGS");
    if (ca && strcmp(ca, "1") == 0) {
        base_seed = tst_seed("test_argcheck (CCL_CHECK_ARGS=1)");
        failed += tst_run_ranks("check-args", 4, 60, check_args_body, NULL) != 0;
        return failed ? 1 : 0;
    }
    base_seed = tst_seed("test_argcheck");
    failed += tst_run_ranks("argcheck", 1, 60, argcheck_body, NULL) != 0;
    failed += tst_run_ranks("argcheck", 3, 60, argcheck_body, NULL) != 0;
    failed += run_check_args_in_child(argv);
    printf("test_argcheck: %s\n", failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
