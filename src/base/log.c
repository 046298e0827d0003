/*
 * log.c - the one place that writes diagnostics.
 *
 * Level and subsystem filters are parsed once. Lines are formatted into one
 * buffer and written with a single write() so lines from concurrent ranks do
 * not interleave mid-line.
 */
#include "base/log.h"
#include "base/param.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <unistd.h>

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static log_level_t log_level = LOG_WARN;
static unsigned log_mask = SUB_ALL;
static int log_fd = 2;
static char log_host[64];
static __thread int log_rank = -1;
unsigned log_filter; /* log.h; set at the end of log_init */

static const struct { const char *name; unsigned bit; } log_subsys_names[] = {
    {"INIT", SUB_INIT}, {"BOOTSTRAP", SUB_BOOTSTRAP}, {"SHM", SUB_SHM},
    {"COLL", SUB_COLL}, {"NET", SUB_NET}, {"TUNING", SUB_TUNING}, {"P2P", SUB_P2P}, {"ALL", SUB_ALL},
};

static unsigned log_parse_mask(const char *list)
{
    int exclude = (list[0] == '^');
    unsigned mask = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list + exclude);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        for (size_t i = 0; i < sizeof log_subsys_names / sizeof log_subsys_names[0]; i++)
            if (strcasecmp(tok, log_subsys_names[i].name) == 0)
                mask |= log_subsys_names[i].bit;
    }
    return exclude ? (SUB_ALL & ~mask) : mask;
}

/* Expands %h (host) and %p (pid) in CCL_DEBUG_FILE so each rank gets its file. */
static void log_open_file(const char *pattern)
{
    char path[512];
    size_t o = 0;
    for (const char *p = pattern; *p && o + 32 < sizeof path; p++) {
        if (p[0] == '%' && p[1] == 'h') {
            o += (size_t)snprintf(path + o, sizeof path - o, "%s", log_host);
            p++;
        } else if (p[0] == '%' && p[1] == 'p') {
            o += (size_t)snprintf(path + o, sizeof path - o, "%d", (int)getpid());
            p++;
        } else {
            path[o++] = *p;
        }
    }
    path[o] = '\0';
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0)
        log_fd = fd;
}

static void log_init(void)
{
    static const char *levels[] = {"NONE", "VERSION", "WARN", "INFO", "TRACE"};
    const char *lv = param_str(PARAM_DEBUG);
    for (int i = 0; i < 5; i++)
        if (strcasecmp(lv, levels[i]) == 0)
            log_level = (log_level_t)i;
    log_mask = log_parse_mask(param_str(PARAM_DEBUG_SUBSYS));
    gethostname(log_host, sizeof log_host - 1);
    const char *file = param_str(PARAM_DEBUG_FILE);
    if (file[0])
        log_open_file(file);
    /* Last: a thread that sees the filter sees everything above. */
    __atomic_store_n(&log_filter, LOG_FILTER_READY | (unsigned)log_level << 16 | (log_mask & 0xffff),
                     __ATOMIC_RELEASE);
}

int log_enabled_first(log_level_t level, log_subsys_t sub)
{
    pthread_once(&log_once, log_init);
    return level <= log_level && (log_mask & (unsigned)sub);
}

void log_set_rank(int rank) { log_rank = rank; }

void log_write(log_level_t level, log_subsys_t sub, const char *file, int line, const char *fmt, ...)
{
    if (!log_enabled(level, sub))
        return;
    static const char *tags[] = {"", "VERSION", "WARN", "INFO", "TRACE"};
    char buf[2048];
    struct timeval tv;
    gettimeofday(&tv, NULL);
    int n = snprintf(buf, sizeof buf, "%s:%d:%d [%ld.%06ld] ccl %s ", log_host, (int)getpid(),
                     log_rank, (long)tv.tv_sec, (long)tv.tv_usec, tags[level]);
    if (level >= LOG_TRACE) {
        const char *base = strrchr(file, '/');
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%s:%d ", base ? base + 1 : file, line);
    }
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof buf - 2)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    ssize_t w = write(log_fd, buf, (size_t)n);
    (void)w; /* nowhere left to report a failed diagnostic write */
}

