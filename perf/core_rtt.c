/*
 * core-rtt: the round trip of one cache line between two CPUs, the probe
 * that tells where the hypervisor has put this VM's vCPUs right now.
 *
 * On the project's 2-core VMs the host moves the two vCPUs every few
 * seconds: onto the two hyperthreads of one core (a round trip of ~40 ns),
 * two cores of one socket (~85-130 ns) or, by all appearances, two sockets
 * (~500 ns). Transfers between ranks follow: a FIFO whose reader takes
 * every line from the writer's cache ran 3-5x slower in the last placement
 * (perf/RESULTS.md, "Single copy from 1 MiB"). Benchmarks that run this
 * before and after each invocation can sort their rows by placement
 * instead of mixing them in one median.
 *
 *   core-rtt [-a CPU] [-b CPU] [-n ROUNDTRIPS]     defaults: -a 0 -b 1 -n 20000
 *
 * Two forked processes pinned to the two CPUs bounce a counter on one
 * shared line; the first fifth of the round trips is a warm-up (each side
 * gives up after 10 s). Output,
 * one line: "<ns per round trip> <smt|socket|far>" (below 70 ns: smt, below
 * 300: socket, else far). Exits 1 when the CPUs cannot be pinned.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "bench_time.h"

#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define RTT_SMT_NS 70.0
#define RTT_SOCKET_NS 300.0
/* A side whose partner died spins: it gives up after this long. */
#define RTT_LIMIT_S 10

typedef struct {
    _Atomic long ping;
    char pad[64 - sizeof(long)];
    _Atomic long pong; /* each side writes its own line, reads the other's */
    char pad2[64 - sizeof(long)];
    double ns; /* the result, from the pinging side */
} rtt_shared_t;

static int rtt_pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set);
}

static void rtt_side(rtt_shared_t *sh, int pinger, long n)
{
    long warm = n / 5;
    double t0 = 0;
    for (long k = 1; k <= n + warm; k++) {
        if (k == warm + 1)
            t0 = bench_now();
        if (pinger) {
            atomic_store_explicit(&sh->ping, k, memory_order_release);
            while (atomic_load_explicit(&sh->pong, memory_order_acquire) != k)
                ;
        } else {
            while (atomic_load_explicit(&sh->ping, memory_order_acquire) != k)
                ;
            atomic_store_explicit(&sh->pong, k, memory_order_release);
        }
    }
    if (pinger)
        sh->ns = (bench_now() - t0) / (double)n * 1e9;
}

int main(int argc, char **argv)
{
    int cpu[2] = {0, 1};
    long n = 20000;
    int opt;
    while ((opt = getopt(argc, argv, "a:b:n:")) != -1) {
        if (opt == 'a')
            cpu[0] = atoi(optarg);
        else if (opt == 'b')
            cpu[1] = atoi(optarg);
        else if (opt == 'n')
            n = atol(optarg);
        else {
            fprintf(stderr, "usage: core-rtt [-a CPU] [-b CPU] [-n ROUNDTRIPS]\n");
            return 2;
        }
    }
    if (n < 1 || cpu[0] == cpu[1]) {
        fprintf(stderr, "core-rtt: need two different CPUs and at least one round trip\n");
        return 2;
    }
    rtt_shared_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("core-rtt: mmap");
        return 1;
    }
    pid_t kids[2];
    for (int s = 0; s < 2; s++) {
        kids[s] = fork();
        if (kids[s] < 0) {
            perror("core-rtt: fork");
            if (s == 1) {
                kill(kids[0], SIGKILL);
                waitpid(kids[0], NULL, 0);
            }
            return 1;
        }
        if (kids[s] == 0) {
            /* Never left spinning on a 2-core benchmark machine: not when
             * the parent is killed, not when the other side is. */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() == 1)
                _exit(1);
            alarm(RTT_LIMIT_S);
            if (rtt_pin(cpu[s]) != 0) {
                fprintf(stderr, "core-rtt: cannot run on CPU %d\n", cpu[s]);
                _exit(1); /* the other side spins until it is killed below */
            }
            rtt_side(sh, s == 0, n);
            _exit(0);
        }
    }
    int failed = 0, status;
    for (int done = 0; done < 2; done++) {
        pid_t pid = wait(&status);
        if (pid > 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0) && !failed) {
            failed = 1;
            kill(pid == kids[0] ? kids[1] : kids[0], SIGKILL);
        }
    }
    if (failed)
        return 1;
    const char *where = sh->ns < RTT_SMT_NS ? "smt" : sh->ns < RTT_SOCKET_NS ? "socket" : "far";
    printf("%.0f %s\n", sh->ns, where);
    return 0;
}
