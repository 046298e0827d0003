/*
 * test_common.c - deterministic inputs, serial references and checks for the
 * public-API tests; see test_common.h.
 *
 * Why the value ranges look the way they do (every reference below is exact):
 *  - Unsigned sum/prod/premulsum use the full range: wrap-around mod 2^bits
 *    is defined and the reference wraps the same way, so wrap bugs are caught.
 *  - Signed sum/avg draw from [-MAX/n, MAX/n], signed premulsum from
 *    [-MAX/3n, MAX/3n] with scalars in +-{1,2,3}, and signed prod from [-b, b]
 *    with b^n <= MAX, so neither the library nor the reference ever overflows
 *    (signed overflow is undefined in C, so it cannot be tested portably).
 *  - max/min/copy use full-range integers (extremes included on purpose) and
 *    floats with random mantissas (any finite bit pattern for the 16- and
 *    8-bit types), never zero (so +0/-0 ties cannot make max/min ambiguous)
 *    and never NaN.
 *  - Float sum/avg/premulsum use multiples k * 2^-q of a grid and scalars
 *    +-2^j, with |k| bounded so that the sum of |x * scalar| over all ranks
 *    fits the type's significand (2^p grid steps): then every partial sum is
 *    exact, whatever order the library adds in and whether it rounds after
 *    every step (as NCCL does for half types) or once. For float32/64 the
 *    grid is 1/4 and 1/1024 (as before the small types came); float16 1/4,
 *    bfloat16 1/2, fp8 1 (e4m3 sums stay within 16, e5m2 within 8). When n
 *    outgrows 2^p, only the first 2^p ranks contribute +-1.
 *  - Float prod uses {+-1, +-2, +-0.5, 0.25, 0} so every product is a power
 *    of two (or zero) and exact; fp8 drops 0.25, and the 16- and 8-bit types
 *    use +-1 from rank 8 on, so products stay inside their exponent range.
 *  - Float avg is the only inexact case (sum / n rounds); see tol_avg().
 *
 * The 16- and 8-bit float types are converted here, independently of the
 * library: decode exactly, encode with round-to-nearest-even; float16 and
 * bfloat16 overflow to infinity, fp8 e4m3 (OCP E4M3FN) and e5m2 saturate to
 * their largest finite value (448 and 57344).
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

const ccl_datatype_t tst_dtypes[] = {CCL_INT8,    CCL_UINT8,   CCL_INT32,       CCL_UINT32,
                                     CCL_INT64,   CCL_UINT64,  CCL_FLOAT16,     CCL_FLOAT32,
                                     CCL_FLOAT64, CCL_BFLOAT16, CCL_FLOAT8_E4M3, CCL_FLOAT8_E5M2};
const int tst_num_dtypes = (int)(sizeof(tst_dtypes) / sizeof(tst_dtypes[0]));
const ccl_redop_t tst_ops[] = {CCL_SUM, CCL_PROD, CCL_MAX, CCL_MIN, CCL_AVG, TST_OP_PREMULSUM};
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
    case -2: return "premulsum";
    default: return "?";
    }
}

int tst_dtype_is_float(ccl_datatype_t dt)
{
    return dt == CCL_FLOAT32 || dt == CCL_FLOAT64 || dt == CCL_FLOAT16 || dt == CCL_BFLOAT16 ||
           dt == CCL_FLOAT8_E4M3 || dt == CCL_FLOAT8_E5M2;
}

/* ---- 16- and 8-bit floats ---------------------------------------------------- */

typedef struct {
    int ebits, mbits, bias;
    int ieee;          /* all-ones exponent is inf/NaN (else only S.1111.111 is NaN: e4m3) */
    int saturate;      /* overflow gives the largest finite value instead of inf */
    uint32_t maxbits;  /* largest finite value */
    uint32_t nanbits;
    double maxval;     /* the value of maxbits */
} small_float_t;

static const small_float_t fmt_f16 = {5, 10, 15, 1, 0, 0x7bff, 0x7e00, 65504.0};
static const small_float_t fmt_bf16 = {8, 7, 127, 1, 0, 0x7f7f, 0x7fc0, 0x1.fep127};
static const small_float_t fmt_e4m3 = {4, 3, 7, 0, 1, 0x7e, 0x7f, 448.0};
static const small_float_t fmt_e5m2 = {5, 2, 15, 1, 1, 0x7b, 0x7e, 57344.0};

static const small_float_t *small_fmt(ccl_datatype_t dt)
{
    switch (dt) {
    case CCL_FLOAT16: return &fmt_f16;
    case CCL_BFLOAT16: return &fmt_bf16;
    case CCL_FLOAT8_E4M3: return &fmt_e4m3;
    case CCL_FLOAT8_E5M2: return &fmt_e5m2;
    default: return NULL;
    }
}

static int small_is_nan_or_inf(const small_float_t *f, uint32_t bits)
{
    uint32_t emask = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
    uint32_t e = (bits >> f->mbits) & emask, m = bits & mmask;
    return f->ieee ? e == emask : (e == emask && m == mmask);
}

/* 2^e for a normal double exponent, without libm (these run per element). */
static double pow2(int e)
{
    uint64_t b = (uint64_t)(e + 1023) << 52;
    double d;
    memcpy(&d, &b, sizeof(d));
    return d;
}

/* floor(log2(a)) of a positive normal double. */
static int ilog2(double a)
{
    uint64_t b;
    memcpy(&b, &a, sizeof(b));
    return (int)((b >> 52) & 0x7ff) - 1023;
}

static double small_decode(const small_float_t *f, uint32_t bits)
{
    uint32_t emask = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
    uint32_t e = (bits >> f->mbits) & emask, m = bits & mmask;
    int neg = (bits >> (f->ebits + f->mbits)) & 1;
    double v;
    if (small_is_nan_or_inf(f, bits))
        v = (f->ieee && m == 0) ? INFINITY : NAN;
    else if (e == 0)
        v = (double)m * pow2(1 - f->bias - f->mbits);
    else
        v = (double)(m | (mmask + 1)) * pow2((int)e - f->bias - f->mbits);
    return neg ? -v : v;
}

static uint32_t small_encode(const small_float_t *f, double x)
{
    uint32_t sign = signbit(x) ? 1u << (f->ebits + f->mbits) : 0;
    uint32_t inf = f->ieee ? ((1u << f->ebits) - 1) << f->mbits : f->maxbits;
    uint32_t over = sign | (f->saturate ? f->maxbits : inf);
    double a = fabs(x);
    int emin = 1 - f->bias;
    if (isnan(x))
        return sign | f->nanbits;
    if (isinf(a))
        return over;
    if (a < pow2(emin - f->mbits - 2)) /* below half the smallest subnormal: zero */
        return sign;
    int e = ilog2(a);
    if (e < emin) /* subnormal: the step of the smallest binade */
        e = emin;
    /* Round to a multiple of the binade's step, to nearest, ties to even:
     * y < 2^12, and adding 2^52 leaves no fraction bits, so the FPU's own
     * rounding (to nearest even) does it. */
    double y = a * pow2(f->mbits - e);
    double r = ((y + 0x1p52) - 0x1p52) * pow2(e - f->mbits);
    if (r > f->maxval)
        return over;
    if (r < pow2(emin))
        return sign | (uint32_t)(r * pow2(f->mbits - emin));
    e = ilog2(r);
    uint32_t m = (uint32_t)(r * pow2(f->mbits - e)) - (1u << f->mbits);
    return sign | ((uint32_t)(e + f->bias) << f->mbits) | m;
}

/* Significand bits (with the implicit one) of a float type. */
static int float_precision(ccl_datatype_t dt)
{
    const small_float_t *f = small_fmt(dt);
    return f ? f->mbits + 1 : dt == CCL_FLOAT32 ? 24 : 53;
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

#define GEN_MAX_RANKS 64

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
    const small_float_t *sf; /* 16- and 8-bit float types */
    int fgrid;      /* float sum/avg/premulsum data: k * 2^-fgrid ... */
    int64_t fk[GEN_MAX_RANKS]; /* ... with |k| <= fk[rank] */
    tst_scalar_t scalar[GEN_MAX_RANKS]; /* premulsum scalar of each rank */
    uint64_t umax;  /* all-ones of the width */
    int64_t smax, smin;
    int64_t sbound; /* signed sum/avg/prod/premulsum: values in [-sbound, sbound] */
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

/* The premulsum scalar of `rank` before any fitting to the data range. */
static uint64_t scalar_hash(const gen_t *g, int rank)
{
    return tst_mix64(g->seed ^ tst_mix64(0x5CA1AB1Eull + (uint64_t)(unsigned)rank));
}

/* Float data of `rank` for sum/avg/premulsum: the sum over ranks of
 * |x * scalar| must stay within 2^p steps of the finest grid the products
 * land on (2^-(fgrid+1) when scalars may be 1/2), so each rank gets an
 * n-th of that budget; `mult` is how many such steps one unit of k is. */
static int64_t float_kbound(const gen_t *g, int rank, int64_t mult)
{
    int p = float_precision(g->dt);
    int64_t cap = g->dt == CCL_FLOAT32 ? 4096 : g->dt == CCL_FLOAT64 ? (INT64_C(1) << 40)
                                                                    : INT64_MAX;
    int64_t share = (INT64_C(1) << p) / g->nranks;
    if (share == 0)
        share = rank < (1 << p) ? 1 : 0;
    int64_t b = share / mult;
    return b < cap ? b : cap;
}

static void gen_float_init(gen_t *g)
{
    /* fp8 has too few bits for scalars of 1/2 on its integer grid. */
    int halves = !(g->dt == CCL_FLOAT8_E4M3 || g->dt == CCL_FLOAT8_E5M2);
    switch (g->dt) {
    case CCL_FLOAT32: g->fgrid = 2; break;
    case CCL_FLOAT64: g->fgrid = 10; break;
    case CCL_FLOAT16: g->fgrid = 2; break;
    case CCL_BFLOAT16: g->fgrid = 1; break;
    default: g->fgrid = 0; break;
    }
    for (int r = 0; r < g->nranks && r < GEN_MAX_RANKS; r++) {
        if (g->op != TST_OP_PREMULSUM) {
            g->fk[r] = float_kbound(g, r, 1);
            continue;
        }
        /* Scalar +-2^j, j in {-1, 0, 1} ({0, 1} for fp8), lowered until this
         * rank's share allows |k| >= 1. */
        uint64_t h = scalar_hash(g, r);
        int jmin = halves ? -1 : 0;
        int j = jmin + (int)(h % (uint64_t)(2 - jmin));
        int64_t mult = (int64_t)1 << (j - jmin);
        while (j > jmin && float_kbound(g, r, mult) == 0) {
            j--;
            mult >>= 1;
        }
        g->fk[r] = float_kbound(g, r, mult);
        g->scalar[r].f = ((h >> 32) & 1) ? -ldexp(1.0, j) : ldexp(1.0, j);
    }
}

static void gen_init(gen_t *g, ccl_datatype_t dt, ccl_redop_t op, int nranks, uint64_t seed)
{
    memset(g, 0, sizeof(*g));
    g->dt = dt;
    g->op = op;
    g->nranks = nranks < 1 ? 1 : nranks;
    if (g->nranks > GEN_MAX_RANKS) {
        fprintf(stderr, "test_common: at most %d ranks\n", GEN_MAX_RANKS);
        abort();
    }
    g->seed = tst_mix64(seed);
    g->bits = (int)tst_dtype_size(dt) * 8;
    g->is_signed = is_signed_int(dt);
    g->is_float = tst_dtype_is_float(dt);
    g->sf = small_fmt(dt);
    g->umax = g->bits == 64 ? UINT64_MAX : ((uint64_t)1 << g->bits) - 1;
    g->smax = (int64_t)(g->umax >> 1);
    g->smin = -g->smax - 1;
    if (g->is_float) {
        gen_float_init(g);
    } else if (g->is_signed) {
        if (op == CCL_SUM || op == CCL_AVG) {
            g->sbound = g->smax / g->nranks;
        } else if (op == TST_OP_PREMULSUM) {
            g->sbound = g->smax / g->nranks / 3;
            for (int r = 0; r < g->nranks; r++) {
                uint64_t h = scalar_hash(g, r);
                int64_t s = 1 + (int64_t)(h % 3);
                g->scalar[r].i = ((h >> 32) & 1) ? -s : s;
            }
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
    } else {
        if (op == CCL_AVG)
            g->ubound = g->umax / (uint64_t)g->nranks;
        if (op == TST_OP_PREMULSUM) {
            /* Any scalar: the products and the sum wrap like the reference. */
            for (int r = 0; r < g->nranks; r++)
                g->scalar[r].u = (scalar_hash(g, r) >> 3) & g->umax;
        }
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

/* Copy, max and min data of the 16- and 8-bit types: any finite, nonzero
 * bit pattern. */
static uint32_t small_bits(const small_float_t *f, uint64_t h)
{
    int width = 1 + f->ebits + f->mbits;
    uint32_t bits = (uint32_t)(h >> 8) & ((1u << width) - 1);
    if (small_is_nan_or_inf(f, bits))
        bits ^= 1u << f->mbits;
    if ((bits & ((1u << (width - 1)) - 1)) == 0)
        bits |= 1;
    return bits;
}

static double gen_float_value(const gen_t *g, int rank, uint64_t h)
{
    switch ((int)g->op) {
    case CCL_SUM:
    case CCL_AVG:
    case TST_OP_PREMULSUM:
        return (double)uniform_signed(h, g->fk[rank]) * pow2(-g->fgrid);
    case CCL_PROD: {
        static const double table[8] = {1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 1.0, 0.25};
        static const double fp8_table[8] = {1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 1.0, -1.0};
        double v;
        if (g->sf && rank >= 8)
            v = (h & 1) ? -1.0 : 1.0;
        else if (g->sf && g->sf->ebits + g->sf->mbits == 7)
            v = fp8_table[h & 7];
        else
            v = table[h & 7];
        return (h >> 8) % 61 == 0 ? 0.0 : v;
    }
    default: /* copy, max, min */
        if (g->sf) {
            return small_decode(g->sf, small_bits(g->sf, h));
        } else {
            int fbits = g->dt == CCL_FLOAT32 ? 24 : 53;
            uint64_t m = (h >> (64 - fbits)) | 1;
            int e = (int)((h >> 3) & 31) - 16;
            double v = ldexp((double)m, e - fbits);
            return (h & 1) ? -v : v;
        }
    }
}

static tst_scalar_t gen_value(const gen_t *g, int rank, size_t index)
{
    tst_scalar_t v;
    uint64_t h = gen_hash(g, rank, index);
    v.u = 0;

    if (g->is_float) {
        v.f = gen_float_value(g, rank, h);
        return v;
    }

    if (g->is_signed) {
        switch ((int)g->op) {
        case CCL_SUM:
        case CCL_AVG:
        case TST_OP_PREMULSUM:
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
    default: /* copy, sum and premulsum (wrap), max, min; extremes 1 time in 64 */
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

tst_scalar_t tst_premul_scalar(ccl_datatype_t dt, int nranks, uint64_t seed, int rank)
{
    gen_t g;
    gen_init(&g, dt, TST_OP_PREMULSUM, nranks, seed);
    return g.scalar[rank];
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
    case CCL_FLOAT16:
    case CCL_BFLOAT16:
        ((uint16_t *)buf)[index] = (uint16_t)small_encode(small_fmt(dt), v.f);
        break;
    case CCL_FLOAT8_E4M3:
    case CCL_FLOAT8_E5M2:
        ((uint8_t *)buf)[index] = (uint8_t)small_encode(small_fmt(dt), v.f);
        break;
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
    case CCL_FLOAT16:
    case CCL_BFLOAT16: v.f = small_decode(small_fmt(dt), ((const uint16_t *)buf)[index]); break;
    case CCL_FLOAT8_E4M3:
    case CCL_FLOAT8_E5M2: v.f = small_decode(small_fmt(dt), ((const uint8_t *)buf)[index]); break;
    default: abort();
    }
    return v;
}

/* x rounded to the type, as a store and load would. */
static double round_to_type(ccl_datatype_t dt, double x)
{
    if (dt == CCL_FLOAT32)
        return (double)(float)x;
    if (small_fmt(dt))
        return small_decode(small_fmt(dt), small_encode(small_fmt(dt), x));
    return x;
}

void tst_fill_input(void *buf, size_t count, ccl_datatype_t dt, ccl_redop_t op, int nranks,
                    uint64_t seed, int rank, size_t first)
{
    gen_t g;
    gen_init(&g, dt, op, nranks, seed);
    if (g.sf && (op == TST_OP_COPY || op == CCL_MAX || op == CCL_MIN)) {
        /* The bit patterns themselves, skipping a decode and an encode. */
        for (size_t k = 0; k < count; k++) {
            uint32_t bits = small_bits(g.sf, gen_hash(&g, rank, first + k));
            if (tst_dtype_size(dt) == 2)
                ((uint16_t *)buf)[k] = (uint16_t)bits;
            else
                ((uint8_t *)buf)[k] = (uint8_t)bits;
        }
        return;
    }
    for (size_t k = 0; k < count; k++)
        tst_store(buf, k, dt, gen_value(&g, rank, first + k));
}

void tst_format(char *out, size_t outlen, ccl_datatype_t dt, tst_scalar_t v)
{
    const small_float_t *f = small_fmt(dt);
    if (f)
        snprintf(out, outlen, "%.9g (0x%0*x)", v.f, f->ebits + f->mbits == 7 ? 2 : 4,
                 (unsigned)small_encode(f, v.f));
    else if (tst_dtype_is_float(dt))
        snprintf(out, outlen, "%.17g (%a)", v.f, v.f);
    else if (is_signed_int(dt))
        snprintf(out, outlen, "%" PRId64, v.i);
    else
        snprintf(out, outlen, "%" PRIu64 " (0x%" PRIx64 ")", v.u, v.u);
}

/* ---- reference ------------------------------------------------------------ */

/* Float avg: the library may compute sum/n, sum*(1/n), or pre-multiply each
 * input by 1/n and then add (NCCL does the last), rounding to the type after
 * every step for the 16- and 8-bit types. The sum itself is exact on our
 * data, so the error comes from the scaling and from the additions of the
 * scaled terms: at most about (n + 2) unit roundoffs of sum|x_i|/n, plus as
 * many half steps of the subnormal grid. Using machine epsilon (two unit
 * roundoffs) and a whole subnormal step per operation gives a 2x margin. */
static double tol_avg(ccl_datatype_t dt, int nranks, double sum_abs)
{
    double eps = ldexp(1.0, 1 - float_precision(dt));
    const small_float_t *f = small_fmt(dt);
    double tiny = f ? ldexp(1.0, 1 - f->bias - f->mbits) : 0.0;
    return (double)(nranks + 2) * (eps * (sum_abs / nranks) + tiny);
}

static tst_scalar_t gen_reference(const gen_t *g, size_t index, double *tol)
{
    tst_scalar_t acc, v;
    int n = g->nranks;
    int premul = g->op == TST_OP_PREMULSUM;
    if (tol)
        *tol = 0.0;
    acc = gen_value(g, 0, index);

    if (g->is_float) {
        if (premul)
            acc.f *= g->scalar[0].f;
        double sum_abs = fabs(acc.f);
        for (int r = 1; r < n; r++) {
            v = gen_value(g, r, index);
            switch ((int)g->op) {
            case TST_OP_PREMULSUM: v.f *= g->scalar[r].f; /* fall through */
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
        acc.f = round_to_type(g->dt, acc.f);
        return acc;
    }

    if (g->is_signed) {
        if (premul)
            acc.i *= g->scalar[0].i;
        for (int r = 1; r < n; r++) {
            v = gen_value(g, r, index);
            switch ((int)g->op) {
            case TST_OP_PREMULSUM: acc.i += v.i * g->scalar[r].i; break;
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

    if (premul)
        acc.u *= g->scalar[0].u;
    for (int r = 1; r < n; r++) {
        v = gen_value(g, r, index);
        switch ((int)g->op) {
        case TST_OP_PREMULSUM: acc.u += v.u * g->scalar[r].u; break;
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

tst_scalar_t tst_reference(ccl_datatype_t dt, ccl_redop_t op, int nranks, uint64_t seed,
                           size_t index, double *tol)
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

size_t tst_check_reduced(const void *recv, size_t count, ccl_datatype_t dt, ccl_redop_t op,
                         int nranks, uint64_t seed, size_t first, tst_mismatch_t *mm)
{
    gen_t g;
    size_t nbad = 0;
    gen_init(&g, dt, op, nranks, seed);
    for (size_t i = 0; i < count; i++) {
        double tol;
        tst_scalar_t e = gen_reference(&g, first + i, &tol);
        tst_scalar_t v = tst_load(recv, i, dt);
        if (!tst_equal(dt, e, v, tol))
            note_bad(mm, ++nbad, i, dt, e, v, tol);
    }
    if (mm)
        mm->nbad = nbad;
    return nbad;
}

/* Bit for bit: data that was only moved, or must not have been touched,
 * keeps its exact bytes. Compared a chunk at a time against a freshly
 * generated copy; only a chunk that differs is looked at element by element. */
size_t tst_check_input(const void *buf, size_t count, ccl_datatype_t dt, ccl_redop_t op,
                       int nranks, uint64_t seed, int rank, size_t first, tst_mismatch_t *mm)
{
    enum { CHUNK = 4096 };
    uint64_t want[CHUNK];
    size_t esz = tst_dtype_size(dt), nbad = 0;
    for (size_t k0 = 0; k0 < count; k0 += CHUNK) {
        size_t m = count - k0 < CHUNK ? count - k0 : CHUNK;
        const char *got = (const char *)buf + k0 * esz;
        tst_fill_input(want, m, dt, op, nranks, seed, rank, first + k0);
        if (memcmp(got, want, m * esz) == 0)
            continue;
        for (size_t k = 0; k < m; k++) {
            if (memcmp(got + k * esz, (const char *)want + k * esz, esz) != 0)
                note_bad(mm, ++nbad, k0 + k, dt, tst_load(want, k, dt), tst_load(got, k, dt), 0.0);
        }
    }
    if (mm)
        mm->nbad = nbad;
    return nbad;
}

size_t tst_check_gathered(const void *recv, size_t count, ccl_datatype_t dt, int nranks,
                          uint64_t seed, size_t first, tst_mismatch_t *mm)
{
    size_t nbad = 0;
    size_t esz = tst_dtype_size(dt);
    for (int r = 0; r < nranks; r++) {
        tst_mismatch_t one;
        size_t b = tst_check_input((const char *)recv + (size_t)r * count * esz, count, dt,
                                   TST_OP_COPY, nranks, seed, r, first, &one);
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

size_t tst_check_bytes(const void *buf, size_t bytes, unsigned char byte)
{
    const unsigned char *p = buf;
    for (size_t k = 0; k < bytes; k++) {
        if (p[k] != byte)
            return k;
    }
    return bytes;
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
    if (!g->base) /* never allocated: nothing to damage */
        return 0;
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

uint64_t tst_seed(const char *name)
{
    uint64_t seed = (uint64_t)tst_env_long("CCL_TEST_SEED", 12345);
    printf("%s: seed %llu\n", name, (unsigned long long)seed);
    fflush(stdout);
    return seed;
}
