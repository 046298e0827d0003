/*
 * job_member.c - one rank of a "job" for tests/net/two_jobs.sh: joins a
 * communicator through CCL_COMM_ID (rank and size from the launcher's
 * RANK/WORLD_SIZE or OMPI_COMM_WORLD_RANK/SIZE), sums its job's mark over
 * all ranks and says whether every member came from its own job.
 *
 *   job_member MARK [DELAY_MS]
 *
 * Every rank of one job passes the same MARK (jobs pass different ones);
 * ranks other than 0 wait DELAY_MS before they join, which holds the job's
 * bootstrap root open while another job starts. Exit status: 0 the sum is
 * MARK x size (only this job's ranks), 3 it is not (ranks of two jobs
 * formed one communicator: the failure this test exists for), 1 init or
 * the allreduce failed (the message is printed).
 */
#include "ccl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int env_int(const char *a, const char *b)
{
    const char *s = getenv(a);
    if (!s)
        s = getenv(b);
    return s ? atoi(s) : -1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: job_member MARK [DELAY_MS]\n");
        return 2;
    }
    int64_t mark = atoll(argv[1]);
    int delay_ms = argc > 2 ? atoi(argv[2]) : 0;
    int rank = env_int("OMPI_COMM_WORLD_RANK", "RANK"), size = env_int("OMPI_COMM_WORLD_SIZE", "WORLD_SIZE");
    if (rank < 0 || size < 1) {
        fprintf(stderr, "job_member: no rank and size from the launcher\n");
        return 2;
    }
    if (rank > 0 && delay_ms > 0) {
        struct timespec ts = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    ccl_unique_id_t id;
    ccl_comm_t comm = NULL;
    ccl_result_t rc = ccl_get_unique_id(&id);
    if (rc == CCL_SUCCESS)
        rc = ccl_comm_init_rank(&comm, size, id, rank);
    int64_t sum = 0;
    if (rc == CCL_SUCCESS)
        rc = ccl_allreduce(&mark, &sum, 1, CCL_INT64, CCL_SUM, comm, NULL);
    if (rc != CCL_SUCCESS) {
        printf("job %lld rank %d (pid %d): failed: %s: %s\n", (long long)mark, rank, (int)getpid(),
               ccl_get_error_string(rc), ccl_get_last_error(comm));
        if (comm)
            ccl_comm_abort(comm);
        return 1;
    }
    int mixed = sum != mark * size;
    printf("job %lld rank %d (pid %d): sum %lld, %s\n", (long long)mark, rank, (int)getpid(), (long long)sum,
           mixed ? "MIXED with another job's ranks" : "only this job's ranks");
    ccl_comm_destroy(comm);
    return mixed ? 3 : 0;
}
