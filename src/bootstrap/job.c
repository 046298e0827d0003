/*
 * job.c - the launcher's name for this job (job.h). The launchers'
 * variables are read here and nowhere else; they are theirs, not ccl
 * settings, so they are not in params.def.
 */
#include "bootstrap/job.h"
#include "base/param.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char job_name[BS_JOB_MAX];
static char job_text[1024]; /* uncut, for the secret */
static pthread_once_t job_once = PTHREAD_ONCE_INIT;

static const char *job_env(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] ? v : NULL;
}

/* The most specific name first: a job step inside an allocation, an
 * Open MPI job inside a Slurm one. torchrun's default run id "none" is
 * the same for every job, so it names none. */
static void job_detect(void)
{
    const char *a, *b;
    char text[sizeof job_text] = "";
    if ((a = job_env("PMIX_NAMESPACE")))
        snprintf(text, sizeof text, "PMIx namespace %s", a);
    else if ((a = job_env("OMPI_MCA_ess_base_jobid")))
        snprintf(text, sizeof text, "Open MPI job %s", a);
    else if ((a = job_env("TORCHELASTIC_RUN_ID")) && strcmp(a, "none") != 0)
        snprintf(text, sizeof text, "torchrun run %s", a);
    else if ((a = job_env("SLURM_JOB_ID")) || (a = job_env("SLURM_JOBID"))) {
        b = job_env("SLURM_STEP_ID") ? job_env("SLURM_STEP_ID") : job_env("SLURM_STEPID");
        snprintf(text, sizeof text, "Slurm job %s step %s", a, b ? b : "-");
    } else if ((a = job_env("FLUX_JOB_ID")))
        snprintf(text, sizeof text, "Flux job %s", a);
    else if ((a = job_env("PBS_JOBID")))
        snprintf(text, sizeof text, "PBS job %s", a);
    else if ((a = job_env("LSB_JOBID"))) {
        b = job_env("LSB_JOBINDEX");
        snprintf(text, sizeof text, "LSF job %s%s%s", a, b ? " index " : "", b ? b : "");
    }
    memcpy(job_text, text, sizeof job_text);
    snprintf(job_name, sizeof job_name, "%s", text);
}

const char *bs_job_name(void)
{
    pthread_once(&job_once, job_detect);
    return job_name;
}

const char *bs_job_secret_text(const char **secret_from)
{
    const char *secret = param_str(PARAM_COMM_SECRET);
    pthread_once(&job_once, job_detect);
    if (secret[0]) {
        *secret_from = "CCL_COMM_SECRET";
        return secret;
    }
    *secret_from = job_text[0] ? "the launcher's job name" : "nothing (no CCL_COMM_SECRET, no launcher job name)";
    return job_text;
}
