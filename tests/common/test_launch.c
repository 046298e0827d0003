/*
 * test_launch.c - fork-N-ranks launcher with deadlines, a shared-memory
 * barrier and id exchange that do not depend on ccl; see test_launch.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "test_launch.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_common.h"

#define CASE_LEN 256
/* After one rank fails, how long the others may take to finish or report. */
#define GRACE_S 3.0
/* No barrier or id wait inside a test should take longer than this. */
#define SIDE_WAIT_S 120.0

struct tst_shared {
    int parent_id_state; /* 0 pending, 1 ready, -1 ccl_get_unique_id failed */
    ccl_unique_id_t parent_id;
    int barrier_count;
    int barrier_gen;
    int id_gen;
    ccl_unique_id_t id;
    int sigkilled[TST_MAX_RANKS]; /* set by tst_sigkill_self just before the signal */
    int nsigkilled;
    char current[TST_MAX_RANKS][CASE_LEN];
};

/* LeakSanitizer's entry point, present only in sanitizer builds. Ranks
 * leave with _exit (they must not run the parent's atexit handlers), which
 * skips the automatic leak check, so a rank asks for it explicitly. */
int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

static void side_wait_sleep(void)
{
    /* Polling with a short sleep: with up to 8 ranks on 2 cores, spinning
     * would starve the ranks doing real work. */
    usleep(200);
}

void tst_barrier(tst_ctx_t *ctx)
{
    tst_shared_t *sh = ctx->sh;
    int gen = __atomic_load_n(&sh->barrier_gen, __ATOMIC_ACQUIRE);
    int expected = ctx->nranks - __atomic_load_n(&sh->nsigkilled, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&sh->barrier_count, 1, __ATOMIC_ACQ_REL) == expected) {
        __atomic_store_n(&sh->barrier_count, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&sh->barrier_gen, gen + 1, __ATOMIC_RELEASE);
        return;
    }
    double deadline = tst_now() + SIDE_WAIT_S;
    while (__atomic_load_n(&sh->barrier_gen, __ATOMIC_ACQUIRE) == gen) {
        if (tst_now() > deadline)
            tst_fatal(ctx, "test barrier timed out (a peer is stuck or gone)");
        side_wait_sleep();
    }
}

void tst_sigkill_self(tst_ctx_t *ctx)
{
    tst_shared_t *sh = ctx->sh;
    snprintf(sh->current[ctx->rank], CASE_LEN, "killed itself with SIGKILL, as planned");
    __atomic_store_n(&sh->sigkilled[ctx->rank], 1, __ATOMIC_RELEASE);
    __atomic_add_fetch(&sh->nsigkilled, 1, __ATOMIC_ACQ_REL);
    fflush(stdout);
    fflush(stderr);
    for (;;)
        kill(getpid(), SIGKILL);
}

void tst_note_killed(tst_ctx_t *ctx, int rank)
{
    tst_shared_t *sh = ctx->sh;
    if (__atomic_exchange_n(&sh->sigkilled[rank], 1, __ATOMIC_ACQ_REL))
        return;
    __atomic_add_fetch(&sh->nsigkilled, 1, __ATOMIC_ACQ_REL);
}

void tst_share_id(tst_ctx_t *ctx, ccl_unique_id_t *id)
{
    tst_shared_t *sh = ctx->sh;
    int gen = ++ctx->id_calls;
    if (ctx->rank == 0) {
        TST_CCL(ctx, NULL, ccl_get_unique_id(id));
        memcpy(&sh->id, id, sizeof(*id));
        __atomic_store_n(&sh->id_gen, gen, __ATOMIC_RELEASE);
    } else {
        double deadline = tst_now() + SIDE_WAIT_S;
        while (__atomic_load_n(&sh->id_gen, __ATOMIC_ACQUIRE) < gen) {
            if (tst_now() > deadline)
                tst_fatal(ctx, "waiting for rank 0's unique id timed out");
            side_wait_sleep();
        }
        memcpy(id, &sh->id, sizeof(*id));
    }
    /* Nobody may overwrite the slot until every rank has copied it. */
    tst_barrier(ctx);
}

void tst_set_case(tst_ctx_t *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->sh->current[ctx->rank], CASE_LEN, fmt, ap);
    va_end(ap);
}

void tst_fail(tst_ctx_t *ctx, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    ctx->failures++;
    /* Cap the flood when one bug breaks hundreds of cases. */
    if (ctx->failures <= 20)
        fprintf(stderr, "%s rank %d/%d: FAIL %s\n", ctx->name, ctx->rank, ctx->nranks, msg);
    else if (ctx->failures == 21)
        fprintf(stderr, "%s rank %d/%d: (further failures not shown)\n", ctx->name, ctx->rank,
                ctx->nranks);
}

void tst_fatal(tst_ctx_t *ctx, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s rank %d/%d: FATAL %s (while: %s)\n", ctx->name, ctx->rank, ctx->nranks,
            msg, ctx->sh->current[ctx->rank]);
    fflush(stdout);
    fflush(stderr);
    _exit(3);
}

ccl_comm_t tst_comm_init_id(tst_ctx_t *ctx, ccl_unique_id_t id)
{
    ccl_comm_t comm = NULL;
    int n = -1, r = -1;
    if (tst_env_long("CCL_TEST_NONBLOCKING_INIT", 0)) {
        /* The whole test on comms from the nonblocking init, polled. */
        ccl_config_t config = CCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        tst_set_case(ctx, "nonblocking ccl_comm_init_rank_config(nranks=%d, rank=%d)", ctx->nranks, ctx->rank);
        ccl_result_t rc = ccl_comm_init_rank_config(&comm, ctx->nranks, id, ctx->rank, &config);
        if (rc != CCL_IN_PROGRESS || !comm)
            tst_fatal(ctx, "nonblocking init returned %s with comm %p: %s", ccl_get_error_string(rc), (void *)comm,
                      ccl_get_last_error(NULL));
        ccl_result_t async = CCL_IN_PROGRESS;
        while (async == CCL_IN_PROGRESS) {
            TST_CCL(ctx, comm, ccl_comm_get_async_error(comm, &async));
            if (async == CCL_IN_PROGRESS)
                usleep(500);
        }
        if (async != CCL_SUCCESS)
            tst_fatal(ctx, "nonblocking init failed: %s (%s)", ccl_get_error_string(async), ccl_get_last_error(comm));
    } else {
        tst_set_case(ctx, "ccl_comm_init_rank(nranks=%d, rank=%d)", ctx->nranks, ctx->rank);
        TST_CCL(ctx, NULL, ccl_comm_init_rank(&comm, ctx->nranks, id, ctx->rank));
        if (!comm)
            tst_fatal(ctx, "ccl_comm_init_rank succeeded but left comm NULL");
    }
    TST_CCL(ctx, comm, ccl_comm_count(comm, &n));
    TST_CCL(ctx, comm, ccl_comm_user_rank(comm, &r));
    if (n != ctx->nranks || r != ctx->rank)
        tst_fatal(ctx, "comm reports count %d rank %d, expected %d and %d", n, r, ctx->nranks,
                  ctx->rank);
    return comm;
}

ccl_comm_t tst_comm_init(tst_ctx_t *ctx)
{
    return tst_comm_init_id(ctx, ctx->id);
}

void tst_comm_destroy(tst_ctx_t *ctx, ccl_comm_t comm)
{
    tst_set_case(ctx, "ccl_comm_destroy");
    TST_CCL(ctx, comm, ccl_comm_destroy(comm));
}

/* Stacks of a stuck rank say more than any message; gdb is optional. */
static void dump_stacks(pid_t pid)
{
    char cmd[512];
    if (getenv("CCL_TEST_NO_GDB") || system("command -v gdb >/dev/null 2>&1") != 0)
        return;
    snprintf(cmd, sizeof(cmd),
             "timeout 30 gdb -p %d -batch -ex 'thread apply all bt' 2>/dev/null"
             " | grep -E '^(Thread|#)' | head -60 | sed 's/^/       /'",
             (int)pid);
    printf("     stacks of pid %d:\n", (int)pid);
    fflush(stdout);
    if (system(cmd) != 0)
        printf("       (gdb failed)\n");
}

static void describe_status(char *out, size_t len, int status)
{
    if (WIFEXITED(status))
        snprintf(out, len, "exited with %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, len, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(out, len, "status 0x%x", status);
}

int tst_sigkill_ok_rank = -1;

int tst_run_ranks(const char *name, int nranks, int timeout_s, tst_rank_fn fn, void *arg)
{
    pid_t pids[TST_MAX_RANKS];
    int status[TST_MAX_RANKS];
    int done[TST_MAX_RANKS] = {0};
    int killed[TST_MAX_RANKS] = {0};
    ccl_unique_id_t id;
    double t0 = tst_now();

    timeout_s = tst_timeout(timeout_s);
    if (nranks < 1 || nranks > TST_MAX_RANKS) {
        fprintf(stderr, "%s: bad rank count %d\n", name, nranks);
        return 1;
    }
    tst_shared_t *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    memset(sh, 0, sizeof(*sh));

    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    for (int r = 0; r < nranks; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            for (int k = 0; k < r; k++)
                kill(pids[k], SIGKILL);
            for (int k = 0; k < r; k++)
                waitpid(pids[k], NULL, 0);
            munmap(sh, sizeof(*sh));
            return 1;
        }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(4);
            /* Backstop in case the parent's own deadline logic is stuck. */
            alarm((unsigned)timeout_s + 15);
            tst_ctx_t ctx;
            memset(&ctx, 0, sizeof(ctx));
            ctx.rank = r;
            ctx.nranks = nranks;
            ctx.sh = sh;
            ctx.name = name;
            snprintf(sh->current[r], CASE_LEN, "waiting for the parent's unique id");
            double id_deadline = tst_now() + SIDE_WAIT_S;
            int state;
            while ((state = __atomic_load_n(&sh->parent_id_state, __ATOMIC_ACQUIRE)) == 0) {
                if (tst_now() > id_deadline)
                    tst_fatal(&ctx, "the parent's unique id never came");
                side_wait_sleep();
            }
            if (state < 0)
                _exit(5);
            memcpy(&ctx.id, &sh->parent_id, sizeof(ctx.id));
            snprintf(sh->current[r], CASE_LEN, "starting");
            int ret = fn(&ctx, arg);
            if (ret == 0 && ctx.failures)
                ret = 1;
            if (__lsan_do_recoverable_leak_check && __lsan_do_recoverable_leak_check()) {
                fprintf(stderr, "%s rank %d/%d: FAIL memory leaked (report above)\n", name, r,
                        nranks);
                ret = 1;
            }
            snprintf(sh->current[r], CASE_LEN, "finished (%d failures)", ctx.failures);
            fflush(stdout);
            fflush(stderr);
            _exit(ret ? 1 : 0);
        }
        pids[r] = pid;
    }

    ccl_result_t rc = ccl_get_unique_id(&id);
    if (rc != CCL_SUCCESS) {
        fprintf(stderr, "%s: ccl_get_unique_id: %s: %s\n", name, ccl_get_error_string(rc),
                ccl_get_last_error(NULL));
        __atomic_store_n(&sh->parent_id_state, -1, __ATOMIC_RELEASE);
        for (int r = 0; r < nranks; r++)
            waitpid(pids[r], NULL, 0);
        munmap(sh, sizeof(*sh));
        return 1;
    }
    memcpy(&sh->parent_id, &id, sizeof(id));
    __atomic_store_n(&sh->parent_id_state, 1, __ATOMIC_RELEASE);

    double deadline = t0 + timeout_s;
    double grace_end = 0.0;
    int remaining = nranks, failed = 0, timed_out = 0;
    while (remaining > 0) {
        int progressed = 0;
        for (int r = 0; r < nranks; r++) {
            if (done[r])
                continue;
            pid_t w = waitpid(pids[r], &status[r], WNOHANG);
            if (w == pids[r]) {
                done[r] = 1;
                remaining--;
                progressed = 1;
                int planned = WIFSIGNALED(status[r]) && WTERMSIG(status[r]) == SIGKILL &&
                              (r == tst_sigkill_ok_rank || __atomic_load_n(&sh->sigkilled[r], __ATOMIC_ACQUIRE));
                if (!planned && !(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0)) {
                    failed = 1;
                    if (grace_end == 0.0)
                        grace_end = tst_now() + GRACE_S;
                }
            } else if (w < 0 && errno != EINTR) {
                done[r] = 1;
                remaining--;
                status[r] = -1;
                failed = 1;
            }
        }
        if (remaining == 0)
            break;
        double now = tst_now();
        if (now > deadline || (grace_end != 0.0 && now > grace_end)) {
            timed_out = now > deadline;
            for (int r = 0; r < nranks; r++) {
                if (!done[r]) {
                    printf("     rank %d (pid %d) is stuck in: %s\n", r, (int)pids[r],
                           sh->current[r]);
                    dump_stacks(pids[r]);
                }
            }
            for (int r = 0; r < nranks; r++) {
                if (!done[r]) {
                    kill(pids[r], SIGKILL);
                    killed[r] = 1;
                }
            }
            for (int r = 0; r < nranks; r++) {
                if (!done[r]) {
                    waitpid(pids[r], &status[r], 0);
                    done[r] = 1;
                }
            }
            failed = 1;
            break;
        }
        if (!progressed)
            usleep(2000);
    }

    double dt = tst_now() - t0;
    if (!failed) {
        printf("ok   %s nranks=%d (%.2fs)\n", name, nranks, dt);
    } else {
        printf("FAIL %s nranks=%d (%.2fs)%s\n", name, nranks, dt,
               timed_out ? ": timed out" : "");
        for (int r = 0; r < nranks; r++) {
            char st[128];
            if (killed[r])
                snprintf(st, sizeof(st), "%s, killed by the launcher",
                         timed_out ? "still running at the deadline"
                                   : "still running after a peer failed");
            else if (status[r] == -1)
                snprintf(st, sizeof(st), "lost");
            else
                describe_status(st, sizeof(st), status[r]);
            printf("     rank %d: %s; last case: %s\n", r, st, sh->current[r]);
        }
    }
    fflush(stdout);
    munmap(sh, sizeof(*sh));
    return failed;
}

int tst_scenario_wanted(int argc, char **argv, const char *name)
{
    return argc < 2 || strcmp(argv[1], name) == 0;
}
