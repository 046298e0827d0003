/*
 * reduce-bench: bandwidth of the host reduction kernels (dev_reduce) at each
 * SIMD level, next to memcpy measured in the same run.
 *
 * A large host allreduce is bound by how fast one core streams dst = a + b
 * through memory, so the kernel should run at memory speed: the table gives
 * each kernel's bandwidth as a percentage of memcpy's on the same machine,
 * at the same moment.
 *
 *   reduce-bench                       256 MiB buffers, 11 rounds, f32 bf16 f16 sum
 *   reduce-bench -s 64M -n 21 -t f32 -t f16 -o max -i
 *
 * Bandwidth counts memory traffic, 1 GB = 1e9 bytes: memcpy moves 2 bytes
 * per byte copied (one read, one write), dst = a op b moves 3 bytes per
 * output byte (two reads, one write). Bytes a CPU moves without being asked
 * (read-for-ownership of a destination line before it is written) are not
 * counted, for either. Elements per second are in the last column.
 *
 * Buffers (a, b, dst, and memcpy's pair, which reuses a and dst) are
 * allocated at 2 MiB alignment with MADV_HUGEPAGE (unless -P) and written
 * before any timing. One round times memcpy once, then every (level, dtype)
 * once, so a slow spell of a noisy VM hits all of them alike; after an
 * untimed warm-up round, the median of the rounds is reported.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench_size.h"
#include "bench_time.h"
#include "device/dtype_conv.h"
#include "device/reduce.h"

#define MAX_TYPES CCL_NUM_DTYPES

/* Through a volatile pointer so the compiler keeps every timed copy. */
static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;

static void *alloc(size_t bytes, int huge)
{
    void *p = NULL;
    if (posix_memalign(&p, 2u << 20, bytes) != 0)
        return NULL;
    if (huge)
        madvise(p, bytes, MADV_HUGEPAGE);
    memset(p, 0x3c, bytes); /* touch every page before timing */
    return p;
}

/* Ordinary finite values (no subnormals, which some CPUs handle slowly),
 * different in a and b. */
static void fill(ccl_datatype_t dt, void *p, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) {
        float v = scale * (float)(1 + (i % 1000)) * 0.01f;
        switch (dt) {
        case CCL_FLOAT32: ((float *)p)[i] = v; break;
        case CCL_FLOAT64: ((double *)p)[i] = v; break;
        case CCL_FLOAT16: ((uint16_t *)p)[i] = dev_f32_to_f16(v); break;
        case CCL_BFLOAT16: ((uint16_t *)p)[i] = dev_f32_to_bf16(v); break;
        case CCL_FLOAT8_E4M3: ((uint8_t *)p)[i] = dev_f32_to_e4m3(v); break;
        case CCL_FLOAT8_E5M2: ((uint8_t *)p)[i] = dev_f32_to_e5m2(v); break;
        default: {
            size_t es = dev_dtype_size(dt);
            uint64_t x = (uint64_t)(i * 2654435761u) ^ (uint64_t)scale;
            memcpy((char *)p + i * es, &x, es);
        }
        }
    }
}

static int parse_dtype(const char *s, ccl_datatype_t *out)
{
    static const struct {
        const char *name;
        ccl_datatype_t dt;
    } alias[] = {{"f32", CCL_FLOAT32}, {"float", CCL_FLOAT32}, {"f16", CCL_FLOAT16},
                 {"half", CCL_FLOAT16}, {"bf16", CCL_BFLOAT16}, {"f64", CCL_FLOAT64},
                 {"double", CCL_FLOAT64}, {"e4m3", CCL_FLOAT8_E4M3}, {"e5m2", CCL_FLOAT8_E5M2},
                 {"i8", CCL_INT8}, {"u8", CCL_UINT8}, {"i32", CCL_INT32}, {"u32", CCL_UINT32},
                 {"i64", CCL_INT64}, {"u64", CCL_UINT64}};
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
        if (strcmp(s, alias[i].name) == 0) {
            *out = alias[i].dt;
            return 0;
        }
    for (int d = 0; d < CCL_NUM_DTYPES; d++)
        if (strcmp(s, dev_dtype_name((ccl_datatype_t)d)) == 0) {
            *out = (ccl_datatype_t)d;
            return 0;
        }
    return -1;
}

static int parse_op(const char *s, ccl_redop_t *out)
{
    for (int o = 0; o < CCL_NUM_OPS; o++)
        if (strcmp(s, dev_op_name((ccl_redop_t)o)) == 0) {
            *out = (ccl_redop_t)o;
            return 0;
        }
    return -1;
}

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-s size] [-n rounds] [-t dtype]... [-l level]... [-o op] [-i] [-P]\n"
            "  -s  bytes per buffer (a, b and dst), K/M/G suffixes (1024-based); default 256M\n"
            "  -n  timed rounds, median reported (default 11)\n"
            "  -t  dtype: f32 bf16 f16 f64 e4m3 e5m2 i8 u8 i32 u32 i64 u64 (or ccl names);\n"
            "      repeatable; default f32, bf16, f16\n"
            "  -l  SIMD level: avx512 avx2 scalar; repeatable; default every level this CPU has\n"
            "  -o  op: sum prod max min avg (default sum; avg times the reduce only),\n"
            "      premul (dst = b[0] * a: dev_premul) or div (avg's division of dst, in place)\n"
            "  -i  in place (dst = a)\n"
            "  -P  no MADV_HUGEPAGE\n",
            prog);
}

int main(int argc, char **argv)
{
    size_t bytes = 256u << 20;
    int rounds = 11, huge = 1, inplace = 0, ntypes = 0, nlevels = 0, c;
    ccl_datatype_t types[MAX_TYPES];
    dev_simd_t levels[DEV_SIMD_NUM_LEVELS];
    ccl_redop_t op = CCL_SUM;
    enum { MODE_REDUCE, MODE_PREMUL, MODE_DIV } mode = MODE_REDUCE;
    dev_simd_t best = dev_simd_best();

    while ((c = getopt(argc, argv, "s:n:t:l:o:iPh")) != -1) {
        switch (c) {
        case 's':
            if (bench_parse_size(optarg, &bytes, 0) != 0) {
                fprintf(stderr, "reduce-bench: bad size '%s'\n", optarg);
                return 2;
            }
            break;
        case 'n':
            rounds = atoi(optarg);
            if (rounds < 1) {
                fprintf(stderr, "reduce-bench: -n must be positive\n");
                return 2;
            }
            break;
        case 't':
            if (ntypes == MAX_TYPES || parse_dtype(optarg, &types[ntypes]) != 0) {
                fprintf(stderr, "reduce-bench: bad or too many -t '%s'\n", optarg);
                return 2;
            }
            ntypes++;
            break;
        case 'l': {
            int l;
            for (l = 0; l < DEV_SIMD_NUM_LEVELS; l++)
                if (strcmp(optarg, dev_simd_name((dev_simd_t)l)) == 0)
                    break;
            if (l == DEV_SIMD_NUM_LEVELS || nlevels == DEV_SIMD_NUM_LEVELS) {
                fprintf(stderr, "reduce-bench: bad or too many -l '%s'\n", optarg);
                return 2;
            }
            if ((dev_simd_t)l > best) {
                fprintf(stderr, "reduce-bench: this CPU does not run %s (best: %s)\n", optarg,
                        dev_simd_name(best));
                return 2;
            }
            levels[nlevels++] = (dev_simd_t)l;
            break;
        }
        case 'o':
            if (strcmp(optarg, "premul") == 0)
                mode = MODE_PREMUL;
            else if (strcmp(optarg, "div") == 0)
                mode = MODE_DIV;
            else if (parse_op(optarg, &op) != 0) {
                fprintf(stderr, "reduce-bench: bad op '%s'\n", optarg);
                return 2;
            }
            break;
        case 'i': inplace = 1; break;
        case 'P': huge = 0; break;
        case 'h': usage(argv[0]); return 0;
        default: usage(argv[0]); return 2;
        }
    }
    if (optind < argc) {
        usage(argv[0]);
        return 2;
    }
    if (ntypes == 0) {
        types[ntypes++] = CCL_FLOAT32;
        types[ntypes++] = CCL_BFLOAT16;
        types[ntypes++] = CCL_FLOAT16;
    }
    if (nlevels == 0)
        for (int l = (int)best; l >= 0; l--)
            levels[nlevels++] = (dev_simd_t)l;

    char *a = alloc(bytes, huge), *b = alloc(bytes, huge), *d = alloc(bytes, huge);
    double *t = malloc(sizeof(double) * (size_t)rounds * (1 + (size_t)nlevels * ntypes));
    if (!a || !b || !d || !t) {
        fprintf(stderr, "reduce-bench: cannot allocate 3 x %zu bytes\n", bytes);
        return 1;
    }
    double *tm = t, *tk = t + rounds; /* tk[(l * ntypes + k) * rounds + r] */

    static const char *const mode_names[] = {"", "premul (dst = b[0] * a)", "avg's division (dst /= 7)"};
    printf("# reduce-bench: single thread, %zu bytes per buffer (a, b, dst), %s, %s%s\n", bytes,
           mode == MODE_REDUCE ? dev_op_name(op) : mode_names[mode],
           inplace ? "in place (dst = a)" : "out of place", huge ? ", MADV_HUGEPAGE" : "");
    printf("# median of %d rounds; a round times memcpy(dst, a) once, then each kernel once\n",
           rounds);
    printf("# GB/s = memory traffic / time / 1e9: memcpy 2 x bytes (read + write),\n"
           "# reduce 3 x bytes (read a, read b, write dst), premul and div 2 x bytes;\n"
           "# %%memcpy = ratio of the two\n");
    printf("# best SIMD level on this CPU: %s\n", dev_simd_name(best));

    for (int r = -1; r < rounds; r++) { /* round -1 warms up, untimed */
        double t0 = bench_now();
        copy_fn(d, a, bytes);
        if (r >= 0)
            tm[r] = bench_now() - t0;
        for (int l = 0; l < nlevels; l++) {
            dev_simd_force(levels[l]);
            for (int k = 0; k < ntypes; k++) {
                size_t n = bytes / dev_dtype_size(types[k]);
                /* Refill so every dtype reads valid values of its own kind
                 * (in place, a holds the last result). Untimed. */
                if (r < 0 || inplace) {
                    fill(types[k], a, n, 1.0f);
                    fill(types[k], b, n, 0.5f);
                }
                void *dst = inplace ? a : d;
                if (mode == MODE_DIV && (r < 0 || !inplace))
                    memcpy(dst, b, bytes); /* values to divide; untimed */
                t0 = bench_now();
                if (mode == MODE_PREMUL)
                    dev_premul(types[k], dst, a, n, b); /* b[0]: 0.5 of the type */
                else if (mode == MODE_DIV)
                    dev_postop(types[k], CCL_AVG, dst, n, 7);
                else
                    dev_reduce(types[k], op, dst, NULL, a, b, n);
                double dt = bench_now() - t0;
                if (r >= 0)
                    tk[((size_t)l * ntypes + k) * rounds + r] = dt;
            }
        }
    }
    dev_simd_force(best);

    double mc = 2.0 * (double)bytes / bench_median(tm, rounds) / 1e9;
    printf("%-8s %-12s %10s %9s %12s\n", "level", "dtype", "GB/s", "%memcpy", "Gelem/s");
    printf("%-8s %-12s %10.2f %8.1f%% %12s\n", "memcpy", "-", mc, 100.0, "-");
    for (int l = 0; l < nlevels; l++)
        for (int k = 0; k < ntypes; k++) {
            double med = bench_median(tk + ((size_t)l * ntypes + k) * rounds, rounds);
            size_t n = bytes / dev_dtype_size(types[k]);
            double gbs = (mode == MODE_REDUCE ? 3.0 : 2.0) * (double)bytes / med / 1e9;
            printf("%-8s %-12s %10.2f %8.1f%% %12.3f\n", dev_simd_name(levels[l]),
                   dev_dtype_name(types[k]), gbs, 100.0 * gbs / mc, (double)n / med / 1e9);
        }
    free(a);
    free(b);
    free(d);
    free(t);
    return 0;
}
