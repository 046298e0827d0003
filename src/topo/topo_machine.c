/*
 * topo_machine.c - this machine's topology, discovered once per process.
 *
 * hwloc discovery (topo_discover) takes ~100 ms on the test VM, and a
 * communicator that spans nodes needs it at every init (the tuner reads
 * its NIC): a job that rebuilds its communicator would pay that each time.
 * The machine does not change under a running process, CCL_TOPO_FILE and
 * CCL_TOPO_DUMP_FILE are read once per process anyway, and a topo_t holds
 * only the machine's structure (no thread's binding), so one copy serves
 * every communicator and thread. It lives until the process exits (still
 * reachable, not a leak); a failed discovery is not kept, so the next
 * init tries again and reports the failure again.
 */
#include "topo/topo.h"
#include "base/err.h"

#include <pthread.h>

static pthread_mutex_t machine_lock = PTHREAD_MUTEX_INITIALIZER;
static topo_t *machine_topo;

ccl_result_t topo_machine(const topo_t **out)
{
    ccl_result_t res = CCL_SUCCESS;
    /* Under the lock: topo_discover's dump writes annotations into the
     * hwloc objects, and two first inits must not both discover. */
    pthread_mutex_lock(&machine_lock);
    if (!machine_topo)
        res = topo_discover(&machine_topo);
    *out = machine_topo;
    pthread_mutex_unlock(&machine_lock);
    return res;
}
