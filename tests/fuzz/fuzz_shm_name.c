/*
 * fuzz_shm_name.c - shm_name_check: the shared-memory segment names ranks
 * of one host send each other through the bootstrap before shm_open.
 */
#include "fuzz.h"

#include "transport/shm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (shm_name_check((const char *)data, size, "fuzz") != CCL_SUCCESS)
        return 0;
    const char *name = (const char *)data;
    size_t n = strnlen(name, size);
    FUZZ_REQUIRE(n < size); /* terminated within what arrived */
    FUZZ_REQUIRE(strncmp(name, "/ccl-", 5) == 0);
    FUZZ_REQUIRE(strchr(name + 1, '/') == NULL && strstr(name, "..") == NULL);
    FUZZ_REQUIRE(n == 37 || n == 38);
    return 0;
}
