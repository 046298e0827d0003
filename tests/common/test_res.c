/*
 * test_res.c - process resource snapshots and leak comparisons; see
 * test_res.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "test_res.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_common.h"

/* Present only in sanitizer builds (weak, so a plain build links without). */
size_t __sanitizer_get_current_allocated_bytes(void) __attribute__((weak));

int tst_under_asan(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return 1;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    return 1;
#else
    return 0;
#endif
#else
    return 0;
#endif
}

void tst_res_exact_heap(char **argv)
{
    static const char off[] = "glibc.malloc.tcache_count=0";
    const char *now = getenv("GLIBC_TUNABLES");
    if (tst_under_asan() || (now && strstr(now, off)))
        return;
    char *val = NULL;
    if (asprintf(&val, "%s%s%s", now ? now : "", now && *now ? ":" : "", off) < 0)
        return;
    setenv("GLIBC_TUNABLES", val, 1);
    free(val);
    fflush(stdout);
    fflush(stderr);
    execv("/proc/self/exe", argv);
    fprintf(stderr, "tst_res_exact_heap: execv /proc/self/exe failed; heap counts include "
                    "glibc's per-thread cache\n");
}

size_t tst_heap_in_use(void)
{
    if (__sanitizer_get_current_allocated_bytes)
        return __sanitizer_get_current_allocated_bytes();
    /* Summed over every arena, small chunks and mmapped ones. */
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static int count_map_lines(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    int n = 0, ch;
    if (!f)
        return -1;
    while ((ch = fgetc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    return n;
}

void tst_res_take(tst_res_t *r)
{
    r->fds = tst_count_fds();
    r->threads = tst_count_threads();
    r->maps = count_map_lines();
    r->heap = tst_heap_in_use();
}

static void append(char *msg, size_t len, size_t *used, const char *fmt, long long a, long long b)
{
    if (*used >= len)
        return;
    int w = snprintf(msg + *used, len - *used, "%s", *used ? "; " : "");
    if (w > 0)
        *used += (size_t)w;
    if (*used >= len)
        return;
    w = snprintf(msg + *used, len - *used, fmt, a, b);
    if (w > 0)
        *used += (size_t)w;
}

int tst_res_grew(const tst_res_t *base, size_t heap_slack, char *msg, size_t len)
{
    tst_res_t now;
    double until = tst_now() + 3.0;
    for (;;) {
        tst_res_take(&now);
        if ((now.fds <= base->fds && now.threads <= base->threads) || tst_now() > until)
            break;
        usleep(20000);
    }
    int grew = 0;
    size_t used = 0;
    if (len)
        msg[0] = '\0';
    if (now.fds > base->fds) {
        grew++;
        append(msg, len, &used, "open fds %lld -> %lld", base->fds, now.fds);
    }
    if (now.threads > base->threads) {
        grew++;
        append(msg, len, &used, "threads %lld -> %lld", base->threads, now.threads);
    }
    if (!tst_under_asan() && now.maps > base->maps + 4) {
        grew++;
        append(msg, len, &used, "memory mappings %lld -> %lld", base->maps, now.maps);
    }
    if (now.heap > base->heap + heap_slack) {
        grew++;
        append(msg, len, &used, "heap bytes in use %lld -> %lld", (long long)base->heap,
               (long long)now.heap);
    }
    return grew;
}

int tst_own_ccl_shm_maps(char *first, size_t len)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024];
    int n = 0;
    if (len)
        first[0] = '\0';
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        char *p = strstr(line, "/dev/shm/");
        if (p && strcasestr(p, "ccl") && n++ == 0)
            snprintf(first, len, "%s", p);
    }
    fclose(f);
    return n;
}

/* Names in `now` (one per line) that are not in `before` and that no
 * process maps or holds open, one per line into out. */
static int unused_new_names(const char *before, char *now, char *out, size_t outlen)
{
    int n = 0;
    size_t used = 0;
    char *save = NULL;
    out[0] = '\0';
    for (char *name = strtok_r(now, "\n", &save); name; name = strtok_r(NULL, "\n", &save)) {
        /* Whole lines only: "ccl-ab" must not match inside "ccl-abc". */
        char needle[300];
        snprintf(needle, sizeof(needle), "%s\n", name);
        const char *hit = strstr(before, needle);
        if ((hit && (hit == before || hit[-1] == '\n')) || tst_shm_is_mapped(name))
            continue;
        n++;
        if (used < outlen)
            used += (size_t)snprintf(out + used, outlen - used, "%s\n", name);
    }
    return n;
}

int tst_shm_left_behind(const char *before, char *first, size_t len)
{
    /* As many names as /dev/shm may hold while other tests run beside us. */
    size_t cap = 1 << 16;
    char *now = malloc(cap), *cand = malloc(cap), *again = malloc(cap);
    int left = -1;
    if (len)
        first[0] = '\0';
    if (!now || !cand || !again)
        goto out;
    tst_list_ccl_shm(now, cap);
    left = unused_new_names(before, now, cand, cap);
    /* Tests that run beside this one on the machine create segments too,
     * and a segment is briefly neither mapped nor open (a test of the
     * segment checks makes and removes one, an init between shm_open and
     * mmap). What this run left behind stays; so only what is still there,
     * still unused, a moment later counts. */
    for (int round = 0; round < 3 && left > 0; round++) {
        usleep(500000);
        tst_list_ccl_shm(now, cap);
        /* Still listed now and still a candidate from before: */
        size_t used = 0;
        again[0] = '\0';
        char *save = NULL;
        for (char *name = strtok_r(now, "\n", &save); name; name = strtok_r(NULL, "\n", &save)) {
            char needle[300];
            snprintf(needle, sizeof(needle), "%s\n", name);
            const char *hit = strstr(cand, needle);
            if (hit && (hit == cand || hit[-1] == '\n') && used < cap)
                used += (size_t)snprintf(again + used, cap - used, "%s", needle);
        }
        left = unused_new_names(before, again, cand, cap);
    }
    if (left > 0 && len) {
        char *nl = strchr(cand, '\n');
        snprintf(first, len, "/dev/shm/%.*s", nl ? (int)(nl - cand) : (int)strlen(cand), cand);
    }
out:
    free(now);
    free(cand);
    free(again);
    return left;
}

int tst_run_ranks_shm_clean(const char *name, int nranks, int timeout_s, tst_rank_fn fn, void *arg)
{
    static char before[1 << 14];
    tst_list_ccl_shm(before, sizeof before);
    int failed = tst_run_ranks(name, nranks, timeout_s, fn, arg) != 0;
    char first[512];
    int left = tst_shm_left_behind(before, first, sizeof first);
    if (left > 0) {
        printf("%s: %d /dev/shm entries left behind, e.g. %s\n", name, left, first);
        failed = 1;
    }
    return failed;
}
