/*
 * test_init_all.c - several ranks as threads of one process, created with
 * ccl_comm_init_all. Each rank's thread runs blocking collectives on its own
 * communicator (allreduce and allgather with every dtype and op, the other
 * collectives with a few, odd counts, both placements); then one
 * thread drives all ranks through host streams, NCCL's single-thread
 * multi-device pattern, which only works if each stream progresses on its
 * own. Results are checked against the serial reference, guards included.
 * CCL_TEST_CCL_MEM=1: buffers from ccl_mem_alloc, so that single copy
 * (and the fused 2-rank allreduce) runs between threads of one process.
 * A watchdog alarm turns a hang into a failure that names the case.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_coll.h"
#include "test_common.h"

#define MAXR 8
#define TIMEOUT_S 120

static uint64_t base_seed;
static int use_ccl_mem; /* CCL_TEST_CCL_MEM=1: ccl_mem_alloc buffers (single copy between threads too) */
static int failures;
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;
/* What is running now, for the watchdog (written before each step). */
static char current[MAXR + 1][256];

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&fail_lock);
    failures++;
    if (failures <= 20) {
        fprintf(stderr, "FAIL ");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
    }
    pthread_mutex_unlock(&fail_lock);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char head[] = "FAIL test_init_all: timed out; ranks were running:\n";
    ssize_t w = write(2, head, sizeof(head) - 1);
    for (int r = 0; r <= MAXR; r++) {
        if (current[r][0]) {
            w = write(2, "  ", 2);
            w = write(2, current[r], strnlen(current[r], sizeof(current[r])));
            w = write(2, "\n", 1);
        }
    }
    (void)w;
    _exit(2);
}

static const size_t counts[] = {0, 1, 7, 13, 1021};
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))

/* All (dtype, op, count, placement) cases for allreduce, then allgather,
 * then the other collectives with a few dtypes and ops each (root and peer
 * distance cycling), so that threads of one process run every kind. */
#define NOTHER (TST_NUM_COLLS - 2)
#define OTHER_VARIANTS 4

static int ncases(void)
{
    return (tst_num_dtypes * tst_num_ops + tst_num_dtypes + NOTHER * OTHER_VARIANTS) *
           (int)NCOUNTS * 2;
}

static tst_case_t make_case(int nranks, int k)
{
    tst_case_t c;
    int inplace = k % 2, rest = k / 2;
    size_t count = counts[rest % (int)NCOUNTS];
    int combo = rest / (int)NCOUNTS;
    memset(&c, 0, sizeof(c));
    if (combo < tst_num_dtypes * tst_num_ops) {
        c.coll = TST_ALLREDUCE;
        c.dt = tst_dtypes[combo / tst_num_ops];
        c.op = tst_ops[combo % tst_num_ops];
    } else if ((combo -= tst_num_dtypes * tst_num_ops) < tst_num_dtypes) {
        c.coll = TST_ALLGATHER;
        c.dt = tst_dtypes[combo];
        c.op = TST_OP_COPY;
    } else {
        combo -= tst_num_dtypes;
        c.coll = (tst_coll_t)(2 + combo / OTHER_VARIANTS);
        c.dt = tst_dtypes[(combo * 5 + k) % tst_num_dtypes];
        c.op = tst_coll_reduces(c.coll) ? tst_ops[(combo + k) % tst_num_ops] : TST_OP_COPY;
        c.root = (combo + k / 2) % nranks;
        c.null_unused = combo & 1;
    }
    c.count = count;
    c.inplace = inplace;
    c.seed = tst_case_seed(base_seed, (uint64_t)nranks, (uint64_t)k, 5, 5);
    return c;
}

typedef struct {
    ccl_comm_t comm;
    int rank, nranks;
} thread_arg_t;

static void *rank_thread(void *p)
{
    thread_arg_t *a = p;
    char what[160], msg[512];
    for (int k = 0; k < ncases(); k++) {
        tst_case_t c = make_case(a->nranks, k);
        tst_bufs_t b;
        tst_case_str(&c, a->nranks, what, sizeof(what));
        snprintf(current[a->rank], sizeof(current[a->rank]), "rank %d: %s", a->rank, what);
        tst_case_prepare(&c, a->rank, a->nranks, &b, use_ccl_mem);
        ccl_result_t rc = tst_case_issue(&c, &b, a->comm, NULL);
        if (rc != CCL_SUCCESS) {
            /* The other ranks would wait for this one forever: stop here. */
            fail("%s rank=%d returned %s: %s", what, a->rank, ccl_get_error_string(rc),
                 ccl_get_last_error(a->comm));
            fflush(stderr);
            _exit(1);
        }
        if (tst_case_verify(&c, a->rank, a->nranks, &b, msg, sizeof(msg)))
            fail("threads: %s", msg);
        tst_case_release(&b);
    }
    snprintf(current[a->rank], sizeof(current[a->rank]), "rank %d: done", a->rank);
    return NULL;
}

static void check_rc(ccl_result_t rc, ccl_comm_t comm, const char *what)
{
    if (rc != CCL_SUCCESS) {
        fail("%s returned %s: %s", what, ccl_get_error_string(rc), ccl_get_last_error(comm));
        fflush(stderr);
        _exit(1);
    }
}

static void run_nranks(int n)
{
    ccl_comm_t comms[MAXR];
    pthread_t th[MAXR];
    thread_arg_t args[MAXR];
    ccl_stream_t streams[MAXR];
    char what[160], msg[512];
    double t0 = tst_now();
    int before = failures;

    memset(current, 0, sizeof(current));
    snprintf(current[MAXR], sizeof(current[MAXR]), "ccl_comm_init_all(%d)", n);
    memset(comms, 0, sizeof(comms));
    check_rc(ccl_comm_init_all(comms, n, NULL), NULL, current[MAXR]);
    for (int r = 0; r < n; r++) {
        int cnt = -1, rk = -1;
        check_rc(ccl_comm_count(comms[r], &cnt), comms[r], "ccl_comm_count");
        check_rc(ccl_comm_user_rank(comms[r], &rk), comms[r], "ccl_comm_user_rank");
        if (cnt != n || rk != r)
            fail("init_all(%d): comms[%d] reports count %d rank %d", n, r, cnt, rk);
    }

    /* Blocking calls, one thread per rank. */
    snprintf(current[MAXR], sizeof(current[MAXR]), "threads with blocking calls, %d ranks", n);
    for (int r = 0; r < n; r++) {
        args[r] = (thread_arg_t){.comm = comms[r], .rank = r, .nranks = n};
        if (pthread_create(&th[r], NULL, rank_thread, &args[r]) != 0) {
            fail("pthread_create");
            _exit(1);
        }
    }
    for (int r = 0; r < n; r++)
        pthread_join(th[r], NULL);

    /* One thread, one host stream per rank: queue every rank's part of a
     * case, then synchronize them all. */
    for (int r = 0; r < n; r++)
        check_rc(ccl_stream_create(&streams[r]), NULL, "ccl_stream_create");
    for (int k = 0; k < ncases(); k += 7) {
        tst_case_t c = make_case(n, k);
        tst_bufs_t b[MAXR];
        c.seed ^= 0x5157;
        tst_case_str(&c, n, what, sizeof(what));
        snprintf(current[MAXR], sizeof(current[MAXR]), "single thread, streams: %s", what);
        for (int r = 0; r < n; r++) {
            tst_case_prepare(&c, r, n, &b[r], use_ccl_mem);
            check_rc(tst_case_issue(&c, &b[r], comms[r], streams[r]), comms[r], what);
        }
        for (int r = 0; r < n; r++)
            check_rc(ccl_stream_synchronize(streams[r]), comms[r], "ccl_stream_synchronize");
        for (int r = 0; r < n; r++) {
            if (tst_case_verify(&c, r, n, &b[r], msg, sizeof(msg)))
                fail("streams: %s", msg);
            tst_case_release(&b[r]);
        }
    }
    for (int r = 0; r < n; r++)
        check_rc(ccl_stream_destroy(streams[r]), NULL, "ccl_stream_destroy");

    snprintf(current[MAXR], sizeof(current[MAXR]), "ccl_comm_destroy, %d ranks", n);
    for (int r = 0; r < n; r++)
        check_rc(ccl_comm_destroy(comms[r]), NULL, "ccl_comm_destroy");
    printf("%s init_all nranks=%d (%.2fs)\n", failures > before ? "FAIL" : "ok  ", n,
           tst_now() - t0);
    fflush(stdout);
}

int main(void)
{
    static const int nranks[] = {1, 2, 3, 4, 5, 8};
    base_seed = (uint64_t)tst_env_long("CCL_TEST_SEED", 12345);
    use_ccl_mem = (int)tst_env_long("CCL_TEST_CCL_MEM", 0);
    printf("test_init_all: seed %llu%s\n", (unsigned long long)base_seed,
           use_ccl_mem ? ", ccl_mem_alloc buffers" : "");
    signal(SIGALRM, on_alarm);
    alarm((unsigned)tst_timeout(TIMEOUT_S));
    for (size_t k = 0; k < sizeof(nranks) / sizeof(nranks[0]); k++)
        run_nranks(nranks[k]);
    printf("test_init_all: %s\n", failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
