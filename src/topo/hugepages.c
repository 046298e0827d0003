/*
 * hugepages.c - reads the kernel's shared-memory THP setting (hugepages.h).
 *
 * Two files decide it on current kernels: the top-level shmem_enabled,
 * and the PMD size's own hugepages-<size>kB/shmem_enabled (multi-size
 * THP, Linux 6.11+; older kernels have only the top-level file). The
 * fault takes the per-size one unless it says "inherit", but the address
 * of a memfd mapping is aligned to the PMD size only where the top-level
 * one allows huge pages, and a mapping that is not aligned never gets
 * them: so both must allow it. Each file lists the choices with the
 * selected one in brackets. always, within_size (our buffers are whole
 * huge pages, ftruncated before use), advise (we advise) and force give
 * huge pages; never and deny do not. (A process whose launcher disabled
 * THP for it, prctl PR_SET_THP_DISABLE, gets none whatever they say.)
 */
#include "topo/hugepages.h"

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

static int hp_allows(const char *word)
{
    return !strcmp(word, "always") || !strcmp(word, "within_size") || !strcmp(word, "advise") ||
           !strcmp(word, "force");
}

int topo_shm_huge_pages_at(const char *root, char *setting, size_t len)
{
    char path[4096 + 128], top[32] = "unknown", size[32] = "";
    unsigned long pmd = 0;
    snprintf(path, sizeof path, "%s" HP_DIR "/shmem_enabled", root);
    if (!hp_selected(path, top, sizeof top))
        snprintf(top, sizeof top, "unknown");
    snprintf(path, sizeof path, "%s" HP_DIR "/hpage_pmd_size", root);
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%lu", &pmd) != 1)
            pmd = 0;
        fclose(f);
    }
    if (pmd >= 1024) {
        snprintf(path, sizeof path, "%s" HP_DIR "/hugepages-%lukB/shmem_enabled", root, pmd / 1024);
        if (!hp_selected(path, size, sizeof size) || !strcmp(size, "inherit"))
            size[0] = '\0';
    }
    /* The setting that decided: the top level where it forbids (or where
     * the size defers to it), else the size's own. */
    const char *word = !hp_allows(top) || !size[0] ? top : size;
    if (setting && len)
        snprintf(setting, len, "%s", word);
    return hp_allows(word);
}
