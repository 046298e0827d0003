/*
 * log.h - logging (CCL_DEBUG, CCL_DEBUG_SUBSYS, CCL_DEBUG_FILE).
 *
 * Messages carry host, pid and, once known, the rank, so interleaved output
 * from many processes stays readable.
 */
#ifndef CCL_BASE_LOG_H
#define CCL_BASE_LOG_H

typedef enum { LOG_NONE = 0, LOG_VERSION, LOG_WARN, LOG_INFO, LOG_TRACE } log_level_t;

typedef enum {
    SUB_INIT = 1 << 0,
    SUB_BOOTSTRAP = 1 << 1,
    SUB_SHM = 1 << 2,
    SUB_COLL = 1 << 3,
    SUB_NET = 1 << 4,
    SUB_TUNING = 1 << 5, /* the tuner: its inputs and cost table (INFO), each call's pick (TRACE) */
    SUB_P2P = 1 << 6,    /* the P2P transport and device executor: setup, fallbacks (INFO), each call (TRACE) */
    SUB_ALL = 0xffff
} log_subsys_t;

/* The filter once CCL_DEBUG* are parsed: LOG_FILTER_READY | level << 16 |
 * subsystem mask; 0 before. Read on every call's trace points, so the
 * check after the first is two loads and a compare, not pthread_once. */
#define LOG_FILTER_READY (1u << 31)
extern unsigned log_filter;
int log_enabled_first(log_level_t level, log_subsys_t sub);

/* True when a message of this level and subsystem would be written; lets
 * callers skip building expensive messages. */
static inline int log_enabled(log_level_t level, log_subsys_t sub)
{
    unsigned f = __atomic_load_n(&log_filter, __ATOMIC_ACQUIRE);
    if (!f)
        return log_enabled_first(level, sub);
    return (unsigned)level <= ((f >> 16) & 0xff) && (f & (unsigned)sub & 0xffff);
}
void log_write(log_level_t level, log_subsys_t sub, const char *file, int line,
               const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Rank shown in this thread's log lines (-1: unknown). */
void log_set_rank(int rank);

#define LOG_WARN(sub, ...) log_write(LOG_WARN, sub, __FILE__, __LINE__, __VA_ARGS__)
#define LOG_INFO(sub, ...) \
    do { if (log_enabled(LOG_INFO, sub)) log_write(LOG_INFO, sub, __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define LOG_TRACE(sub, ...) \
    do { if (log_enabled(LOG_TRACE, sub)) log_write(LOG_TRACE, sub, __FILE__, __LINE__, __VA_ARGS__); } while (0)

#endif
