/*
 * test_mem.c - ccl_mem_alloc's huge pages and how peers map its buffers
 * (src/base/mem.c, src/transport/shm_peer.c).
 *
 * Single copy reads and writes a local peer's ccl_mem_alloc buffer through
 * a second mapping of its memfd. Both mappings must map huge pages with one
 * entry per 2 MiB, or the copies pay a page walk (and, on the project's
 * VMs, a hypervisor-shadowed page-table entry) per 4 KiB. Asserted here:
 * a buffer of 1 MiB or more starts on a huge-page boundary and is whole
 * huge pages; where this kernel collapses a memfd's pages into huge ones
 * (probed with a memfd of the test's own), every byte of the owner's
 * mapping and of a peer's (shm_peer_read and shm_peer_writable through
 * /proc/<pid>/fd, as a reader and a helper map it) is mapped huge; both
 * mappings show the same bytes, written from either side; and a small
 * buffer stays small (rounded to 4 KiB, no huge page spent on it). Where
 * the kernel refuses huge pages the test says so and checks the rest.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ccl.h"
#include "base/mem.h"
#include "transport/shm_peer.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

/* kB of `field` in /proc/self/smaps for the mapping that starts at base;
 * -1 if there is none. */
static long smaps_kb(const void *base, const char *field)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    assert_non_null(f);
    char line[512], want[32];
    snprintf(want, sizeof want, "%lx-", (unsigned long)(uintptr_t)base);
    long kb = -1;
    int in = 0;
    size_t flen = strlen(field);
    while (fgets(line, sizeof line, f)) {
        /* A mapping's header starts with its address (lower-case hex), its
         * fields with a capitalised name. */
        if ((line[0] >= '0' && line[0] <= '9') || (line[0] >= 'a' && line[0] <= 'f')) {
            in = strncmp(line, want, strlen(want)) == 0;
            continue;
        }
        if (in && strncmp(line, field, flen) == 0 && line[flen] == ':') {
            kb = strtol(line + flen + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kb;
}

/* Whether this kernel turns a memfd's pages into huge ones on request. */
static int kernel_collapses_memfd(void)
{
    size_t len = MEM_HUGE_PAGE;
    int fd = memfd_create("ccl-test-probe", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    int ok = 0;
    if (ftruncate(fd, (off_t)len) == 0) {
        char *p = mem_map_shared(fd, len, PROT_READ | PROT_WRITE);
        if (p != MAP_FAILED) {
            p[0] = 1;
            ok = madvise(p, len, MADV_COLLAPSE) == 0;
            munmap(p, len);
        }
    }
    close(fd);
    return ok;
}

static void test_aligned_mapping(void **state)
{
    (void)state;
    int fd = memfd_create("ccl-test-align", MFD_CLOEXEC);
    assert_true(fd >= 0);
    size_t len = 3 * MEM_HUGE_PAGE;
    assert_int_equal(ftruncate(fd, (off_t)len), 0);
    for (int i = 0; i < 8; i++) { /* wherever the kernel would have put it */
        char *p = mem_map_shared(fd, len, PROT_READ | PROT_WRITE);
        assert_true(p != MAP_FAILED);
        assert_int_equal((uintptr_t)p % MEM_HUGE_PAGE, 0);
        p[len - 1] = (char)i;
        assert_int_equal(munmap(p, len), 0);
    }
    close(fd);
}

static void test_large_buffer_is_huge_in_owner_and_peer(void **state)
{
    (void)state;
    int huge = kernel_collapses_memfd();
    if (!huge)
        print_message("this kernel keeps memfd pages small (no MADV_COLLAPSE): checking the rest\n");
    size_t size = 8 * MEM_HUGE_PAGE + 12345; /* not a whole number of huge pages */
    size_t len = 9 * MEM_HUGE_PAGE;
    char *buf = NULL;
    assert_int_equal(ccl_mem_alloc((void **)&buf, size), CCL_SUCCESS);
    assert_int_equal((uintptr_t)buf % MEM_HUGE_PAGE, 0);
    mem_ref_t mr;
    assert_true(mem_find(buf, size, &mr));
    assert_int_equal(mr.alloc_len, len);
    for (size_t i = 0; i < size; i += 4096)
        assert_int_equal(buf[i], 0);
    if (huge)
        assert_int_equal(smaps_kb(buf, "ShmemPmdMapped"), (long)(len >> 10));

    /* A peer's view, as a reader and as a helper map it (our own pid
     * stands in for the peer: the path through /proc/<pid>/fd is the
     * same). */
    shm_peer_cache_t cache = {0};
    shm_ref_t ref = {SHM_REF_MAGIC, (int32_t)getpid(), mr.fd, mr.id, mr.alloc_len, 4096, size - 4096,
                     (uint64_t)(uintptr_t)(buf + 4096)};
    const void *view = NULL;
    assert_int_equal(shm_peer_read(&cache, getpid(), &ref, NULL, &view), CCL_SUCCESS);
    const char *rbase = (const char *)view - 4096;
    assert_true(rbase != buf);
    assert_int_equal((uintptr_t)rbase % MEM_HUGE_PAGE, 0);
    void *wview = NULL;
    assert_int_equal(shm_peer_writable(&cache, getpid(), &ref, &wview), CCL_SUCCESS);
    char *wbase = (char *)wview - 4096;
    assert_int_equal((uintptr_t)wbase % MEM_HUGE_PAGE, 0);

    for (size_t i = 0; i < size; i += 4093)
        buf[i] = (char)(i * 7 + 1);
    for (size_t i = 0; i < size; i += 4093)
        assert_int_equal(rbase[i], (char)(i * 7 + 1));
    for (size_t i = 4096 + 1; i < size; i += 4099)
        wbase[i] = (char)(i * 3 + 5);
    for (size_t i = 4096 + 1; i < size; i += 4099)
        assert_int_equal(buf[i], (char)(i * 3 + 5));
    if (huge) { /* every page touched above: all of it mapped huge */
        volatile char sink = 0;
        for (size_t i = 0; i < len; i += 4096)
            sink ^= rbase[i], sink ^= wbase[i];
        (void)sink;
        assert_int_equal(smaps_kb(rbase, "ShmemPmdMapped"), (long)(len >> 10));
        assert_int_equal(smaps_kb(wbase, "ShmemPmdMapped"), (long)(len >> 10));
    }
    shm_peer_cache_close(&cache);
    assert_int_equal(ccl_mem_free(buf), CCL_SUCCESS);
}

static void test_small_buffer_stays_small(void **state)
{
    (void)state;
    char *buf = NULL;
    assert_int_equal(ccl_mem_alloc((void **)&buf, 10000), CCL_SUCCESS);
    mem_ref_t mr;
    assert_true(mem_find(buf, 10000, &mr));
    assert_int_equal(mr.alloc_len, 12288);
    assert_int_equal(smaps_kb(buf, "Size"), 12); /* the mapping is the one looked at */
    assert_int_equal(smaps_kb(buf, "ShmemPmdMapped"), 0);
    memset(buf, 0x5a, 10000);
    assert_int_equal(ccl_mem_free(buf), CCL_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aligned_mapping),
        cmocka_unit_test(test_large_buffer_is_huge_in_owner_and_peer),
        cmocka_unit_test(test_small_buffer_stays_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
