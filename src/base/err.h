/*
 * err.h - ccl's one error convention.
 *
 * Every internal function returns ccl_result_t. A function declares
 * `ccl_result_t res = CCL_SUCCESS;`, has a single `out:` label where it
 * releases what it holds, and uses:
 *   CCL_TRY(call)          run call; on failure log where, goto out
 *   CCL_FAIL(code, fmt..)  record a message for ccl_get_last_error, goto out
 * The message is kept per thread; the public entry points copy it into the
 * communicator so ccl_get_last_error(comm) works from any thread.
 */
#ifndef CCL_BASE_ERR_H
#define CCL_BASE_ERR_H

#include "ccl.h"
#include "base/log.h"

#define CCL_API __attribute__((visibility("default")))

/* Records the message of a new failure (replacing the previous one) and
 * logs it at WARN. Returns code. */
ccl_result_t err_set(ccl_result_t code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes context ("allreduce #12: ") to this thread's current message. */
void err_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* This thread's current message. */
const char *err_message(void);
void err_clear(void);
/* While on, this thread's err_set logs runtime failures at INFO instead of
 * WARN: for code that expects them (a peer that closed first at destroy).
 * Returns the previous setting. */
int err_expected(int on);

/* Data changed between two ranks (a net checksum that does not match) is
 * CCL_ERR_CORRUPT on every rank, but most ranks learn of it as text: a
 * peer's notice, a local peer's poison reason. The failure's message says
 * this phrase, and err_remote_code finds it there. */
#define ERR_CORRUPT_MARK "was corrupted in flight"
/* CCL_ERR_CORRUPT when why tells of data corrupted in flight, else
 * CCL_ERR_REMOTE: the code of a failure that came from elsewhere. */
ccl_result_t err_remote_code(const char *why);

#define CCL_TRY(call)                                                              \
    do {                                                                           \
        res = (call);                                                              \
        if (res != CCL_SUCCESS) {                                                  \
            LOG_TRACE(SUB_ALL, "%s failed: %s", #call, ccl_get_error_string(res)); \
            goto out;                                                              \
        }                                                                          \
    } while (0)

#define CCL_FAIL(code, ...)                \
    do {                                   \
        res = err_set((code), __VA_ARGS__); \
        goto out;                          \
    } while (0)

#endif
