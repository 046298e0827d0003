/*
 * nccl_values.c - element access and reference values for the NCCL ABI
 * test (nccl_check.h). Every input is a small integer, exact in every
 * NCCL type, so sums, products, maxima and minima have exact references;
 * only avg and the 8-bit floats leave room for rounding.
 */
#include "nccl_check.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

size_t dtype_size(ncclDataType_t dt)
{
    switch (dt) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

const char *dtype_name(ncclDataType_t dt)
{
    static const char *names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
                                  "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
    return (unsigned)dt < sizeof names / sizeof names[0] ? names[dt] : "?";
}

/* A small float of 1 + ebits + mbits bits, IEEE-like (e4m3 has no
 * infinities, which small test values never reach). */
static double small_float(unsigned bits, int ebits, int mbits)
{
    int bias = (1 << (ebits - 1)) - 1;
    unsigned m = bits & ((1u << mbits) - 1), e = (bits >> mbits) & ((1u << ebits) - 1);
    double v = e == 0 ? ldexp(m, 1 - bias - mbits) : ldexp(m + (double)(1u << mbits), (int)e - bias - mbits);
    return (bits >> (ebits + mbits)) & 1 ? -v : v;
}

static double decode(unsigned bits, ncclDataType_t dt)
{
    switch (dt) {
    case ncclFloat16: return small_float(bits, 5, 10);
    case ncclFloat8e4m3: return small_float(bits, 4, 3);
    case ncclFloat8e5m2: return small_float(bits, 5, 2);
    default: { /* bfloat16: the top half of a float */
        uint32_t w = bits << 16;
        float f;
        memcpy(&f, &w, sizeof f);
        return f;
    }
    }
}

/* The code of small integer v in a half or 8-bit float type, found once
 * by search (exact values only, so no rounding rule is needed). */
static unsigned encode(double v, ncclDataType_t dt)
{
    static unsigned cache[12][256];
    static int known[12][256];
    int iv = (int)v;
    if (iv >= 0 && iv < 256 && known[dt][iv])
        return cache[dt][iv];
    unsigned ncodes = dtype_size(dt) == 1 ? 256 : 65536, code = 0;
    for (unsigned c = 0; c < ncodes; c++)
        if (decode(c, dt) == v) {
            code = c;
            break;
        }
    if (iv >= 0 && iv < 256) {
        cache[dt][iv] = code;
        known[dt][iv] = 1;
    }
    return code;
}

double elem_get(const void *buf, ncclDataType_t dt, size_t i)
{
    const char *p = (const char *)buf + i * dtype_size(dt);
    switch (dt) {
    case ncclInt8: return *(const int8_t *)p;
    case ncclUint8: return *(const uint8_t *)p;
    case ncclInt32: return *(const int32_t *)p;
    case ncclUint32: return *(const uint32_t *)p;
    case ncclInt64: return (double)*(const int64_t *)p;
    case ncclUint64: return (double)*(const uint64_t *)p;
    case ncclFloat32: return *(const float *)p;
    case ncclFloat64: return *(const double *)p;
    case ncclFloat16: case ncclBfloat16: return decode(*(const uint16_t *)p, dt);
    default: return decode(*(const uint8_t *)p, dt);
    }
}

void elem_set(void *buf, ncclDataType_t dt, size_t i, double v)
{
    char *p = (char *)buf + i * dtype_size(dt);
    switch (dt) {
    case ncclInt8: *(int8_t *)p = (int8_t)v; break;
    case ncclUint8: *(uint8_t *)p = (uint8_t)v; break;
    case ncclInt32: *(int32_t *)p = (int32_t)v; break;
    case ncclUint32: *(uint32_t *)p = (uint32_t)v; break;
    case ncclInt64: *(int64_t *)p = (int64_t)v; break;
    case ncclUint64: *(uint64_t *)p = (uint64_t)v; break;
    case ncclFloat32: *(float *)p = (float)v; break;
    case ncclFloat64: *(double *)p = v; break;
    case ncclFloat16: case ncclBfloat16: *(uint16_t *)p = (uint16_t)encode(v, dt); break;
    default: *(uint8_t *)p = (uint8_t)encode(v, dt); break;
    }
}

double input_value(int r, size_t i, int salt, ncclRedOp_t op)
{
    if (op == ncclProd) /* 1 or 2: 2^nranks fits every type */
        return (double)(1 + (r + i + (size_t)salt) % 2);
    return (double)(1 + ((size_t)r * 7 + i * 3 + (size_t)salt) % 5);
}

static int is_integer(ncclDataType_t dt) { return dt <= ncclUint64; }

double reduce_ref(int n, size_t i, int salt, ncclRedOp_t op, ncclDataType_t dt)
{
    double acc = input_value(0, i, salt, op);
    for (int r = 1; r < n; r++) {
        double v = input_value(r, i, salt, op);
        switch (op) {
        case ncclProd: acc *= v; break;
        case ncclMax: acc = v > acc ? v : acc; break;
        case ncclMin: acc = v < acc ? v : acc; break;
        default: acc += v; break;
        }
    }
    if (op == ncclAvg)
        acc = is_integer(dt) ? floor(acc / n) : acc / n;
    return acc;
}

int value_ok(double got, double want, ncclDataType_t dt)
{
    double tol;
    switch (dt) {
    case ncclFloat16: tol = 5e-3; break;
    case ncclBfloat16: tol = 3e-2; break;
    case ncclFloat8e4m3: tol = 0.13; break;
    case ncclFloat8e5m2: tol = 0.26; break;
    case ncclFloat32: tol = 1e-6; break;
    case ncclFloat64: tol = 1e-12; break;
    default: return got == want;
    }
    return fabs(got - want) <= tol * (fabs(want) > 1 ? fabs(want) : 1);
}
