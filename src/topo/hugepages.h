/*
 * hugepages.h - whether shared memory gets transparent huge pages here.
 *
 * Single copy reads and writes a local peer's ccl_mem_alloc buffer (a
 * memfd) through this process's own mapping of it, and every page of that
 * mapping faults on first use. On the project's VMs such a fault costs
 * ~6-12 us (4 KiB pages: 1.5 ms to read a MiB through a new mapping, 3 ms
 * to write one). With huge pages for shared memory one fault maps 2 MiB
 * (a MiB written through a new mapping: 60 us). Whether memfds get them
 * on first touch is the kernel's shmem_enabled setting (ccl_mem_alloc
 * asks with MADV_HUGEPAGE, which "advise" honours); where it says no,
 * ccl_mem_alloc collapses its buffers into huge pages instead (base/mem.c).
 * ccl-info prints both; the tuner's single-copy sizes depend on neither
 * (core/tuner.c).
 */
#ifndef CCL_TOPO_HUGEPAGES_H
#define CCL_TOPO_HUGEPAGES_H

#include <stddef.h>

/* 1 when a memfd mapping advised MADV_HUGEPAGE gets PMD-size pages, 0 when
 * not (or unknown), from the sysfs files under `root` ("" for the real
 * ones; tests point it at a fake tree); `setting`, when given, receives the
 * setting that decided ("advise", "never", ... or "unknown"). */
int topo_shm_huge_pages_at(const char *root, char *setting, size_t len);

#endif
