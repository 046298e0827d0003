/*
 * nccl_check.h - what the NCCL ABI test shares between its parts: element
 * access for every NCCL type, the reference values, and the check macros.
 *
 * Built against NVIDIA's nccl.h only (tests/nccl/run.sh), so it speaks
 * NCCL's names; the half and 8-bit floats are decoded here, not through
 * CUDA's headers, because no GPU code can run on these machines.
 */
#ifndef NCCL_CHECK_H
#define NCCL_CHECK_H

#include <nccl.h>
#include <stdio.h>

extern int test_failures;

#define FAILF(...)                                                       \
    do {                                                                 \
        fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);             \
        fprintf(stderr, __VA_ARGS__);                                    \
        fputc('\n', stderr);                                             \
        __atomic_add_fetch(&test_failures, 1, __ATOMIC_RELAXED);         \
    } while (0)

/* A call that must succeed; on failure the test goes on with the next. */
#define NCHECK(call)                                                                         \
    do {                                                                                     \
        ncclResult_t r_ = (call);                                                            \
        if (r_ != ncclSuccess)                                                               \
            FAILF("%s: %s (%d): %s", #call, ncclGetErrorString(r_), r_, ncclGetLastError(NULL)); \
    } while (0)

/* A call that must fail with `want` and leave a message. */
#define NEXPECT(want, call)                                                                  \
    do {                                                                                     \
        ncclResult_t r_ = (call);                                                            \
        const char *m_ = ncclGetLastError(NULL);                                             \
        if (r_ != (want) || !m_ || !m_[0])                                                   \
            FAILF("%s returned %d (wanted %d), message \"%s\"", #call, r_, (want), m_ ? m_ : "(null)"); \
    } while (0)

size_t dtype_size(ncclDataType_t dt);
const char *dtype_name(ncclDataType_t dt);
/* Element i of buf as a double. */
double elem_get(const void *buf, ncclDataType_t dt, size_t i);
/* Stores v, a small integer (exact in every type), as element i. */
void elem_set(void *buf, ncclDataType_t dt, size_t i, double v);
/* Rank r's input element i for a call with op (products stay small). */
double input_value(int r, size_t i, int salt, ncclRedOp_t op);
/* op over ranks 0..n-1 of input_value, as NCCL defines it for dt. */
double reduce_ref(int n, size_t i, int salt, ncclRedOp_t op, ncclDataType_t dt);
/* Whether got matches want for dt (exact for integers; floats within a
 * few roundings of dt). */
int value_ok(double got, double want, ncclDataType_t dt);

#endif
