/*
 * test_schedule.c - schedules as plain data (src/algos/schedule.h, ring.c,
 * direct.c, pairwise.c, schedule.c).
 *
 * Covers sched_partition (parts disjoint, contiguous, in order, covering
 * [0, count) exactly, non-empty parts starting on 64-byte boundaries, none
 * much larger than an even share); the schedule container (reserve/add/free,
 * action names); sched_step_slices and sched_rounds arithmetic; the ring
 * allreduce and allgather schedules for 1..16 ranks (step counts and
 * actions, ring neighbours as peers, regions inside the buffers, POSTOP on
 * exactly the last reduce-scatter step, each part owned by exactly one rank
 * after the reduce-scatter); the 2-rank direct allreduce and its refusal of
 * everything else; the pairwise allgather for 1..16 ranks (each peer sent
 * to and received from once, blocks where they belong). Every schedule is also run through a small data-flow
 * model written here: per element, a bitmask of the ranks whose input it
 * holds, moved over unbounded FIFOs in send order; at the end every rank
 * must hold every element reduced over all ranks exactly once (and the avg
 * post-op applied exactly once), or every rank's allgather block in place.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algos/schedule.h"
#include "algos/direct.h"
#include "algos/pairwise.h"
#include "algos/ring.h"
#include "base/err.h"

#define MAX_RANKS 16

static int mod(int a, int n) { return ((a % n) + n) % n; }

/* ---- sched_partition ------------------------------------------------------- */

static void check_partition(size_t count, size_t es, int nparts)
{
    size_t align = 64 / es;
    size_t share = (count + (size_t)nparts - 1) / (size_t)nparts; /* ceil(count/nparts) */
    size_t expect_off = 0, total = 0;
    for (int k = 0; k < nparts; k++) {
        size_t off = (size_t)-1, len = (size_t)-1;
        sched_partition(count, es, nparts, k, &off, &len);
        if (off != expect_off || len > count - off || (len > 0 && off % align != 0) ||
            len > share + align - 1) {
            print_error("sched_partition(count=%zu, elem=%zu, nparts=%d) part %d = [%zu, +%zu): "
                        "expected start %zu, 64-byte aligned, at most %zu long, inside the count\n",
                        count, es, nparts, k, off, len, expect_off, share + align - 1);
            fail();
        }
        expect_off = off + len;
        total += len;
    }
    if (expect_off != count || total != count) {
        print_error("sched_partition(count=%zu, elem=%zu, nparts=%d) covers %zu of %zu elements\n",
                    count, es, nparts, total, count);
        fail();
    }
}

static void test_partition(void **state)
{
    (void)state;
    static const size_t elem_sizes[] = {1, 2, 4, 8};
    static const int big_parts[] = {31, 32, 33, 64, 100, 127, 1000, 1024};
    static const size_t big_counts[] = {1000,    1023,        1024,       1025,      4096,
                                        4099,    65536 + 17,  (1u << 20), (1u << 20) + 3,
                                        1000003, 123456789,   (size_t)1 << 33};
    for (size_t e = 0; e < sizeof elem_sizes / sizeof elem_sizes[0]; e++) {
        for (size_t count = 0; count <= 300; count++)
            for (int n = 1; n <= 17; n++)
                check_partition(count, elem_sizes[e], n);
        for (size_t c = 0; c < sizeof big_counts / sizeof big_counts[0]; c++) {
            for (int n = 1; n <= 17; n++)
                check_partition(big_counts[c], elem_sizes[e], n);
            for (size_t p = 0; p < sizeof big_parts / sizeof big_parts[0]; p++)
                check_partition(big_counts[c], elem_sizes[e], big_parts[p]);
        }
    }
}

/* Known values, worked out by hand: 64 bytes = 16 floats per alignment unit. */
static void test_partition_literals(void **state)
{
    (void)state;
    size_t off, len;
    /* 100 floats in 3 parts: an even share is 34, rounded up to 48. */
    sched_partition(100, 4, 3, 0, &off, &len);
    assert_true(off == 0 && len == 48);
    sched_partition(100, 4, 3, 1, &off, &len);
    assert_true(off == 48 && len == 48);
    sched_partition(100, 4, 3, 2, &off, &len);
    assert_true(off == 96 && len == 4);
    /* 10 doubles in 4 parts: one 8-element unit each; the last two share
     * the remaining 2 and nothing. */
    sched_partition(10, 8, 4, 0, &off, &len);
    assert_true(off == 0 && len == 8);
    sched_partition(10, 8, 4, 1, &off, &len);
    assert_true(off == 8 && len == 2);
    sched_partition(10, 8, 4, 2, &off, &len);
    assert_true(off == 10 && len == 0);
    sched_partition(10, 8, 4, 3, &off, &len);
    assert_true(off == 10 && len == 0);
    /* One part is everything. */
    sched_partition(12345, 1, 1, 0, &off, &len);
    assert_true(off == 0 && len == 12345);
    /* 1 MiB of bytes in 4 parts: exact quarters (already aligned). */
    for (int k = 0; k < 4; k++) {
        sched_partition(1u << 20, 1, 4, k, &off, &len);
        assert_true(off == (size_t)k * (1u << 18) && len == (1u << 18));
    }
}

/* ---- the container ---------------------------------------------------------- */

static void test_container(void **state)
{
    (void)state;
    sched_t s = {0};
    assert_int_equal(sched_reserve(&s, 3), CCL_SUCCESS);
    assert_true(s.cap >= 3);
    for (int i = 0; i < 3; i++) {
        sched_step_t *st = sched_add(&s);
        assert_int_equal(st->recv_peer, -1);
        assert_int_equal(st->send_peer, -1);
        assert_int_equal(st->flags, 0);
        assert_int_equal(st->count, 0);
        assert_int_equal(st->src_off, 0);
        assert_int_equal(st->dst_off, 0);
        st->count = (size_t)i + 100;
    }
    assert_int_equal(s.nsteps, 3);
    /* Growing keeps what is there. */
    assert_int_equal(sched_reserve(&s, 1000), CCL_SUCCESS);
    assert_true(s.cap >= 1003);
    for (int i = 0; i < 1000; i++)
        sched_add(&s)->count = (size_t)i + 103;
    assert_int_equal(s.nsteps, 1003);
    for (int i = 0; i < 1003; i++)
        assert_int_equal(s.steps[i].count, (size_t)i + 100);
    /* Reserving what already fits changes nothing. */
    int cap = s.cap;
    sched_step_t *steps = s.steps;
    assert_int_equal(sched_reserve(&s, cap - s.nsteps), CCL_SUCCESS);
    assert_int_equal(s.cap, cap);
    assert_ptr_equal(s.steps, steps);
    sched_free(&s);
    assert_null(s.steps);
    assert_int_equal(s.nsteps, 0);
    assert_int_equal(s.cap, 0);
    sched_free(&s); /* twice is harmless */
}

static void test_action_names(void **state)
{
    (void)state;
    static const char *const names[SCHED_NUM_ACTIONS] = {
        [SCHED_SEND] = "SEND",
        [SCHED_RECV] = "RECV",
        [SCHED_COPY] = "COPY",
        [SCHED_RECV_REDUCE_SEND] = "RECV_REDUCE_SEND",
        [SCHED_RECV_REDUCE_COPY] = "RECV_REDUCE_COPY",
        [SCHED_RECV_COPY_SEND] = "RECV_COPY_SEND",
        [SCHED_RECV_REDUCE_COPY_SEND] = "RECV_REDUCE_COPY_SEND",
        [SCHED_LOCAL_REDUCE] = "LOCAL_REDUCE",
    };
    for (int a = 0; a < SCHED_NUM_ACTIONS; a++)
        assert_string_equal(sched_action_name(a), names[a]);
    assert_string_equal(sched_action_name(-1), "?");
    assert_string_equal(sched_action_name(SCHED_NUM_ACTIONS), "?");
    assert_string_equal(sched_action_name(255), "?");
}

/* ---- slices and rounds ------------------------------------------------------ */

static void test_step_slices(void **state)
{
    (void)state;
    static const struct {
        size_t count, es, slot, want;
    } rows[] = {
        {0, 4, 64, 0},          {1, 4, 64, 1},       {16, 4, 64, 1},
        {17, 4, 64, 2},         {1, 1, 1, 1},        {7, 1, 1, 7},
        {1000, 8, 4096, 2},     {1024, 4, 4096, 1},  {1025, 4, 4096, 2},
        {131072, 8, 131072, 8}, {131073, 8, 131072, 9}, {3, 8, 4096, 1},
        {(size_t)1 << 30, 4, (size_t)1 << 20, 4096},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        sched_step_t st = {.count = rows[i].count, .recv_peer = -1, .send_peer = -1};
        size_t got = sched_step_slices(&st, rows[i].es, rows[i].slot);
        if (got != rows[i].want) {
            print_error("slices(count=%zu, elem=%zu, slot=%zu) = %zu, want %zu\n", rows[i].count,
                        rows[i].es, rows[i].slot, got, rows[i].want);
            fail();
        }
    }
}

static void test_rounds(void **state)
{
    (void)state;
    sched_t s = {0};
    assert_int_equal(sched_rounds(&s, 4, 4096), 0); /* no steps */
    assert_int_equal(sched_reserve(&s, 4), CCL_SUCCESS);
    sched_add(&s)->count = 0;
    assert_int_equal(sched_rounds(&s, 4, 4096), 0);
    sched_add(&s)->count = 1025;  /* 4100 bytes: 2 slots */
    sched_add(&s)->count = 5000;  /* 20000 bytes: 5 slots */
    sched_add(&s)->count = 3;     /* 1 slot */
    assert_int_equal(sched_rounds(&s, 4, 4096), 5);
    assert_int_equal(sched_rounds(&s, 8, 4096), 10); /* 40000 bytes */
    assert_int_equal(sched_rounds(&s, 1, 4096), 2);  /* 5000 bytes */
    assert_int_equal(sched_rounds(&s, 4, 1), 20000);
    sched_free(&s);
}

/* ---- the data-flow model ------------------------------------------------ */
/*
 * A value is what one element of a buffer holds. Allreduce: `mask` is the
 * set of ranks whose input went into it and `post` how many times the avg
 * post-op was applied. Allgather: `mask` is a tag naming the element of the
 * rank it came from (origin * count + index + 1). 0 means never written.
 */
typedef struct {
    uint32_t mask;
    int post;
} val_t;

typedef struct {
    val_t *data;
    size_t count;
    int from;
} msg_t;

typedef struct {
    msg_t *q;
    size_t head, tail, cap;
} queue_t;

typedef struct {
    int n;
    size_t count;        /* op count */
    size_t send_len, recv_len;
    int in_place;        /* allreduce: send buffer is the receive buffer */
    int is_allgather;
    sched_t sched[MAX_RANKS];
    val_t *sendb[MAX_RANKS], *recvb[MAX_RANKS];
    int next[MAX_RANKS];
    queue_t link[MAX_RANKS][MAX_RANKS]; /* [from][to] */
    char err[256];
} model_t;

static void q_push(queue_t *q, msg_t m)
{
    if (q->tail == q->cap) {
        q->cap = q->cap ? q->cap * 2 : 8;
        q->q = realloc(q->q, q->cap * sizeof *q->q);
        assert_non_null(q->q);
    }
    q->q[q->tail++] = m;
}

static val_t *region(model_t *m, int r, int buf, size_t off, size_t count, int *ok)
{
    val_t *base;
    size_t len;
    if (buf == SCHED_BUF_SEND) {
        base = m->in_place ? m->recvb[r] : m->sendb[r];
        len = m->in_place ? m->recv_len : m->send_len;
    } else if (buf == SCHED_BUF_RECV) {
        base = m->recvb[r];
        len = m->recv_len;
    } else {
        *ok = 0;
        return NULL;
    }
    if (off > len || count > len - off) {
        *ok = 0;
        return NULL;
    }
    *ok = 1;
    return base + off;
}

static int combine(model_t *m, int r, int step, val_t *out, val_t x, val_t y)
{
    if (m->is_allgather) {
        snprintf(m->err, sizeof m->err, "rank %d step %d: a reduction in an allgather", r, step);
        return -1;
    }
    if (x.mask == 0 || y.mask == 0 || (x.mask & y.mask) || x.post || y.post) {
        snprintf(m->err, sizeof m->err,
                 "rank %d step %d: reduces %#x(post %d) with %#x(post %d): missing, overlapping "
                 "or already post-processed inputs",
                 r, step, x.mask, x.post, y.mask, y.post);
        return -1;
    }
    out->mask = x.mask | y.mask;
    out->post = 0;
    return 0;
}

/* Runs rank r's next step if it can: 1 ran, 0 blocked, -1 error. */
static int model_step(model_t *m, int r)
{
    const sched_t *s = &m->sched[r];
    int i = m->next[r];
    const sched_step_t *st = &s->steps[i];
    int a = st->action;
    int receives = a != SCHED_SEND && a != SCHED_COPY && a != SCHED_LOCAL_REDUCE;
    int sends = a == SCHED_SEND || a == SCHED_RECV_REDUCE_SEND || a == SCHED_RECV_COPY_SEND ||
                a == SCHED_RECV_REDUCE_COPY_SEND;
    int reduces = a == SCHED_RECV_REDUCE_SEND || a == SCHED_RECV_REDUCE_COPY ||
                  a == SCHED_RECV_REDUCE_COPY_SEND || a == SCHED_LOCAL_REDUCE;
    int reads_src = a == SCHED_SEND || a == SCHED_COPY || reduces;
    int writes_dst = a == SCHED_RECV || a == SCHED_COPY || a == SCHED_RECV_REDUCE_COPY ||
                     a == SCHED_RECV_COPY_SEND || a == SCHED_RECV_REDUCE_COPY_SEND ||
                     a == SCHED_LOCAL_REDUCE;
    if (a >= SCHED_NUM_ACTIONS) {
        snprintf(m->err, sizeof m->err, "rank %d step %d: action %d", r, i, a);
        return -1;
    }
    if ((receives && (st->recv_peer < 0 || st->recv_peer >= m->n)) ||
        (!receives && st->recv_peer != -1) || (sends && (st->send_peer < 0 || st->send_peer >= m->n)) ||
        (!sends && st->send_peer != -1)) {
        snprintf(m->err, sizeof m->err, "rank %d step %d (%s): peers recv %d send %d do not fit",
                 r, i, sched_action_name(a), st->recv_peer, st->send_peer);
        return -1;
    }
    msg_t in = {0};
    if (receives) {
        queue_t *q = &m->link[st->recv_peer][r];
        if (q->head == q->tail)
            return 0;
        in = q->q[q->head];
        if (in.count != st->count) {
            snprintf(m->err, sizeof m->err, "rank %d step %d (%s): receives %zu elements from %d, "
                     "which sent %zu", r, i, sched_action_name(a), st->count, st->recv_peer, in.count);
            return -1;
        }
        q->head++;
    }
    int ok = 1;
    val_t *src = NULL, *dst = NULL;
    if (reads_src && !(src = region(m, r, st->src_buf, st->src_off, st->count, &ok)) && !ok) {
        snprintf(m->err, sizeof m->err, "rank %d step %d (%s): source [%zu, +%zu) of buffer %d "
                 "is outside it", r, i, sched_action_name(a), st->src_off, st->count, st->src_buf);
        return -1;
    }
    if (writes_dst && !(dst = region(m, r, st->dst_buf, st->dst_off, st->count, &ok)) && !ok) {
        snprintf(m->err, sizeof m->err, "rank %d step %d (%s): destination [%zu, +%zu) of buffer "
                 "%d is outside it", r, i, sched_action_name(a), st->dst_off, st->count, st->dst_buf);
        return -1;
    }
    val_t *out = calloc(st->count + 1, sizeof *out);
    assert_non_null(out);
    for (size_t k = 0; k < st->count; k++) {
        val_t v;
        switch (a) {
        case SCHED_SEND:
        case SCHED_COPY: v = src[k]; break;
        case SCHED_RECV:
        case SCHED_RECV_COPY_SEND: v = in.data[k]; break;
        case SCHED_LOCAL_REDUCE:
            if (combine(m, r, i, &v, src[k], dst[k]) != 0)
                goto fail;
            break;
        default:
            if (combine(m, r, i, &v, in.data[k], src[k]) != 0)
                goto fail;
            break;
        }
        if (st->flags & SCHED_POSTOP)
            v.post++;
        out[k] = v;
    }
    if (writes_dst)
        memcpy(dst, out, st->count * sizeof *out);
    if (sends)
        q_push(&m->link[r][st->send_peer], (msg_t){out, st->count, r});
    else
        free(out);
    free(in.data);
    m->next[r]++;
    return 1;
fail:
    free(out);
    free(in.data);
    return -1;
}

enum { MODEL_RING, MODEL_DIRECT, MODEL_PAIRWISE };
static const char *const model_algo_names[] = {"ring", "direct", "pairwise"};

/* Builds every rank's schedule (ring, direct or pairwise) and runs the model;
 * returns 0 when every rank ends with the right result. */
static int model_run(sched_coll_t coll, int n, size_t count, size_t es, int in_place, int algo,
                     char *why, size_t whylen)
{
    model_t *m = calloc(1, sizeof *m);
    assert_non_null(m);
    m->n = n;
    m->count = count;
    m->is_allgather = coll == SCHED_ALLGATHER;
    /* Allreduce in place: the send buffer is the receive buffer. Allgather
     * in place: the send buffer is rank r's block of the receive buffer,
     * which no step but the (then trivial) COPY writes; the model keeps the
     * same values in both places. */
    m->in_place = in_place && !m->is_allgather;
    m->send_len = count;
    m->recv_len = m->is_allgather ? count * (size_t)n : count;
    int rc = -1;
    for (int r = 0; r < n; r++) {
        sched_op_t op = {.coll = coll, .count = count, .elem_size = es, .nranks = n, .rank = r};
        ccl_result_t res = algo == MODEL_DIRECT     ? direct_schedule(&op, &m->sched[r])
                           : algo == MODEL_PAIRWISE ? pairwise_schedule(&op, &m->sched[r])
                                                    : ring_schedule(&op, &m->sched[r]);
        if (res != CCL_SUCCESS) {
            snprintf(m->err, sizeof m->err, "rank %d: schedule failed (%d)", r, (int)res);
            goto out;
        }
        m->sendb[r] = calloc(m->send_len + 1, sizeof(val_t));
        m->recvb[r] = calloc(m->recv_len + 1, sizeof(val_t));
        assert_non_null(m->sendb[r]);
        assert_non_null(m->recvb[r]);
        for (size_t k = 0; k < count; k++) {
            val_t v = {m->is_allgather ? (uint32_t)((size_t)r * count + k + 1) : 1u << r, 0};
            if (m->in_place)
                m->recvb[r][k] = v;
            else
                m->sendb[r][k] = v;
            if (in_place && m->is_allgather)
                m->recvb[r][(size_t)r * count + k] = v;
        }
    }
    /* Round robin until every rank is done; a pass without progress is a
     * deadlock even with unbounded FIFOs. */
    for (;;) {
        int progress = 0, done = 1;
        for (int r = 0; r < n; r++) {
            while (m->next[r] < m->sched[r].nsteps) {
                int k = model_step(m, r);
                if (k < 0)
                    goto out;
                if (k == 0)
                    break;
                progress = 1;
            }
            if (m->next[r] < m->sched[r].nsteps)
                done = 0;
        }
        if (done)
            break;
        if (!progress) {
            snprintf(m->err, sizeof m->err, "deadlock: no rank can make progress");
            goto out;
        }
    }
    for (int f = 0; f < n; f++)
        for (int t = 0; t < n; t++)
            if (m->link[f][t].head != m->link[f][t].tail) {
                snprintf(m->err, sizeof m->err, "%zu messages from %d to %d never received",
                         m->link[f][t].tail - m->link[f][t].head, f, t);
                goto out;
            }
    uint32_t all = (n == 32) ? 0xffffffffu : ((1u << n) - 1);
    for (int r = 0; r < n; r++) {
        for (size_t k = 0; k < m->recv_len; k++) {
            val_t v = m->recvb[r][k];
            int good = m->is_allgather ? (v.mask == (uint32_t)(k + 1) && v.post == 0)
                                       : (v.mask == all && v.post == 1);
            if (!good) {
                snprintf(m->err, sizeof m->err, "rank %d element %zu ends as %#x (post %d)", r, k,
                         v.mask, v.post);
                goto out;
            }
        }
    }
    rc = 0;
out:
    if (rc != 0)
        snprintf(why, whylen, "%s n=%d count=%zu elem=%zu%s: %s", model_algo_names[algo],
                 n, count, es, in_place ? " in place" : "", m->err);
    for (int r = 0; r < n; r++) {
        sched_free(&m->sched[r]);
        free(m->sendb[r]);
        free(m->recvb[r]);
        for (int t = 0; t < n; t++) {
            queue_t *q = &m->link[r][t];
            for (size_t j = q->head; j < q->tail; j++)
                free(q->q[j].data);
            free(q->q);
        }
    }
    free(m);
    return rc;
}

/* ---- ring allreduce ------------------------------------------------------------ */

static const size_t model_counts[] = {0, 1, 5, 16, 63, 64, 65, 200, 1000, 1031};

static int is_send_action(int a)
{
    return a == SCHED_SEND || a == SCHED_RECV_REDUCE_SEND || a == SCHED_RECV_COPY_SEND ||
           a == SCHED_RECV_REDUCE_COPY_SEND;
}

static int is_recv_action(int a)
{
    return a == SCHED_RECV || a == SCHED_RECV_REDUCE_SEND || a == SCHED_RECV_REDUCE_COPY ||
           a == SCHED_RECV_COPY_SEND || a == SCHED_RECV_REDUCE_COPY_SEND;
}

static void check_ring_allreduce_shape(int n, size_t count, size_t es)
{
    int owner_of[MAX_RANKS];
    for (int p = 0; p < n; p++)
        owner_of[p] = -1;
    sched_t s = {0};
    for (int r = 0; r < n; r++) {
        sched_op_t op = {.coll = SCHED_ALLREDUCE, .count = count, .elem_size = es, .nranks = n, .rank = r};
        assert_int_equal(ring_schedule(&op, &s), CCL_SUCCESS);
        if (n == 1) {
            assert_int_equal(s.nsteps, 1);
            const sched_step_t *st = &s.steps[0];
            assert_int_equal(st->action, SCHED_COPY);
            assert_int_equal(st->flags, SCHED_POSTOP);
            assert_int_equal(st->src_buf, SCHED_BUF_SEND);
            assert_int_equal(st->dst_buf, SCHED_BUF_RECV);
            assert_int_equal(st->src_off, 0);
            assert_int_equal(st->dst_off, 0);
            assert_int_equal(st->count, count);
            assert_int_equal(st->recv_peer, -1);
            assert_int_equal(st->send_peer, -1);
            continue;
        }
        /* Reduce-scatter: n steps; allgather: n - 1 steps. Every rank sends
         * and receives 2(n-1) times. */
        if (s.nsteps != 2 * n - 1) {
            print_error("ring allreduce n=%d rank %d: %d steps, want %d\n", n, r, s.nsteps, 2 * n - 1);
            fail();
        }
        int nsend = 0, nrecv = 0, npost = 0;
        for (int i = 0; i < s.nsteps; i++) {
            const sched_step_t *st = &s.steps[i];
            if (is_send_action(st->action)) {
                nsend++;
                assert_int_equal(st->send_peer, mod(r + 1, n));
            } else {
                assert_int_equal(st->send_peer, -1);
            }
            if (is_recv_action(st->action)) {
                nrecv++;
                assert_int_equal(st->recv_peer, mod(r - 1, n));
            } else {
                assert_int_equal(st->recv_peer, -1);
            }
            if (st->flags & SCHED_POSTOP)
                npost++;
            assert_true(st->src_off + st->count <= count);
            assert_true(st->dst_off + st->count <= count);
            /* Each step moves one part: its region is part p of the split. */
            size_t off, len;
            int part = -1;
            for (int p = 0; p < n && part < 0; p++) {
                sched_partition(count, es, n, p, &off, &len);
                if (len == st->count && (off == st->src_off || st->src_buf == SCHED_BUF_NONE) &&
                    (off == st->dst_off || st->dst_buf == SCHED_BUF_NONE))
                    part = p;
            }
            assert_true(part >= 0);
        }
        assert_int_equal(nsend, 2 * (n - 1));
        assert_int_equal(nrecv, 2 * (n - 1));
        /* The first step only sends (the pipeline's start); reduce-scatter
         * reduces, its last step keeps the result and carries the post-op;
         * the allgather only copies; the very last step only receives. */
        assert_int_equal(s.steps[0].action, SCHED_SEND);
        assert_int_equal(s.steps[0].src_buf, SCHED_BUF_SEND);
        for (int i = 1; i < n - 1; i++)
            assert_int_equal(s.steps[i].action, SCHED_RECV_REDUCE_SEND);
        const sched_step_t *last_rs = &s.steps[n - 1];
        assert_int_equal(last_rs->action, SCHED_RECV_REDUCE_COPY_SEND);
        assert_true(last_rs->flags & SCHED_POSTOP);
        assert_int_equal(npost, 1);
        for (int i = n; i < 2 * n - 2; i++)
            assert_int_equal(s.steps[i].action, SCHED_RECV_COPY_SEND);
        assert_int_equal(s.steps[2 * n - 2].action, SCHED_RECV);
        /* The part this rank owns after the reduce-scatter. */
        for (int p = 0; p < n; p++) {
            size_t off, len;
            sched_partition(count, es, n, p, &off, &len);
            if (off == last_rs->dst_off && len == last_rs->count && owner_of[p] < 0) {
                owner_of[p] = r;
                break;
            }
        }
    }
    sched_free(&s);
    if (n == 1)
        return;
    /* Parts can only be told apart by offset when none is empty. */
    size_t off, len;
    sched_partition(count, es, n, n - 1, &off, &len);
    if (len == 0)
        return;
    for (int p = 0; p < n; p++) {
        if (owner_of[p] < 0) {
            print_error("ring allreduce n=%d count=%zu: no rank owns part %d after reduce-scatter\n",
                        n, count, p);
            fail();
        }
    }
}

static void test_ring_allreduce_shape(void **state)
{
    (void)state;
    static const size_t counts[] = {0, 1, 7, 64, 1000, 4099, 1u << 20};
    static const size_t ess[] = {1, 4, 8};
    for (int n = 1; n <= MAX_RANKS; n++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
            for (size_t e = 0; e < sizeof ess / sizeof ess[0]; e++)
                check_ring_allreduce_shape(n, counts[c], ess[e]);
}

/* Which rank ends the reduce-scatter holding which part, with one part per
 * 64-byte unit so every part is distinct: rank r owns part r+1. */
static void test_ring_allreduce_ownership(void **state)
{
    (void)state;
    for (int n = 2; n <= MAX_RANKS; n++) {
        int owners = 0;
        size_t count = (size_t)n * 16; /* floats: 16 per part */
        sched_t s = {0};
        for (int r = 0; r < n; r++) {
            sched_op_t op = {.coll = SCHED_ALLREDUCE, .count = count, .elem_size = 4, .nranks = n, .rank = r};
            assert_int_equal(ring_schedule(&op, &s), CCL_SUCCESS);
            const sched_step_t *st = &s.steps[n - 1];
            assert_int_equal(st->count, 16);
            assert_int_equal(st->dst_off, (size_t)mod(r + 1, n) * 16);
            owners |= 1 << (st->dst_off / 16);
        }
        assert_int_equal(owners, (1 << n) - 1);
        sched_free(&s);
    }
}

static void test_ring_allreduce_dataflow(void **state)
{
    (void)state;
    char why[400];
    for (int n = 1; n <= MAX_RANKS; n++) {
        for (size_t c = 0; c < sizeof model_counts / sizeof model_counts[0]; c++) {
            for (int in_place = 0; in_place <= 1; in_place++) {
                if (model_run(SCHED_ALLREDUCE, n, model_counts[c], 4, in_place, MODEL_RING, why, sizeof why)) {
                    print_error("%s\n", why);
                    fail();
                }
            }
        }
        if (model_run(SCHED_ALLREDUCE, n, 333, 1, 0, MODEL_RING, why, sizeof why) ||
            model_run(SCHED_ALLREDUCE, n, 333, 8, 0, MODEL_RING, why, sizeof why)) {
            print_error("%s\n", why);
            fail();
        }
    }
}

/* ---- ring allgather --------------------------------------------------------- */

static void test_ring_allgather_shape(void **state)
{
    (void)state;
    static const size_t counts[] = {0, 1, 17, 4099};
    sched_t s = {0};
    for (int n = 1; n <= MAX_RANKS; n++) {
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            size_t count = counts[c];
            for (int r = 0; r < n; r++) {
                sched_op_t op = {.coll = SCHED_ALLGATHER, .count = count, .elem_size = 4, .nranks = n, .rank = r};
                assert_int_equal(ring_schedule(&op, &s), CCL_SUCCESS);
                /* Own block into place first; then (n > 1) a send and n-1
                 * receives, all but the last forwarded. */
                assert_int_equal(s.nsteps, n == 1 ? 1 : n + 1);
                const sched_step_t *cp = &s.steps[0];
                assert_int_equal(cp->action, SCHED_COPY);
                assert_int_equal(cp->src_buf, SCHED_BUF_SEND);
                assert_int_equal(cp->dst_buf, SCHED_BUF_RECV);
                assert_int_equal(cp->src_off, 0);
                assert_int_equal(cp->dst_off, (size_t)r * count);
                assert_int_equal(cp->count, count);
                assert_int_equal(cp->flags, 0);
                if (n == 1)
                    continue;
                assert_int_equal(s.steps[1].action, SCHED_SEND);
                assert_int_equal(s.steps[1].src_buf, SCHED_BUF_SEND);
                assert_int_equal(s.steps[1].src_off, 0);
                assert_int_equal(s.steps[1].send_peer, mod(r + 1, n));
                assert_int_equal(s.steps[1].recv_peer, -1);
                unsigned seen = 1u << r;
                for (int i = 2; i < s.nsteps; i++) {
                    const sched_step_t *st = &s.steps[i];
                    int last = i == s.nsteps - 1;
                    assert_int_equal(st->action, last ? SCHED_RECV : SCHED_RECV_COPY_SEND);
                    assert_int_equal(st->recv_peer, mod(r - 1, n));
                    assert_int_equal(st->send_peer, last ? -1 : mod(r + 1, n));
                    assert_int_equal(st->dst_buf, SCHED_BUF_RECV);
                    assert_int_equal(st->count, count);
                    assert_int_equal(st->flags, 0);
                    /* Step i receives the block of rank r - (i - 1). */
                    int origin = mod(r - (i - 1), n);
                    assert_int_equal(st->dst_off, (size_t)origin * count);
                    seen |= 1u << origin;
                }
                assert_int_equal(seen, (n == 32) ? 0xffffffffu : (1u << n) - 1);
            }
        }
    }
    sched_free(&s);
}

static void test_ring_allgather_dataflow(void **state)
{
    (void)state;
    char why[400];
    for (int n = 1; n <= MAX_RANKS; n++) {
        for (size_t c = 0; c < sizeof model_counts / sizeof model_counts[0]; c++) {
            for (int in_place = 0; in_place <= 1; in_place++) {
                if (model_run(SCHED_ALLGATHER, n, model_counts[c], 4, in_place, MODEL_RING, why, sizeof why)) {
                    print_error("%s\n", why);
                    fail();
                }
            }
        }
    }
}

/* ---- pairwise allgather ------------------------------------------------------ */

static void test_pairwise_allgather(void **state)
{
    (void)state;
    static const size_t counts[] = {0, 1, 17, 4099};
    sched_t s = {0};
    char why[400];
    for (int n = 1; n <= MAX_RANKS; n++) {
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            size_t count = counts[c];
            for (int r = 0; r < n; r++) {
                sched_op_t op = {.coll = SCHED_ALLGATHER, .count = count, .elem_size = 4, .nranks = n, .rank = r};
                assert_int_equal(pairwise_schedule(&op, &s), CCL_SUCCESS);
                assert_true(s.steps_independent);
                assert_true(s.send_refs_safe_in_place);
                /* Own block into place, then a send of it to and a
                 * receive from every other rank, each exactly once. */
                assert_int_equal(s.nsteps, 2 * n - 1);
                assert_int_equal(s.steps[0].action, SCHED_COPY);
                assert_int_equal(s.steps[0].src_off, 0);
                assert_int_equal(s.steps[0].dst_off, (size_t)r * count);
                assert_int_equal(s.steps[0].count, count);
                uint32_t sent = 0, got = 0;
                for (int i = 1; i < s.nsteps; i++) {
                    const sched_step_t *st = &s.steps[i];
                    assert_int_equal(st->count, count);
                    if (st->action == SCHED_SEND) {
                        assert_true(st->send_peer >= 0 && st->send_peer < n && st->send_peer != r);
                        assert_int_equal(st->src_buf, SCHED_BUF_SEND);
                        assert_int_equal(st->src_off, 0);
                        assert_false(sent & (1u << st->send_peer));
                        sent |= 1u << st->send_peer;
                    } else {
                        assert_int_equal(st->action, SCHED_RECV);
                        int p = st->recv_peer;
                        assert_true(p >= 0 && p < n && p != r);
                        assert_int_equal(st->dst_buf, SCHED_BUF_RECV);
                        assert_int_equal(st->dst_off, (size_t)p * count);
                        assert_false(got & (1u << p));
                        got |= 1u << p;
                    }
                }
                uint32_t others = (n == 32 ? 0xffffffffu : (1u << n) - 1) & ~(1u << r);
                assert_int_equal(sent, others);
                assert_int_equal(got, others);
            }
            for (int in_place = 0; in_place <= 1; in_place++)
                if (model_run(SCHED_ALLGATHER, n, count, 4, in_place, MODEL_PAIRWISE, why, sizeof why)) {
                    print_error("%s\n", why);
                    fail();
                }
        }
    }
    sched_free(&s);
}

/* ---- direct (two ranks) ---------------------------------------------------- */

static void test_direct(void **state)
{
    (void)state;
    sched_t s = {0};
    static const size_t counts[] = {0, 1, 100, 4099};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        for (int r = 0; r < 2; r++) {
            sched_op_t op = {.coll = SCHED_ALLREDUCE, .count = counts[c], .elem_size = 8, .nranks = 2, .rank = r};
            assert_int_equal(direct_schedule(&op, &s), CCL_SUCCESS);
            assert_int_equal(s.nsteps, 2);
            assert_int_equal(s.steps[0].action, SCHED_SEND);
            assert_int_equal(s.steps[0].send_peer, 1 - r);
            assert_int_equal(s.steps[0].recv_peer, -1);
            assert_int_equal(s.steps[0].src_buf, SCHED_BUF_SEND);
            assert_int_equal(s.steps[0].count, counts[c]);
            assert_int_equal(s.steps[0].flags, 0);
            assert_int_equal(s.steps[1].action, SCHED_RECV_REDUCE_COPY);
            assert_int_equal(s.steps[1].recv_peer, 1 - r);
            assert_int_equal(s.steps[1].send_peer, -1);
            assert_int_equal(s.steps[1].count, counts[c]);
            assert_int_equal(s.steps[1].flags, SCHED_POSTOP);
        }
        char why[400];
        for (int in_place = 0; in_place <= 1; in_place++)
            if (model_run(SCHED_ALLREDUCE, 2, counts[c], 8, in_place, MODEL_DIRECT, why, sizeof why)) {
                print_error("%s\n", why);
                fail();
            }
    }
    /* Anything but a 2-rank allreduce is refused, leaving no steps. */
    static const int bad_n[] = {1, 3, 4, 8, 16};
    for (size_t i = 0; i < sizeof bad_n / sizeof bad_n[0]; i++) {
        sched_op_t op = {.coll = SCHED_ALLREDUCE, .count = 10, .elem_size = 4, .nranks = bad_n[i], .rank = 0};
        s.nsteps = 5; /* left over from an earlier use */
        err_clear();
        assert_int_not_equal(direct_schedule(&op, &s), CCL_SUCCESS);
        assert_int_equal(s.nsteps, 0);
        assert_true(err_message()[0] != '\0');
    }
    sched_op_t ag = {.coll = SCHED_ALLGATHER, .count = 10, .elem_size = 4, .nranks = 2, .rank = 0};
    assert_int_not_equal(direct_schedule(&ag, &s), CCL_SUCCESS);
    assert_int_equal(s.nsteps, 0);
    sched_free(&s);
}

/* ring_schedule resets its output and refuses collectives it has no
 * schedule for. */
static void test_ring_reuse_and_refusal(void **state)
{
    (void)state;
    sched_t s = {0};
    sched_op_t op = {.coll = SCHED_ALLREDUCE, .count = 1000, .elem_size = 4, .nranks = 8, .rank = 3};
    assert_int_equal(ring_schedule(&op, &s), CCL_SUCCESS);
    assert_int_equal(s.nsteps, 15);
    op.nranks = 2;
    op.rank = 1;
    assert_int_equal(ring_schedule(&op, &s), CCL_SUCCESS);
    assert_int_equal(s.nsteps, 3);
    op.coll = SCHED_ALLGATHER;
    op.nranks = 5;
    assert_int_equal(ring_schedule(&op, &s), CCL_SUCCESS);
    assert_int_equal(s.nsteps, 6);
    op.coll = SCHED_NUM_COLLS;
    err_clear();
    assert_int_not_equal(ring_schedule(&op, &s), CCL_SUCCESS);
    assert_true(err_message()[0] != '\0');
    sched_free(&s);
}

/* The model itself must catch a broken schedule: drop one step of one
 * rank, or swap a peer, and it reports it. */
static void test_model_detects_faults(void **state)
{
    (void)state;
    model_t *m = calloc(1, sizeof *m);
    assert_non_null(m);
    /* A schedule where rank 0 sends twice what rank 1 receives once. */
    m->n = 2;
    m->count = 4;
    m->send_len = m->recv_len = 4;
    for (int r = 0; r < 2; r++) {
        m->sendb[r] = calloc(5, sizeof(val_t));
        m->recvb[r] = calloc(5, sizeof(val_t));
        for (int k = 0; k < 4; k++)
            m->sendb[r][k] = (val_t){1u << r, 0};
        assert_int_equal(sched_reserve(&m->sched[r], 2), CCL_SUCCESS);
    }
    sched_step_t *st = sched_add(&m->sched[0]);
    st->action = SCHED_SEND;
    st->send_peer = 1;
    st->src_buf = SCHED_BUF_SEND;
    st->count = 4;
    st = sched_add(&m->sched[1]);
    st->action = SCHED_RECV_REDUCE_COPY;
    st->recv_peer = 0;
    st->src_buf = SCHED_BUF_SEND;
    st->dst_buf = SCHED_BUF_RECV;
    st->count = 3; /* size mismatch */
    assert_int_equal(model_step(m, 0), 1);
    assert_int_equal(model_step(m, 1), -1);
    assert_non_null(strstr(m->err, "receives 3 elements"));
    /* Reducing the same input twice is double counting. */
    m->sched[1].steps[0].count = 4;
    free(m->link[0][1].q[0].data); /* drop the mismatched message */
    m->link[0][1].head = 1;
    q_push(&m->link[0][1], (msg_t){calloc(4, sizeof(val_t)), 4, 0});
    assert_non_null(m->link[0][1].q[1].data);
    for (int k = 0; k < 4; k++)
        m->link[0][1].q[1].data[k] = (val_t){2u, 0}; /* rank 1's own input */
    assert_int_equal(model_step(m, 1), -1);
    assert_non_null(strstr(m->err, "overlapping"));
    for (int r = 0; r < 2; r++) {
        sched_free(&m->sched[r]);
        free(m->sendb[r]);
        free(m->recvb[r]);
        for (int t = 0; t < 2; t++) {
            for (size_t j = m->link[r][t].head; j < m->link[r][t].tail; j++)
                free(m->link[r][t].q[j].data);
            free(m->link[r][t].q);
        }
    }
    free(m);
}

int main(void)
{
    /* The refusals below are expected: keep their WARN lines out of the log
     * unless the caller asked for a level. */
    setenv("CCL_DEBUG", "NONE", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partition),
        cmocka_unit_test(test_partition_literals),
        cmocka_unit_test(test_container),
        cmocka_unit_test(test_action_names),
        cmocka_unit_test(test_step_slices),
        cmocka_unit_test(test_rounds),
        cmocka_unit_test(test_ring_allreduce_shape),
        cmocka_unit_test(test_ring_allreduce_ownership),
        cmocka_unit_test(test_ring_allreduce_dataflow),
        cmocka_unit_test(test_ring_allgather_shape),
        cmocka_unit_test(test_ring_allgather_dataflow),
        cmocka_unit_test(test_pairwise_allgather),
        cmocka_unit_test(test_direct),
        cmocka_unit_test(test_ring_reuse_and_refusal),
        cmocka_unit_test(test_model_detects_faults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
