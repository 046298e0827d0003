/*
 * nccl_types.c - result mapping, the per-thread last error, and the
 * ncclConfig_t reader shared by the NCCL ABI layer.
 *
 * NCCL keeps one last-error message per thread and returns it from
 * ncclGetLastError whatever comm is passed; this layer does the same, filling
 * it with ccl's message (which names the call and the bad value) when a ccl
 * call fails, or with its own when the layer refuses something first.
 */
#include "nccl/nccl_types.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static __thread char last_message[1024];

nccl_result_t nccl_from_ccl(ccl_result_t res)
{
    switch (res) {
    case CCL_SUCCESS:
        return NCCL_ABI_SUCCESS;
    case CCL_ERR_CUDA:
        return NCCL_ABI_CUDA_ERROR;
    case CCL_ERR_SYSTEM:
        return NCCL_ABI_SYSTEM_ERROR;
    case CCL_ERR_INTERNAL:
        return NCCL_ABI_INTERNAL_ERROR;
    case CCL_IN_PROGRESS:
        return NCCL_ABI_IN_PROGRESS;
    /* Refused arguments: NCCL has one code for all of them; the message
     * keeps ccl's detail (which argument, which value). */
    case CCL_ERR_INVALID_ARGUMENT:
    case CCL_ERR_NULL_COMM:
    case CCL_ERR_NULL_BUFFER:
    case CCL_ERR_INVALID_DTYPE:
    case CCL_ERR_INVALID_OP:
    case CCL_ERR_INVALID_RANK:
    case CCL_ERR_COUNT_OVERFLOW:
    case CCL_ERR_INPLACE_LAYOUT:
        return NCCL_ABI_INVALID_ARGUMENT;
    /* A peer that failed, stalled past CCL_TIMEOUT, or sent bad data is
     * what NCCL calls a remote error. */
    case CCL_ERR_REMOTE:
    case CCL_ERR_TIMEOUT:
    case CCL_ERR_CORRUPT:
        return NCCL_ABI_REMOTE_ERROR;
    /* Calls that do not fit together, and what ccl cannot do here, are
     * usage errors for an NCCL caller (as the ABI layer promises). */
    case CCL_ERR_INVALID_USAGE:
    case CCL_ERR_ABORTED:
    case CCL_ERR_UNSUPPORTED:
    case CCL_ERR_MISMATCH:
    case CCL_ERR_GROUP:
        return NCCL_ABI_INVALID_USAGE;
    default:
        return NCCL_ABI_INTERNAL_ERROR;
    }
}

nccl_result_t nccl_check_slow(ccl_result_t res, ccl_comm_t comm)
{
    /* In progress is a state, not a failure: keep the last real message. */
    if (res != CCL_IN_PROGRESS && res != CCL_SUCCESS)
        snprintf(last_message, sizeof last_message, "%s", ccl_get_last_error(comm));
    return nccl_from_ccl(res);
}

nccl_result_t nccl_fail(nccl_result_t code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    return code;
}

const char *nccl_last_message(void) { return last_message; }

/* Whether the caller's struct, of `size` bytes, holds the field that ends
 * at `end`: fields newer than the caller's nccl.h are not there to read. */
static int config_has(const nccl_config_abi_t *config, size_t end) { return config->size >= end; }

#define CONFIG_HAS(config, field) \
    config_has(config, offsetof(nccl_config_abi_t, field) + sizeof((config)->field))

nccl_result_t nccl_read_config(const nccl_config_abi_t *config, const char *who, int *blocking)
{
    *blocking = 1;
    if (!config)
        return NCCL_ABI_SUCCESS;
    if (config->magic != NCCL_ABI_CONFIG_MAGIC || config->size < offsetof(nccl_config_abi_t, blocking))
        return nccl_fail(NCCL_ABI_INVALID_ARGUMENT,
                         "%s: config (size %zu, magic 0x%x) was not set up with NCCL_CONFIG_INITIALIZER", who,
                         config->size, config->magic);
    if (config->version < NCCL_ABI_CONFIG_MIN_VERSION)
        return nccl_fail(NCCL_ABI_INVALID_ARGUMENT, "%s: config version %u is older than NCCL 2.14's (%d)", who,
                         config->version, NCCL_ABI_CONFIG_MIN_VERSION);
    if (CONFIG_HAS(config, blocking) && config->blocking != NCCL_ABI_CONFIG_UNDEF_INT) {
        if (config->blocking != 0 && config->blocking != 1)
            return nccl_fail(NCCL_ABI_INVALID_ARGUMENT, "%s: config.blocking is %d, not 0 or 1", who,
                             config->blocking);
        *blocking = config->blocking;
    }
    /* The GPU fields (CTAs, cluster size, NVLS, channels per peer, CTA
     * policy, NVLink scheduling), netName (ccl picks its transport from
     * CCL_NET), splitShare/shrinkShare, trafficClass and commName tune or
     * name NCCL's own machinery: valid values are accepted and have no
     * effect here (docs/nccl.md). */
    if (CONFIG_HAS(config, split_share) && config->split_share != NCCL_ABI_CONFIG_UNDEF_INT &&
        config->split_share != 0 && config->split_share != 1)
        return nccl_fail(NCCL_ABI_INVALID_ARGUMENT, "%s: config.splitShare is %d, not 0 or 1", who,
                         config->split_share);
    return NCCL_ABI_SUCCESS;
}
