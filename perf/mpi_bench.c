/*
 * mpi-bench: the MPI reference point for ccl-perf.
 *
 * Times one MPI collective over a range of sizes with the method of nccl-tests
 * and prints nccl-tests' table, so the same parser (perf/compare.sh) reads
 * ccl-perf and this program alike. It measures what an ordinary MPI user
 * gets: buffers come from plain malloc (glibc's hugetlb tunable, when set,
 * changes how those are backed), the collective is called with no tuning.
 *
 *   mpirun -np 2 build/bin/mpi-bench -C allreduce -b 8 -e 64M -f 2
 *
 * Method, per size (as nccl-tests' TimeTest/BenchTime):
 *   - send and receive buffers are allocated once at the maximum size and
 *     filled once before anything is timed, so no page fault lands in a
 *     timed call; with 0x3f bytes, as ccl-perf's (PERF_FILL_BYTE): on the
 *     project's VMs zeros copied up to 3x faster than other data;
 *   - warm-up calls, then a barrier, then n calls timed together; the time
 *     of one call is elapsed/n, and the reported time is the maximum over
 *     ranks (-a chooses another reduction);
 *   - iteration i works at offset (i mod (max/size)) * size inside the big
 *     buffers, as nccl-tests does, so small sizes are not all served from
 *     the same cache lines;
 *   - out-of-place, then in-place (MPI_IN_PLACE) with the same layout as
 *     nccl-tests' in-place mode;
 *   - with -c 1 (default) one more call on known data is checked, and the
 *     number of wrong elements summed over ranks is printed.
 * Warm-up runs at every size (nccl-tests warms only the largest and the
 * smallest): MPI libraries switch protocol by size and a first call of each
 * protocol may set up state (registrations, fragments) that a steady-state
 * figure should not include.
 *
 * Sizes follow nccl-tests: the size column is max(send bytes, receive bytes)
 * (for allgather the total received), the count column is the count passed
 * to the collective (per rank for allgather, reduce_scatter, alltoall,
 * gather, scatter). algbw = size / time; busbw = algbw * factor, the factor
 * being 2(n-1)/n for allreduce, (n-1)/n for allgather, reduce_scatter,
 * alltoall, gather and scatter, and 1 for broadcast, reduce and sendrecv.
 *
 * sendrecv is ccl-perf's ring shift: every rank sends to rank+1 and receives
 * from rank-1, here with MPI_Sendrecv (in place: MPI_Sendrecv_replace).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>

#include <ctype.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_size.h"

/* Every byte of both buffers before anything is timed (ccl-perf: PERF_FILL_BYTE). */
#define MPI_BENCH_FILL_BYTE 0x3f

enum coll {
    COLL_ALLREDUCE,
    COLL_ALLGATHER,
    COLL_REDUCE_SCATTER,
    COLL_BROADCAST,
    COLL_REDUCE,
    COLL_ALLTOALL,
    COLL_GATHER,
    COLL_SCATTER,
    COLL_SENDRECV,
};

static const struct {
    const char *name;
    enum coll coll;
    int reduces; /* has a reduction operator (else redop prints "none") */
    int rooted;  /* has a root (else root prints -1) */
} colls[] = {
    {"allreduce", COLL_ALLREDUCE, 1, 0},
    {"allgather", COLL_ALLGATHER, 0, 0},
    {"reduce_scatter", COLL_REDUCE_SCATTER, 1, 0},
    {"broadcast", COLL_BROADCAST, 0, 1},
    {"reduce", COLL_REDUCE, 1, 1},
    {"alltoall", COLL_ALLTOALL, 0, 0},
    {"gather", COLL_GATHER, 0, 1},
    {"scatter", COLL_SCATTER, 0, 1},
    {"sendrecv", COLL_SENDRECV, 0, 0},
};
#define NCOLLS (sizeof(colls) / sizeof(colls[0]))

/* Element types: float32 and int32, both 4 bytes, so the layout code below
 * works in elements of 4 bytes whatever the type. */
enum dtype { DT_FLOAT, DT_INT32 };
enum redop { OP_SUM, OP_MAX, OP_MIN };

struct opts {
    int ci; /* index in colls[] */
    size_t minbytes, maxbytes, stepbytes, stepfactor;
    int iters, warmup, check, root, rotate;
    int cycles; /* -N: times the whole size sweep runs and prints (nccl-tests' run_cycles) */
    int average; /* 0 rank 0, 1 mean, 2 min, 3 max (nccl-tests' -a) */
    enum dtype dt;
    enum redop op;
};

/* Per-size element counts, as nccl-tests' *GetCollByteCount. */
struct layout {
    size_t sendcount, recvcount, paramcount;
    size_t send_inplace_off, recv_inplace_off; /* elements, times rank */
};

static int rank, nranks;

static void die(const char *msg)
{
    if (rank == 0) fprintf(stderr, "mpi-bench: %s\n", msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

static struct layout get_layout(enum coll c, size_t count)
{
    size_t n = (size_t)nranks;
    struct layout l = {count, count, count, 0, 0};
    switch (c) {
    case COLL_ALLREDUCE:
    case COLL_BROADCAST:
    case COLL_REDUCE:
    case COLL_SENDRECV:
        break;
    case COLL_ALLGATHER:
    case COLL_GATHER:
        l.sendcount = count / n;
        l.recvcount = (count / n) * n;
        l.paramcount = count / n;
        l.send_inplace_off = count / n;
        break;
    case COLL_REDUCE_SCATTER:
    case COLL_SCATTER:
        l.sendcount = (count / n) * n;
        l.recvcount = count / n;
        l.paramcount = count / n;
        l.recv_inplace_off = count / n;
        break;
    case COLL_ALLTOALL:
        l.sendcount = (count / n) * n;
        l.recvcount = (count / n) * n;
        l.paramcount = count / n;
        break;
    }
    return l;
}

static double bus_factor(enum coll c)
{
    double n = nranks;
    switch (c) {
    case COLL_ALLREDUCE: return 2.0 * (n - 1) / n;
    case COLL_BROADCAST:
    case COLL_REDUCE:
    case COLL_SENDRECV: return 1.0;
    default: return (n - 1) / n;
    }
}

/* Input element i of rank r. Small non-negative integers, so sums over up to
 * 2^18 ranks stay exact in float32 and any summation order gives the same
 * bits; the rank term makes misplaced blocks visible. */
static int gen(int r, size_t i)
{
    return (int)(((size_t)r * 13 + i * 7) % 64);
}

static int fold(enum redop op, int a, int b)
{
    switch (op) {
    case OP_MAX: return a > b ? a : b;
    case OP_MIN: return a < b ? a : b;
    default: return a + b;
    }
}

/* The reduction over ranks of element i. */
static int reduced(enum redop op, size_t i)
{
    int v = gen(0, i);
    for (int r = 1; r < nranks; r++) v = fold(op, v, gen(r, i));
    return v;
}

static void fill(enum dtype dt, void *buf, size_t n, int r, size_t base)
{
    if (dt == DT_FLOAT) {
        float *f = buf;
        for (size_t i = 0; i < n; i++) f[i] = (float)gen(r, base + i);
    } else {
        int32_t *p = buf;
        for (size_t i = 0; i < n; i++) p[i] = gen(r, base + i);
    }
}

static int64_t count_wrong(enum dtype dt, const void *buf, size_t n,
                           int (*want)(size_t, const void *), const void *ctx)
{
    int64_t wrong = 0;
    for (size_t i = 0; i < n; i++) {
        int w = want(i, ctx);
        if (dt == DT_FLOAT ? ((const float *)buf)[i] != (float)w
                           : ((const int32_t *)buf)[i] != w)
            wrong++;
    }
    return wrong;
}

/* Expected-value callbacks for count_wrong; ctx carries what they need. */
struct want_ctx {
    enum redop op;
    int r;       /* a source rank */
    size_t base; /* element offset in the source rank's input */
    size_t block;
};
static int want_reduced(size_t i, const void *c)
{
    const struct want_ctx *w = c;
    return reduced(w->op, w->base + i);
}
static int want_gen(size_t i, const void *c)
{
    const struct want_ctx *w = c;
    return gen(w->r, w->base + i);
}
/* Concatenation of every rank's block: gathered data, block r from rank r. */
static int want_blocks(size_t i, const void *c)
{
    const struct want_ctx *w = c;
    return gen((int)(i / w->block), w->base + i % w->block);
}

static MPI_Datatype mpi_type(enum dtype dt) { return dt == DT_FLOAT ? MPI_FLOAT : MPI_INT; }
static MPI_Op mpi_op(enum redop op) { return op == OP_MAX ? MPI_MAX : op == OP_MIN ? MPI_MIN : MPI_SUM; }

/* One collective call. send/recv already include the rotation shift; in
 * place, the pointers are placed as nccl-tests places them and MPI_IN_PLACE
 * is passed where MPI defines it. */
static void run_coll(const struct opts *o, const struct layout *l, char *send, char *recv, int inplace)
{
    MPI_Datatype t = mpi_type(o->dt);
    MPI_Op op = mpi_op(o->op);
    MPI_Comm w = MPI_COMM_WORLD;
    int root = o->root;
    int pc = (int)l->paramcount;
    switch (colls[o->ci].coll) {
    case COLL_ALLREDUCE:
        MPI_Allreduce(inplace ? MPI_IN_PLACE : send, recv, pc, t, op, w);
        break;
    case COLL_ALLGATHER:
        if (inplace) MPI_Allgather(MPI_IN_PLACE, 0, t, recv, pc, t, w);
        else MPI_Allgather(send, pc, t, recv, pc, t, w);
        break;
    case COLL_REDUCE_SCATTER:
        /* In place MPI leaves this rank's block at the start of recv, not at
         * rank*count as NCCL does; check_result() knows. */
        MPI_Reduce_scatter_block(inplace ? MPI_IN_PLACE : send, recv, pc, t, op, w);
        break;
    case COLL_BROADCAST:
        /* MPI_Bcast has one buffer: out of place the root sends from send and
         * the others receive into recv; in place everyone uses recv. */
        MPI_Bcast(!inplace && rank == root ? send : recv, pc, t, root, w);
        break;
    case COLL_REDUCE:
        if (inplace) {
            if (rank == root) MPI_Reduce(MPI_IN_PLACE, recv, pc, t, op, root, w);
            else MPI_Reduce(recv, NULL, pc, t, op, root, w);
        } else {
            MPI_Reduce(send, recv, pc, t, op, root, w);
        }
        break;
    case COLL_ALLTOALL:
        if (inplace) MPI_Alltoall(MPI_IN_PLACE, 0, t, recv, pc, t, w);
        else MPI_Alltoall(send, pc, t, recv, pc, t, w);
        break;
    case COLL_GATHER:
        if (inplace) {
            if (rank == root) MPI_Gather(MPI_IN_PLACE, 0, t, recv, pc, t, root, w);
            else MPI_Gather(recv + l->send_inplace_off * 4 * (size_t)rank, pc, t, NULL, 0, t, root, w);
        } else {
            MPI_Gather(send, pc, t, recv, pc, t, root, w);
        }
        break;
    case COLL_SCATTER:
        if (inplace) {
            if (rank == root) MPI_Scatter(recv, pc, t, MPI_IN_PLACE, pc, t, root, w);
            else MPI_Scatter(NULL, 0, t, recv + l->recv_inplace_off * 4 * (size_t)rank, pc, t, root, w);
        } else {
            MPI_Scatter(send, pc, t, recv, pc, t, root, w);
        }
        break;
    case COLL_SENDRECV: {
        int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
        if (inplace)
            MPI_Sendrecv_replace(recv, pc, t, next, 0, prev, 0, w, MPI_STATUS_IGNORE);
        else
            MPI_Sendrecv(send, pc, t, next, 0, recv, pc, t, prev, 0, w, MPI_STATUS_IGNORE);
        break;
    }
    }
}

/* Writes this rank's known input where the call will read it. */
static void prepare_input(const struct opts *o, const struct layout *l, char *send, char *recv, int inplace)
{
    enum coll c = colls[o->ci].coll;
    enum dtype dt = o->dt;
    char *in = inplace ? recv : send;
    if (inplace) memset(recv, 0, l->recvcount * 4 > l->sendcount * 4 ? l->recvcount * 4 : l->sendcount * 4);
    else memset(recv, 0, l->recvcount * 4);
    switch (c) {
    case COLL_ALLGATHER:
    case COLL_GATHER:
        fill(dt, in + (inplace ? l->send_inplace_off * 4 * (size_t)rank : 0), l->sendcount, rank, 0);
        break;
    case COLL_BROADCAST:
    case COLL_SCATTER:
        if (rank == o->root) fill(dt, in, l->sendcount, rank, 0);
        break;
    default:
        fill(dt, in, l->sendcount, rank, 0);
        break;
    }
}

/* Wrong elements on this rank after one call on prepare_input()'s data. */
static int64_t check_result(const struct opts *o, const struct layout *l, const char *recv, int inplace)
{
    enum dtype dt = o->dt;
    size_t pc = l->paramcount;
    struct want_ctx w = {.op = o->op, .r = o->root, .base = 0, .block = pc};
    switch (colls[o->ci].coll) {
    case COLL_ALLREDUCE:
        return count_wrong(dt, recv, pc, want_reduced, &w);
    case COLL_REDUCE:
        return rank == o->root ? count_wrong(dt, recv, pc, want_reduced, &w) : 0;
    case COLL_REDUCE_SCATTER:
        w.base = (size_t)rank * pc;
        return count_wrong(dt, recv, pc, want_reduced, &w);
    case COLL_ALLGATHER:
        return count_wrong(dt, recv, l->recvcount, want_blocks, &w);
    case COLL_GATHER:
        return rank == o->root ? count_wrong(dt, recv, l->recvcount, want_blocks, &w) : 0;
    case COLL_BROADCAST:
        /* Out of place the root's recv is not part of the operation. */
        if (!inplace && rank == o->root) return 0;
        return count_wrong(dt, recv, pc, want_gen, &w);
    case COLL_SCATTER:
        w.base = (size_t)rank * pc;
        return count_wrong(dt, recv + (inplace ? l->recv_inplace_off * 4 * (size_t)rank : 0), pc, want_gen, &w);
    case COLL_ALLTOALL: {
        /* Block s came from rank s, which sent its block number `rank`. */
        int64_t wrong = 0;
        for (int s = 0; s < nranks; s++) {
            w.r = s;
            w.base = (size_t)rank * pc;
            wrong += count_wrong(dt, recv + (size_t)s * pc * 4, pc, want_gen, &w);
        }
        return wrong;
    }
    case COLL_SENDRECV:
        w.r = (rank + nranks - 1) % nranks;
        return count_wrong(dt, recv, pc, want_gen, &w);
    }
    return 0;
}

/* Times one (size, placement); returns the per-call seconds reduced over
 * ranks and stores the wrong-element count (-1 when not checked). */
static double bench(const struct opts *o, size_t bytes, char *send, char *recv, int inplace, int64_t *wrong)
{
    struct layout l = get_layout(colls[o->ci].coll, bytes / 4);
    size_t span = (l.sendcount > l.recvcount ? l.sendcount : l.recvcount) * 4;
    size_t steps = o->rotate && span ? o->maxbytes / span : 1;
    if (steps == 0) steps = 1;

    for (int i = 0; i < o->warmup; i++) {
        size_t shift = span * ((size_t)i % steps);
        run_coll(o, &l, send + shift, recv + shift, inplace);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < o->iters; i++) {
        size_t shift = span * ((size_t)i % steps);
        run_coll(o, &l, send + shift, recv + shift, inplace);
    }
    double sec = (MPI_Wtime() - t0) / (o->iters > 0 ? o->iters : 1);

    static const MPI_Op reduce_ops[] = {MPI_SUM, MPI_SUM, MPI_MIN, MPI_MAX};
    if (o->average == 0) {
        MPI_Bcast(&sec, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    } else {
        MPI_Allreduce(MPI_IN_PLACE, &sec, 1, MPI_DOUBLE, reduce_ops[o->average], MPI_COMM_WORLD);
        if (o->average == 1) sec /= nranks;
    }

    *wrong = -1;
    if (o->check) {
        prepare_input(o, &l, send, recv, inplace);
        run_coll(o, &l, send, recv, inplace);
        long long w = check_result(o, &l, recv, inplace);
        MPI_Allreduce(MPI_IN_PLACE, &w, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        *wrong = w;
    }
    return sec;
}

/* nccl-tests' cell: time with precision by magnitude, algbw, busbw, #wrong. */
static void print_cell(double sec, double algbw, double busbw, int64_t wrong)
{
    double us = sec * 1e6;
    char t[32];
    if (us >= 10000.0) snprintf(t, sizeof t, "%7.0f", us);
    else if (us >= 100.0) snprintf(t, sizeof t, "%7.1f", us);
    else if (us >= 1.0) snprintf(t, sizeof t, "%7.2f", us);
    else snprintf(t, sizeof t, "%7.3f", us); /* as ccl-perf: small calls need the third digit */
    if (wrong < 0) printf("  %7s  %6.2f  %6.2f  %5s", t, algbw, busbw, "N/A");
    else printf("  %7s  %6.2f  %6.2f  %5g", t, algbw, busbw, (double)wrong);
}

static void usage(const char *prog)
{
    printf("usage: %s [-C coll] [-b minbytes] [-e maxbytes] [-f stepfactor | -i stepbytes]\n"
           "       [-n iters] [-w warmup] [-c 0|1] [-d float|int32] [-o sum|max|min] [-r root]\n"
           "       [-a 0|1|2|3] [-N cycles] [--rotate 0|1]\n"
           "  -C  allreduce|allgather|reduce_scatter|broadcast|reduce|alltoall|gather|scatter|\n"
           "      sendrecv (also nccl-tests' spellings: reducescatter, all_reduce, ...)\n"
           "  sizes take K/M/G (1024-based); defaults -b 32M -e 32M -i 1M -n 20 -w 5 -c 1\n"
           "  -a  time reported over ranks: 0 rank 0, 1 mean, 2 min, 3 max (default 3)\n"
           "  -N  run and print the whole size sweep this many times (default 1)\n"
           "  --rotate 1 (default) moves each iteration to a new offset in the buffers,\n"
           "             as nccl-tests does; 0 reuses offset 0\n",
           prog);
}

/* Names compare without case, '_' and '-', so ccl-perf's and nccl-tests'
 * spellings (reduce_scatter, reducescatter, all_reduce) all work. */
static int same_name(const char *a, const char *b)
{
    for (;;) {
        while (*a == '_' || *a == '-') a++;
        while (*b == '_' || *b == '-') b++;
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
        if (!*a) return 1;
        a++;
        b++;
    }
}

static void parse_args(int argc, char **argv, struct opts *o)
{
    static const struct option longopts[] = {
        {"minbytes", required_argument, 0, 'b'},  {"maxbytes", required_argument, 0, 'e'},
        {"stepbytes", required_argument, 0, 'i'}, {"stepfactor", required_argument, 0, 'f'},
        {"iters", required_argument, 0, 'n'},     {"warmup_iters", required_argument, 0, 'w'},
        {"check", required_argument, 0, 'c'},     {"op", required_argument, 0, 'o'},
        {"datatype", required_argument, 0, 'd'},  {"root", required_argument, 0, 'r'},
        {"average", required_argument, 0, 'a'},   {"coll", required_argument, 0, 'C'},
        {"rotate", required_argument, 0, 'R'},    {"help", no_argument, 0, 'h'},
        {"run_cycles", required_argument, 0, 'N'},
        {0, 0, 0, 0},
    };
    *o = (struct opts){.ci = 0, .minbytes = 32u << 20, .maxbytes = 32u << 20, .stepbytes = 1u << 20,
                       .stepfactor = 1, .iters = 20, .warmup = 5, .check = 1, .root = 0,
                       .rotate = 1, .cycles = 1, .average = 3, .dt = DT_FLOAT, .op = OP_SUM};
    int c;
    while ((c = getopt_long(argc, argv, "C:b:e:i:f:n:w:c:d:o:r:a:N:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'C': {
            size_t k;
            for (k = 0; k < NCOLLS && !same_name(optarg, colls[k].name); k++) {}
            if (k == NCOLLS) die("unknown collective for -C");
            o->ci = (int)k;
            break;
        }
        case 'b': if (bench_parse_size(optarg, &o->minbytes, 1)) die("bad -b size"); break;
        case 'e': if (bench_parse_size(optarg, &o->maxbytes, 1)) die("bad -e size"); break;
        case 'i': if (bench_parse_size(optarg, &o->stepbytes, 1)) die("bad -i size"); break;
        case 'f': o->stepfactor = strtoul(optarg, NULL, 0); break;
        case 'n': o->iters = atoi(optarg); break;
        case 'w': o->warmup = atoi(optarg); break;
        case 'c': o->check = atoi(optarg); break;
        case 'r': o->root = atoi(optarg); break;
        case 'a': o->average = atoi(optarg); break;
        case 'R': o->rotate = atoi(optarg); break;
        case 'N': o->cycles = atoi(optarg); if (o->cycles < 1) die("-N takes a positive count"); break;
        case 'd':
            if (!strcmp(optarg, "float") || !strcmp(optarg, "float32")) o->dt = DT_FLOAT;
            else if (!strcmp(optarg, "int32") || !strcmp(optarg, "int")) o->dt = DT_INT32;
            else die("-d takes float or int32");
            break;
        case 'o':
            if (!strcmp(optarg, "sum")) o->op = OP_SUM;
            else if (!strcmp(optarg, "max")) o->op = OP_MAX;
            else if (!strcmp(optarg, "min")) o->op = OP_MIN;
            else die("-o takes sum, max or min");
            break;
        case 'h':
            if (rank == 0) usage(argv[0]);
            MPI_Finalize();
            exit(0);
        default:
            if (rank == 0) usage(argv[0]);
            die("bad option");
        }
    }
    if (optind < argc) die("unexpected argument");
    if (o->minbytes > o->maxbytes) die("-b is larger than -e");
    if (o->stepfactor < 1) die("-f must be at least 1");
    if (o->stepfactor == 1 && o->stepbytes == 0) die("-i must be positive when -f is 1");
    if (o->iters < 1 || o->warmup < 0) die("-n must be positive and -w not negative");
    if (o->average < 0 || o->average > 3) die("-a takes 0..3");
    if (o->root < 0 || o->root >= nranks) die("-r is not a rank");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    setvbuf(stdout, NULL, _IOLBF, 0);

    struct opts o;
    parse_args(argc, argv, &o);
    enum coll c = colls[o.ci].coll;

    /* Both buffers at the largest size (nccl-tests sizes them the same way);
     * rounded up to whole elements. Plain malloc on purpose, see the top. */
    size_t bufbytes = (o.maxbytes + 3) / 4 * 4;
    if (bufbytes == 0) bufbytes = 4;
    char *send = malloc(bufbytes);
    char *recv = malloc(bufbytes);
    if (!send || !recv) die("out of memory");
    /* First touch here, outside any timed region: on this kind of machine a
     * fresh page costs microseconds, which would swamp small timings. The
     * call goes through a volatile pointer so that no compiler turns the
     * fill into something that skips the writes (malloc+memset(0) becomes
     * calloc, which leaves fresh mmap pages untouched). */
    static void *(*volatile touch)(void *, int, size_t) = memset;
    touch(send, MPI_BENCH_FILL_BYTE, bufbytes);
    touch(recv, MPI_BENCH_FILL_BYTE, bufbytes);

    if (rank == 0) {
        printf("# mpi-bench %s: %d ranks, minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
               "validation: %d, time: %s over ranks, buffers: malloc\n",
               colls[o.ci].name, nranks, o.minbytes, o.maxbytes,
               o.stepfactor > 1 ? o.stepfactor : o.stepbytes, o.stepfactor > 1 ? "factor" : "bytes",
               o.warmup, o.iters, o.check, (const char *[]){"rank 0", "mean", "min", "max"}[o.average]);
        const char *tun = getenv("GLIBC_TUNABLES");
        printf("# GLIBC_TUNABLES=%s\n", tun ? tun : "(unset)");
        printf("#\n");
        printf("#                                                              out-of-place                       in-place\n");
        printf("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n");
        printf("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n");
    }

    const char *tname = o.dt == DT_FLOAT ? "float" : "int32";
    const char *opname = colls[o.ci].reduces ? (const char *[]){"sum", "max", "min"}[o.op] : "none";
    int root_print = colls[o.ci].rooted ? o.root : -1;
    double bw_sum = 0;
    int bw_n = 0;
    int64_t wrong_total = 0;

    for (int cycle = 0; cycle < o.cycles; cycle++) {
        for (size_t size = o.minbytes; size <= o.maxbytes;
             size = o.stepfactor > 1 ? size * o.stepfactor : size + o.stepbytes) {
            struct layout l = get_layout(c, size / 4);
            size_t shown = (l.sendcount > l.recvcount ? l.sendcount : l.recvcount) * 4;
            if (rank == 0) printf("%12zu  %12zu  %8s  %6s  %6i", shown, l.paramcount, tname, opname, root_print);
            for (int inplace = 0; inplace <= 1; inplace++) {
                int64_t wrong;
                double sec = bench(&o, size, send, recv, inplace, &wrong);
                double algbw = sec > 0 ? (double)shown / 1e9 / sec : 0;
                double busbw = algbw * bus_factor(c);
                if (rank == 0) print_cell(sec, algbw, busbw, wrong);
                bw_sum += busbw;
                bw_n++;
                if (wrong > 0) wrong_total += wrong;
            }
            if (rank == 0) printf("\n");
            if (size == 0 && o.stepfactor > 1) break; /* zero cannot grow by a factor */
        }
    }

    if (rank == 0) {
        printf("# Out of bounds values : %lld %s\n", (long long)wrong_total, wrong_total ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %g \n", bw_n ? bw_sum / bw_n : 0.0);
        printf("#\n");
    }
    free(send);
    free(recv);
    MPI_Finalize();
    return wrong_total ? 1 : 0;
}
