/*
 * ccl_perf_data.c - ccl-perf's dtype table, the input data of checked calls
 * and the count of wrong result elements (-c).
 *
 * Inputs are small non-negative integers drawn from a hash of (seed, rank,
 * index), so every rank can recompute any other rank's input and the exact
 * result of any reduction order: ranges are chosen per dtype, op and rank
 * count so that every partial sum or product stays an exactly representable
 * integer (fp8 holds integers exactly only up to 8 or 16). Only float avg is
 * compared with a tolerance, since implementations may pre-divide each input.
 * The expected results are computed here on the host, never through ccl.
 */
#include <math.h>
#include <string.h>

#include "ccl_perf.h"

/* nccl-tests' `-d all` order; names as nccl-tests prints them. */
const struct perf_dtype perf_dtypes[] = {
    {CCL_INT8, "int8", "char", 1, PERF_SINT, 0, 0, 0, 127, 6},
    {CCL_UINT8, "uint8", "", 1, PERF_UINT, 0, 0, 0, 254, 7},
    {CCL_INT32, "int32", "int", 4, PERF_SINT, 0, 0, 0, 2147483647.0, 16},
    {CCL_UINT32, "uint32", "", 4, PERF_UINT, 0, 0, 0, 4294967294.0, 16},
    {CCL_INT64, "int64", "", 8, PERF_SINT, 0, 0, 0, 9007199254740992.0, 16},
    {CCL_UINT64, "uint64", "", 8, PERF_UINT, 0, 0, 0, 9007199254740992.0, 16},
    {CCL_FLOAT16, "half", "float16 fp16", 2, PERF_MINIFLOAT, 5, 10, 1, 2048, 15},
    {CCL_FLOAT32, "float", "float32 fp32", 4, PERF_FLOAT, 8, 23, 1, 16777216.0, 16},
    {CCL_FLOAT64, "double", "float64 fp64", 8, PERF_FLOAT, 11, 52, 1, 9007199254740992.0, 16},
    {CCL_BFLOAT16, "bfloat16", "bf16", 2, PERF_MINIFLOAT, 8, 7, 1, 256, 16},
    {CCL_FLOAT8_E4M3, "f8e4m3", "e4m3 fp8_e4m3 fp8e4m3 float8_e4m3 f8_e4m3", 1, PERF_MINIFLOAT,
     4, 3, 0, 16, 8},
    {CCL_FLOAT8_E5M2, "f8e5m2", "e5m2 fp8_e5m2 fp8e5m2 float8_e5m2 f8_e5m2", 1, PERF_MINIFLOAT,
     5, 2, 1, 8, 15},
};
const int perf_num_dtypes = (int)(sizeof(perf_dtypes) / sizeof(perf_dtypes[0]));

static int word_in_list(const char *word, const char *list)
{
    size_t n = strlen(word);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, " ");
        if (len == n && strncmp(p, word, n) == 0)
            return 1;
        p += len;
        p += strspn(p, " ");
    }
    return 0;
}

const struct perf_dtype *perf_dtype_by_name(const char *name)
{
    for (int i = 0; i < perf_num_dtypes; i++)
        if (strcmp(perf_dtypes[i].name, name) == 0 || word_in_list(name, perf_dtypes[i].aliases))
            return &perf_dtypes[i];
    return NULL;
}

const struct perf_dtype *perf_dtype_by_id(ccl_datatype_t id)
{
    for (int i = 0; i < perf_num_dtypes; i++)
        if (perf_dtypes[i].id == id)
            return &perf_dtypes[i];
    return NULL;
}

/* ---- small floats (fp16, bf16, fp8): no portable C type, so encode by hand */

static int bias_of(const struct perf_dtype *t) { return (1 << (t->ebits - 1)) - 1; }

/* Round-to-nearest encoding of a finite value in range (inputs and exact
 * expected results only, so no overflow handling is needed). */
static uint32_t mini_encode(const struct perf_dtype *t, double v)
{
    uint32_t sign = 0;
    if (v < 0) {
        sign = 1u << (t->ebits + t->mbits);
        v = -v;
    }
    if (v == 0)
        return sign;
    int e;
    double fr = frexp(v, &e); /* v = fr * 2^e, fr in [0.5, 1) */
    int biased = e - 1 + bias_of(t);
    if (biased <= 0) /* subnormal; a carry into the exponent is still right */
        return sign | (uint32_t)nearbyint(ldexp(v, t->mbits - 1 + bias_of(t)));
    uint32_t mant = (uint32_t)nearbyint(ldexp(fr * 2 - 1, t->mbits));
    return sign | (((uint32_t)biased << t->mbits) + mant);
}

static double mini_decode(const struct perf_dtype *t, uint32_t bits)
{
    uint32_t mmask = (1u << t->mbits) - 1, emax = (1u << t->ebits) - 1;
    uint32_t e = (bits >> t->mbits) & emax, m = bits & mmask;
    int negative = (bits >> (t->ebits + t->mbits)) & 1;
    double v;
    if (t->ieee && e == emax)
        v = m ? NAN : INFINITY;
    else if (!t->ieee && e == emax && m == mmask) /* e4m3 has NaN but no inf */
        v = NAN;
    else if (e == 0)
        v = ldexp(m, 1 - bias_of(t) - t->mbits);
    else
        v = ldexp(m | (mmask + 1), (int)e - bias_of(t) - t->mbits);
    return negative ? -v : v;
}

/* ---- element access ------------------------------------------------------ */

static void store(const struct perf_dtype *t, void *buf, size_t i, int64_t v)
{
    switch (t->id) {
    case CCL_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case CCL_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case CCL_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case CCL_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case CCL_INT64: ((int64_t *)buf)[i] = v; break;
    case CCL_UINT64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case CCL_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case CCL_FLOAT64: ((double *)buf)[i] = (double)v; break;
    default:
        if (t->size == 2)
            ((uint16_t *)buf)[i] = (uint16_t)mini_encode(t, (double)v);
        else
            ((uint8_t *)buf)[i] = (uint8_t)mini_encode(t, (double)v);
    }
}

static double load_float(const struct perf_dtype *t, const void *buf, size_t i)
{
    switch (t->id) {
    case CCL_FLOAT32: return ((const float *)buf)[i];
    case CCL_FLOAT64: return ((const double *)buf)[i];
    default:
        if (t->size == 2)
            return mini_decode(t, ((const uint16_t *)buf)[i]);
        return mini_decode(t, ((const uint8_t *)buf)[i]);
    }
}

void perf_data_encode(const struct perf_dtype *t, void *buf, int64_t v) { store(t, buf, 0, v); }

/* ---- input values ------------------------------------------------------- */

/* A cheap avalanche hash (murmur3's finalizer), so neighbouring elements and
 * ranks get unrelated values and misplaced data is caught. */
static uint32_t mix(uint32_t seed, int rank, size_t i)
{
    uint32_t x = (uint32_t)i * 0x9E3779B1u ^ (uint32_t)((uint64_t)i >> 32);
    x += (uint32_t)rank * 0x85EBCA77u + seed * 0xC2B2AE3Du;
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    return x;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

int perf_premul_scalar(int rank) { return 1 + rank % 2; }

void perf_data_plan(struct perf_data *d, const struct perf_dtype *dt, int op, int reduce,
                    int nranks, uint32_t seed)
{
    int64_t exact = (int64_t)dt->exact;
    memset(d, 0, sizeof(*d));
    d->dt = dt;
    d->op = op;
    d->reduce = reduce;
    d->nranks = nranks;
    d->seed = seed;
    d->value_ranks = nranks;
    d->twos_ranks = (int)min64(nranks, dt->prod_twos);
    /* Below 255 so an all-ones poison byte pattern is never a right answer. */
    d->maxval = min64(exact, 100);
    if (reduce && (op == CCL_SUM || op == CCL_AVG || op == PERF_OP_PREMULSUM)) {
        /* Keep the total (hence every partial sum) within the exact range;
         * premulsum terms are up to twice the input. */
        int64_t weight = op == PERF_OP_PREMULSUM ? 2 : 1;
        d->maxval = min64(31, exact / (weight * nranks));
        if (d->maxval < 1)
            d->maxval = 1;
        int64_t total = 0;
        d->value_ranks = 0;
        while (d->value_ranks < nranks) {
            int64_t w = op == PERF_OP_PREMULSUM ? perf_premul_scalar(d->value_ranks) : 1;
            if (total + w * d->maxval > exact)
                break;
            total += w * d->maxval;
            d->value_ranks++;
        }
    }
}

static int64_t input_value(const struct perf_data *d, int rank, size_t i)
{
    uint32_t h = mix(d->seed, rank, i);
    if (d->reduce && d->op == CCL_PROD)
        return (rank < d->twos_ranks && (h & 3) == 0) ? 2 : 1;
    if (rank >= d->value_ranks)
        return 0;
    return (int64_t)(h % (uint32_t)(d->maxval + 1));
}

void perf_data_fill(const struct perf_data *d, void *buf, size_t count, int rank, size_t first)
{
    for (size_t i = 0; i < count; i++)
        store(d->dt, buf, i, input_value(d, rank, first + i));
}

void perf_data_poison(void *buf, size_t bytes)
{
    /* All-ones is NaN in every float type and out of the inputs' range in
     * every integer type. */
    memset(buf, 0xff, bytes);
}

/* ---- checks ---------------------------------------------------------------- */

static int64_t expected_reduce(const struct perf_data *d, size_t i)
{
    int64_t acc = input_value(d, 0, i);
    if (d->op == PERF_OP_PREMULSUM)
        acc *= perf_premul_scalar(0);
    for (int r = 1; r < d->nranks; r++) {
        int64_t v = input_value(d, r, i);
        switch (d->op) {
        case CCL_PROD: acc *= v; break;
        case CCL_MAX: acc = v > acc ? v : acc; break;
        case CCL_MIN: acc = v < acc ? v : acc; break;
        case PERF_OP_PREMULSUM: acc += perf_premul_scalar(r) * v; break;
        default: acc += v; break; /* sum, avg */
        }
    }
    return acc;
}

/* Compares one element by its bytes against the expected value encoded in the
 * dtype, which is exact for integers and for the exact float results. */
static int differs_exact(const struct perf_dtype *t, const void *buf, size_t i, int64_t want)
{
    unsigned char enc[8];
    store(t, enc, 0, want);
    return memcmp((const char *)buf + i * t->size, enc, t->size) != 0;
}

/* Float avg: a sum scaled by 1/n (or inputs pre-scaled) rounds, by up to
 * about one unit in the last place per term. */
static int differs_avg_float(const struct perf_data *d, const void *buf, size_t i, int64_t sum)
{
    double want = (double)sum / d->nranks;
    double got = load_float(d->dt, buf, i);
    double tol = (d->nranks + 1) * ldexp(1.0, -d->dt->mbits) * fmax(fabs(want), 1.0);
    return !(fabs(got - want) <= tol); /* NaN counts as wrong */
}

int64_t perf_data_check_reduce(const struct perf_data *d, const void *buf, size_t count,
                               size_t first)
{
    int avg_float = d->op == CCL_AVG &&
                    (d->dt->kind == PERF_FLOAT || d->dt->kind == PERF_MINIFLOAT);
    int64_t wrong = 0;
    for (size_t i = 0; i < count; i++) {
        int64_t want = expected_reduce(d, first + i);
        if (avg_float)
            wrong += differs_avg_float(d, buf, i, want);
        else
            wrong += differs_exact(d->dt, buf, i, d->op == CCL_AVG ? want / d->nranks : want);
    }
    return wrong;
}

int64_t perf_data_check_copy(const struct perf_data *d, const void *buf, size_t count, int src,
                             size_t first)
{
    int64_t wrong = 0;
    for (size_t i = 0; i < count; i++)
        wrong += differs_exact(d->dt, buf, i, input_value(d, src, first + i));
    return wrong;
}
