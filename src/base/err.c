/*
 * err.c - result codes, their strings, and the per-thread last message.
 */
#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static __thread char err_msg[1024];
static __thread int err_is_expected;

static const char *const err_strings[CCL_NUM_RESULTS] = {
    [CCL_SUCCESS] = "no error",
    [CCL_ERR_CUDA] = "unhandled CUDA error",
    [CCL_ERR_SYSTEM] = "system error (memory, sockets, shared memory)",
    [CCL_ERR_INTERNAL] = "internal error",
    [CCL_ERR_INVALID_ARGUMENT] = "invalid argument",
    [CCL_ERR_INVALID_USAGE] = "invalid usage",
    [CCL_ERR_REMOTE] = "remote process failed or sent invalid data",
    [CCL_IN_PROGRESS] = "operation in progress",
    [CCL_ERR_TIMEOUT] = "timed out",
    [CCL_ERR_ABORTED] = "communicator aborted",
    [CCL_ERR_UNSUPPORTED] = "not supported by this build or machine",
    [CCL_ERR_NULL_COMM] = "communicator is NULL or destroyed",
    [CCL_ERR_NULL_BUFFER] = "NULL buffer with a non-zero count",
    [CCL_ERR_INVALID_DTYPE] = "invalid data type",
    [CCL_ERR_INVALID_OP] = "invalid reduction operation",
    [CCL_ERR_INVALID_RANK] = "rank, root or peer out of range",
    [CCL_ERR_COUNT_OVERFLOW] = "count too large: byte size overflows",
    [CCL_ERR_INPLACE_LAYOUT] = "buffers overlap in a way the in-place rules forbid",
    [CCL_ERR_MISMATCH] = "ranks called different collectives or arguments",
    [CCL_ERR_GROUP] = "a call that cannot be part of this group, or a group call out of order",
    [CCL_ERR_CORRUPT] = "data corruption: ranks' results differ where they must be equal, or data changed in flight",
};

CCL_API const char *ccl_get_error_string(ccl_result_t result)
{
    if ((unsigned)result >= CCL_NUM_RESULTS || !err_strings[result])
        return "unknown error code";
    return err_strings[result];
}

CCL_API ccl_result_t ccl_get_version(int *version)
{
    if (!version)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "ccl_get_version: version is NULL");
    *version = CCL_VERSION_CODE;
    return CCL_SUCCESS;
}

ccl_result_t err_set(ccl_result_t code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    /* Refused input is returned to the caller, who decides what it means;
     * runtime failures (peers, system) are worth a WARN line by default. */
    int caller_error = code == CCL_ERR_INVALID_ARGUMENT || code == CCL_ERR_NULL_COMM ||
                       code == CCL_ERR_NULL_BUFFER || code == CCL_ERR_INVALID_DTYPE ||
                       code == CCL_ERR_INVALID_OP || code == CCL_ERR_INVALID_RANK ||
                       code == CCL_ERR_COUNT_OVERFLOW || code == CCL_ERR_INPLACE_LAYOUT ||
                       code == CCL_ERR_UNSUPPORTED || code == CCL_ERR_GROUP;
    if (caller_error || err_is_expected)
        LOG_INFO(SUB_ALL, "%s (%s)", err_msg, ccl_get_error_string(code));
    else
        LOG_WARN(SUB_ALL, "%s (%s)", err_msg, ccl_get_error_string(code));
    return code;
}

void err_prefix(const char *fmt, ...)
{
    char prefix[256], old[sizeof err_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    /* Keep as much of the original (most specific) message as fits. */
    size_t plen = strlen(prefix), olen = strlen(err_msg);
    memcpy(old, err_msg, olen + 1);
    if (plen >= sizeof err_msg)
        plen = sizeof err_msg - 1;
    if (plen + olen >= sizeof err_msg)
        olen = sizeof err_msg - 1 - plen;
    memcpy(err_msg, prefix, plen);
    memcpy(err_msg + plen, old, olen);
    err_msg[plen + olen] = '\0';
}

const char *err_message(void) { return err_msg; }
void err_clear(void) { err_msg[0] = '\0'; }

int err_expected(int on)
{
    int was = err_is_expected;
    err_is_expected = on;
    return was;
}

ccl_result_t err_remote_code(const char *why)
{
    return why && strstr(why, ERR_CORRUPT_MARK) ? CCL_ERR_CORRUPT : CCL_ERR_REMOTE;
}
