/*
 * test_shm_hygiene.c - shared-memory segments are private, unguessable,
 * never reused, and leave nothing in /dev/shm, even when a rank is killed
 * with SIGKILL in the middle of a collective.
 *
 * Each rank looks at its own mappings (/proc/self/maps) after init: every
 * ccl segment it maps must already be unlinked ("(deleted)"), be named
 * /ccl-<32 hex digits> or /ccl-b<32 hex digits> (128 random bits, nothing
 * derived from a pid), and, where /proc/self/map_files can be read (root),
 * have mode 0600 and belong to this user. A second communicator must map
 * no name the first one used, on any rank. Then the last rank is killed
 * with SIGKILL during a stream of allreduces: the others must fail with an
 * error (not hang), abort, and in the end no segment any rank ever mapped
 * may exist in /dev/shm.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_common.h"
#include "test_launch.h"

#define NRANKS 3
#define MAX_NAMES 256
#define NAME_LEN 64
#define COUNT (1u << 20)
/* Seconds a survivor may take to notice the kill (CCL_TIMEOUT is 20). */
#define NOTICE_S 40.0

/* Names every rank mapped, per phase, in memory the launcher's children
 * share with main. */
typedef struct {
    int n[3];
    char names[3][MAX_NAMES][NAME_LEN];
    int map_files_unreadable;
} seen_t;

static seen_t *seen;

static int is_hex32(const char *p)
{
    for (int i = 0; i < 32; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
            return 0;
    return p[32] == '\0';
}

/* Checks every ccl segment this process maps and records its name under
 * `phase`; returns how many there were. */
static int check_own_segments(tst_ctx_t *ctx, int phase)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        tst_fatal(ctx, "cannot read /proc/self/maps: %s", strerror(errno));
    char line[1024], last[NAME_LEN] = "";
    int count = 0;
    while (fgets(line, sizeof line, f)) {
        char *path = strstr(line, "/dev/shm/ccl-");
        if (!path)
            continue;
        path[strcspn(path, "\n")] = '\0';
        int deleted = strstr(path, " (deleted)") != NULL;
        char name[NAME_LEN];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(path + 8, " "), path + 8); /* "/ccl-..." */
        if (!deleted)
            tst_fail(ctx, "%s is still linked in /dev/shm after init", path);
        const char *hex = name + 5 + (name[5] == 'b' && strlen(name) == 38);
        if (!is_hex32(hex))
            tst_fail(ctx, "segment name %s is not /ccl-[b]<32 random hex digits>", name);
        /* A mapping appears once per contiguous range; count each segment once. */
        if (strcmp(name, last) == 0)
            continue;
        snprintf(last, sizeof last, "%s", name);
        count++;
        unsigned long lo = 0, hi = 0;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2) {
            char mf[128];
            struct stat st;
            snprintf(mf, sizeof mf, "/proc/self/map_files/%lx-%lx", lo, hi);
            if (stat(mf, &st) == 0) {
                if ((st.st_mode & 07777) != 0600)
                    tst_fail(ctx, "segment %s has mode %04o, not 0600", name, (unsigned)(st.st_mode & 07777));
                if (st.st_uid != getuid())
                    tst_fail(ctx, "segment %s belongs to uid %d, not %d", name, (int)st.st_uid, (int)getuid());
            } else {
                __atomic_store_n(&seen->map_files_unreadable, 1, __ATOMIC_RELAXED);
            }
        }
        int k = __atomic_fetch_add(&seen->n[phase], 1, __ATOMIC_ACQ_REL);
        if (k < MAX_NAMES)
            snprintf(seen->names[phase][k], NAME_LEN, "%s", name);
    }
    fclose(f);
    if (count == 0)
        tst_fail(ctx, "phase %d: no ccl segment mapped after init (expected FIFOs to the local peers)", phase);
    return count;
}

static void *killer(void *arg)
{
    (void)arg;
    usleep(150000); /* the others are inside the allreduces by now */
    raise(SIGKILL);
    return NULL;
}

static int rank_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    int n = ctx->nranks, r = ctx->rank;

    tst_set_case(ctx, "first communicator");
    ccl_comm_t a = tst_comm_init(ctx);
    check_own_segments(ctx, 0);
    /* Gone before the next one, so that its mappings are all the next's. */
    TST_CCL(ctx, a, ccl_comm_destroy(a));
    tst_set_case(ctx, "second communicator");
    ccl_unique_id_t id2;
    tst_share_id(ctx, &id2);
    ccl_comm_t b = tst_comm_init_id(ctx, id2);
    check_own_segments(ctx, 1);
    tst_barrier(ctx);
    /* Never reused: no name of the second comm (any rank) was one of the first's. */
    if (r == 0)
        for (int i = 0; i < seen->n[1] && i < MAX_NAMES; i++)
            for (int j = 0; j < seen->n[0] && j < MAX_NAMES; j++)
                if (strcmp(seen->names[1][i], seen->names[0][j]) == 0)
                    tst_fail(ctx, "segment name %s was used by both communicators", seen->names[1][i]);
    TST_CCL(ctx, b, ccl_comm_destroy(b));

    tst_set_case(ctx, "third communicator, whose last rank is killed");
    ccl_unique_id_t id3;
    tst_share_id(ctx, &id3);
    ccl_comm_t c = tst_comm_init_id(ctx, id3);
    check_own_segments(ctx, 2);
    float *buf = malloc(COUNT * sizeof *buf);
    if (!buf)
        tst_fatal(ctx, "out of memory");
    for (size_t i = 0; i < COUNT; i++)
        buf[i] = 1.0f;
    tst_barrier(ctx); /* the last one the victim joins */
    if (r == n - 1) {
        pthread_t th;
        if (pthread_create(&th, NULL, killer, NULL) != 0)
            tst_fatal(ctx, "pthread_create failed");
        for (;;)
            ccl_allreduce(buf, buf, COUNT, CCL_FLOAT32, CCL_SUM, c, NULL);
    }
    double t0 = tst_now();
    ccl_result_t rc = CCL_SUCCESS;
    int calls = 0;
    while (rc == CCL_SUCCESS && tst_now() - t0 < NOTICE_S) {
        rc = ccl_allreduce(buf, buf, COUNT, CCL_FLOAT32, CCL_SUM, c, NULL);
        calls++;
    }
    if (rc == CCL_SUCCESS)
        tst_fail(ctx, "%d allreduces succeeded over %.0f s although rank %d was killed", calls, NOTICE_S, n - 1);
    else
        printf("  rank %d: allreduce #%d failed %.2f s after the kill window opened: %s\n", r, calls,
               tst_now() - t0, ccl_get_last_error(c));
    fflush(stdout);
    TST_CCL(ctx, c, ccl_comm_abort(c));
    free(buf);
    return 0;
}

int main(void)
{
    /* A survivor that only notices through its timeout still ends soon. */
    setenv("CCL_TIMEOUT", "20", 0);
    /* All ranks on one host, so that they talk through segments. */
    unsetenv("CCL_HOSTID");
    seen = mmap(NULL, sizeof *seen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (seen == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    memset(seen, 0, sizeof *seen);
    tst_sigkill_ok_rank = NRANKS - 1; /* its death is the point */
    int failed = tst_run_ranks("shm hygiene", NRANKS, 240, rank_body, NULL);
    /* Everyone is gone, the victim without any cleanup: nothing any rank
     * ever mapped may be left in /dev/shm. */
    int total = 0, left = 0;
    for (int ph = 0; ph < 3; ph++)
        for (int i = 0; i < seen->n[ph] && i < MAX_NAMES; i++, total++) {
            char path[128];
            struct stat st;
            snprintf(path, sizeof path, "/dev/shm%s", seen->names[ph][i]);
            if (stat(path, &st) == 0) {
                printf("FAIL %s was left behind\n", path);
                left++;
            }
        }
    printf("%d segments checked (%d left in /dev/shm)%s\n", total, left,
           seen->map_files_unreadable ? "; modes not checked: /proc/self/map_files is not readable here" : "");
    if (total == 0) {
        printf("FAIL no segment names were recorded\n");
        failed = 1;
    }
    return failed || left ? 1 : 0;
}
