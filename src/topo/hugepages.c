/*
 * hugepages.c - reads the kernel's shared-memory THP setting (hugepages.h).
 *
 * Two files decide it on current kernels: the PMD size's own
 * hugepages-<size>kB/shmem_enabled (multi-size THP, Linux 6.11+), and the
 * top-level shmem_enabled, which that one defers to when it says
 * "inherit" (older kernels have only the top-level file). Each lists the
 * choices with the selected one in brackets. always, within_size (our
 * buffers are whole huge pages, ftruncated before use), advise (we
 * advise) and force give huge pages; never and deny do not.
 */
#include "topo/hugepages.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define HP_DIR "/sys/kernel/mm/transparent_hugepage"

/* The bracketed word of a sysfs choice file into out; 0 if none. */
static int hp_selected(const char *path, char *out, size_t len)
{
    char line[256];
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    char *open = ok ? strchr(line, '[') : NULL;
    char *close = open ? strchr(open, ']') : NULL;
    if (!close || (size_t)(close - open - 1) >= len)
        return 0;
    memcpy(out, open + 1, (size_t)(close - open - 1));
    out[close - open - 1] = '\0';
    return 1;
}

int topo_shm_huge_pages_at(const char *root, char *setting, size_t len)
{
    char path[4096 + 128], word[32] = "unknown";
    unsigned long pmd = 0;
    snprintf(path, sizeof path, "%s" HP_DIR "/hpage_pmd_size", root);
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%lu", &pmd) != 1)
            pmd = 0;
        fclose(f);
    }
    int found = 0;
    if (pmd >= 1024) {
        snprintf(path, sizeof path, "%s" HP_DIR "/hugepages-%lukB/shmem_enabled", root, pmd / 1024);
        found = hp_selected(path, word, sizeof word) && strcmp(word, "inherit") != 0;
    }
    if (!found) {
        snprintf(path, sizeof path, "%s" HP_DIR "/shmem_enabled", root);
        if (!hp_selected(path, word, sizeof word))
            snprintf(word, sizeof word, "unknown");
    }
    if (setting && len)
        snprintf(setting, len, "%s", word);
    return !strcmp(word, "always") || !strcmp(word, "within_size") || !strcmp(word, "advise") ||
           !strcmp(word, "force");
}

int topo_shm_huge_pages(void)
{
    /* Racing first callers compute the same value; no lock needed. -1:
     * not read yet. */
    static atomic_int cached = -1;
    int h = atomic_load_explicit(&cached, memory_order_relaxed);
    if (h < 0) {
        h = topo_shm_huge_pages_at("", NULL, 0);
        atomic_store_explicit(&cached, h, memory_order_relaxed);
    }
    return h;
}
