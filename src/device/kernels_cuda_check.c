/*
 * kernels_cuda_check.c - the argument contract of the kernel entry points
 * of kernels_cuda.h, checked in one place for every implementation of
 * them: the CUDA kernels (reduce_cuda.cu) and the host kernels of the mock
 * GPU build (tests/mock_cuda/kernels_mock.c). Plain C, in every build; a
 * part of kernels_cuda.h's module (its name says so), as the contract it
 * checks is that header's.
 */
#include "base/err.h"
#include "device/kernels_cuda.h"

ccl_result_t dev_cuda_reduce_check(const dev_cuda_reduce_t *r)
{
    if ((unsigned)r->dtype >= CCL_NUM_DTYPES || (unsigned)r->op >= CCL_NUM_OPS)
        return err_set(CCL_ERR_INTERNAL, "dev_cuda_reduce: dtype %d / op %d out of range", (int)r->dtype,
                       (int)r->op);
    if (r->nsrc < 1 || r->nsrc > DEV_CUDA_MAX_SRCS || r->ndst < 1 || r->ndst > 2)
        return err_set(CCL_ERR_INTERNAL, "dev_cuda_reduce: %d sources, %d destinations", r->nsrc, r->ndst);
    return CCL_SUCCESS;
}
