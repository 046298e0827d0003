/*
 * test_coll.c - buffers, call and verification of one collective test case,
 * and the sweep built from them; see test_coll.h.
 */
#include "test_coll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const coll_names[TST_NUM_COLLS] = {
    "allreduce", "allgather", "reduce_scatter", "broadcast", "bcast",
    "reduce",    "alltoall",  "gather",         "scatter",   "sendrecv",
};

const char *tst_coll_name(tst_coll_t c)
{
    return (unsigned)c < TST_NUM_COLLS ? coll_names[c] : "?";
}

tst_coll_t tst_coll_by_name(const char *name)
{
    for (int c = 0; c < TST_NUM_COLLS; c++) {
        if (strcmp(name, coll_names[c]) == 0)
            return (tst_coll_t)c;
    }
    return TST_NUM_COLLS;
}

int tst_coll_reduces(tst_coll_t c)
{
    return c == TST_ALLREDUCE || c == TST_REDUCE_SCATTER || c == TST_REDUCE;
}

int tst_coll_rooted(tst_coll_t c)
{
    return c == TST_BROADCAST || c == TST_BCAST || c == TST_REDUCE || c == TST_GATHER ||
           c == TST_SCATTER || c == TST_SENDRECV;
}

int tst_coll_has_inplace(tst_coll_t c)
{
    return c != TST_BCAST && c != TST_ALLTOALL && c != TST_SENDRECV;
}

/* The op the inputs are generated for. */
static ccl_redop_t data_op(const tst_case_t *c)
{
    return tst_coll_reduces(c->coll) ? c->op : TST_OP_COPY;
}

/* Whether a premulsum operator's scalar is copied at creation (else read at
 * every run). */
static int scalar_immediate(const tst_case_t *c)
{
    return (int)((c->seed >> 17) & 1);
}

void tst_case_str(const tst_case_t *c, int nranks, char *buf, size_t len)
{
    char op[48] = "", root[32] = "", align[32] = "";
    if (tst_coll_reduces(c->coll))
        snprintf(op, sizeof(op), " op=%s%s", tst_op_name(c->op),
                 c->op != TST_OP_PREMULSUM ? ""
                 : scalar_immediate(c)     ? "(scalar host-immediate)"
                                           : "(scalar by pointer)");
    if (c->coll == TST_SENDRECV)
        snprintf(root, sizeof(root), " peer=rank+%d", c->root);
    else if (tst_coll_rooted(c->coll))
        snprintf(root, sizeof(root), " root=%d", c->root);
    if (c->misalign)
        snprintf(align, sizeof(align), " misalign=%zu", c->misalign);
    snprintf(buf, len, "%s dtype=%s%s count=%zu nranks=%d%s %s%s%s", tst_coll_name(c->coll),
             tst_dtype_name(c->dt), op, c->count, nranks, root,
             c->coll == TST_BCAST || c->inplace == 1 ? "in-place"
             : c->inplace == TST_INPLACE_MIXED       ? "in-place-on-even-ranks"
                                                     : "out-of-place",
             align,
             c->null_unused ? " unused-buffers-NULL" : "");
}

/* Where this rank's buffers are, in elements. */
typedef struct {
    size_t send_elems, recv_elems; /* sizes as the call sees them */
    int send_used, recv_used;      /* ccl.h reads sendbuf / writes recvbuf on this rank */
    int shared;                    /* in place: one allocation (b->recv) holds both */
    size_t shared_elems, send_off, recv_off;
} layout_t;

static layout_t layout_of(const tst_case_t *c, int rank, int nranks)
{
    layout_t l;
    size_t n = (size_t)nranks, cnt = c->count, r = (size_t)rank;
    int is_root = rank == c->root;
    memset(&l, 0, sizeof(l));
    l.send_used = l.recv_used = 1;
    l.send_elems = l.recv_elems = cnt;
    switch (c->coll) {
    case TST_ALLGATHER: l.recv_elems = n * cnt; break;
    case TST_REDUCE_SCATTER: l.send_elems = n * cnt; break;
    case TST_BROADCAST: l.send_used = is_root; break;
    case TST_REDUCE: l.recv_used = is_root; break;
    case TST_ALLTOALL: l.send_elems = l.recv_elems = n * cnt; break;
    case TST_GATHER:
        l.recv_elems = n * cnt;
        l.recv_used = is_root;
        break;
    case TST_SCATTER:
        l.send_elems = n * cnt;
        l.send_used = is_root;
        break;
    default: break;
    }
    if (c->coll == TST_BCAST) {
        l.shared = 1;
        l.send_used = is_root;
        l.shared_elems = cnt;
    } else if ((c->inplace == 1 || (c->inplace == TST_INPLACE_MIXED && rank % 2 == 0)) &&
               tst_coll_has_inplace(c->coll)) {
        switch (c->coll) {
        case TST_ALLGATHER:
            l.shared = 1;
            l.shared_elems = n * cnt;
            l.send_off = r * cnt;
            break;
        case TST_REDUCE_SCATTER:
            l.shared = 1;
            l.shared_elems = n * cnt;
            l.recv_off = r * cnt;
            break;
        case TST_GATHER:
            /* ccl.h's in-place rule is the root's; the others are as usual. */
            if (is_root) {
                l.shared = 1;
                l.shared_elems = n * cnt;
                l.send_off = (size_t)c->root * cnt;
            }
            break;
        case TST_SCATTER:
            if (is_root) {
                l.shared = 1;
                l.shared_elems = n * cnt;
                l.recv_off = (size_t)c->root * cnt;
            }
            break;
        default: /* allreduce, broadcast, reduce: sendbuf == recvbuf */
            l.shared = 1;
            l.shared_elems = cnt;
            break;
        }
    }
    return l;
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
    layout_t l = layout_of(c, rank, nranks);
    memset(b, 0, sizeof(*b));
    b->rank = rank;
    b->nranks = nranks;
    if (l.shared) {
        char *base = tst_gbuf_alloc(&b->recv, l.shared_elems * esz, c->misalign, use_ccl_mem);
        b->sendp = base + l.send_off * esz;
        b->recvp = base + l.recv_off * esz;
    } else {
        if (l.recv_used || !c->null_unused)
            b->recvp = tst_gbuf_alloc(&b->recv, l.recv_elems * esz, recv_misalign(c), use_ccl_mem);
        if (l.send_used || !c->null_unused)
            b->sendp = tst_gbuf_alloc(&b->send, l.send_elems * esz, c->misalign, use_ccl_mem);
    }
    if (l.send_used)
        tst_fill_input(b->sendp, l.send_elems, c->dt, data_op(c), nranks, c->seed, rank, 0);
}

/* Creates this rank's premulsum operator. A host-immediate scalar is
 * overwritten right after creation and a by-pointer one set only after
 * it, so a library that reads it at the wrong time gets a wrong value. */
static ccl_result_t make_premul(const tst_case_t *c, tst_bufs_t *b, ccl_comm_t comm)
{
    tst_scalar_t s = tst_premul_scalar(c->dt, b->nranks, c->seed, b->rank), wrong;
    if (tst_dtype_is_float(c->dt))
        wrong.f = 3.0;
    else
        wrong.u = 5;
    int imm = scalar_immediate(c);
    tst_store(b->scalar, 0, c->dt, imm ? s : wrong);
    ccl_result_t rc = ccl_redop_create_premulsum(
        &b->op, b->scalar, c->dt, imm ? CCL_SCALAR_HOST_IMMEDIATE : CCL_SCALAR_DEVICE, comm);
    tst_store(b->scalar, 0, c->dt, imm ? wrong : s);
    if (rc == CCL_SUCCESS) {
        b->op_made = 1;
        b->op_comm = comm;
    }
    return rc;
}

static ccl_result_t sendrecv_ring(const tst_case_t *c, const tst_bufs_t *b, ccl_comm_t comm,
                                  ccl_stream_t stream)
{
    int n = b->nranks, d = c->root % n;
    ccl_result_t rc = ccl_group_start();
    if (rc != CCL_SUCCESS)
        return rc;
    ccl_result_t r1 = ccl_send(b->sendp, c->count, c->dt, (b->rank + d) % n, comm, stream);
    ccl_result_t r2 = ccl_recv(b->recvp, c->count, c->dt, (b->rank - d + n) % n, comm, stream);
    rc = ccl_group_end();
    return r1 != CCL_SUCCESS ? r1 : r2 != CCL_SUCCESS ? r2 : rc;
}

ccl_result_t tst_case_issue(const tst_case_t *c, tst_bufs_t *b, ccl_comm_t comm,
                            ccl_stream_t stream)
{
    ccl_redop_t op = c->op;
    if (tst_coll_reduces(c->coll) && c->op == TST_OP_PREMULSUM) {
        if (!b->op_made) {
            ccl_result_t rc = make_premul(c, b, comm);
            if (rc != CCL_SUCCESS)
                return rc;
        }
        op = b->op;
    }
    const void *s = b->sendp;
    void *r = b->recvp;
    size_t n = c->count;
    ccl_datatype_t dt = c->dt;
    switch (c->coll) {
    case TST_ALLREDUCE: return ccl_allreduce(s, r, n, dt, op, comm, stream);
    case TST_ALLGATHER: return ccl_allgather(s, r, n, dt, comm, stream);
    case TST_REDUCE_SCATTER: return ccl_reduce_scatter(s, r, n, dt, op, comm, stream);
    case TST_BROADCAST: return ccl_broadcast(s, r, n, dt, c->root, comm, stream);
    case TST_BCAST: return ccl_bcast(r, n, dt, c->root, comm, stream);
    case TST_REDUCE: return ccl_reduce(s, r, n, dt, op, c->root, comm, stream);
    case TST_ALLTOALL: return ccl_alltoall(s, r, n, dt, comm, stream);
    case TST_GATHER: return ccl_gather(s, r, n, dt, c->root, comm, stream);
    case TST_SCATTER: return ccl_scatter(s, r, n, dt, c->root, comm, stream);
    case TST_SENDRECV: return sendrecv_ring(c, b, comm, stream);
    default: return CCL_ERR_INVALID_ARGUMENT;
    }
}

/* The result this rank must hold, checked in place. */
static size_t check_result(const tst_case_t *c, int rank, int nranks, const tst_bufs_t *b,
                           tst_mismatch_t *mm)
{
    size_t cnt = c->count;
    switch (c->coll) {
    case TST_ALLREDUCE:
    case TST_REDUCE:
        return tst_check_reduced(b->recvp, cnt, c->dt, c->op, nranks, c->seed, 0, mm);
    case TST_REDUCE_SCATTER:
        return tst_check_reduced(b->recvp, cnt, c->dt, c->op, nranks, c->seed,
                                 (size_t)rank * cnt, mm);
    case TST_ALLGATHER:
    case TST_GATHER:
        return tst_check_gathered(b->recvp, cnt, c->dt, nranks, c->seed, 0, mm);
    case TST_ALLTOALL: /* block p: rank p's block `rank` */
        return tst_check_gathered(b->recvp, cnt, c->dt, nranks, c->seed, (size_t)rank * cnt, mm);
    case TST_BROADCAST:
    case TST_BCAST:
        return tst_check_input(b->recvp, cnt, c->dt, TST_OP_COPY, nranks, c->seed, c->root, 0, mm);
    case TST_SCATTER:
        return tst_check_input(b->recvp, cnt, c->dt, TST_OP_COPY, nranks, c->seed, c->root,
                               (size_t)rank * cnt, mm);
    case TST_SENDRECV: {
        int from = (rank - c->root % nranks + nranks) % nranks;
        return tst_check_input(b->recvp, cnt, c->dt, TST_OP_COPY, nranks, c->seed, from, 0, mm);
    }
    default: return 0;
    }
}

/* Input elements [first, first + count) of this rank at p must be intact. */
static int check_kept(const tst_case_t *c, int rank, int nranks, const char *p, size_t first,
                      size_t count, const char *what, const char *name, char *msg, size_t len)
{
    tst_mismatch_t mm;
    size_t nbad = tst_check_input(p, count, c->dt, data_op(c), nranks, c->seed, rank, first, &mm);
    if (!nbad)
        return 0;
    snprintf(msg, len, "%s rank=%d: %s modified: %zu elements, first at index %zu: was %s, now %s",
             what, rank, name, nbad, first + mm.index, mm.expected, mm.got);
    return 1;
}

int tst_case_verify(const tst_case_t *c, int rank, int nranks, const tst_bufs_t *b, char *msg,
                    size_t len)
{
    char what[200], guard[160];
    tst_mismatch_t mm;
    size_t esz = tst_dtype_size(c->dt), cnt = c->count, nbad;
    layout_t l = layout_of(c, rank, nranks);

    tst_case_str(c, nranks, what, sizeof(what));
    if (l.recv_used && (nbad = check_result(c, rank, nranks, b, &mm)) != 0) {
        snprintf(msg, len, "%s rank=%d: %zu wrong elements, first at index %zu: expected %s, got %s",
                 what, rank, nbad, mm.index, mm.expected, mm.got);
        return 1;
    }
    if (tst_gbuf_check(&b->recv, guard, sizeof(guard))) {
        snprintf(msg, len, "%s rank=%d: %s guard damaged: %s", what, rank,
                 l.shared ? "buffer" : "recvbuf", guard);
        return 1;
    }
    if (tst_gbuf_check(&b->send, guard, sizeof(guard))) {
        snprintf(msg, len, "%s rank=%d: sendbuf guard damaged: %s", what, rank, guard);
        return 1;
    }
    /* Input that is not also the result must be left alone. */
    if (l.shared) {
        if (c->coll == TST_REDUCE && !l.recv_used)
            return check_kept(c, rank, nranks, b->sendp, 0, cnt, what, "buffer (not root)", msg, len);
        if (c->coll == TST_REDUCE_SCATTER) {
            size_t r = (size_t)rank, n = (size_t)nranks;
            return check_kept(c, rank, nranks, b->sendp, 0, r * cnt, what,
                              "sendbuf before the in-place block", msg, len) ||
                   check_kept(c, rank, nranks, (const char *)b->sendp + (r + 1) * cnt * esz,
                              (r + 1) * cnt, (n - r - 1) * cnt, what,
                              "sendbuf after the in-place block", msg, len);
        }
        if (c->coll == TST_SCATTER)
            return check_kept(c, rank, nranks, b->sendp, 0, l.send_elems, what, "sendbuf", msg, len);
        return 0;
    }
    if (l.send_used &&
        check_kept(c, rank, nranks, b->sendp, 0, l.send_elems, what, "sendbuf", msg, len))
        return 1;
    /* Buffers this rank passed but ccl.h says it does not use. */
    if (!l.send_used && b->sendp && (nbad = tst_check_bytes(b->sendp, l.send_elems * esz, TST_FILL_BYTE)) <
                        l.send_elems * esz) {
        snprintf(msg, len, "%s rank=%d: unused sendbuf written at byte %zu", what, rank, nbad);
        return 1;
    }
    if (!l.recv_used && b->recvp &&
        (nbad = tst_check_bytes(b->recvp, l.recv_elems * esz, TST_FILL_BYTE)) < l.recv_elems * esz) {
        snprintf(msg, len, "%s rank=%d: unused recvbuf written at byte %zu", what, rank, nbad);
        return 1;
    }
    return 0;
}

void tst_case_release(tst_bufs_t *b)
{
    if (b->op_made) {
        ccl_result_t rc = ccl_redop_destroy(b->op, b->op_comm);
        if (rc != CCL_SUCCESS) {
            fprintf(stderr, "ccl_redop_destroy of a premulsum op returned %s: %s\n",
                    ccl_get_error_string(rc), ccl_get_last_error(b->op_comm));
            abort();
        }
        b->op_made = 0;
    }
    tst_gbuf_free(&b->send);
    tst_gbuf_free(&b->recv);
}

void tst_run_case(tst_ctx_t *ctx, ccl_comm_t comm, const tst_case_t *c, int use_ccl_mem)
{
    char what[200], msg[600];
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

/* ---- the sweep ----------------------------------------------------------------- */

int tst_sweep_body(tst_ctx_t *ctx, void *arg)
{
    const tst_sweep_t *sw = arg;
    const tst_sweep_cfg_t *cfg = &sw->cfg;
    int n = ctx->nranks;
    /* Root (or peer distance) choices: 0, the last rank, a middle one. */
    int roots[3] = {0, n - 1, n / 2}, nroots = n == 1 ? 1 : n == 2 ? 2 : 3;
    ccl_comm_t comm = tst_comm_init(ctx);
    int k = 0;
    for (int ci = 0; ci < sw->ncolls; ci++) {
        tst_coll_t coll = sw->colls[ci];
        int nops = tst_coll_reduces(coll) ? tst_num_ops : 1;
        int nplace = tst_coll_has_inplace(coll) ? 2 : 1;
        for (int d = 0; d < tst_num_dtypes; d++) {
            size_t esz = tst_dtype_size(tst_dtypes[d]);
            for (int o = 0; o < nops; o++) {
                int ncounts = sw->ncounts + (sw->big_count && o == d % nops);
                for (int c = 0; c < ncounts; c++) {
                    for (int inplace = 0; inplace < nplace; inplace++, k++) {
                        tst_case_t tc = {
                            .coll = coll,
                            .dt = tst_dtypes[d],
                            .op = tst_coll_reduces(coll) ? tst_ops[o] : TST_OP_COPY,
                            .count = c < sw->ncounts ? sw->counts[c] : sw->big_count,
                            .inplace = inplace && (k & 8) ? TST_INPLACE_MIXED : inplace,
                            .misalign = (k & 2) ? esz : 0,
                            .seed = tst_case_seed(cfg->seed, (uint64_t)n,
                                                  (uint64_t)coll * 16 + (uint64_t)d, (uint64_t)o,
                                                  (uint64_t)c * 2 + (uint64_t)inplace),
                            .root = roots[(d + o + c + inplace) % nroots],
                            .null_unused = (k >> 2) & 1,
                        };
                        /* 2: only even ranks' buffers registered */
                        tst_run_case(ctx, comm, &tc, cfg->use_ccl_mem == 2 ? ctx->rank % 2 == 0 : cfg->use_ccl_mem);
                    }
                }
            }
        }
    }
    tst_comm_destroy(ctx, comm);
    return 0;
}

/* Keeps the collectives CCL_TEST_COLLS names (all when unset). */
static int filter_colls(const tst_sweep_t *sw, tst_coll_t *out)
{
    const char *env = getenv("CCL_TEST_COLLS");
    int n = 0;
    for (int k = 0; k < sw->ncolls; k++) {
        const char *name = tst_coll_name(sw->colls[k]);
        size_t len = strlen(name);
        int keep = !env || !*env;
        for (const char *p = env; !keep && p && *p;) {
            const char *e = strchr(p, ',');
            size_t plen = e ? (size_t)(e - p) : strlen(p);
            keep = plen == len && strncmp(p, name, len) == 0;
            p = e ? e + 1 : NULL;
        }
        if (keep)
            out[n++] = sw->colls[k];
    }
    return n;
}

/* CCL_TEST_COUNTS, a comma-separated list, replaces the small counts. */
static int env_counts(size_t *out, int max)
{
    const char *p = getenv("CCL_TEST_COUNTS");
    int n = 0;
    while (p && *p && n < max) {
        char *end;
        out[n++] = (size_t)strtoull(p, &end, 10);
        p = *end == ',' ? end + 1 : NULL;
    }
    return n;
}

int tst_sweep_main(const char *name, int argc, char **argv, tst_sweep_t *sw)
{
    size_t counts[32];
    int ncounts = env_counts(counts, 32);
    if (ncounts) {
        sw->counts = counts;
        sw->ncounts = ncounts;
    }
    static const int default_ranks[] = {1, 2, 3, 4, 5, 7, 8, 16};
    static const int mem_ranks[] = {2, 3, 4, 5};
    tst_coll_t colls[TST_NUM_COLLS];
    tst_sweep_cfg_t *cfg = &sw->cfg;
    cfg->seed = (uint64_t)tst_env_long("CCL_TEST_SEED", 12345);
    long mem = tst_env_long("CCL_TEST_CCL_MEM", 0);
    cfg->use_ccl_mem = mem == 2 ? 2 : mem != 0;
    sw->ncolls = filter_colls(sw, colls);
    sw->colls = colls;
    const int *ranks = cfg->use_ccl_mem ? mem_ranks : sw->ranks ? sw->ranks : default_ranks;
    int nlist = argc > 1             ? argc - 1
                : cfg->use_ccl_mem   ? (int)(sizeof mem_ranks / sizeof mem_ranks[0])
                : sw->ranks          ? sw->nranks
                                     : (int)(sizeof default_ranks / sizeof default_ranks[0]);
    int failed = 0;
    printf("test_%s: seed %llu%s\n", name, (unsigned long long)cfg->seed,
           cfg->use_ccl_mem == 2 ? ", ccl_mem_alloc buffers on even ranks"
           : cfg->use_ccl_mem    ? ", ccl_mem_alloc buffers"
                                 : "");
    for (int k = 0; k < nlist; k++) {
        int n = argc > 1 ? atoi(argv[k + 1]) : ranks[k];
        failed += tst_run_ranks(name, n, sw->timeout_s ? sw->timeout_s : 60, tst_sweep_body, sw) != 0;
    }
    printf("test_%s: %s\n", name, failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}

const size_t tst_sweep_counts[] = {0, 1, 2, 3, 7, 13, 1021};
const int tst_sweep_ncounts = (int)(sizeof(tst_sweep_counts) / sizeof(tst_sweep_counts[0]));

int tst_sweep_one(const char *name, tst_coll_t coll, int argc, char **argv)
{
    tst_sweep_t sw = {.colls = &coll,
                      .ncolls = 1,
                      .counts = tst_sweep_counts,
                      .ncounts = tst_sweep_ncounts,
                      .big_count = TST_SWEEP_BIG_COUNT};
    return tst_sweep_main(name, argc, argv, &sw);
}
