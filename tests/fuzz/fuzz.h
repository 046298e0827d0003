/*
 * fuzz.h - what every libFuzzer target in tests/fuzz/ shares.
 *
 * Each target feeds arbitrary bytes to one of ccl's wire parsers (the pure
 * functions that stand between the network and everything else) and, when
 * the parser accepts them, checks that what it returns keeps the promises
 * its header makes; a broken promise aborts, which libFuzzer reports as a
 * crash with the input that caused it. AddressSanitizer and UBSan catch
 * reads past the input and undefined arithmetic. `make fuzz` runs each
 * target for FUZZ_SECONDS; `make test` runs each over its seed corpus
 * (tests/fuzz/corpus/<target>/) for a few seconds.
 */
#ifndef CCL_TEST_FUZZ_H
#define CCL_TEST_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A promise broken: abort with where and why. */
#define FUZZ_REQUIRE(cond)                                                           \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: parser accepted input but %s\n", __FILE__,       \
                    __LINE__, #cond);                                                \
            abort();                                                                 \
        }                                                                            \
    } while (0)

/* Rejections are the common case and would flood the output at WARN. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("CCL_DEBUG", "NONE", 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Takes an integer of n (<= 8) bytes, host byte order, off the front of
 * the input (0 bytes where it runs out): targets draw their parameters
 * from the input too, so the fuzzer explores those as well. */
static inline uint64_t fuzz_take(const uint8_t **data, size_t *size, size_t n)
{
    uint64_t v = 0;
    size_t k = n < *size ? n : *size;
    memcpy(&v, *data, k);
    *data += k;
    *size -= k;
    return v;
}

#endif
