/*
 * host.h - which host (node) this process runs on.
 *
 * Ranks with equal host ids share memory and use the shm transport. The id
 * is a hash of the hostname and the kernel's boot id (two containers with one
 * hostname on different machines differ by boot id); CCL_HOSTID overrides it
 * so tests can simulate several nodes on one machine.
 */
#ifndef CCL_TOPO_HOST_H
#define CCL_TOPO_HOST_H

#include <stddef.h>
#include <stdint.h>

uint64_t topo_host_id(void);
/* The running kernel (its boot id): equal for ranks that share the CPUs,
 * even when CCL_HOSTID or network namespaces make them different nodes.
 * Wait policies count the ranks that compete for the cores by it. */
uint64_t topo_kernel_id(void);
void topo_hostname(char *buf, size_t len);

#endif
