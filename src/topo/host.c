/*
 * host.c - host identity for grouping ranks into nodes (see host.h).
 */
#include "topo/host.h"
#include "base/param.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static uint64_t topo_hash(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull; /* FNV-1a */
    return h;
}

void topo_hostname(char *buf, size_t len)
{
    if (gethostname(buf, len) != 0)
        snprintf(buf, len, "unknown");
    buf[len - 1] = '\0';
}

static void topo_boot_id(char *boot, size_t len)
{
    boot[0] = '\0';
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, (int)len, f))
            boot[0] = '\0';
        fclose(f);
    }
}

uint64_t topo_host_id(void)
{
    const char *forced = param_str(PARAM_HOSTID);
    if (forced[0])
        return topo_hash(0xcbf29ce484222325ull, forced);
    char host[256], boot[64];
    topo_hostname(host, sizeof host);
    topo_boot_id(boot, sizeof boot);
    return topo_hash(topo_hash(0xcbf29ce484222325ull, host), boot);
}

uint64_t topo_kernel_id(void)
{
    char boot[64];
    topo_boot_id(boot, sizeof boot);
    return topo_hash(0x84222325cbf29ce4ull, boot[0] ? boot : "no boot id");
}
