/*
 * nccl_suite.h - the per-rank collective suite of the NCCL ABI test.
 */
#ifndef NCCL_SUITE_H
#define NCCL_SUITE_H

#include "nccl_check.h"

/* Every collective of nccl.h, every type, odd counts, in and out of place,
 * on comm; mismatches are counted in test_failures. Collective: every rank
 * of comm calls it. */
void suite_run(ncclComm_t comm);

#endif
