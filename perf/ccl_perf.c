/*
 * ccl_perf.c - main of ccl-perf: decides how this process becomes one or more
 * ranks, sets each rank up (communicator, buffers, stream) and hands it to
 * the benchmark (ccl_perf_bench.c).
 *
 * Launch modes:
 *   forked    no launcher in the environment: the process forks --np ranks
 *             (default 2), gives them one unique id and supervises them;
 *   launcher  one rank per process, rank and size from the launcher's
 *             variables; the ranks meet at CCL_COMM_ID or, in a `make MPI=1`
 *             build, through an MPI_Bcast of the unique id.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef CCL_PERF_WITH_MPI
#include <mpi.h>
#endif

#include "ccl_perf.h"

#define GiB (1024.0 * 1024 * 1024)
/* Besides our buffers: the library's own per-rank buffers, and the rest of
 * the system. Pre-touched memory that does not fit gets ranks OOM-killed. */
#define RANK_OVERHEAD_BYTES (64ull << 20)
#define HEADROOM_BYTES (256ull << 20)
/* MemAvailable is a snapshot on a machine others use too. */
#define USABLE_PERCENT 90
/* After one forked rank fails, how long the others get to report their own
 * error before they are killed. */
#define FAIL_GRACE_NS (5ll * 1000000000)

/* ---- memory check --------------------------------------------------------- */

static unsigned long long mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kib = 0;
    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
            break;
    fclose(f);
    return kib * 1024;
}

/* 1 when `local` ranks' buffers fit in MemAvailable (or it is unknown);
 * otherwise 0 and a message with the numbers in msg. */
static int memory_fits(const struct perf_args *a, int nranks, int local, char *msg, size_t len)
{
    size_t each = perf_buffer_bytes(a, nranks);
    unsigned long long avail = mem_available();
    unsigned long long usable = avail / 100 * USABLE_PERCENT;
    unsigned long long buffers = 2ull * each;
    unsigned long long extra = local * RANK_OVERHEAD_BYTES + HEADROOM_BYTES;
    unsigned long long need = local * buffers + extra;
    if (!avail || need <= usable)
        return 1;
    snprintf(msg, len,
             "ccl-perf: -e %zu (%.2f GiB) does not fit: %d local rank%s x %.2f GiB of "
             "send+recv buffers + %.2f GiB headroom = %.2f GiB, but MemAvailable is %.2f GiB "
             "(of which ccl-perf uses at most %d%%); lower -e or the number of ranks\n",
             a->max_bytes, a->max_bytes / GiB, local, local == 1 ? "" : "s", buffers / GiB,
             extra / GiB, need / GiB, avail / GiB, USABLE_PERCENT);
    return 0;
}

/* ---- one rank ----------------------------------------------------------- */

static void read_line_file(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    buf[0] = '\0';
    if (f) {
        if (fgets(buf, (int)len, f))
            buf[strcspn(buf, "\n")] = '\0';
        fclose(f);
    }
}

static void gather_rank_info(struct perf_ctx *x, struct perf_rank_info *all)
{
    struct perf_rank_info me;
    memset(&me, 0, sizeof(me));
    me.pid = (int32_t)getpid();
    gethostname(me.host, sizeof(me.host) - 1);
    read_line_file("/proc/sys/kernel/random/boot_id", me.boot_id, sizeof(me.boot_id));
    ccl_result_t res = ccl_allgather(&me, all, sizeof(me), CCL_UINT8, x->comm, NULL);
    if (res != CCL_SUCCESS)
        perf_die(x, "ccl_allgather", res);
}

static int same_machine(const struct perf_rank_info *p, const struct perf_rank_info *q)
{
    return strcmp(p->host, q->host) == 0 && strcmp(p->boot_id, q->boot_id) == 0;
}

/* All ranks agree on the verdict, so none is left waiting in a collective;
 * the first rank of each machine that does not fit says why. */
static int check_memory(struct perf_ctx *x, const struct perf_rank_info *all)
{
    int local = 0, lowest_local = 1; /* no rank below us on this machine */
    char msg[512];
    for (int r = 0; r < x->nranks; r++)
        if (same_machine(&all[r], &all[x->rank])) {
            local++;
            lowest_local &= r >= x->rank;
        }
    int fits = memory_fits(x->a, x->nranks, local, msg, sizeof(msg));
    if (perf_allreduce_i64(x, fits, CCL_MIN))
        return 1;
    if (!fits && lowest_local)
        fputs(msg, stderr);
    return 0;
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* Host buffers always (inputs are filled and results checked there);
 * with -m device, device buffers of the same size for the calls. */
static void alloc_buffers(struct perf_ctx *x, int local_rank)
{
    size_t bytes = perf_buffer_bytes(x->a, x->nranks);
    /* Room for the count-1 support probe (ccl_perf_bench.c) at any -e. */
    size_t floor_bytes = 4096 + (size_t)x->nranks * 8;
    x->send_cap = x->recv_cap = round_up(bytes > floor_bytes ? bytes : floor_bytes, 4096);
    ccl_result_t res = ccl_mem_alloc(&x->hsend, x->send_cap);
    if (res == CCL_SUCCESS)
        res = ccl_mem_alloc(&x->hrecv, x->recv_cap);
    if (res != CCL_SUCCESS)
        perf_die(x, "ccl_mem_alloc", res);
    memset(x->hsend, PERF_FILL_BYTE, x->send_cap);
    memset(x->hrecv, PERF_FILL_BYTE, x->recv_cap);
    x->send = x->hsend;
    x->recv = x->hrecv;
    if (x->a->mem == PERF_MEM_DEVICE)
        perf_dev_setup(x, local_rank);
}

static void release(struct perf_ctx *x)
{
    ccl_result_t res = CCL_SUCCESS;
    if (x->stream && x->device < 0 && (res = ccl_stream_destroy(x->stream)) != CCL_SUCCESS)
        perf_die(x, "ccl_stream_destroy", res);
    if (x->device >= 0)
        perf_dev_release(x);
    if (x->hsend)
        ccl_mem_free(x->hsend);
    if (x->hrecv)
        ccl_mem_free(x->hrecv);
    if ((res = ccl_comm_destroy(x->comm)) != CCL_SUCCESS)
        perf_die(x, "ccl_comm_destroy", res);
}

/* This rank's index among the ranks of its machine. */
static int local_rank_of(const struct perf_ctx *x, const struct perf_rank_info *all)
{
    int local = 0;
    for (int r = 0; r < x->rank; r++)
        local += same_machine(&all[r], &all[x->rank]);
    return local;
}

/* -m: every rank must agree, since a rank with host buffers and one with
 * device buffers time different things. Default: device when all ranks
 * can; -m device where one cannot is an error, said by the ranks that
 * cannot. Returns 0 to go on. */
static int choose_memory(struct perf_ctx *x, struct perf_args *a)
{
    char why[256] = "";
    if (a->mem == PERF_MEM_HOST)
        return 0;
    int can = perf_dev_available(why, sizeof why);
    int all = (int)perf_allreduce_i64(x, can, CCL_MIN);
    if (a->mem == PERF_MEM_AUTO) {
        a->mem = all ? PERF_MEM_DEVICE : PERF_MEM_HOST;
        return 0;
    }
    if (all)
        return 0;
    if (!can)
        fprintf(stderr, "ccl-perf: rank %d: -m device: %s\n", x->rank, why);
    return 1;
}

/* The life of one rank; returns its exit status. */
static int run_rank(const struct perf_args *a, int nranks, int rank, ccl_unique_id_t id,
                    const char *desc)
{
    struct perf_ctx x;
    memset(&x, 0, sizeof(x));
    struct perf_args args = *a; /* -m is settled per run, below */
    x.a = &args;
    x.rank = rank;
    x.nranks = nranks;
    x.device = -1;
    ccl_result_t res = ccl_comm_init_rank(&x.comm, nranks, id, rank);
    if (res != CCL_SUCCESS)
        perf_die(&x, "ccl_comm_init_rank", res);

    struct perf_rank_info *ranks = calloc((size_t)nranks, sizeof(*ranks));
    if (!ranks) {
        fprintf(stderr, "ccl-perf: rank %d: out of memory\n", rank);
        return EXIT_FAILURE;
    }
    gather_rank_info(&x, ranks);
    int rc = 2;
    if (choose_memory(&x, &args)) {
        rc = EXIT_FAILURE;
    } else if (check_memory(&x, ranks)) {
        alloc_buffers(&x, local_rank_of(&x, ranks));
        if (x.device >= 0)
            x.stream = a->blocking ? NULL : (ccl_stream_t)x.cuda_stream;
        else if (!a->blocking && (res = ccl_stream_create(&x.stream)) != CCL_SUCCESS)
            perf_die(&x, "ccl_stream_create", res);
        rc = perf_bench(&x, desc, ranks);
    }
    free(ranks);
    release(&x);
    return rc;
}

/* ---- forked ranks ----------------------------------------------------------- */

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Like mpirun's default binding: with no more ranks than CPUs, rank r runs
 * on the r-th allowed CPU. Forked children otherwise start on the parent's
 * CPU and wait for the load balancer, which skews the first timed rows.
 * --bind none leaves placement to the kernel. */
static void bind_rank(const struct perf_args *a, int n, int rank)
{
    cpu_set_t allowed, one;
    if (!a->bind || sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < n)
        return;
    for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed) || seen++ != rank)
            continue;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        sched_setaffinity(0, sizeof one, &one); /* best effort, like a launcher */
        return;
    }
}

/* Child side: waits for the id on the pipe, then is rank `rank`. */
static void __attribute__((noreturn)) child_main(const struct perf_args *a, int n, int rank, int rfd,
                                                 pid_t parent, const char *desc)
{
    ccl_unique_id_t id;
    size_t got = 0;
    /* Do not outlive a killed parent, which would leave ranks waiting. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(EXIT_FAILURE);
    while (got < sizeof(id)) {
        ssize_t r = read(rfd, id.internal + got, sizeof(id) - got);
        if (r <= 0 && !(r < 0 && errno == EINTR))
            _exit(EXIT_FAILURE); /* the parent failed and said why */
        got += r > 0 ? (size_t)r : 0;
    }
    close(rfd);
    bind_rank(a, n, rank);
    exit(run_rank(a, n, rank, id, desc));
}

static int rank_of(const pid_t *pids, int n, pid_t p)
{
    for (int r = 0; r < n; r++)
        if (pids[r] == p)
            return r;
    return -1;
}

static int exit_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : EXIT_FAILURE;
}

static void kill_all(pid_t *pids, int n)
{
    for (int r = 0; r < n; r++)
        if (pids[r] > 0)
            kill(pids[r], SIGKILL);
}

/* Waits for every child. After the first failure the others get a grace
 * period to report their own errors, then are killed rather than waited on.
 * Returns the first failing child's status, or 0. */
static int supervise(pid_t *pids, int n)
{
    int alive = n, first_bad = 0, killed = 0;
    int64_t deadline = 0;
    while (alive > 0) {
        int status;
        pid_t p = waitpid(-1, &status, deadline && !killed ? WNOHANG : 0);
        if (p < 0 && errno == EINTR)
            continue;
        if (p < 0)
            break;
        if (p == 0) {
            if (mono_ns() >= deadline) {
                fprintf(stderr, "ccl-perf: stopping the %d rank%s still running\n", alive,
                        alive == 1 ? "" : "s");
                kill_all(pids, n);
                killed = 1;
            } else {
                nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
            }
            continue;
        }
        int r = rank_of(pids, n, p);
        if (r < 0)
            continue;
        pids[r] = 0;
        alive--;
        int code = exit_code(status);
        if (code && WIFSIGNALED(status) && !killed)
            fprintf(stderr, "ccl-perf: rank %d (pid %d) was killed by signal %d (%s)\n", r,
                    (int)p, WTERMSIG(status), strsignal(WTERMSIG(status)));
        if (code && !first_bad) {
            first_bad = code;
            /* A crashed rank cannot answer its peers: do not wait for them. */
            deadline = mono_ns() + (WIFSIGNALED(status) ? 0 : FAIL_GRACE_NS);
        }
    }
    return first_bad;
}

/* Forks first and creates the id afterwards, so no child inherits the
 * bootstrap root's threads; one pipe carries a copy of the id to each child
 * (writes of one id are atomic, so each read gets a whole one). */
static int run_forked(const struct perf_args *a, int n)
{
    char msg[512], desc[64];
    if (!memory_fits(a, n, n, msg, sizeof(msg))) {
        fputs(msg, stderr);
        return 2;
    }
    snprintf(desc, sizeof(desc), "%d rank%s (forked)", n, n == 1 ? "" : "s");
    int fds[2];
    pid_t *pids = calloc((size_t)n, sizeof(*pids));
    if (!pids || pipe(fds) != 0) {
        perror("ccl-perf: pipe");
        free(pids);
        return EXIT_FAILURE;
    }
    fflush(NULL);
    pid_t parent = getpid();
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            free(pids); /* the parent's; a rank leaves through exit() */
            close(fds[1]);
            child_main(a, n, r, fds[0], parent, desc);
        }
        if (pids[r] < 0) {
            perror("ccl-perf: fork");
            close(fds[1]); /* started children read EOF and exit */
            supervise(pids, r);
            free(pids);
            return EXIT_FAILURE;
        }
    }
    close(fds[0]);

    ccl_unique_id_t id;
    ccl_result_t res = ccl_get_unique_id(&id);
    if (res != CCL_SUCCESS)
        fprintf(stderr, "ccl-perf: ccl_get_unique_id failed: %s: %s\n",
                ccl_get_error_string(res), ccl_get_last_error(NULL));
    for (int r = 0; r < n && res == CCL_SUCCESS; r++)
        if (write(fds[1], &id, sizeof(id)) != (ssize_t)sizeof(id)) {
            perror("ccl-perf: write");
            res = CCL_ERR_SYSTEM;
        }
    close(fds[1]);
    int rc = supervise(pids, n);
    free(pids);
    return res != CCL_SUCCESS ? EXIT_FAILURE : rc;
}

/* ---- one rank per process, under a launcher ----------------------------- */

struct launcher {
    const char *vars; /* e.g. "RANK/WORLD_SIZE", for messages */
    int rank, size;
};

static int env_int(const char *name, int *out)
{
    const char *s = getenv(name);
    char *end;
    if (!s || !*s)
        return 0;
    long v = strtol(s, &end, 10);
    if (*end || v < 0 || v > 1 << 24)
        return -1;
    *out = (int)v;
    return 1;
}

/* 1 found, 0 none, -1 malformed (message printed). */
static int detect_launcher(struct launcher *l)
{
    static const char *const pairs[][3] = {
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK/SIZE"},
        {"PMI_RANK", "PMI_SIZE", "PMI_RANK/PMI_SIZE"},
        {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_PROCID/SLURM_NTASKS"},
        {"RANK", "WORLD_SIZE", "RANK/WORLD_SIZE"},
    };
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        int hr = env_int(pairs[i][0], &l->rank), hs = env_int(pairs[i][1], &l->size);
        if (hr == 0 || hs == 0)
            continue;
        l->vars = pairs[i][2];
        if (hr < 0 || hs < 0 || l->size < 1 || l->rank >= l->size) {
            fprintf(stderr, "ccl-perf: %s=%s/%s is not a valid rank/size\n", l->vars,
                    getenv(pairs[i][0]), getenv(pairs[i][1]));
            return -1;
        }
        return 1;
    }
    return 0;
}

#ifdef CCL_PERF_WITH_MPI
/* Rank 0 creates the id and MPI carries it; MPI's rank and size win. */
static int mpi_share_id(struct launcher *l, int *argc, char ***argv, ccl_unique_id_t *id)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &l->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &l->size);
    if (l->rank == 0) {
        ccl_result_t res = ccl_get_unique_id(id);
        if (res != CCL_SUCCESS) {
            fprintf(stderr, "ccl-perf: rank 0: ccl_get_unique_id failed: %s: %s\n",
                    ccl_get_error_string(res), ccl_get_last_error(NULL));
            MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE);
        }
    }
    MPI_Bcast(id, (int)sizeof(*id), MPI_BYTE, 0, MPI_COMM_WORLD);
    return 1;
}
#endif

/* Every rank builds the id itself when CCL_COMM_ID names the root. */
static int share_id(struct launcher *l, int *argc, char ***argv, ccl_unique_id_t *id,
                    const char **how)
{
    (void)argc;
    (void)argv;
    if (getenv("CCL_COMM_ID") || l->size == 1) {
        *how = getenv("CCL_COMM_ID") ? "CCL_COMM_ID" : "single rank";
        ccl_result_t res = ccl_get_unique_id(id);
        if (res == CCL_SUCCESS)
            return 1;
        fprintf(stderr, "ccl-perf: rank %d: ccl_get_unique_id failed: %s: %s\n", l->rank,
                ccl_get_error_string(res), ccl_get_last_error(NULL));
        return 0;
    }
#ifdef CCL_PERF_WITH_MPI
    *how = "MPI";
    return mpi_share_id(l, argc, argv, id);
#else
    fprintf(stderr,
            "ccl-perf: rank %d of %d (from %s): the ranks need a common unique id, but this "
            "ccl-perf has no way to share one: set CCL_COMM_ID=host:port (the same on every "
            "rank; rank 0 listens there), or rebuild with `make MPI=1` and run under mpirun\n",
            l->rank, l->size, l->vars);
    return 0;
#endif
}

static int run_launched(const struct perf_args *a, struct launcher *l, int *argc, char ***argv)
{
    ccl_unique_id_t id;
    const char *how = "";
    char desc[128];
    if (!share_id(l, argc, argv, &id, &how))
        return EXIT_FAILURE;
    snprintf(desc, sizeof(desc), "%d rank%s (%s, %s)", l->size, l->size == 1 ? "" : "s",
             l->vars, how);
    int rc = run_rank(a, l->size, l->rank, id, desc);
#ifdef CCL_PERF_WITH_MPI
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited)
        MPI_Finalize();
#endif
    return rc;
}

int main(int argc, char **argv)
{
    struct perf_args a;
    struct launcher l;
    int done;
    /* Whole lines, so forked ranks' output does not interleave mid-line. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    int rc = perf_parse_args(argc, argv, &a, &done);
    if (rc || done)
        return rc;
    int launched = detect_launcher(&l);
    if (launched < 0)
        return EXIT_FAILURE;
    if (launched && a.np) {
        fprintf(stderr,
                "ccl-perf: --np forks local ranks, but %s says this process is already rank "
                "%d of %d; drop --np (or unset %s)\n",
                l.vars, l.rank, l.size, l.vars);
        return EXIT_FAILURE;
    }
    if (launched)
        return run_launched(&a, &l, &argc, &argv);
    return run_forked(&a, a.np ? a.np : 2);
}
