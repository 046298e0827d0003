/*
 * ccl_perf_args.c - ccl-perf's command line. Flags, defaults and meanings are
 * nccl-tests' (so scripts written for all_reduce_perf work), except -C, which
 * names the collective here since ccl-perf is one binary for all of them.
 * -d, -o and -C also take comma-separated lists and "all".
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ccl_perf.h"

/* nccl-tests' spelling; premulsum is "mulsum" there, and in the table. */
const char *const perf_op_names[PERF_NUM_OPS] = {"sum", "prod", "max", "min", "avg", "mulsum"};

enum { OPT_NP = 256, OPT_HELP_ENV, OPT_BIND };

static const struct option long_opts[] = {
    {"minbytes", required_argument, 0, 'b'},     {"maxbytes", required_argument, 0, 'e'},
    {"stepbytes", required_argument, 0, 'i'},    {"stepfactor", required_argument, 0, 'f'},
    {"iters", required_argument, 0, 'n'},        {"warmup_iters", required_argument, 0, 'w'},
    {"check", required_argument, 0, 'c'},        {"datatype", required_argument, 0, 'd'},
    {"op", required_argument, 0, 'o'},           {"blocking", required_argument, 0, 'z'},
    {"root", required_argument, 0, 'r'},         {"average", required_argument, 0, 'a'},
    {"collective", required_argument, 0, 'C'},   {"np", required_argument, 0, OPT_NP},
    {"help", no_argument, 0, 'h'},               {"help-env", no_argument, 0, OPT_HELP_ENV},
    {"bind", required_argument, 0, OPT_BIND},   {"memory", required_argument, 0, 'm'},
    {"run_cycles", required_argument, 0, 'N'},  {"warmup_every_size", required_argument, 0, 'W'},
    {"json", required_argument, 0, 'J'},
    {0, 0, 0, 0},
};

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "USAGE: %s [options]\n"
            "  -b,--minbytes <size>       smallest size (default 32M); K/M/G suffixes are powers of 1024\n"
            "  -e,--maxbytes <size>       largest size (default 32M)\n"
            "  -i,--stepbytes <size>      size increment when -f is not given (default 1M)\n"
            "  -f,--stepfactor <n>        size multiplier between rows (default: off, use -i)\n"
            "  -n,--iters <n>             timed iterations per row (default 20)\n"
            "  -w,--warmup_iters <n>      warmup iterations at the largest and smallest size (default 5)\n"
            "  -W,--warmup_every_size <0|1>  1: also -w warmup calls before every row, over the\n"
            "                             buffers' rotation, as MPI benchmarks warm up (default 0:\n"
            "                             one untimed call per row, as nccl-tests)\n"
            "  -N,--run_cycles <n>        run and print the whole size sweep n times (default 1)\n"
            "  -c,--check <n>             checked calls per row, 0 disables checking (default 1)\n"
            "  -d,--datatype <types|all>  int8 uint8 int32 uint32 int64 uint64 half bfloat16\n"
            "                             float double f8e4m3 f8e5m2 (default float; also float16\n"
            "                             bf16 float32 float64 e4m3 e5m2), comma-separated; with\n"
            "                             'all', types this ccl does not support are skipped\n"
            "  -o,--op <ops|all>          sum prod max min avg premulsum (or mulsum), comma-\n"
            "                             separated (default sum); premulsum: rank r multiplies\n"
            "                             its input by 1 + r%%2, then sum\n"
            "  -r,--root <rank|-1>        root of rooted collectives; -1: every rank in turn\n"
            "                             (default 0)\n"
            "  -z,--blocking <0|1>        1: each call blocks (NULL stream); 0: all iterations are\n"
            "                             queued on a ccl host stream, then synchronized (default 0)\n"
            "  -a,--average <0|1|2|3>     time reported: 0 rank 0, 1 average, 2 min, 3 max (default 1)\n"
            "  -C,--collective <names|all>  collectives, comma-separated, run one after another\n"
            "                             (default allreduce): %s\n"
            "  --np <n>                   number of local ranks to fork (default 2); without --np,\n"
            "                             a launcher's OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE,\n"
            "                             SLURM_PROCID/NTASKS or RANK/WORLD_SIZE make this process\n"
            "                             one rank; the ranks then meet at CCL_COMM_ID=host:port\n"
#ifdef CCL_PERF_WITH_MPI
            "                             or, without it, share the id through MPI\n"
#endif
            "  --bind <core|none>         forked ranks: one CPU each when they fit, as mpirun binds\n"
            "                             (default core)\n"
            "  -m,--memory <host|device>  where the buffers live: host (ccl_mem_alloc) or device\n"
            "                             (cudaMalloc on GPU local-rank %% GPUs; calls go on a CUDA\n"
            "                             stream, or NULL with -z 1). Default: device when this\n"
            "                             ccl-perf has CUDA and every rank sees a GPU, else host\n"
            "  -J,--json <file>           also write every row as JSON to <file> (rank 0)\n"
            "  -h,--help                  this text\n"
            "  --help-env                 the CCL_* environment variables the library reads\n",
            prog, perf_coll_supported());
}

/* The library's one table of CCL_* variables (src/base/params.def), so this
 * list cannot drift from what the library reads. */
static void usage_env(void)
{
    printf("CCL_* environment variables read by ccl (default in brackets):\n");
#define CCL_PARAM(name, kind, def, doc) \
    printf("  %-28s %-7s %s\n", "CCL_" #name, "[" def "]", doc);
#include "base/params.def"
#undef CCL_PARAM
}

/* nccl-tests' size syntax: a number with an optional K, M or G suffix. */
static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0)
        return -1;
    double unit = 1;
    switch (*end) {
    case 'k': case 'K': unit = 1024.0; end++; break;
    case 'm': case 'M': unit = 1024.0 * 1024; end++; break;
    case 'g': case 'G': unit = 1024.0 * 1024 * 1024; end++; break;
    default: break;
    }
    if (unit > 1 && (strcasecmp(end, "b") == 0 || strcasecmp(end, "ib") == 0))
        end += strlen(end);
    if (*end || v * unit > (double)(SIZE_MAX / 2))
        return -1;
    *out = (size_t)(v * unit);
    return 0;
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 0);
    if (end == s || *end || errno || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

/* A comma-separated list of names, or "all"; bit i of *mask is entry i as
 * lookup(name) numbers them (-1: unknown). */
static int parse_list(const char *s, int (*lookup)(const char *), int n, uint32_t *mask, int *all)
{
    char word[64];
    *mask = 0;
    *all = strcmp(s, "all") == 0;
    if (*all) {
        *mask = n >= 32 ? ~0u : (1u << n) - 1;
        return 0;
    }
    for (const char *p = s;; p++) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof(word))
            return -1;
        memcpy(word, p, len);
        word[len] = '\0';
        int i = lookup(word);
        if (i < 0)
            return -1;
        *mask |= 1u << i;
        p += len;
        if (!*p)
            return 0;
    }
}

static int dtype_index(const char *s)
{
    const struct perf_dtype *t = perf_dtype_by_name(s);
    return t ? (int)(t - perf_dtypes) : -1;
}

static int op_index(const char *s)
{
    if (strcmp(s, "premulsum") == 0)
        return PERF_OP_PREMULSUM;
    for (int i = 0; i < PERF_NUM_OPS; i++)
        if (strcmp(s, perf_op_names[i]) == 0)
            return i;
    return -1;
}

static int coll_index(const char *s)
{
    const struct perf_coll *c = perf_coll_by_name(s);
    return c ? (int)(c - perf_colls) : -1;
}

static void set_defaults(struct perf_args *a)
{
    memset(a, 0, sizeof(*a));
    a->min_bytes = a->max_bytes = 32u << 20;
    a->step_bytes = 1u << 20;
    a->step_factor = 1;
    a->iters = 20;
    a->bind = 1;
    a->warmup = 5;
    a->cycles = 1;
    a->check = 1;
    a->average = 1;
    a->dtypes = 1u << dtype_index("float");
    a->ops = 1u << CCL_SUM;
    a->colls = 1u << coll_index("allreduce");
}

/* The values option `c` accepts, for the message about a bad one. */
static const char *valid_values(int c)
{
    switch (c) {
    case 'd': return "use int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 "
                     "f8e4m3 f8e5m2, a comma-separated list of them, or all";
    case 'o': return "use sum prod max min avg premulsum (mulsum), a comma-separated list of "
                     "them, or all";
    case 'C': return "use allreduce allgather reduce_scatter broadcast reduce alltoall gather "
                     "scatter sendrecv, a comma-separated list of them, or all";
    case 'r': return "use a rank, or -1 for every rank in turn";
    case 'b': case 'e': case 'i': return "use bytes with an optional K, M or G suffix";
    case 'z': case 'W': return "use 0 or 1";
    case 'm': return "use host or device";
    case 'a': return "use 0 (rank 0), 1 (avg), 2 (min) or 3 (max)";
    case 'n': case 'N': case OPT_NP: return "use a positive integer";
    default: return "use a non-negative integer";
    }
}

/* One option; returns 0 or -1 after printing what is wrong. */
static int apply_opt(int c, const char *v, struct perf_args *a)
{
    int sf = 0, rc;
    switch (c) {
    case 'b': rc = parse_size(v, &a->min_bytes); break;
    case 'e': rc = parse_size(v, &a->max_bytes); break;
    case 'i': rc = parse_size(v, &a->step_bytes); break;
    case 'f': rc = parse_int(v, 0, 1 << 20, &sf); a->step_factor = (size_t)sf; break;
    case 'n': rc = parse_int(v, 1, 1 << 30, &a->iters); break;
    case 'w': rc = parse_int(v, 0, 1 << 30, &a->warmup); break;
    case 'N': rc = parse_int(v, 1, 1 << 20, &a->cycles); break;
    case 'W': rc = parse_int(v, 0, 1, &a->warmup_every_size); break;
    case 'c': rc = parse_int(v, 0, 1 << 20, &a->check); break;
    case 'd': rc = parse_list(v, dtype_index, perf_num_dtypes, &a->dtypes, &a->dtypes_all); break;
    case 'o': rc = parse_list(v, op_index, PERF_NUM_OPS, &a->ops, &a->ops_all); break;
    case 'C': rc = parse_list(v, coll_index, perf_num_colls, &a->colls, &sf); break;
    case 'z': rc = parse_int(v, 0, 1, &a->blocking); break;
    case 'r': rc = parse_int(v, PERF_ALL_ROOTS, 1 << 30, &a->root); break;
    case 'a': rc = parse_int(v, 0, 3, &a->average); break;
    case OPT_NP: rc = parse_int(v, 1, 4096, &a->np); break;
    case 'm':
        rc = strcmp(v, "host") == 0 ? (a->mem = PERF_MEM_HOST, 0)
             : strcmp(v, "device") == 0 ? (a->mem = PERF_MEM_DEVICE, 0) : -1;
        break;
    case 'J':
        if (!v[0]) {
            fprintf(stderr, "ccl-perf: -J needs a file name\n");
            return -1;
        }
        a->json_path = v;
        return 0;
    case OPT_BIND:
        if (strcmp(v, "core") && strcmp(v, "none")) {
            fprintf(stderr, "ccl-perf: invalid value '%s' for --bind; use core or none\n", v);
            return -1;
        }
        a->bind = !strcmp(v, "core");
        return 0;
    default: return -1;
    }
    if (rc) {
        char flag[8] = {'-', (char)c, 0};
        fprintf(stderr, "ccl-perf: invalid value '%s' for %s; %s\n", v,
                c == OPT_NP ? "--np" : flag, valid_values(c));
    }
    return rc;
}

static int validate(const struct perf_args *a)
{
    if (a->min_bytes > a->max_bytes) {
        fprintf(stderr, "ccl-perf: invalid sizes for 'minbytes' and 'maxbytes': %zu > %zu\n",
                a->min_bytes, a->max_bytes);
        return -1;
    }
    if (a->step_factor <= 1 && a->step_bytes == 0 && a->min_bytes < a->max_bytes) {
        fprintf(stderr, "ccl-perf: -i 0 without -f never reaches -e\n");
        return -1;
    }
    return 0;
}

int perf_parse_args(int argc, char **argv, struct perf_args *a, int *done)
{
    int c;
    set_defaults(a);
    *done = 0;
    while ((c = getopt_long(argc, argv, "b:e:i:f:n:w:W:N:c:d:o:z:r:a:C:m:J:h", long_opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout, argv[0]);
            *done = 1;
            return 0;
        }
        if (c == OPT_HELP_ENV) {
            usage_env();
            *done = 1;
            return 0;
        }
        if (c == '?') {
            usage(stderr, argv[0]);
            return 1;
        }
        if (apply_opt(c, optarg, a))
            return 1;
    }
    if (optind < argc) {
        fprintf(stderr, "ccl-perf: unexpected argument '%s' (see --help)\n", argv[optind]);
        return 1;
    }
    return validate(a) ? 1 : 0;
}

size_t perf_buffer_bytes(const struct perf_args *a, int nranks)
{
    /* Counts of 1-byte elements bound those of every wider type. */
    size_t bytes = 0;
    for (int i = 0; i < perf_num_colls; i++) {
        struct perf_counts c;
        if (!(a->colls & 1u << i))
            continue;
        perf_colls[i].counts(a->max_bytes, nranks, &c);
        if (c.send > bytes)
            bytes = c.send;
        if (c.recv > bytes)
            bytes = c.recv;
    }
    return bytes;
}
