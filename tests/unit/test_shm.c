/*
 * test_shm.c - the shared-memory FIFO connection (src/transport/shm.h).
 *
 * Covers creating a connection (receiver side) and opening it (sender side):
 * the segment's name, its /dev/shm entry with mode 0600 until
 * shm_name_unlink and gone after (mappings stay usable), fresh names per
 * connection, a name that already exists refused; refusals: a name that does not exist (CCL_ERR_SYSTEM) and
 * segments that are empty, too small, garbage, or sized unlike their header
 * (CCL_ERR_REMOTE); the data path: 1000 slices of varying size in order
 * through 4 slots (and through 1 and 2) with a thread on each side, under a
 * futex-only wait policy and a spinning one, with the sender never more
 * than nslots slices ahead and the slot kind (data or reference) carried
 * with each slice; the same across two processes (fork); shm_send_drain
 * returning only once everything was consumed; and ending waits: poison from
 * either side ends a blocked receiver's or sender's wait with CCL_ERR_REMOTE
 * within a second, and an error from the policy's check callback ends a wait
 * with that error; but data that arrived together with the poison (a peer's
 * last slice, then its goodbye) is still delivered, and on the one-shot
 * board a broadcast whose root posted before the poison still completes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/wait.h"
#include "transport/shm.h"
#include "transport/shm_board.h"

#define MS (1000ull * 1000ull)
#define SEC (1000ull * MS)

static double ms_since(uint64_t t0) { return (double)(clock_now_ns() - t0) / 1e6; }

/* A connection's two ends in this process, its name already unlinked. */
static void open_pair(shm_conn_t *rcv, shm_conn_t *snd, uint32_t nslots, size_t slot_size)
{
    char name[SHM_NAME_MAX];
    assert_int_equal(shm_name_new(name, "/ccl-"), CCL_SUCCESS);
    assert_int_equal(shm_conn_create(rcv, nslots, slot_size, name, 1), CCL_SUCCESS);
    assert_int_equal(shm_conn_open(snd, name), CCL_SUCCESS);
    shm_name_unlink(name);
}

/* ---- wait policies -------------------------------------------------------------- */

typedef struct {
    atomic_int calls;
    ccl_result_t fail_with; /* returned once waited_ns passes fail_after_ns */
    uint64_t fail_after_ns;
} check_ctx_t;

static ccl_result_t check_cb(void *arg, uint64_t waited_ns)
{
    check_ctx_t *c = arg;
    atomic_fetch_add(&c->calls, 1);
    if (c->fail_with != CCL_SUCCESS && waited_ns >= c->fail_after_ns)
        return err_set(c->fail_with, "test check callback gives up after %llu ns",
                       (unsigned long long)waited_ns);
    return CCL_SUCCESS;
}

/* ---- /dev/shm --------------------------------------------------------------------- */

static int shm_stat(const char *name, struct stat *st)
{
    char path[128];
    snprintf(path, sizeof path, "/dev/shm%s", name);
    return stat(path, st);
}

/* A segment of `len` bytes under `name` holding `fill` (or a byte pattern
 * when fill < 0); the test's own, not made by ccl. */
static void make_segment(const char *name, size_t len, int fill)
{
    shm_unlink(name);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)len), 0);
    if (len) {
        unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        assert_true(p != MAP_FAILED);
        uint32_t x = 12345;
        for (size_t i = 0; i < len; i++) {
            x = x * 1103515245u + 12345u;
            p[i] = fill >= 0 ? (unsigned char)fill : (unsigned char)(x >> 16);
        }
        munmap(p, len);
    }
    close(fd);
}

/* ---- slices ------------------------------------------------------------------------ */

/* Slice i's length (1..slot) and bytes: a pure function of i, so either side
 * can compute it. */
static size_t slice_len(uint32_t i, size_t slot)
{
    if (i % 10 == 0)
        return slot;
    if (i % 10 == 1)
        return 1;
    uint32_t h = i * 2654435761u;
    return 1 + (h >> 8) % slot;
}

static unsigned char slice_byte(uint32_t i, size_t k)
{
    uint32_t h = (i + 1) * 0x9E3779B1u ^ (uint32_t)k * 0x85EBCA77u;
    h ^= h >> 15;
    return (unsigned char)(h ^ (h >> 8));
}

static int slice_kind(uint32_t i) { return (i % 7 == 3) ? SHM_SLOT_REF : SHM_SLOT_DATA; }

static void slice_fill(void *slot, uint32_t i, size_t len)
{
    unsigned char *p = slot;
    for (size_t k = 0; k < len; k++)
        p[k] = slice_byte(i, k);
}

/* Index of the first wrong byte, or -1. */
static long slice_check(const void *slot, uint32_t i, size_t len)
{
    const unsigned char *p = slot;
    for (size_t k = 0; k < len; k++)
        if (p[k] != slice_byte(i, k))
            return (long)k;
    return -1;
}

/* ---- create / open / unlink -------------------------------------------------------- */

static void test_create_open_unlink(void **state)
{
    (void)state;
    shm_conn_t rcv, snd;
    char name[SHM_NAME_MAX];
    memset(name, 0, sizeof name);
    assert_int_equal(shm_name_new(name, "/ccl-"), CCL_SUCCESS);
    assert_true(name[0] == '/');
    assert_true(strnlen(name, SHM_NAME_MAX) < SHM_NAME_MAX);
    assert_null(strchr(name + 1, '/'));
    assert_int_equal(shm_conn_create(&rcv, 4, 4096, name, 1), CCL_SUCCESS);
    assert_non_null(rcv.fifo);
    assert_int_equal(rcv.nslots, 4);
    assert_int_equal(rcv.slot_size, 4096);
    assert_int_equal(rcv.is_sender, 0);
    assert_int_equal(rcv.pos, 0);

    struct stat st;
    assert_int_equal(shm_stat(name, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_uid, getuid());
    assert_true((size_t)st.st_size >= 4 * 4096);
    assert_int_equal((size_t)st.st_size, rcv.map_len);

    assert_int_equal(shm_conn_open(&snd, name), CCL_SUCCESS);
    assert_int_equal(snd.is_sender, 1);
    assert_int_equal(snd.nslots, 4);
    assert_int_equal(snd.slot_size, 4096);
    assert_int_equal(snd.map_len, rcv.map_len);
    assert_int_equal(snd.pos, 0);

    /* Another connection gets another name, and a name that exists is
     * refused (someone may have planted it). */
    shm_conn_t other;
    char name2[SHM_NAME_MAX];
    assert_int_equal(shm_name_new(name2, "/ccl-"), CCL_SUCCESS);
    assert_string_not_equal(name, name2);
    assert_int_equal(shm_conn_create(&other, 2, 64, name2, 1), CCL_SUCCESS);
    shm_name_unlink(name2);
    shm_conn_close(&other);
    err_clear();
    assert_int_equal(shm_conn_create(&other, 2, 64, name, 1), CCL_ERR_SYSTEM);
    assert_null(other.fifo);
    assert_non_null(strstr(err_message(), "File exists"));

    shm_name_unlink(name);
    errno = 0;
    assert_int_not_equal(shm_stat(name, &st), 0);
    assert_int_equal(errno, ENOENT);
    shm_name_unlink(name); /* twice is harmless */
    shm_name_unlink("");   /* so is an empty name */

    /* The mappings outlive the name. */
    wait_policy_t pol = {NULL, NULL, 0, 0, NULL, NULL};
    void *slot = NULL;
    const void *rslot = NULL;
    assert_int_equal(shm_send_wait(&snd, &pol, &slot), CCL_SUCCESS);
    slice_fill(slot, 7, 4096);
    shm_send_post(&snd, SHM_SLOT_DATA, 4096);
    assert_int_equal(shm_recv_wait(&rcv, &pol, &rslot), CCL_SUCCESS);
    assert_int_equal(slice_check(rslot, 7, 4096), -1);
    assert_int_equal(shm_recv_is_ref(&rcv), 0);
    assert_int_equal(shm_recv_len(&rcv), 4096);
    shm_recv_done(&rcv);
    assert_int_equal(shm_send_drain(&snd, &pol), CCL_SUCCESS);

    /* Once unlinked, nobody else can open it. */
    shm_conn_t late;
    assert_int_equal(shm_conn_open(&late, name), CCL_ERR_SYSTEM);
    assert_null(late.fifo);

    shm_conn_close(&snd);
    assert_null(snd.fifo);
    shm_conn_close(&snd); /* twice is harmless */
    shm_conn_close(&rcv);
    assert_null(rcv.fifo);
}

static void test_open_missing(void **state)
{
    (void)state;
    char name[64];
    snprintf(name, sizeof name, "/ccl-unit-missing-%d", (int)getpid());
    shm_unlink(name);
    shm_conn_t c;
    memset(&c, 0xEE, sizeof c);
    err_clear();
    assert_int_equal(shm_conn_open(&c, name), CCL_ERR_SYSTEM);
    assert_true(err_message()[0] != '\0');
    assert_null(c.fifo);
}

static void expect_refused(const char *name, const char *what)
{
    shm_conn_t c;
    err_clear();
    ccl_result_t rc = shm_conn_open(&c, name);
    if (rc != CCL_ERR_REMOTE) {
        print_error("shm_conn_open of %s: %d, want CCL_ERR_REMOTE (%d)\n", what, (int)rc,
                    (int)CCL_ERR_REMOTE);
        if (rc == CCL_SUCCESS)
            shm_conn_close(&c);
        shm_unlink(name);
        fail();
    }
    assert_true(err_message()[0] != '\0');
    assert_null(c.fifo);
}

static void test_open_corrupt(void **state)
{
    (void)state;
    char name[64];
    snprintf(name, sizeof name, "/ccl-unit-corrupt-%d", (int)getpid());

    make_segment(name, 4096 + 4 * 4096, -1);
    expect_refused(name, "a segment of random bytes");
    make_segment(name, 4096 + 4 * 4096, 0);
    expect_refused(name, "an all-zero segment");
    make_segment(name, 4096 + 4 * 4096, 0xFF);
    expect_refused(name, "an all-0xFF segment");
    make_segment(name, 0, 0);
    expect_refused(name, "an empty segment");
    make_segment(name, 100, -1);
    expect_refused(name, "a 100-byte segment");
    shm_unlink(name);

    /* A real header whose segment no longer has the size it describes. */
    shm_conn_t rcv;
    char real[SHM_NAME_MAX];
    assert_int_equal(shm_name_new(real, "/ccl-"), CCL_SUCCESS);
    assert_int_equal(shm_conn_create(&rcv, 4, 4096, real, 1), CCL_SUCCESS);
    int fd = shm_open(real, O_RDWR, 0);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)rcv.map_len + 4096), 0);
    close(fd);
    expect_refused(real, "a segment grown past its header's size");
    /* ... and once the size is right again, it opens. */
    fd = shm_open(real, O_RDWR, 0);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)rcv.map_len), 0);
    close(fd);
    shm_conn_t snd;
    assert_int_equal(shm_conn_open(&snd, real), CCL_SUCCESS);
    shm_conn_close(&snd);
    shm_name_unlink(real);
    shm_conn_close(&rcv);
}

/* ---- the data path, one thread per side ------------------------------------------ */

typedef struct {
    shm_conn_t *conn;
    wait_policy_t pol;
    uint32_t nslices;
    atomic_uint *consumed; /* slices the receiver finished reading */
    ccl_result_t rc;
    char err[200];
} side_t;

static void *sender_main(void *arg)
{
    side_t *s = arg;
    shm_conn_t *c = s->conn;
    for (uint32_t i = 0; i < s->nslices; i++) {
        void *slot = NULL;
        s->rc = shm_send_wait(c, &s->pol, &slot);
        if (s->rc != CCL_SUCCESS) {
            snprintf(s->err, sizeof s->err, "send_wait of slice %u failed: %d", i, (int)s->rc);
            return NULL;
        }
        /* A free slot means the receiver is done with slice i - nslots. */
        uint32_t done = atomic_load(s->consumed);
        if (i >= done + c->nslots) {
            snprintf(s->err, sizeof s->err, "slice %u got a slot while only %u of %u-slot FIFO "
                     "were consumed", i, done, c->nslots);
            s->rc = CCL_ERR_INTERNAL;
            return NULL;
        }
        if ((char *)slot < c->slots || (char *)slot + c->slot_size > c->slots + (size_t)c->nslots * c->slot_size) {
            snprintf(s->err, sizeof s->err, "slice %u: slot outside the slot area", i);
            s->rc = CCL_ERR_INTERNAL;
            return NULL;
        }
        slice_fill(slot, i, slice_len(i, c->slot_size));
        shm_send_post(c, slice_kind(i), slice_len(i, c->slot_size));
    }
    s->rc = shm_send_drain(c, &s->pol);
    if (s->rc == CCL_SUCCESS && atomic_load(s->consumed) != s->nslices) {
        snprintf(s->err, sizeof s->err, "drain returned with %u of %u consumed",
                 atomic_load(s->consumed), s->nslices);
        s->rc = CCL_ERR_INTERNAL;
    }
    return NULL;
}

static void *receiver_main(void *arg)
{
    side_t *s = arg;
    shm_conn_t *c = s->conn;
    for (uint32_t i = 0; i < s->nslices; i++) {
        const void *slot = NULL;
        s->rc = shm_recv_wait(c, &s->pol, &slot);
        if (s->rc != CCL_SUCCESS) {
            snprintf(s->err, sizeof s->err, "recv_wait of slice %u failed: %d", i, (int)s->rc);
            return NULL;
        }
        size_t len = slice_len(i, c->slot_size);
        long bad = slice_check(slot, i, len);
        int is_ref = shm_recv_is_ref(c);
        if (bad >= 0 || is_ref != (slice_kind(i) == SHM_SLOT_REF) || shm_recv_len(c) != len) {
            snprintf(s->err, sizeof s->err, "slice %u (%zu bytes): %s", i, len,
                     bad >= 0 ? "wrong or out-of-order bytes" : "wrong slot kind");
            s->rc = CCL_ERR_INTERNAL;
            return NULL;
        }
        /* Counted before the slot is handed back, so the sender's view of
         * `consumed` is never behind the FIFO's head. */
        atomic_store(s->consumed, i + 1);
        shm_recv_done(c);
    }
    return NULL;
}

static void run_transfer(uint32_t nslots, size_t slot_size, uint32_t nslices, wait_policy_t pol)
{
    shm_conn_t rcv, snd;
    open_pair(&rcv, &snd, nslots, slot_size);
    atomic_uint consumed = 0;
    side_t s = {.conn = &snd, .pol = pol, .nslices = nslices, .consumed = &consumed};
    side_t r = {.conn = &rcv, .pol = pol, .nslices = nslices, .consumed = &consumed};
    uint64_t t0 = clock_now_ns();
    pthread_t ts, tr;
    assert_int_equal(pthread_create(&tr, NULL, receiver_main, &r), 0);
    assert_int_equal(pthread_create(&ts, NULL, sender_main, &s), 0);
    pthread_join(ts, NULL);
    pthread_join(tr, NULL);
    double ms = ms_since(t0);
    if (s.rc != CCL_SUCCESS || r.rc != CCL_SUCCESS) {
        print_error("nslots=%u slot=%zu spin=%d yield=%d: sender: %s / receiver: %s\n", nslots,
                    slot_size, pol.spin, pol.yield, s.rc ? s.err : "ok", r.rc ? r.err : "ok");
        fail();
    }
    assert_int_equal(consumed, nslices);
    assert_int_equal(snd.pos, nslices);
    assert_int_equal(rcv.pos, nslices);
    /* Generous: a lost wake-up costs a 5 ms sleep per slice (5 s here). */
    if (ms > 4000.0) {
        print_error("%u slices took %.0f ms\n", nslices, ms);
        fail();
    }
    shm_conn_close(&snd);
    shm_conn_close(&rcv);
}

/* Each policy's check gives up after 10 s: a lost wake-up or a stuck FIFO
 * fails the test instead of hanging it. */
/* The one-shot board: 0600, and a header whose slot size would wrap the
 * length check around to the real size is refused (its slots would lie
 * far outside the mapping). */
static void test_board_mode_and_corrupt_header(void **state)
{
    (void)state;
    shm_board_t b, o;
    char name[SHM_NAME_MAX], path[64 + SHM_NAME_MAX];
    assert_int_equal(shm_name_new(name, "/ccl-b"), CCL_SUCCESS);
    assert_int_equal(shm_board_create(&b, 4, 64, name), CCL_SUCCESS);
    snprintf(path, sizeof path, "/dev/shm%s", name);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(shm_board_open(&o, name, 4, 1), CCL_SUCCESS);
    shm_board_close(&o);
    /* The header starts magic, nranks (4 bytes each), slot_bytes (8). */
    uint64_t *slot_bytes = (uint64_t *)((char *)b.hdr + 8);
    assert_int_equal(*slot_bytes, 64);
    *slot_bytes = 64 + (1ull << 61); /* 2 banks x 4 ranks x this wraps to 512 */
    assert_int_equal(shm_board_open(&o, name, 4, 1), CCL_ERR_REMOTE);
    assert_non_null(strstr(err_message(), "corrupt header"));
    *slot_bytes = 64;
    assert_int_equal(shm_board_open(&o, name, 3, 1), CCL_ERR_REMOTE);
    shm_name_unlink(name);
    shm_board_close(&b);
}

static void test_transfer_futex_only(void **state)
{
    (void)state;
    check_ctx_t ctx = {.fail_with = CCL_ERR_TIMEOUT, .fail_after_ns = 10 * SEC};
    wait_policy_t pol = {check_cb, &ctx, 0, 0, NULL, NULL};
    run_transfer(4, 4096, 1000, pol);
}

static void test_transfer_spinning(void **state)
{
    (void)state;
    check_ctx_t ctx = {.fail_with = CCL_ERR_TIMEOUT, .fail_after_ns = 10 * SEC};
    wait_policy_t pol = {check_cb, &ctx, 20, 50, NULL, NULL};
    run_transfer(4, 4096, 1000, pol);
}

static void test_transfer_few_slots(void **state)
{
    (void)state;
    check_ctx_t ctx = {.fail_with = CCL_ERR_TIMEOUT, .fail_after_ns = 10 * SEC};
    wait_policy_t pol = {check_cb, &ctx, 0, 0, NULL, NULL};
    run_transfer(1, 256, 300, pol);
    run_transfer(2, 64, 500, pol);
    run_transfer(8, 1000, 500, pol); /* slot size not a power of two */
}

/* ---- across processes -------------------------------------------------------------- */

static void test_transfer_across_fork(void **state)
{
    (void)state;
    const uint32_t nslices = 300;
    shm_conn_t rcv;
    char name[SHM_NAME_MAX];
    assert_int_equal(shm_name_new(name, "/ccl-"), CCL_SUCCESS);
    assert_int_equal(shm_conn_create(&rcv, 4, 2048, name, 1), CCL_SUCCESS);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* Child: the sender. Exit status says what went wrong. */
        shm_conn_t snd;
        if (shm_conn_open(&snd, name) != CCL_SUCCESS)
            _exit(10);
        check_ctx_t cctx = {.fail_with = CCL_ERR_TIMEOUT, .fail_after_ns = 10 * SEC};
        wait_policy_t pol = {check_cb, &cctx, 0, 0, NULL, NULL};
        for (uint32_t i = 0; i < nslices; i++) {
            void *slot;
            if (shm_send_wait(&snd, &pol, &slot) != CCL_SUCCESS)
                _exit(11);
            slice_fill(slot, i, slice_len(i, snd.slot_size));
            shm_send_post(&snd, slice_kind(i), slice_len(i, snd.slot_size));
        }
        if (shm_send_drain(&snd, &pol) != CCL_SUCCESS)
            _exit(12);
        shm_conn_close(&snd);
        _exit(0);
    }
    check_ctx_t ctx = {.fail_with = CCL_ERR_TIMEOUT, .fail_after_ns = 10 * SEC};
    wait_policy_t pol = {check_cb, &ctx, 0, 0, NULL, NULL};
    int failed = 0;
    for (uint32_t i = 0; i < nslices && !failed; i++) {
        const void *slot;
        if (shm_recv_wait(&rcv, &pol, &slot) != CCL_SUCCESS) {
            print_error("recv_wait of slice %u failed\n", i);
            failed = 1;
            break;
        }
        if (i == 0) {
            /* The child has it mapped: the name can go, as connect.c does. */
            struct stat st;
            shm_name_unlink(name);
            assert_int_not_equal(shm_stat(name, &st), 0);
        }
        if (slice_check(slot, i, slice_len(i, rcv.slot_size)) >= 0 ||
            shm_recv_is_ref(&rcv) != (slice_kind(i) == SHM_SLOT_REF)) {
            print_error("slice %u from the child is wrong\n", i);
            failed = 1;
        }
        shm_recv_done(&rcv);
    }
    if (failed)
        shm_conn_poison(&rcv, NULL); /* let the child's wait end */
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    shm_name_unlink(name);
    shm_conn_close(&rcv);
    assert_false(failed);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- drain --------------------------------------------------------------------------- */

typedef struct {
    shm_conn_t *conn;
    atomic_uint *consumed;
    uint64_t t0; /* before the thread starts: it may start late on a busy machine */
    ccl_result_t rc;
    double ms;
} drain_t;

static void *drain_main(void *arg)
{
    drain_t *d = arg;
    wait_policy_t pol = {NULL, NULL, 0, 0, NULL, NULL};
    d->rc = shm_send_drain(d->conn, &pol);
    d->ms = ms_since(d->t0);
    if (atomic_load(d->consumed) != 3)
        d->rc = CCL_ERR_INTERNAL;
    return NULL;
}

static void test_drain_waits_for_receiver(void **state)
{
    (void)state;
    shm_conn_t rcv, snd;
    open_pair(&rcv, &snd, 4, 128);
    wait_policy_t pol = {NULL, NULL, 0, 0, NULL, NULL};
    /* Nothing outstanding: returns at once. */
    assert_int_equal(shm_send_drain(&snd, &pol), CCL_SUCCESS);
    for (uint32_t i = 0; i < 3; i++) {
        void *slot;
        assert_int_equal(shm_send_wait(&snd, &pol, &slot), CCL_SUCCESS);
        slice_fill(slot, i, 128);
        shm_send_post(&snd, SHM_SLOT_DATA, 128);
    }
    atomic_uint consumed = 0;
    drain_t d = {.conn = &snd, .consumed = &consumed, .t0 = clock_now_ns()};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, drain_main, &d), 0);
    for (uint32_t i = 0; i < 3; i++) {
        usleep(30 * 1000);
        const void *slot;
        assert_int_equal(shm_recv_wait(&rcv, &pol, &slot), CCL_SUCCESS);
        assert_int_equal(slice_check(slot, i, 128), -1);
        atomic_store(&consumed, i + 1);
        shm_recv_done(&rcv);
    }
    pthread_join(t, NULL);
    assert_int_equal(d.rc, CCL_SUCCESS);
    assert_true(d.ms >= 80.0);
    shm_conn_close(&snd);
    shm_conn_close(&rcv);
}

/* ---- ending waits ----------------------------------------------------------------- */

typedef struct {
    shm_conn_t *conn;
    wait_policy_t pol;
    int recv; /* 1: recv_wait, 0: send_wait */
    ccl_result_t rc;
    uint64_t end_ns;
    atomic_int started;
} blocked_t;

static void *blocked_main(void *arg)
{
    blocked_t *b = arg;
    atomic_store(&b->started, 1);
    if (b->recv) {
        const void *slot;
        b->rc = shm_recv_wait(b->conn, &b->pol, &slot);
    } else {
        void *slot;
        b->rc = shm_send_wait(b->conn, &b->pol, &slot);
    }
    b->end_ns = clock_now_ns();
    return NULL;
}

/* Blocks one side, poisons from `poisoner` after 100 ms, and checks that the
 * wait ends with CCL_ERR_REMOTE within a second. */
static void poison_case(int block_receiver, int poison_from_sender)
{
    shm_conn_t rcv, snd;
    open_pair(&rcv, &snd, 4, 64);
    wait_policy_t nowait = {NULL, NULL, 0, 0, NULL, NULL};
    if (!block_receiver) {
        /* Fill every slot so the next send_wait blocks. */
        for (int i = 0; i < 4; i++) {
            void *slot;
            assert_int_equal(shm_send_wait(&snd, &nowait, &slot), CCL_SUCCESS);
            shm_send_post(&snd, SHM_SLOT_DATA, 0);
        }
    }
    /* Returns success for 3 s, then gives up, so a wait that poison fails
     * to end shows up as CCL_ERR_TIMEOUT instead of a hang. */
    check_ctx_t ctx = {.fail_with = CCL_ERR_TIMEOUT, .fail_after_ns = 3 * SEC};
    blocked_t b = {.conn = block_receiver ? &rcv : &snd, .recv = block_receiver,
                   .pol = {check_cb, &ctx, 0, 0}, .rc = CCL_ERR_INTERNAL};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, blocked_main, &b), 0);
    while (!atomic_load(&b.started))
        usleep(1000);
    usleep(100 * 1000);
    uint64_t t_poison = clock_now_ns();
    shm_conn_poison(poison_from_sender ? &snd : &rcv, NULL);
    pthread_join(t, NULL);
    double ms = (double)(int64_t)(b.end_ns - t_poison) / 1e6; /* < 0: ended before the poison */
    if (b.rc != CCL_ERR_REMOTE || ms > 1000.0) {
        print_error("%s blocked, poisoned by the %s: rc %d after %.1f ms (want %d within 1000 ms)\n",
                    block_receiver ? "receiver" : "sender", poison_from_sender ? "sender" : "receiver",
                    (int)b.rc, ms, (int)CCL_ERR_REMOTE);
        fail();
    }
    /* It really waited before the poison and consulted the check meanwhile. */
    assert_true(atomic_load(&ctx.calls) > 0);
    shm_conn_close(&snd);
    shm_conn_close(&rcv);
}

static void test_poison_ends_receiver_wait(void **state)
{
    (void)state;
    poison_case(1, 1);
    poison_case(1, 0);
}

static void test_poison_ends_sender_wait(void **state)
{
    (void)state;
    poison_case(0, 0);
    poison_case(0, 1);
}

static void test_poison_before_wait(void **state)
{
    (void)state;
    shm_conn_t rcv, snd;
    open_pair(&rcv, &snd, 4, 64);
    shm_conn_poison(&snd, NULL);
    check_ctx_t ctx = {.fail_with = CCL_ERR_TIMEOUT, .fail_after_ns = 3 * SEC}; /* backstop */
    wait_policy_t pol = {check_cb, &ctx, 0, 0, NULL, NULL};
    const void *slot;
    uint64_t t0 = clock_now_ns();
    err_clear();
    assert_int_equal(shm_recv_wait(&rcv, &pol, &slot), CCL_ERR_REMOTE);
    assert_true(ms_since(t0) < 1000.0);
    assert_true(err_message()[0] != '\0');
    shm_conn_close(&snd);
    shm_conn_close(&rcv);
    shm_conn_poison(&rcv, NULL); /* closed: nothing to poison, no crash */
}

static void test_check_callback_ends_wait(void **state)
{
    (void)state;
    shm_conn_t rcv, snd;
    open_pair(&rcv, &snd, 2, 64);
    /* The receiver's wait: the callback gives up after 50 ms. */
    check_ctx_t ctx = {.fail_with = CCL_ERR_TIMEOUT, .fail_after_ns = 50 * MS};
    wait_policy_t pol = {check_cb, &ctx, 0, 0, NULL, NULL};
    const void *rslot;
    uint64_t t0 = clock_now_ns();
    assert_int_equal(shm_recv_wait(&rcv, &pol, &rslot), CCL_ERR_TIMEOUT);
    double ms = ms_since(t0);
    if (ms < 45.0 || ms > 1000.0) {
        print_error("recv wait ended after %.1f ms, want about 50\n", ms);
        fail();
    }
    /* The sender's wait on a full FIFO, with spinning and yielding first. */
    wait_policy_t nowait = {NULL, NULL, 0, 0, NULL, NULL};
    for (int i = 0; i < 2; i++) {
        void *slot;
        assert_int_equal(shm_send_wait(&snd, &nowait, &slot), CCL_SUCCESS);
        shm_send_post(&snd, SHM_SLOT_DATA, 0);
    }
    check_ctx_t ctx2 = {.fail_with = CCL_ERR_ABORTED, .fail_after_ns = 30 * MS};
    wait_policy_t pol2 = {check_cb, &ctx2, 20, 50, NULL, NULL};
    void *sslot;
    t0 = clock_now_ns();
    assert_int_equal(shm_send_wait(&snd, &pol2, &sslot), CCL_ERR_ABORTED);
    assert_true(ms_since(t0) < 1000.0);
    /* The FIFO still works after a wait gave up. */
    assert_int_equal(shm_recv_wait(&rcv, &nowait, &rslot), CCL_SUCCESS);
    shm_recv_done(&rcv);
    assert_int_equal(shm_send_wait(&snd, &nowait, &sslot), CCL_SUCCESS);
    shm_conn_close(&snd);
    shm_conn_close(&rcv);
}

/* A peer publishes its last slice and says goodbye (which poisons the
 * connection) between the receiver's last look at the counter and its
 * check: the check callback plays that peer, on its first call. */
typedef struct {
    shm_conn_t *snd;
    int calls;
} late_ctx_t;

static ccl_result_t late_data_cb(void *arg, uint64_t waited_ns)
{
    late_ctx_t *c = arg;
    (void)waited_ns;
    if (c->calls++ == 0) {
        wait_policy_t nowait = {NULL, NULL, 0, 0, NULL, NULL};
        void *slot;
        if (shm_send_wait(c->snd, &nowait, &slot) != CCL_SUCCESS)
            return err_set(CCL_ERR_INTERNAL, "the test's send slot was not free");
        memcpy(slot, "last", 5);
        shm_send_post(c->snd, SHM_SLOT_DATA, 5);
        shm_conn_poison(c->snd, NULL);
    }
    /* A backstop, so that a wait that never ends shows up as a timeout. */
    return c->calls > 400 ? err_set(CCL_ERR_TIMEOUT, "test backstop") : CCL_SUCCESS;
}

static void test_data_before_poison_wins(void **state)
{
    (void)state;
    shm_conn_t rcv, snd;
    open_pair(&rcv, &snd, 4, 64);
    late_ctx_t ctx = {&snd, 0};
    wait_policy_t pol = {late_data_cb, &ctx, 0, 0, NULL, NULL};
    const void *slot = NULL;
    assert_int_equal(shm_recv_wait(&rcv, &pol, &slot), CCL_SUCCESS);
    assert_int_equal(ctx.calls, 1);
    assert_int_equal(shm_recv_len(&rcv), 5);
    assert_memory_equal(slot, "last", 5);
    shm_recv_done(&rcv);
    /* Nothing more will come: the next wait ends on the poison. */
    assert_int_equal(shm_recv_wait(&rcv, &pol, &slot), CCL_ERR_REMOTE);
    shm_conn_close(&snd);
    shm_conn_close(&rcv);
}

/* A two-rank board, both ends in this process; the name is gone again. */
static void open_board_pair(shm_board_t *b0, shm_board_t *b1, size_t slot_bytes)
{
    char name[SHM_NAME_MAX];
    assert_int_equal(shm_name_new(name, "/ccl-b"), CCL_SUCCESS);
    assert_int_equal(shm_board_create(b0, 2, slot_bytes, name), CCL_SUCCESS);
    assert_int_equal(shm_board_open(b1, name, 2, 1), CCL_SUCCESS);
    shm_name_unlink(name);
}

/* The one-shot board: a root posts its broadcast and leaves, then another
 * rank fails and poisons the board; a rank that comes late to the same
 * broadcast still finds the root's data there and completes. Its next
 * call, whose root never posts, fails on the poison. */
static void test_board_data_before_poison_wins(void **state)
{
    (void)state;
    shm_board_t b0, b1;
    open_board_pair(&b0, &b1, 64);
    check_ctx_t ctx = {.fail_with = CCL_ERR_TIMEOUT, .fail_after_ns = 3 * SEC}; /* backstop */
    wait_policy_t pol = {check_cb, &ctx, 0, 0, NULL, NULL};
    board_bank_t bank;
    assert_int_equal(shm_board_exchange(&b1, "root", 5, 64, BOARD_WAIT_NONE, 1, &pol, &bank), CCL_SUCCESS);
    shm_board_release(&b1);
    shm_board_poison(&b1);
    err_clear();
    assert_int_equal(shm_board_exchange(&b0, "", 1, 64, BOARD_WAIT_ROOT, 1, &pol, &bank), CCL_SUCCESS);
    assert_string_equal(shm_board_slot(&bank, 1), "root");
    shm_board_release(&b0);
    uint64_t t0 = clock_now_ns();
    assert_int_equal(shm_board_exchange(&b0, "", 1, 64, BOARD_WAIT_ROOT, 1, &pol, &bank), CCL_ERR_REMOTE);
    assert_true(ms_since(t0) < 1000.0);
    /* A root that would post into the poisoned board is told at once. */
    assert_int_equal(shm_board_exchange(&b1, "root", 5, 64, BOARD_WAIT_NONE, 1, &pol, &bank), CCL_ERR_REMOTE);
    shm_board_close(&b1);
    shm_board_close(&b0);
}

/* A broadcast's root posts and leaves, so it runs ahead of a reader that
 * is not there yet: through every announcement line (small inputs) or
 * slot area (large ones), and no further until the reader releases the
 * call that used the line or area last. The reader then finds every call's
 * data intact, in order. */
typedef struct {
    shm_board_t *b;
    size_t bytes, max_bytes;
    int calls;
    int mixed; /* call c posts runahead_mixed[c % 3] bytes instead */
    _Atomic int posted;
} runahead_t;

/* Inputs in the announcement line (short and full) and in an area. */
static const size_t runahead_mixed[3] = {8, BOARD_INLINE_BYTES, 200};

static size_t runahead_bytes(const runahead_t *r, int c) { return r->mixed ? runahead_mixed[c % 3] : r->bytes; }

static void *runahead_root(void *arg)
{
    runahead_t *r = arg;
    check_ctx_t ctx = {.fail_with = CCL_ERR_TIMEOUT, .fail_after_ns = 10 * SEC};
    wait_policy_t pol = {check_cb, &ctx, 0, 0, NULL, NULL};
    char data[256];
    for (int c = 0; c < r->calls; c++) {
        board_bank_t bank;
        memset(data, c + 1, sizeof data);
        size_t n = runahead_bytes(r, c);
        if (shm_board_exchange(r->b, data, n, r->mixed ? n : r->max_bytes, BOARD_WAIT_NONE, 1, &pol, &bank) != CCL_SUCCESS)
            break;
        shm_board_release(r->b);
        atomic_store(&r->posted, c + 1);
    }
    return NULL;
}

/* ahead: how many calls the root must get ahead by, and no further (-1:
 * mixed sizes, where the first area it cannot reuse stops it). */
static void board_runahead(size_t bytes, int ahead)
{
    shm_board_t b0, b1;
    open_board_pair(&b0, &b1, 256);
    runahead_t r = {&b1, bytes, bytes, (ahead < 0 ? 3 * BOARD_AREAS : ahead) + 40, ahead < 0, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, runahead_root, &r), 0);
    usleep(200 * 1000);
    /* Mixed: calls 2, 5, 8, ... take an area, so the root stops at the
     * first that needs one again (call 3 BOARD_AREAS + 2): the reader has
     * not released its previous user. */
    assert_int_equal(atomic_load(&r.posted), ahead < 0 ? 3 * BOARD_AREAS + 2 : ahead);
    check_ctx_t ctx = {.fail_with = CCL_ERR_TIMEOUT, .fail_after_ns = 10 * SEC};
    wait_policy_t pol = {check_cb, &ctx, 0, 0, NULL, NULL};
    for (int c = 0; c < r.calls; c++) {
        board_bank_t bank;
        char want[256];
        memset(want, c + 1, sizeof want);
        size_t n = runahead_bytes(&r, c);
        assert_int_equal(shm_board_exchange(&b0, NULL, 0, n, BOARD_WAIT_ROOT, 1, &pol, &bank), CCL_SUCCESS);
        assert_memory_equal(shm_board_slot(&bank, 1), want, n);
        shm_board_release(&b0);
    }
    pthread_join(th, NULL);
    assert_int_equal(atomic_load(&r.posted), r.calls);
    shm_board_close(&b1);
    shm_board_close(&b0);
}

static void test_board_runahead_inline(void **state)
{
    (void)state;
    board_runahead(BOARD_INLINE_BYTES, BOARD_POSTS);
}

static void test_board_runahead_areas(void **state)
{
    (void)state;
    board_runahead(200, BOARD_AREAS);
}

static void test_board_runahead_mixed(void **state)
{
    (void)state;
    board_runahead(0, -1);
}

int main(void)
{
    /* Expected failures below log at WARN; keep the log quiet unless the
     * caller chose a level. Environment set before any ccl call. */
    setenv("CCL_DEBUG", "NONE", 0);
    alarm(120); /* a hang is a failure, not a stuck test run */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_open_unlink),
        cmocka_unit_test(test_open_missing),
        cmocka_unit_test(test_open_corrupt),
        cmocka_unit_test(test_board_mode_and_corrupt_header),
        cmocka_unit_test(test_transfer_futex_only),
        cmocka_unit_test(test_transfer_spinning),
        cmocka_unit_test(test_transfer_few_slots),
        cmocka_unit_test(test_transfer_across_fork),
        cmocka_unit_test(test_drain_waits_for_receiver),
        cmocka_unit_test(test_poison_ends_receiver_wait),
        cmocka_unit_test(test_poison_ends_sender_wait),
        cmocka_unit_test(test_poison_before_wait),
        cmocka_unit_test(test_check_callback_ends_wait),
        cmocka_unit_test(test_data_before_poison_wins),
        cmocka_unit_test(test_board_data_before_poison_wins),
        cmocka_unit_test(test_board_runahead_inline),
        cmocka_unit_test(test_board_runahead_areas),
        cmocka_unit_test(test_board_runahead_mixed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
