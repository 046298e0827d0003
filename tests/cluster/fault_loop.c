/*
 * fault_loop.c - the rank program of tests/cluster/faults.sh. Each rank is
 * started on its node by the script itself (no mpirun: Open MPI would kill
 * the whole job as soon as one rank dies, before the survivors could show
 * how they noticed). It joins a communicator through CCL_COMM_ID, rank and
 * size from PMI_RANK/PMI_SIZE (or Open MPI's variables), then runs blocking
 * allreduces of one size in a loop and checks every result, so that the
 * script can cut a link or kill a rank while data moves and then read, per
 * rank, how and when the failure surfaced.
 *
 *   fault_loop [-s BYTES] [-n CALLS] [-K CALL]
 *       -s  bytes per rank (default 16M), K/M/G suffixes
 *       -n  calls at most (default 1e9)
 *       -K  this rank SIGKILLs itself a quarter into call CALL (>= 2), timed by the
 *           call before it: a kill -9 that lands mid-collective every time,
 *           which a kill from outside, racing calls of a second or two, does
 *           not (the process dies as abruptly either way)
 *
 * Output on stdout, one flushed line per event (the script parses it):
 *   ready RANK HOST                       init and the first checked call done
 *   start RANK CALL                       a call begins (the first three only)
 *   done RANK CALL SECONDS                a call that passed (the first few,
 *                                         then one a second)
 *   failed RANK CALL EPOCH SECONDS CODE | MESSAGE
 *                                         a call failed: when it returned
 *                                         (CLOCK_REALTIME), how long it took,
 *                                         ccl's code and ccl_get_last_error
 *   aborted RANK SECONDS                  ccl_comm_abort afterwards, its time
 *   killing RANK CALL EPOCH               -K: the moment it kills itself
 * Exit status: 3 a call failed (what the fault scripts expect), 0 every call
 * passed, 2 a result was wrong, 1 setup failed.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ccl.h"

static double now_s(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int env_int(const char *a, const char *b, int *v)
{
    const char *s = getenv(a);
    if (!s)
        s = getenv(b);
    if (!s)
        return 0;
    *v = atoi(s);
    return 1;
}

static size_t parse_size(const char *s)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    switch (end && *end ? *end : ' ') {
    case 'G': case 'g': v <<= 30; break;
    case 'M': case 'm': v <<= 20; break;
    case 'K': case 'k': v <<= 10; break;
    default: break;
    }
    return (size_t)v;
}

typedef struct {
    int rank;
    long call;
    double delay_s;
} suicide_t;

static void *suicide_main(void *arg)
{
    const suicide_t *k = arg;
    struct timespec ts = {(time_t)k->delay_s, (long)((k->delay_s - (double)(time_t)k->delay_s) * 1e9)};
    nanosleep(&ts, NULL);
    printf("killing %d %ld %.3f\n", k->rank, k->call, now_s(CLOCK_REALTIME));
    fflush(stdout);
    kill(getpid(), SIGKILL);
    return NULL;
}

/* Every element of the sum must be nranks (nranks + 1) / 2: each rank
 * contributes rank + 1 everywhere, exact in float for any rank count here. */
static long first_wrong(const float *buf, size_t count, float want)
{
    for (size_t i = 0; i < count; i++)
        if (buf[i] != want)
            return (long)i;
    return -1;
}

int main(int argc, char **argv)
{
    size_t bytes = 16u << 20;
    long max_calls = 1000000000L, kill_call = 0;
    int opt, rank = -1, nranks = -1;
    while ((opt = getopt(argc, argv, "s:n:K:")) != -1) {
        if (opt == 's')
            bytes = parse_size(optarg);
        else if (opt == 'n')
            max_calls = atol(optarg);
        else if (opt == 'K' && atol(optarg) >= 2)
            kill_call = atol(optarg);
        else {
            fprintf(stderr, "usage: %s [-s BYTES] [-n CALLS] [-K CALL>=2]\n", argv[0]);
            return 1;
        }
    }
    if (!env_int("PMI_RANK", "OMPI_COMM_WORLD_RANK", &rank) ||
        !env_int("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", &nranks) || rank < 0 || rank >= nranks ||
        !getenv("CCL_COMM_ID")) {
        fprintf(stderr, "fault_loop: set PMI_RANK, PMI_SIZE and CCL_COMM_ID\n");
        return 1;
    }
    size_t count = bytes / sizeof(float);
    if (count == 0) {
        fprintf(stderr, "fault_loop: -s %zu is less than one float\n", bytes);
        return 1;
    }
    char host[256] = "?";
    gethostname(host, sizeof host);

    ccl_unique_id_t id;
    ccl_comm_t comm = NULL;
    ccl_result_t res = ccl_get_unique_id(&id);
    if (res == CCL_SUCCESS)
        res = ccl_comm_init_rank(&comm, nranks, id, rank);
    if (res != CCL_SUCCESS) {
        fprintf(stderr, "fault_loop: rank %d: init failed: %s: %s\n", rank, ccl_get_error_string(res),
                ccl_get_last_error(NULL));
        return 1;
    }
    float *send = NULL, *recv = NULL;
    if (posix_memalign((void **)&send, 4096, count * sizeof(float)) != 0 ||
        posix_memalign((void **)&recv, 4096, count * sizeof(float)) != 0) {
        fprintf(stderr, "fault_loop: rank %d: out of memory for 2 x %zu bytes\n", rank, bytes);
        return 1;
    }
    for (size_t i = 0; i < count; i++)
        send[i] = (float)(rank + 1);
    const float want = (float)nranks * (float)(nranks + 1) / 2.0f;

    int status = 0;
    double last_print = 0, last_took = 0;
    suicide_t suicide = {rank, kill_call, 0};
    for (long call = 1; call <= max_calls; call++) {
        memset(recv, 0, count * sizeof(float)); /* a call that does nothing must not pass */
        if (call <= 3) {
            printf("start %d %ld\n", rank, call);
            fflush(stdout);
        }
        if (call == kill_call) {
            pthread_t t;
            suicide.delay_s = 0.25 * last_took; /* calls vary: 4x margin */
            if (pthread_create(&t, NULL, suicide_main, &suicide) != 0) {
                fprintf(stderr, "fault_loop: rank %d: cannot start the thread for -K\n", rank);
                return 1;
            }
        }
        double t0 = now_s(CLOCK_MONOTONIC);
        res = ccl_allreduce(send, recv, count, CCL_FLOAT32, CCL_SUM, comm, NULL);
        double t1 = now_s(CLOCK_MONOTONIC);
        last_took = t1 - t0;
        if (res != CCL_SUCCESS) {
            printf("failed %d %ld %.3f %.3f %s | %s\n", rank, call, now_s(CLOCK_REALTIME), t1 - t0,
                   ccl_get_error_string(res), ccl_get_last_error(comm));
            fflush(stdout);
            status = 3;
            break;
        }
        long bad = first_wrong(recv, count, want);
        if (bad >= 0) {
            printf("wrong %d %ld element %ld is %g, expected %g\n", rank, call, bad, (double)recv[bad],
                   (double)want);
            fflush(stdout);
            status = 2;
            break;
        }
        if (call == 1) {
            printf("ready %d %s\n", rank, host);
            last_print = t1;
        }
        if (call <= 3 || t1 - last_print >= 1.0) {
            printf("done %d %ld %.3f\n", rank, call, t1 - t0);
            last_print = t1;
        }
        fflush(stdout);
    }
    if (status == 3) {
        double t0 = now_s(CLOCK_MONOTONIC);
        res = ccl_comm_abort(comm);
        printf("aborted %d %.3f%s%s\n", rank, now_s(CLOCK_MONOTONIC) - t0, res == CCL_SUCCESS ? "" : " ",
               res == CCL_SUCCESS ? "" : ccl_get_error_string(res));
    } else {
        res = ccl_comm_destroy(comm);
        if (res != CCL_SUCCESS && status == 0) {
            fprintf(stderr, "fault_loop: rank %d: destroy failed: %s\n", rank, ccl_get_error_string(res));
            status = 1;
        }
    }
    fflush(stdout);
    free(send);
    free(recv);
    return status;
}
