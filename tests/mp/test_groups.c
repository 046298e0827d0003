/*
 * test_groups.c - group calls, point to point and barrier across forked
 * ranks (and one process driving all ranks of ccl_comm_init_all):
 *
 *   group-colls   every collective (and a send/recv ring) in one group on
 *                 one comm; nested groups, where nothing may run before the
 *                 outermost ccl_group_end; one group on two comms
 *   group-p2p     a ring exchange of 17 MiB messages (far past any FIFO);
 *                 pairwise exchange where both ranks send first; an
 *                 all-to-all-v from sends and receives with uneven per-pair
 *                 counts (some 0, some large, self included); seven sends to
 *                 one peer that must match the receives in order; int64
 *                 sent and received as uint8 (bytes agree); a group
 *                 mixing collectives with sends and receives; blocking sends
 *                 and receives outside any group
 *   group-one-thread   one thread, ccl_comm_init_all(n), one group with a
 *                 call per rank: NCCL's single-process multi-rank pattern,
 *                 for every collective
 *   group-errors  ccl_group_end without a start (CCL_ERR_GROUP), calls on
 *                 different streams in one group (CCL_ERR_GROUP as ccl.h
 *                 documents), a group with one call that fails its
 *                 checks (the same code from ccl_group_end): nothing of such
 *                 a group may run; ccl_comm_destroy of a comm with calls in
 *                 the open group (CCL_ERR_GROUP, the group then runs); the
 *                 comm must work afterwards
 *   group-stream  a group on a host stream: ccl_group_end returns while the
 *                 peers have provably not joined, the work completes at
 *                 ccl_stream_synchronize
 *   barrier       ccl_barrier waits for the last rank, blocking and on a stream
 *
 * Data comes from tests/common's generator; every receive buffer is checked
 * in full, with its guard bytes, and every send buffer must be unchanged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "test_coll.h"
#include "test_common.h"
#include "test_launch.h"

static uint64_t base_seed;

/* ---- helpers ------------------------------------------------------------------ */

/* A point-to-point message: its data is rank `src`'s copy input under a
 * seed of its own, so a message received in the wrong order or from the
 * wrong peer cannot pass. */
typedef struct {
    tst_gbuf_t g;
    void *p;
    size_t count;
    ccl_datatype_t dt;
    uint64_t seed;
    int src;
} msg_t;

static uint64_t msg_seed(uint64_t tag, int src, int dst, int k)
{
    return tst_case_seed(base_seed, tag, (uint64_t)src, (uint64_t)dst, (uint64_t)k);
}

static void msg_send_buf(msg_t *m, size_t count, ccl_datatype_t dt, uint64_t seed, int nranks,
                         int rank)
{
    m->count = count;
    m->dt = dt;
    m->seed = seed;
    m->src = rank;
    m->p = tst_gbuf_alloc(&m->g, count * tst_dtype_size(dt), 0, 0);
    tst_fill_input(m->p, count, dt, TST_OP_COPY, nranks, seed, rank, 0);
}

static void msg_recv_buf(msg_t *m, size_t count, ccl_datatype_t dt, uint64_t seed, int src)
{
    m->count = count;
    m->dt = dt;
    m->seed = seed;
    m->src = src;
    m->p = tst_gbuf_alloc(&m->g, count * tst_dtype_size(dt), 0, 0);
}

/* The buffer holds rank m->src's data (a received message, or a sent one
 * that must be unchanged) and its guards are intact. */
static void msg_check(tst_ctx_t *ctx, msg_t *m, const char *what)
{
    tst_mismatch_t mm;
    char guard[160];
    size_t nbad = tst_check_input(m->p, m->count, m->dt, TST_OP_COPY, ctx->nranks, m->seed,
                                  m->src, 0, &mm);
    if (nbad)
        tst_fail(ctx, "%s (%zu x %s from rank %d): %zu wrong elements, first at %zu: expected %s, got %s",
                 what, m->count, tst_dtype_name(m->dt), m->src, nbad, mm.index, mm.expected,
                 mm.got);
    else if (tst_gbuf_check(&m->g, guard, sizeof(guard)))
        tst_fail(ctx, "%s: guard damaged: %s", what, guard);
}

static void msg_free(msg_t *m)
{
    tst_gbuf_free(&m->g);
}

static void verify_cases(tst_ctx_t *ctx, const char *where, const tst_case_t *cs, tst_bufs_t *bs,
                         int n)
{
    char msg[600];
    for (int k = 0; k < n; k++) {
        if (tst_case_verify(&cs[k], ctx->rank, ctx->nranks, &bs[k], msg, sizeof(msg)))
            tst_fail(ctx, "%s: %s", where, msg);
        tst_case_release(&bs[k]);
    }
}

static void issue_or_die(tst_ctx_t *ctx, const tst_case_t *c, tst_bufs_t *b, ccl_comm_t comm,
                         ccl_stream_t stream, const char *where)
{
    char what[200];
    tst_case_str(c, ctx->nranks, what, sizeof(what));
    tst_set_case(ctx, "%s: %s", where, what);
    ccl_result_t rc = tst_case_issue(c, b, comm, stream);
    if (rc != CCL_SUCCESS)
        tst_fatal(ctx, "%s: %s returned %s: %s", where, what, ccl_get_error_string(rc),
                  ccl_get_last_error(comm));
}

/* A case of collective `coll` for group tests: built-in ops only (creating
 * premulsum operators is not a group call), outputs out of place so an
 * untouched receive buffer shows that nothing ran. */
static tst_case_t group_case(tst_coll_t coll, int nranks, int k, size_t count, int inplace)
{
    tst_case_t c;
    memset(&c, 0, sizeof(c));
    c.coll = coll;
    c.dt = tst_dtypes[(k * 5 + (int)coll) % tst_num_dtypes];
    c.op = tst_coll_reduces(coll) ? tst_ops[(k + (int)coll) % (tst_num_ops - 1)] : TST_OP_COPY;
    c.count = count;
    c.inplace = inplace && tst_coll_has_inplace(coll);
    c.root = (k + (int)coll) % nranks;
    c.seed = tst_case_seed(base_seed, (uint64_t)nranks, (uint64_t)coll, (uint64_t)k, 41);
    return c;
}

/* The receive buffer of an out-of-place case still holds the fill pattern. */
static int untouched(const tst_bufs_t *b)
{
    size_t bytes = b->recv.bytes;
    return !b->recvp || tst_check_bytes(b->recv.user, bytes, TST_FILL_BYTE) == bytes;
}

/* ---- group-colls ------------------------------------------------------------------ */

#define ROUNDS 3

static int group_colls_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    static const size_t counts[] = {1, 13, 1021, 70001};
    ccl_comm_t comm = tst_comm_init(ctx);
    tst_case_t cs[TST_NUM_COLLS * ROUNDS];
    tst_bufs_t bs[TST_NUM_COLLS * ROUNDS];
    int n = 0;

    /* 1: every collective, three times with other dtypes, counts and
     * placements, all in one group. */
    for (int round = 0; round < ROUNDS; round++) {
        for (int coll = 0; coll < TST_NUM_COLLS; coll++, n++) {
            cs[n] = group_case((tst_coll_t)coll, ctx->nranks, round,
                               counts[(coll + round) % 4], round == 1);
            tst_case_prepare(&cs[n], ctx->rank, ctx->nranks, &bs[n], 0);
        }
    }
    TST_CCL(ctx, comm, ccl_group_start());
    for (int k = 0; k < n; k++)
        issue_or_die(ctx, &cs[k], &bs[k], comm, NULL, "one group of every collective");
    tst_set_case(ctx, "ccl_group_end of %d collectives", n);
    TST_CCL(ctx, comm, ccl_group_end());
    verify_cases(ctx, "one group of every collective", cs, bs, n);

    /* 2: nested groups; only the outermost end runs anything. */
    n = 0;
    cs[n++] = group_case(TST_ALLREDUCE, ctx->nranks, 7, 1021, 0);
    cs[n++] = group_case(TST_BROADCAST, ctx->nranks, 7, 13, 0);
    cs[n++] = group_case(TST_SENDRECV, ctx->nranks, 7, 70001, 0); /* a third level inside */
    cs[n++] = group_case(TST_REDUCE_SCATTER, ctx->nranks, 7, 1021, 0);
    for (int k = 0; k < n; k++)
        tst_case_prepare(&cs[k], ctx->rank, ctx->nranks, &bs[k], 0);
    TST_CCL(ctx, comm, ccl_group_start());
    TST_CCL(ctx, comm, ccl_group_start());
    issue_or_die(ctx, &cs[0], &bs[0], comm, NULL, "nested groups");
    TST_CCL(ctx, comm, ccl_group_end());
    if (!untouched(&bs[0]))
        tst_fail(ctx, "nested groups: the allreduce ran at an inner ccl_group_end");
    TST_CCL(ctx, comm, ccl_group_start());
    issue_or_die(ctx, &cs[1], &bs[1], comm, NULL, "nested groups");
    issue_or_die(ctx, &cs[2], &bs[2], comm, NULL, "nested groups");
    TST_CCL(ctx, comm, ccl_group_end());
    issue_or_die(ctx, &cs[3], &bs[3], comm, NULL, "nested groups");
    for (int k = 0; k < n; k++) {
        if (!untouched(&bs[k]))
            tst_fail(ctx, "nested groups: call %d ran before the outermost ccl_group_end", k);
    }
    tst_set_case(ctx, "nested groups: outermost ccl_group_end");
    TST_CCL(ctx, comm, ccl_group_end());
    verify_cases(ctx, "nested groups", cs, bs, n);

    /* 3: one group with calls on two communicators of the same ranks. */
    ccl_unique_id_t id2;
    tst_share_id(ctx, &id2);
    ccl_comm_t comm2 = tst_comm_init_id(ctx, id2);
    n = 0;
    cs[n++] = group_case(TST_ALLREDUCE, ctx->nranks, 8, 70001, 0);
    cs[n++] = group_case(TST_ALLTOALL, ctx->nranks, 8, 1021, 0);
    cs[n++] = group_case(TST_SENDRECV, ctx->nranks, 8, 1021, 0);
    cs[n++] = group_case(TST_REDUCE, ctx->nranks, 8, 13, 1);
    for (int k = 0; k < n; k++)
        tst_case_prepare(&cs[k], ctx->rank, ctx->nranks, &bs[k], 0);
    TST_CCL(ctx, comm, ccl_group_start());
    for (int k = 0; k < n; k++)
        issue_or_die(ctx, &cs[k], &bs[k], (k & 1) ? comm2 : comm, NULL, "one group on two comms");
    tst_set_case(ctx, "one group on two comms: ccl_group_end");
    TST_CCL(ctx, comm, ccl_group_end());
    verify_cases(ctx, "one group on two comms", cs, bs, n);
    tst_comm_destroy(ctx, comm2);

    tst_comm_destroy(ctx, comm);
    return 0;
}

/* ---- group-p2p ---------------------------------------------------------------------- */

/* In one group: send `count` elements to `to`, receive as many from `from`. */
static void exchange(tst_ctx_t *ctx, ccl_comm_t comm, const char *what, uint64_t tag,
                     size_t count, ccl_datatype_t dt, int to, int from)
{
    int r = ctx->rank;
    msg_t s, d;
    char where[160];
    tst_set_case(ctx, "%s: preparing", what);
    msg_send_buf(&s, count, dt, msg_seed(tag, r, to, 0), ctx->nranks, r);
    msg_recv_buf(&d, count, dt, msg_seed(tag, from, r, 0), from);
    tst_set_case(ctx, "%s: send to %d, receive from %d", what, to, from);
    TST_CCL(ctx, comm, ccl_group_start());
    TST_CCL(ctx, comm, ccl_send(s.p, count, dt, to, comm, NULL));
    TST_CCL(ctx, comm, ccl_recv(d.p, count, dt, from, comm, NULL));
    TST_CCL(ctx, comm, ccl_group_end());
    snprintf(where, sizeof(where), "%s: received", what);
    msg_check(ctx, &d, where);
    snprintf(where, sizeof(where), "%s: sendbuf after the send", what);
    msg_check(ctx, &s, where);
    msg_free(&s);
    msg_free(&d);
}

static void ring_exchange(tst_ctx_t *ctx, ccl_comm_t comm)
{
    int n = ctx->nranks, r = ctx->rank;
    /* int32: 17 MiB + 12 bytes */
    exchange(ctx, comm, "ring exchange of 17 MiB", 1, ((size_t)17 << 20) / 4 + 3, CCL_INT32,
             (r + 1) % n, (r - 1 + n) % n);
}

/* Both ranks of a pair send first (an odd rank out exchanges with itself). */
static void pairwise_exchange(tst_ctx_t *ctx, ccl_comm_t comm)
{
    int r = ctx->rank, peer = (r ^ 1) < ctx->nranks ? r ^ 1 : r;
    /* float32: 9 MiB + 4 bytes */
    exchange(ctx, comm, "pairwise exchange of 9 MiB, send first", 2, ((size_t)9 << 20) / 4 + 1,
             CCL_FLOAT32, peer, peer);
}

/* Elements rank s sends rank d: 0, a few, a few thousand or ~2 MiB. */
static size_t a2av_count(int s, int d)
{
    uint64_t h = tst_case_seed(base_seed, 3, (uint64_t)s, (uint64_t)d, 0);
    switch (h & 3) {
    case 0: return 0;
    case 1: return 1 + (h >> 8) % 100;
    case 2: return 1 + (h >> 8) % 30000;
    default: return 250000 + (h >> 8) % 20000;
    }
}

static void alltoallv(tst_ctx_t *ctx, ccl_comm_t comm)
{
    const ccl_datatype_t dt = CCL_FLOAT64;
    int n = ctx->nranks, r = ctx->rank;
    msg_t s[TST_MAX_RANKS], d[TST_MAX_RANKS];
    tst_set_case(ctx, "all-to-all-v: preparing");
    for (int p = 0; p < n; p++) {
        msg_send_buf(&s[p], a2av_count(r, p), dt, msg_seed(3, r, p, 0), n, r);
        msg_recv_buf(&d[p], a2av_count(p, r), dt, msg_seed(3, p, r, 0), p);
    }
    tst_set_case(ctx, "all-to-all-v from sends and receives in one group");
    TST_CCL(ctx, comm, ccl_group_start());
    for (int p = 0; p < n; p++)
        TST_CCL(ctx, comm, ccl_send(s[p].p, s[p].count, dt, p, comm, NULL));
    for (int p = 0; p < n; p++)
        TST_CCL(ctx, comm, ccl_recv(d[p].p, d[p].count, dt, p, comm, NULL));
    TST_CCL(ctx, comm, ccl_group_end());
    for (int p = 0; p < n; p++) {
        char what[96];
        snprintf(what, sizeof(what), "all-to-all-v: block from rank %d", p);
        msg_check(ctx, &d[p], what);
        snprintf(what, sizeof(what), "all-to-all-v: sendbuf for rank %d", p);
        msg_check(ctx, &s[p], what);
        msg_free(&s[p]);
        msg_free(&d[p]);
    }
}

#define NSAME 7

/* Seven messages to the next rank, three of them the same size: receives
 * must match them in the order they were sent. The recvs come first in the
 * receiver's group, and half the ranks put them in a group of their own. */
static void same_peer_in_order(tst_ctx_t *ctx, ccl_comm_t comm)
{
    static const size_t counts[NSAME] = {5, 0, 70000, 1, 300001, 5, 5};
    int n = ctx->nranks, r = ctx->rank, to = (r + 1) % n, from = (r - 1 + n) % n;
    msg_t s[NSAME], d[NSAME];
    for (int k = 0; k < NSAME; k++) {
        msg_send_buf(&s[k], counts[k], CCL_UINT32, msg_seed(4, r, to, k), n, r);
        msg_recv_buf(&d[k], counts[k], CCL_UINT32, msg_seed(4, from, r, k), from);
    }
    tst_set_case(ctx, "%d messages to rank %d, matched in order", NSAME, to);
    TST_CCL(ctx, comm, ccl_group_start());
    for (int k = 0; k < NSAME; k++)
        TST_CCL(ctx, comm, ccl_recv(d[k].p, counts[k], CCL_UINT32, from, comm, NULL));
    if (r & 1) {
        TST_CCL(ctx, comm, ccl_group_start());
        for (int k = 0; k < NSAME; k++)
            TST_CCL(ctx, comm, ccl_send(s[k].p, counts[k], CCL_UINT32, to, comm, NULL));
        TST_CCL(ctx, comm, ccl_group_end());
    } else {
        for (int k = 0; k < NSAME; k++)
            TST_CCL(ctx, comm, ccl_send(s[k].p, counts[k], CCL_UINT32, to, comm, NULL));
    }
    TST_CCL(ctx, comm, ccl_group_end());
    for (int k = 0; k < NSAME; k++) {
        char what[96];
        snprintf(what, sizeof(what), "message %d of %d to the same peer", k, NSAME);
        msg_check(ctx, &d[k], what);
        msg_free(&s[k]);
        msg_free(&d[k]);
    }
}

/* Sends and receives must agree on bytes only: 1021 int64 sent arrive as
 * 8168 uint8 (bit for bit), in a group with the reverse direction. */
static void bytes_not_dtypes(tst_ctx_t *ctx, ccl_comm_t comm)
{
    int n = ctx->nranks, r = ctx->rank, to = (r + 1) % n, from = (r - 1 + n) % n;
    msg_t s, d;
    msg_send_buf(&s, 1021, CCL_INT64, msg_seed(7, r, to, 0), n, r);
    msg_recv_buf(&d, 1021, CCL_INT64, msg_seed(7, from, r, 0), from);
    tst_set_case(ctx, "1021 int64 sent, received as 8168 uint8");
    TST_CCL(ctx, comm, ccl_group_start());
    TST_CCL(ctx, comm, ccl_recv(d.p, 1021 * 8, CCL_UINT8, from, comm, NULL));
    TST_CCL(ctx, comm, ccl_send(s.p, 1021, CCL_INT64, to, comm, NULL));
    TST_CCL(ctx, comm, ccl_group_end());
    msg_check(ctx, &d, "int64 sent, received as uint8");
    msg_free(&s);
    msg_free(&d);
}

/* Collectives and a send/recv ring in one group. */
static void mixed_group(tst_ctx_t *ctx, ccl_comm_t comm)
{
    int n = ctx->nranks, r = ctx->rank, to = (r + 1) % n, from = (r - 1 + n) % n;
    tst_case_t cs[3];
    tst_bufs_t bs[3];
    msg_t s, d;
    cs[0] = group_case(TST_ALLREDUCE, n, 11, 70001, 0);
    cs[1] = group_case(TST_BROADCAST, n, 11, 1021, 1);
    cs[2] = group_case(TST_ALLTOALL, n, 11, 1021, 0);
    for (int k = 0; k < 3; k++)
        tst_case_prepare(&cs[k], r, n, &bs[k], 0);
    msg_send_buf(&s, 100003, CCL_INT64, msg_seed(5, r, to, 0), n, r);
    msg_recv_buf(&d, 100003, CCL_INT64, msg_seed(5, from, r, 0), from);
    TST_CCL(ctx, comm, ccl_group_start());
    issue_or_die(ctx, &cs[0], &bs[0], comm, NULL, "collectives and sends in one group");
    TST_CCL(ctx, comm, ccl_send(s.p, s.count, CCL_INT64, to, comm, NULL));
    issue_or_die(ctx, &cs[1], &bs[1], comm, NULL, "collectives and sends in one group");
    TST_CCL(ctx, comm, ccl_recv(d.p, d.count, CCL_INT64, from, comm, NULL));
    issue_or_die(ctx, &cs[2], &bs[2], comm, NULL, "collectives and sends in one group");
    tst_set_case(ctx, "collectives and sends in one group: ccl_group_end");
    TST_CCL(ctx, comm, ccl_group_end());
    verify_cases(ctx, "collectives and sends in one group", cs, bs, 3);
    msg_check(ctx, &d, "collectives and sends in one group: received");
    msg_check(ctx, &s, "collectives and sends in one group: sendbuf");
    msg_free(&s);
    msg_free(&d);
}

/* Outside any group: rank 0 sends three messages (one of 5 MiB) to the last
 * rank with blocking calls, which receives them with blocking calls. */
static void blocking_p2p(tst_ctx_t *ctx, ccl_comm_t comm)
{
    static const size_t counts[3] = {1, ((size_t)5 << 20) + 7, 7};
    int n = ctx->nranks, r = ctx->rank, last = n - 1;
    if (n < 2 || (r != 0 && r != last))
        return;
    for (int k = 0; k < 3; k++) {
        msg_t m;
        tst_set_case(ctx, "blocking %s of message %d (%zu bytes)", r == 0 ? "send" : "recv", k,
                     counts[k]);
        if (r == 0) {
            msg_send_buf(&m, counts[k], CCL_UINT8, msg_seed(6, 0, last, k), n, 0);
            TST_CCL(ctx, comm, ccl_send(m.p, counts[k], CCL_UINT8, last, comm, NULL));
            msg_check(ctx, &m, "blocking send: sendbuf");
        } else {
            msg_recv_buf(&m, counts[k], CCL_UINT8, msg_seed(6, 0, last, k), 0);
            TST_CCL(ctx, comm, ccl_recv(m.p, counts[k], CCL_UINT8, 0, comm, NULL));
            msg_check(ctx, &m, "blocking recv");
        }
        msg_free(&m);
    }
}

static int group_p2p_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    ring_exchange(ctx, comm);
    pairwise_exchange(ctx, comm);
    alltoallv(ctx, comm);
    same_peer_in_order(ctx, comm);
    bytes_not_dtypes(ctx, comm);
    mixed_group(ctx, comm);
    blocking_p2p(ctx, comm);
    /* The comm is in step afterwards. */
    tst_case_t c = group_case(TST_ALLREDUCE, ctx->nranks, 12, 1021, 0);
    tst_run_case(ctx, comm, &c, 0);
    tst_comm_destroy(ctx, comm);
    return 0;
}

/* ---- group-one-thread --------------------------------------------------------------- */

#define MAXN 8

static int one_thread_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    static const int sizes[] = {1, 2, 3, 5, 8};
    static const size_t counts[] = {1021, 70001};
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        int n = sizes[si];
        ccl_comm_t comms[MAXN];
        tst_set_case(ctx, "ccl_comm_init_all(%d)", n);
        TST_CCL(ctx, NULL, ccl_comm_init_all(comms, n, NULL));
        for (int coll = 0; coll < TST_NUM_COLLS; coll++) {
            for (int ci = 0; ci < 2; ci++) {
                char what[200], msg[600];
                tst_bufs_t b[MAXN];
                tst_case_t c = group_case((tst_coll_t)coll, n, ci + 20, counts[ci], ci);
                tst_case_str(&c, n, what, sizeof(what));
                for (int r = 0; r < n; r++)
                    tst_case_prepare(&c, r, n, &b[r], 0);
                tst_set_case(ctx, "one thread, %d comms in a group: %s", n, what);
                TST_CCL(ctx, NULL, ccl_group_start());
                for (int r = 0; r < n; r++) {
                    ccl_result_t rc = tst_case_issue(&c, &b[r], comms[r], NULL);
                    if (rc != CCL_SUCCESS)
                        tst_fatal(ctx, "one thread: %s on rank %d returned %s: %s", what, r,
                                  ccl_get_error_string(rc), ccl_get_last_error(comms[r]));
                }
                TST_CCL(ctx, NULL, ccl_group_end());
                for (int r = 0; r < n; r++) {
                    if (tst_case_verify(&c, r, n, &b[r], msg, sizeof(msg)))
                        tst_fail(ctx, "one thread, %d comms in a group: %s", n, msg);
                    tst_case_release(&b[r]);
                }
            }
        }
        tst_set_case(ctx, "ccl_comm_destroy of %d comms", n);
        for (int r = 0; r < n; r++)
            TST_CCL(ctx, comms[r], ccl_comm_destroy(comms[r]));
    }
    return 0;
}

/* ---- group-errors ------------------------------------------------------------------- */

static void expect_code(tst_ctx_t *ctx, ccl_result_t got, ccl_result_t want, ccl_comm_t comm,
                        const char *what, const char *word)
{
    if (got != want) {
        tst_fail(ctx, "%s returned %s, expected %s", what, ccl_get_error_string(got),
                 ccl_get_error_string(want));
        return;
    }
    const char *m = ccl_get_last_error(comm);
    if (!m || !m[0])
        tst_fail(ctx, "%s: %s but no message", what, ccl_get_error_string(got));
    else if (word && !strcasestr(m, word))
        tst_fail(ctx, "%s: the message does not mention \"%s\": %s", what, word, m);
}

/* A group of two allreduces, the second on `s2`: refused as a whole. */
static void mixed_streams(tst_ctx_t *ctx, ccl_comm_t comm, ccl_stream_t s1, ccl_stream_t s2,
                          const char *what)
{
    tst_case_t cs[2];
    tst_bufs_t bs[2];
    for (int k = 0; k < 2; k++) {
        cs[k] = group_case(TST_ALLREDUCE, ctx->nranks, 30 + k, 1021, 0);
        tst_case_prepare(&cs[k], ctx->rank, ctx->nranks, &bs[k], 0);
    }
    tst_set_case(ctx, "%s", what);
    TST_CCL(ctx, comm, ccl_group_start());
    ccl_result_t r1 = tst_case_issue(&cs[0], &bs[0], comm, s1);
    ccl_result_t r2 = tst_case_issue(&cs[1], &bs[1], comm, s2);
    ccl_result_t rc = ccl_group_end();
    if (r1 != CCL_SUCCESS)
        tst_fail(ctx, "%s: the first call returned %s", what, ccl_get_error_string(r1));
    if (r2 != CCL_ERR_GROUP)
        tst_fail(ctx, "%s: the call on the other stream returned %s", what,
                 ccl_get_error_string(r2));
    expect_code(ctx, rc, CCL_ERR_GROUP, comm, what, "stream");
    /* Whatever a stream might have queued has run once it is synchronized. */
    if (s1)
        TST_CCL(ctx, comm, ccl_stream_synchronize(s1));
    if (s2)
        TST_CCL(ctx, comm, ccl_stream_synchronize(s2));
    for (int k = 0; k < 2; k++) {
        if (!untouched(&bs[k]))
            tst_fail(ctx, "%s: call %d of the refused group wrote its recvbuf", what, k);
        tst_case_release(&bs[k]);
    }
}

static int group_errors_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    ccl_stream_t s1, s2;
    ccl_result_t rc;

    tst_set_case(ctx, "ccl_group_end without ccl_group_start");
    expect_code(ctx, ccl_group_end(), CCL_ERR_GROUP, NULL, "ccl_group_end without a start",
                "group");
    TST_CCL(ctx, comm, ccl_group_start());
    TST_CCL(ctx, comm, ccl_group_end()); /* an empty group is fine */
    expect_code(ctx, ccl_group_end(), CCL_ERR_GROUP, NULL, "a second ccl_group_end", "group");

    TST_CCL(ctx, NULL, ccl_stream_create(&s1));
    TST_CCL(ctx, NULL, ccl_stream_create(&s2));
    mixed_streams(ctx, comm, NULL, s1, "a group with a blocking call and one on a host stream");
    mixed_streams(ctx, comm, s1, s2, "a group with calls on two host streams");

    /* A call that fails its checks: the group returns its code, runs nothing. */
    {
        tst_case_t c = group_case(TST_ALLREDUCE, ctx->nranks, 33, 1021, 0);
        tst_bufs_t b;
        float junk[4] = {1, 2, 3, 4}, out[4] = {0};
        tst_case_prepare(&c, ctx->rank, ctx->nranks, &b, 0);
        tst_set_case(ctx, "a group with a call that fails its checks");
        TST_CCL(ctx, comm, ccl_group_start());
        issue_or_die(ctx, &c, &b, comm, NULL, "a group with a call that fails its checks");
        rc = ccl_allreduce(junk, out, 4, (ccl_datatype_t)CCL_NUM_DTYPES, CCL_SUM, comm, NULL);
        if (rc != CCL_ERR_INVALID_DTYPE)
            tst_fail(ctx, "an allreduce with a bad dtype in a group returned %s",
                     ccl_get_error_string(rc));
        rc = ccl_group_end();
        if (rc != CCL_ERR_INVALID_DTYPE)
            tst_fail(ctx, "ccl_group_end of a group with a refused call returned %s, expected "
                     "CCL_ERR_INVALID_DTYPE", ccl_get_error_string(rc));
        if (!untouched(&b))
            tst_fail(ctx, "the valid allreduce of a group with a refused call ran");
        if (out[0] != 0.0f)
            tst_fail(ctx, "the refused allreduce wrote its recvbuf");
        tst_case_release(&b);
    }

    /* Destroying a comm that this thread's open group has calls on is
     * refused (the group would wait forever); the group then runs. */
    {
        tst_case_t c = group_case(TST_ALLREDUCE, ctx->nranks, 36, 1021, 0);
        tst_bufs_t b;
        tst_case_prepare(&c, ctx->rank, ctx->nranks, &b, 0);
        tst_set_case(ctx, "ccl_comm_destroy inside a group with a call on the comm");
        TST_CCL(ctx, comm, ccl_group_start());
        issue_or_die(ctx, &c, &b, comm, NULL, "ccl_comm_destroy inside a group");
        expect_code(ctx, ccl_comm_destroy(comm), CCL_ERR_GROUP, comm,
                    "ccl_comm_destroy of a comm with calls in the open group", "group");
        TST_CCL(ctx, comm, ccl_group_end());
        verify_cases(ctx, "the group whose comm could not be destroyed", &c, &b, 1);
    }

    /* After all of that the comm still works, blocking and on a stream. */
    tst_case_t ok = group_case(TST_ALLREDUCE, ctx->nranks, 34, 70001, 0);
    tst_run_case(ctx, comm, &ok, 0);
    {
        tst_case_t c = group_case(TST_ALLGATHER, ctx->nranks, 35, 1021, 0);
        tst_bufs_t b;
        tst_case_prepare(&c, ctx->rank, ctx->nranks, &b, 0);
        issue_or_die(ctx, &c, &b, comm, s1, "after the refused groups, on a stream");
        TST_CCL(ctx, comm, ccl_stream_synchronize(s1));
        verify_cases(ctx, "after the refused groups, on a stream", &c, &b, 1);
    }
    TST_CCL(ctx, NULL, ccl_stream_destroy(s1));
    TST_CCL(ctx, NULL, ccl_stream_destroy(s2));
    tst_comm_destroy(ctx, comm);
    return 0;
}

/* ---- group-stream --------------------------------------------------------------------- */

static int group_stream_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    enum { NQ = 5 };
    static const tst_coll_t colls[NQ] = {TST_ALLREDUCE, TST_ALLTOALL, TST_BCAST, TST_SENDRECV,
                                         TST_REDUCE};
    ccl_comm_t comm = tst_comm_init(ctx);
    ccl_stream_t s;
    tst_case_t cs[NQ];
    tst_bufs_t bs[NQ];
    TST_CCL(ctx, NULL, ccl_stream_create(&s));
    for (int k = 0; k < NQ; k++) {
        cs[k] = group_case(colls[k], ctx->nranks, 40, 20011, k & 1);
        tst_case_prepare(&cs[k], ctx->rank, ctx->nranks, &bs[k], 0);
    }
    /* Rank 0 queues its group before anyone else starts: its group_end must
     * return without waiting for them. */
    if (ctx->rank != 0)
        tst_barrier(ctx);
    TST_CCL(ctx, comm, ccl_group_start());
    for (int k = 0; k < NQ; k++)
        issue_or_die(ctx, &cs[k], &bs[k], comm, s, "a group on a host stream");
    tst_set_case(ctx, "ccl_group_end of a group on a host stream");
    TST_CCL(ctx, comm, ccl_group_end());
    if (ctx->rank == 0) {
        ccl_result_t rc = ccl_stream_query(s);
        if (ctx->nranks > 1 && rc != CCL_IN_PROGRESS)
            tst_fail(ctx, "query of a stream whose group waits for its peers returned %s",
                     ccl_get_error_string(rc));
        tst_barrier(ctx);
    }
    tst_set_case(ctx, "ccl_stream_synchronize of a group");
    TST_CCL(ctx, comm, ccl_stream_synchronize(s));
    verify_cases(ctx, "a group on a host stream", cs, bs, NQ);
    TST_CCL(ctx, NULL, ccl_stream_destroy(s));
    tst_comm_destroy(ctx, comm);
    return 0;
}

/* ---- barrier ------------------------------------------------------------------------- */

#define LATE_S 0.3

/* A receive of another size than its send: the receiver fails with
 * CCL_ERR_MISMATCH naming the sender instead of reading a wrong length
 * (slots carry their length). arg: 1 the receive is shorter, 0 longer. */
static int p2p_mismatch_body(tst_ctx_t *ctx, void *arg)
{
    int shorter = *(const int *)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    enum { SENT = 1000 };
    size_t want = shorter ? SENT / 2 : SENT * 3 / 2;
    float buf[SENT * 2];
    for (int i = 0; i < SENT * 2; i++)
        buf[i] = (float)i;
    tst_set_case(ctx, "send of %d floats, receive of %zu", SENT, want);
    if (ctx->rank == 0) {
        TST_CCL(ctx, comm, ccl_send(buf, SENT, CCL_FLOAT32, 1, comm, NULL));
    } else {
        char what[96];
        snprintf(what, sizeof what, "a receive of %zu floats from a send of %d", want, SENT);
        expect_code(ctx, ccl_recv(buf, want, CCL_FLOAT32, 0, comm, NULL), CCL_ERR_MISMATCH, comm, what,
                    "rank 0");
    }
    tst_barrier(ctx);
    ccl_comm_destroy(comm);
    return 0;
}

static int barrier_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    ccl_stream_t s;
    TST_CCL(ctx, NULL, ccl_stream_create(&s));
    int late[2] = {0, ctx->nranks - 1};
    for (int k = 0; k < 4; k++) {
        int who = late[k & 1], on_stream = k >= 2;
        tst_barrier(ctx);
        if (ctx->rank == who)
            usleep((useconds_t)(LATE_S * 1e6));
        tst_set_case(ctx, "ccl_barrier%s, rank %d late", on_stream ? " on a stream" : "", who);
        double t0 = tst_now();
        if (on_stream) {
            TST_CCL(ctx, comm, ccl_barrier(comm, s));
            TST_CCL(ctx, comm, ccl_stream_synchronize(s));
        } else {
            TST_CCL(ctx, comm, ccl_barrier(comm, NULL));
        }
        double dt = tst_now() - t0;
        if (ctx->rank != who && dt < LATE_S * 0.8)
            tst_fail(ctx, "ccl_barrier%s returned after %.3f s, before rank %d (%.1f s late) "
                     "arrived", on_stream ? " on a stream" : "", dt, who, LATE_S);
    }
    TST_CCL(ctx, NULL, ccl_stream_destroy(s));
    tst_comm_destroy(ctx, comm);
    return 0;
}

int main(void)
{
    int failed = 0;
    base_seed = tst_seed("test_groups");
    static const int colls_n[] = {1, 3, 4};
    for (size_t k = 0; k < sizeof(colls_n) / sizeof(colls_n[0]); k++)
        failed += tst_run_ranks("group-colls", colls_n[k], 60, group_colls_body, NULL) != 0;
    static const int p2p_n[] = {1, 2, 3, 5};
    for (size_t k = 0; k < sizeof(p2p_n) / sizeof(p2p_n[0]); k++)
        failed += tst_run_ranks("group-p2p", p2p_n[k], 90, group_p2p_body, NULL) != 0;
    failed += tst_run_ranks("group-one-thread", 1, 90, one_thread_body, NULL) != 0;
    failed += tst_run_ranks("group-errors", 3, 60, group_errors_body, NULL) != 0;
    failed += tst_run_ranks("group-stream", 1, 60, group_stream_body, NULL) != 0;
    failed += tst_run_ranks("group-stream", 4, 60, group_stream_body, NULL) != 0;
    failed += tst_run_ranks("barrier", 3, 60, barrier_body, NULL) != 0;
    static const int shorter = 1, longer = 0;
    failed += tst_run_ranks("p2p-shorter-recv", 2, 60, p2p_mismatch_body, (void *)&shorter) != 0;
    failed += tst_run_ranks("p2p-longer-recv", 2, 60, p2p_mismatch_body, (void *)&longer) != 0;
    printf("test_groups: %s\n", failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
