/*
 * job.h - which job this process belongs to, as its launcher says.
 *
 * With CCL_COMM_ID every rank derives the bootstrap secret itself, and two
 * jobs that share the address (two trainings with the same default port)
 * would meet at one root and sum each other's data. Launchers already name
 * their jobs (PMIx namespace, Open MPI job id, Slurm job and step, torchrun
 * run id, PBS, LSF and Flux job ids): without CCL_COMM_SECRET the secret is
 * derived from that name, so ranks of different jobs cannot meet, and the
 * name travels in the bootstrap's hello so that a rank which reaches
 * another job's root is told whose it is.
 */
#ifndef CCL_BOOTSTRAP_JOB_H
#define CCL_BOOTSTRAP_JOB_H

#include "bootstrap/wire.h" /* BS_JOB_MAX: the longest name kept (the secret uses all of it) */

/* This process's job as its launcher names it, e.g. "Slurm job 4242 step 0",
 * or "" when no launcher variable is set. Read once; thread-safe. */
const char *bs_job_name(void);
/* The text the CCL_COMM_ID secret is derived from: CCL_COMM_SECRET when
 * set, else the launcher's job name (secret_from says which, for logs). */
const char *bs_job_secret_text(const char **secret_from);

#endif
