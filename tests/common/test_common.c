/*
 * test_common.c - deterministic inputs, serial references and checks for the
 * public-API tests; see test_common.h.
 *
 * Why the value ranges look the way they do (every reference below is exact):
 *  - Unsigned sum/prod use the full range: wrap-around mod 2^bits is defined
 *    and the reference wraps the same way, so wrap bugs are caught.
 *  - Signed sum/avg draw from [-MAX/n, MAX/n] and signed prod from [-b, b]
 *    with b^n <= MAX, so neither the library nor the reference ever overflows
 *    (signed overflow is undefined in C, so it cannot be tested portably).
 *  - max/min/copy use full-range integers (extremes included on purpose) and
 *    floats with random 24/53-bit mantissas, never zero (so +0/-0 ties
 *    cannot make max/min ambiguous) and never NaN.
 *  - Float sum/avg use dyadic values k/4 (float32) or k/1024 (float64) with k
 *    small enough that every partial sum of up to thousands of terms is exact
 *    in the type, whatever order the library adds them in.
 *  - Float prod uses {+-1, +-2, +-0.5, 0.25, 0} so every product is a power
 *    of two (or zero) and exact.
 *  - Float avg is the only inexact case (sum / n rounds); see tol_avg().
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "test_common.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const ccl_datatype_t tst_dtypes[] = {CCL_INT8,  CCL_UINT8,  CCL_INT32,   CCL_UINT32,
                                     CCL_INT64, CCL_UINT64, CCL_FLOAT32, CCL_FLOAT64};
const int tst_num_dtypes = (int)(sizeof(tst_dtypes) / sizeof(tst_dtypes[0]));
const ccl_redop_t tst_ops[] = {CCL_SUM, CCL_PROD, CCL_MAX, CCL_MIN, CCL_AVG};
const int tst_num_ops = (int)(sizeof(tst_ops) / sizeof(tst_ops[0]));

size_t tst_dtype_size(ccl_datatype_t dt)
{
    switch (dt) {
    case CCL_INT8:
    case CCL_UINT8:
        return 1;
    case CCL_INT32:
    case CCL_UINT32:
    case CCL_FLOAT32:
        return 4;
    case CCL_INT64:
    case CCL_UINT64:
    case CCL_FLOAT64:
        return 8;
    case CCL_FLOAT16:
    case CCL_BFLOAT16:
        return 2;
    case CCL_FLOAT8_E4M3:
    case CCL_FLOAT8_E5M2:
        return 1;
    default:
        return 0;
    }
}

const char *tst_dtype_name(ccl_datatype_t dt)
{
    switch (dt) {
    case CCL_INT8: return "int8";
    case CCL_UINT8: return "uint8";
    case CCL_INT32: return "int32";
    case CCL_UINT32: return "uint32";
    case CCL_INT64: return "int64";
    case CCL_UINT64: return "uint64";
    case CCL_FLOAT16: return "float16";
    case CCL_FLOAT32: return "float32";
    case CCL_FLOAT64: return "float64";
    case CCL_BFLOAT16: return "bfloat16";
    case CCL_FLOAT8_E4M3: return "float8_e4m3";
    case CCL_FLOAT8_E5M2: return "float8_e5m2";
    default: return "?";
    }
}

const char *tst_op_name(ccl_redop_t op)
{
    switch ((int)op) {
    case CCL_SUM: return "sum";
    case CCL_PROD: return "prod";
    case CCL_MAX: return "max";
    case CCL_MIN: return "min";
    case CCL_AVG: return "avg";
    case -1: return "copy";
    default: return "?";
    }
}

int tst_dtype_is_float(ccl_datatype_t dt)
{
    return dt == CCL_FLOAT32 || dt == CCL_FLOAT64;
}

static int is_signed_int(ccl_datatype_t dt)
{
    return dt == CCL_INT8 || dt == CCL_INT32 || dt == CCL_INT64;
}

uint64_t tst_mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t tst_case_seed(uint64_t base, uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    uint64_t s = tst_mix64(base);
    s = tst_mix64(s ^ a);
    s = tst_mix64(s ^ (b << 8));
    s = tst_mix64(s ^ (c << 16));
    return tst_mix64(s ^ (d << 24));
}

/* ---- generator ------------------------------------------------------------ */

/* Everything about a (dtype, op, nranks, seed) that does not depend on the
 * element, computed once so the per-element path stays cheap. */
typedef struct {
    ccl_datatype_t dt;
    ccl_redop_t op;
    int nranks;
    uint64_t seed;
    int bits;
    int is_signed;
    int is_float;
    uint64_t umax;  /* all-ones of the width */
    int64_t smax, smin;
    int64_t sbound; /* signed sum/avg/prod: values in [-sbound, sbound] */
    uint64_t ubound; /* unsigned avg: values in [0, ubound] */
    int pow2_ranks; /* signed prod with b == 1: ranks below this may use +-2 */
} gen_t;

static int64_t checked_pow_le(int64_t b, int n, int64_t max)
{
    /* Returns 1 when b^n <= max, without overflowing. */
    int64_t acc = 1;
    for (int k = 0; k < n; k++) {
        if (acc > max / b)
            return 0;
        acc *= b;
    }
    return 1;
}

static void gen_init(gen_t *g, ccl_datatype_t dt, ccl_redop_t op, int nranks, uint64_t seed)
{
    memset(g, 0, sizeof(*g));
    g->dt = dt;
    g->op = op;
    g->nranks = nranks < 1 ? 1 : nranks;
    g->seed = tst_mix64(seed);
    g->bits = (int)tst_dtype_size(dt) * 8;
    g->is_signed = is_signed_int(dt);
    g->is_float = tst_dtype_is_float(dt);
    g->umax = g->bits == 64 ? UINT64_MAX : ((uint64_t)1 << g->bits) - 1;
    g->smax = (int64_t)(g->umax >> 1);
    g->smin = -g->smax - 1;
    if (g->is_signed) {
        if (op == CCL_SUM || op == CCL_AVG) {
            g->sbound = g->smax / g->nranks;
        } else if (op == CCL_PROD) {
            /* Largest b with b^n <= MAX, capped so n == 1 stays interesting. */
            int64_t b = 1;
            int64_t lo = 1, hi = 1 << 20;
            while (lo <= hi) {
                int64_t mid = lo + (hi - lo) / 2;
                if (checked_pow_le(mid, g->nranks, g->smax)) {
                    b = mid;
                    lo = mid + 1;
                } else {
                    hi = mid - 1;
                }
            }
            g->sbound = b;
            /* With b == 1 (int8 over 7+ ranks) let the first log2(MAX) ranks
             * use +-2 so products are not all +-1/0. */
            if (b == 1) {
                int k = 0;
                while (((int64_t)1 << (k + 1)) <= g->smax)
                    k++;
                g->pow2_ranks = k;
            }
        }
    } else if (!g->is_float && op == CCL_AVG) {
        g->ubound = g->umax / (uint64_t)g->nranks;
    }
}

static uint64_t gen_hash(const gen_t *g, int rank, size_t index)
{
    return tst_mix64(g->seed ^ tst_mix64(((uint64_t)(unsigned)rank << 48) ^ (uint64_t)index));
}

static int64_t sign_extend(uint64_t u, int bits)
{
    if (bits == 64)
        return (int64_t)u;
    uint64_t m = (uint64_t)1 << (bits - 1);
    u &= ((uint64_t)1 << bits) - 1;
    return (int64_t)((u ^ m) - m);
}

/* Uniform in [-b, b], computed in unsigned arithmetic so b = INT64_MAX works. */
static int64_t uniform_signed(uint64_t h, int64_t b)
{
    uint64_t span = 2 * (uint64_t)b + 1;
    return (int64_t)((span == 0 ? h : h % span) - (uint64_t)b);
}

static tst_scalar_t gen_value(const gen_t *g, int rank, size_t index)
{
    tst_scalar_t v;
    uint64_t h = gen_hash(g, rank, index);
    v.u = 0;

    if (g->is_float) {
        int fbits = g->dt == CCL_FLOAT32 ? 24 : 53;
        switch ((int)g->op) {
        case CCL_SUM:
        case CCL_AVG:
            if (g->dt == CCL_FLOAT32) {
                int64_t k = (int64_t)(h % ((1u << 13) + 1)) - (1 << 12);
                v.f = (double)k / 4.0;
            } else {
                int64_t k = (int64_t)(h % ((UINT64_C(1) << 41) + 1)) - (INT64_C(1) << 40);
                v.f = (double)k / 1024.0;
            }
            break;
        case CCL_PROD: {
            static const double table[8] = {1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 1.0, 0.25};
            v.f = table[h & 7];
            if ((h >> 8) % 61 == 0)
                v.f = 0.0;
            break;
        }
        default: { /* copy, max, min */
            uint64_t m = (h >> (64 - fbits)) | 1;
            int e = (int)((h >> 3) & 31) - 16;
            v.f = ldexp((double)m, e - fbits);
            if (h & 1)
                v.f = -v.f;
            break;
        }
        }
        return v;
    }

    if (g->is_signed) {
        switch ((int)g->op) {
        case CCL_SUM:
        case CCL_AVG:
            v.i = uniform_signed(h, g->sbound);
            break;
        case CCL_PROD: {
            /* Nonzero in [-b, b], and 0 about once in 128 so that products
             * are not mostly zero but zero factors still occur. */
            int64_t b = g->sbound >= 2 ? g->sbound : rank < g->pow2_ranks ? 2 : 1;
            uint64_t m = (h >> 1) % (uint64_t)b + 1;
            v.i = (h & 1) ? -(int64_t)m : (int64_t)m;
            if ((h >> 57) == 0)
                v.i = 0;
            break;
        }
        default: /* copy, max, min: full range, extremes 1 time in 64 */
            if ((h >> 58) == 0)
                v.i = (h & 1) ? g->smax : g->smin;
            else
                v.i = sign_extend(h, g->bits);
            break;
        }
        return v;
    }

    switch ((int)g->op) {
    case CCL_AVG:
        v.u = g->ubound == UINT64_MAX ? h : h % (g->ubound + 1);
        break;
    case CCL_PROD:
        /* Mostly odd factors, so products keep their low bits rather than
         * collapsing to 0 after a few even factors. */
        v.u = h & g->umax;
        if ((h >> 62) != 0)
            v.u |= 1;
        break;
    default: /* copy, sum (wraps), max, min; extremes 1 time in 64 */
        if ((h >> 58) == 0)
            v.u = (h & 1) ? g->umax : 0;
        else
            v.u = h & g->umax;
        break;
    }
    return v;
}

tst_scalar_t tst_input(ccl_datatype_t dt, ccl_redop_t op, int nranks, uint64_t seed, int rank,
                       size_t index)
{
    gen_t g;
    gen_init(&g, dt, op, nranks, seed);
    return gen_value(&g, rank, index);
}

void tst_store(void *buf, size_t index, ccl_datatype_t dt, tst_scalar_t v)
{
    switch (dt) {
    case CCL_INT8: ((int8_t *)buf)[index] = (int8_t)v.i; break;
    case CCL_UINT8: ((uint8_t *)buf)[index] = (uint8_t)v.u; break;
    case CCL_INT32: ((int32_t *)buf)[index] = (int32_t)v.i; break;
    case CCL_UINT32: ((uint32_t *)buf)[index] = (uint32_t)v.u; break;
    case CCL_INT64: ((int64_t *)buf)[index] = v.i; break;
    case CCL_UINT64: ((uint64_t *)buf)[index] = v.u; break;
    case CCL_FLOAT32: ((float *)buf)[index] = (float)v.f; break;
    case CCL_FLOAT64: ((double *)buf)[index] = v.f; break;
    default: abort();
    }
}

tst_scalar_t tst_load(const void *buf, size_t index, ccl_datatype_t dt)
{
    tst_scalar_t v;
    switch (dt) {
    case CCL_INT8: v.i = ((const int8_t *)buf)[index]; break;
    case CCL_UINT8: v.u = ((const uint8_t *)buf)[index]; break;
    case CCL_INT32: v.i = ((const int32_t *)buf)[index]; break;
    case CCL_UINT32: v.u = ((const uint32_t *)buf)[index]; break;
    case CCL_INT64: v.i = ((const int64_t *)buf)[index]; break;
    case CCL_UINT64: v.u = ((const uint64_t *)buf)[index]; break;
    case CCL_FLOAT32: v.f = ((const float *)buf)[index]; break;
    case CCL_FLOAT64: v.f = ((const double *)buf)[index]; break;
    default: abort();
    }
    return v;
}

void tst_fill_input(void *buf, size_t count, ccl_datatype_t dt, ccl_redop_t op, int nranks,
                    uint64_t seed, int rank, size_t first)
{
    gen_t g;
    gen_init(&g, dt, op, nranks, seed);
    for (size_t k = 0; k < count; k++)
        tst_store(buf, k, dt, gen_value(&g, rank, first + k));
}

void tst_format(char *out, size_t outlen, ccl_datatype_t dt, tst_scalar_t v)
{
    if (tst_dtype_is_float(dt))
        snprintf(out, outlen, "%.17g (%a)", v.f, v.f);
    else if (is_signed_int(dt))
        snprintf(out, outlen, "%" PRId64, v.i);
    else
        snprintf(out, outlen, "%" PRIu64 " (0x%" PRIx64 ")", v.u, v.u);
}

/* ---- reference ------------------------------------------------------------ */

/* Float avg: the library may compute sum/n, sum*(1/n), or pre-multiply each
 * input by 1/n and then add (NCCL does the last). The sum itself is exact on
 * our data, so the error comes from the scaling and from the additions of the
 * scaled terms: at most about (n + 2) unit roundoffs of sum|x_i|/n. Using
 * machine epsilon (two unit roundoffs) per step gives a 2x margin. */
static double tol_avg(ccl_datatype_t dt, int nranks, double sum_abs)
{
    double eps = dt == CCL_FLOAT32 ? (double)FLT_EPSILON : DBL_EPSILON;
    return (double)(nranks + 2) * eps * (sum_abs / nranks);
}

static tst_scalar_t gen_reference(const gen_t *g, size_t index, double *tol)
{
    tst_scalar_t acc, v;
    int n = g->nranks;
    if (tol)
        *tol = 0.0;
    acc = gen_value(g, 0, index);

    if (g->is_float) {
        double sum_abs = fabs(acc.f);
        for (int r = 1; r < n; r++) {
            v = gen_value(g, r, index);
            switch ((int)g->op) {
            case CCL_SUM:
            case CCL_AVG: acc.f += v.f; sum_abs += fabs(v.f); break;
            case CCL_PROD: acc.f *= v.f; break;
            case CCL_MAX: acc.f = v.f > acc.f ? v.f : acc.f; break;
            case CCL_MIN: acc.f = v.f < acc.f ? v.f : acc.f; break;
            default: break;
            }
        }
        if (g->op == CCL_AVG) {
            acc.f /= n;
            if (tol)
                *tol = tol_avg(g->dt, n, sum_abs);
        }
        /* Round to the type once: exact for everything but avg. */
        if (g->dt == CCL_FLOAT32)
            acc.f = (double)(float)acc.f;
        return acc;
    }

    if (g->is_signed) {
        for (int r = 1; r < n; r++) {
            v = gen_value(g, r, index);
            switch ((int)g->op) {
            case CCL_SUM:
            case CCL_AVG: acc.i += v.i; break;
            case CCL_PROD: acc.i *= v.i; break;
            case CCL_MAX: acc.i = v.i > acc.i ? v.i : acc.i; break;
            case CCL_MIN: acc.i = v.i < acc.i ? v.i : acc.i; break;
            default: break;
            }
        }
        if (g->op == CCL_AVG)
            acc.i /= n; /* C division truncates toward zero, as NCCL's avg */
        return acc;
    }

    for (int r = 1; r < n; r++) {
        v = gen_value(g, r, index);
        switch ((int)g->op) {
        case CCL_SUM:
        case CCL_AVG: acc.u += v.u; break;
        case CCL_PROD: acc.u *= v.u; break;
        case CCL_MAX: acc.u = v.u > acc.u ? v.u : acc.u; break;
        case CCL_MIN: acc.u = v.u < acc.u ? v.u : acc.u; break;
        default: break;
        }
    }
    /* Arithmetic mod 2^64 then truncation equals arithmetic mod 2^bits. */
    acc.u &= g->umax;
    if (g->op == CCL_AVG)
        acc.u /= (uint64_t)n;
    return acc;
}

tst_scalar_t tst_reference_allreduce(ccl_datatype_t dt, ccl_redop_t op, int nranks,
                                     uint64_t seed, size_t index, double *tol)
{
    gen_t g;
    gen_init(&g, dt, op, nranks, seed);
    return gen_reference(&g, index, tol);
}

/* ---- checks --------------------------------------------------------------- */

int tst_equal(ccl_datatype_t dt, tst_scalar_t expected, tst_scalar_t got, double tol)
{
    if (tst_dtype_is_float(dt)) {
        if (isnan(got.f) || isnan(expected.f))
            return 0;
        if (tol == 0.0)
            return got.f == expected.f;
        return fabs(got.f - expected.f) <= tol;
    }
    if (is_signed_int(dt)) {
        int bits = (int)tst_dtype_size(dt) * 8;
        return sign_extend((uint64_t)expected.i, bits) == got.i;
    }
    return expected.u == got.u;
}

static void note_bad(tst_mismatch_t *mm, size_t nbad, size_t index, ccl_datatype_t dt,
                     tst_scalar_t expected, tst_scalar_t got, double tol)
{
    if (!mm || nbad != 1)
        return;
    mm->index = index;
    tst_format(mm->expected, sizeof(mm->expected), dt, expected);
    if (tol > 0.0) {
        size_t len = strlen(mm->expected);
        snprintf(mm->expected + len, sizeof(mm->expected) - len, " +- %.3g", tol);
    }
    tst_format(mm->got, sizeof(mm->got), dt, got);
}

size_t tst_check_allreduce(const void *recv, size_t count, ccl_datatype_t dt, ccl_redop_t op,
                           int nranks, uint64_t seed, tst_mismatch_t *mm)
{
    gen_t g;
    size_t nbad = 0;
    gen_init(&g, dt, op, nranks, seed);
    for (size_t i = 0; i < count; i++) {
        double tol;
        tst_scalar_t e = gen_reference(&g, i, &tol);
        tst_scalar_t v = tst_load(recv, i, dt);
        if (!tst_equal(dt, e, v, tol))
            note_bad(mm, ++nbad, i, dt, e, v, tol);
    }
    if (mm)
        mm->nbad = nbad;
    return nbad;
}

size_t tst_check_input(const void *buf, size_t count, ccl_datatype_t dt, ccl_redop_t op,
                       int nranks, uint64_t seed, int rank, size_t first, tst_mismatch_t *mm)
{
    gen_t g;
    size_t nbad = 0;
    gen_init(&g, dt, op, nranks, seed);
    for (size_t k = 0; k < count; k++) {
        tst_scalar_t e = gen_value(&g, rank, first + k);
        /* Round-trip through the type so float32 compares as stored. */
        char tmp[8];
        tst_store(tmp, 0, dt, e);
        e = tst_load(tmp, 0, dt);
        tst_scalar_t v = tst_load(buf, k, dt);
        if (!tst_equal(dt, e, v, 0.0))
            note_bad(mm, ++nbad, k, dt, e, v, 0.0);
    }
    if (mm)
        mm->nbad = nbad;
    return nbad;
}

size_t tst_check_allgather(const void *recv, size_t count, ccl_datatype_t dt, int nranks,
                           uint64_t seed, tst_mismatch_t *mm)
{
    size_t nbad = 0;
    size_t esz = tst_dtype_size(dt);
    for (int r = 0; r < nranks; r++) {
        tst_mismatch_t one;
        size_t b = tst_check_input((const char *)recv + (size_t)r * count * esz, count, dt,
                                   TST_OP_COPY, nranks, seed, r, 0, &one);
        if (b && mm && nbad == 0) {
            *mm = one;
            mm->index = (size_t)r * count + one.index;
        }
        nbad += b;
    }
    if (mm)
        mm->nbad = nbad;
    return nbad;
}

/* ---- guarded buffers ------------------------------------------------------ */

void *tst_gbuf_alloc(tst_gbuf_t *g, size_t bytes, size_t misalign, int use_ccl_mem)
{
    memset(g, 0, sizeof(*g));
    g->bytes = bytes;
    g->total = TST_GUARD_BYTES + misalign + bytes + TST_GUARD_BYTES;
    void *p = NULL;
    if (use_ccl_mem) {
        ccl_result_t rc = ccl_mem_alloc(&p, g->total);
        if (rc != CCL_SUCCESS || !p) {
            fprintf(stderr, "ccl_mem_alloc(%zu) failed: %s\n", g->total, ccl_get_error_string(rc));
            abort();
        }
        g->from_ccl = 1;
    } else if (posix_memalign(&p, 64, g->total) != 0) {
        fprintf(stderr, "posix_memalign(%zu) failed\n", g->total);
        abort();
    }
    g->base = p;
    g->user = g->base + TST_GUARD_BYTES + misalign;
    memset(g->base, TST_GUARD_BYTE, TST_GUARD_BYTES + misalign);
    memset(g->user, TST_FILL_BYTE, bytes);
    memset(g->user + bytes, TST_GUARD_BYTE, TST_GUARD_BYTES);
    return g->user;
}

int tst_gbuf_check(const tst_gbuf_t *g, char *msg, size_t msglen)
{
    for (unsigned char *p = g->base; p < g->user; p++) {
        if (*p != TST_GUARD_BYTE) {
            snprintf(msg, msglen, "byte %td before the buffer was overwritten (0x%02x)",
                     g->user - p, *p);
            return 1;
        }
    }
    for (size_t k = 0; k < TST_GUARD_BYTES; k++) {
        unsigned char b = g->user[g->bytes + k];
        if (b != TST_GUARD_BYTE) {
            snprintf(msg, msglen,
                     "byte %zu past the end of a %zu-byte buffer was overwritten (0x%02x)", k + 1,
                     g->bytes, b);
            return 1;
        }
    }
    return 0;
}

void tst_gbuf_free(tst_gbuf_t *g)
{
    if (!g->base)
        return;
    if (g->from_ccl)
        ccl_mem_free(g->base);
    else
        free(g->base);
    memset(g, 0, sizeof(*g));
}

/* ---- process probes --------------------------------------------------------- */

double tst_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int count_dir(const char *path)
{
    DIR *d = opendir(path);
    int n = 0;
    struct dirent *e;
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.')
            n++;
    }
    closedir(d);
    return n;
}

int tst_count_fds(void)
{
    int n = count_dir("/proc/self/fd");
    return n < 0 ? n : n - 1; /* minus the directory's own descriptor */
}

int tst_count_threads(void)
{
    return count_dir("/proc/self/task");
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int tst_list_ccl_shm(char *out, size_t outlen)
{
    DIR *d = opendir("/dev/shm");
    char *names[512];
    int n = 0;
    struct dirent *e;
    if (outlen)
        out[0] = '\0';
    if (!d)
        return 0;
    while ((e = readdir(d)) != NULL && n < 512) {
        if (e->d_name[0] != '.' && strcasestr(e->d_name, "ccl"))
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof(names[0]), cmp_str);
    size_t used = 0;
    for (int k = 0; k < n; k++) {
        if (outlen > used)
            used += (size_t)snprintf(out + used, outlen - used, "%s\n", names[k]);
        free(names[k]);
    }
    return n;
}

int tst_shm_is_mapped(const char *name)
{
    char want[300], path[300], line[1024], link[512];
    DIR *proc = opendir("/proc");
    struct dirent *e;
    int found = 0;
    snprintf(want, sizeof(want), "/dev/shm/%s", name);
    if (!proc)
        return 0;
    while (!found && (e = readdir(proc)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        snprintf(path, sizeof(path), "/proc/%s/maps", e->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            while (!found && fgets(line, sizeof(line), f))
                found = strstr(line, want) != NULL;
            fclose(f);
        }
        /* An open descriptor also counts: the owner may not have mapped it yet. */
        snprintf(path, sizeof(path), "/proc/%s/fd", e->d_name);
        DIR *fds = found ? NULL : opendir(path);
        if (fds) {
            struct dirent *fe;
            while (!found && (fe = readdir(fds)) != NULL) {
                char fp[600];
                snprintf(fp, sizeof(fp), "%s/%s", path, fe->d_name);
                ssize_t len = readlink(fp, link, sizeof(link) - 1);
                if (len > 0) {
                    link[len] = '\0';
                    found = strncmp(link, want, strlen(want)) == 0;
                }
            }
            closedir(fds);
        }
    }
    closedir(proc);
    return found;
}

int tst_timeout(int base_s)
{
    const char *s = getenv("TEST_TIMEOUT_SCALE");
    double scale = s && *s ? atof(s) : 1.0;
    if (!(scale > 0.0))
        scale = 1.0;
    return (int)(base_s * scale + 0.5);
}

long tst_env_long(const char *name, long dflt)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 0);
    return (errno || *end) ? dflt : v;
}
