/*
 * test_bootstrap_attack.c - strangers on the bootstrap ports cannot stop a
 * communicator from forming, and every one of them is logged.
 *
 * Four ranks and an attacker process. Ranks 0-2 start ccl_comm_init_rank
 * at once; rank 3 waits for the attacker. Meanwhile the attacker, which
 * knows the unique id (so the root's address and the secret), connects to
 * the bootstrap root and to the ring listener of each waiting rank (found
 * through /proc) and sends: a frame with a wrong secret, garbage, a frame
 * cut short (then closes, or stalls), nranks beyond BS_MAX_RANKS and below
 * 1, a frame for a rank that is not the one expected, a valid frame with
 * bytes after it (the root must take it as oversized, not register it), an
 * HTTP request, a 64 KiB stream, connections that close at once and ones
 * that never send anything; the root also gets a flood of silent
 * connections, more than it keeps pending. Then rank 3 starts.
 *
 * Asserted: every rank's init succeeds within 8 s of rank 3's start (it
 * takes about 0.1 s; a root or a rank that waited on each silent
 * connection would need 5 s per connection, over a minute here), an allreduce over the four gives the exact sum, and
 * each attack connection appears in a WARN line "dropped a connection from
 * <its address>: <reason>" with the reason expected for it (logs go to
 * files through CCL_DEBUG_FILE).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootstrap/accept.h"
#include "test_common.h"
#include "test_launch.h"

#define NRANKS 4
#define ATTACKER NRANKS
#define MAX_CONNS 256
#define COUNT 4099
/* Seconds after rank 3's start by which every rank must be through init:
 * well above the 0.1 s it takes here, even on a loaded machine, and well
 * below what waiting 5 s on each silent connection would cost. */
#define INIT_LIMIT_S 8

typedef struct {
    char from[80];   /* the attacker's end, as the logs print it */
    char target[32]; /* who drops it, as the logs name it: "bootstrap root", "rank N" */
    char expect[64]; /* the reason the log line must contain ("" = any) */
} attack_conn_t;

/* Shared by main, the ranks and the attacker (mapped before the fork). */
typedef struct {
    int pid[NRANKS];
    int attacked;       /* the attacker is done: rank 3 may start */
    double t_attacked;
    int finished;       /* ranks through their allreduce */
    int nconns;
    attack_conn_t conns[MAX_CONNS];
    char logdir[128];
} shared_t;

static shared_t *sh;

/* ---- finding a rank's listener through /proc ------------------------------------- */

static int socket_inodes(int pid, unsigned long *inodes, int max)
{
    char dir[64], link[128], path[320];
    int n = 0;
    snprintf(dir, sizeof dir, "/proc/%d/fd", pid);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        ssize_t len = readlink(path, link, sizeof link - 1);
        if (len <= 0)
            continue;
        link[len] = '\0';
        unsigned long ino;
        if (sscanf(link, "socket:[%lu]", &ino) == 1)
            inodes[n++] = ino;
    }
    closedir(d);
    return n;
}

/* Listening TCP sockets of pid (IPv4 and IPv6), as connectable addresses. */
static int find_listeners(int pid, sock_addr_t *out, int max)
{
    unsigned long inodes[256];
    int ni = socket_inodes(pid, inodes, 256), n = 0;
    const char *files[2] = {"/proc/net/tcp", "/proc/net/tcp6"};
    for (int v6 = 0; v6 < 2; v6++) {
        FILE *f = fopen(files[v6], "r");
        if (!f)
            continue;
        char line[512], hex[40];
        unsigned port, state;
        unsigned long ino;
        while (fgets(line, sizeof line, f) && n < max) {
            if (sscanf(line, " %*d: %39[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %*d %*d %lu", hex, &port, &state, &ino) != 4 ||
                state != 0x0A)
                continue;
            int mine = 0;
            for (int i = 0; i < ni && !mine; i++)
                mine = inodes[i] == ino;
            if (!mine)
                continue;
            sock_addr_t a;
            memset(&a, 0, sizeof a);
            if (!v6) {
                a.sin.sin_family = AF_INET;
                a.sin.sin_port = htons((uint16_t)port);
                a.sin.sin_addr.s_addr = (uint32_t)strtoul(hex, NULL, 16);
            } else {
                a.sin6.sin6_family = AF_INET6;
                a.sin6.sin6_port = htons((uint16_t)port);
                for (int w = 0; w < 4; w++) {
                    char word[9];
                    memcpy(word, hex + 8 * w, 8);
                    word[8] = '\0';
                    uint32_t v = (uint32_t)strtoul(word, NULL, 16);
                    memcpy(&a.sin6.sin6_addr.s6_addr[4 * w], &v, 4);
                }
            }
            out[n++] = a;
        }
        fclose(f);
    }
    return n;
}

/* ---- the attacker ---------------------------------------------------------------- */

static int held[MAX_CONNS], nheld;

/* Connects to `to`, sends len bytes of buf, and closes (keep = 0) or holds
 * the connection open until the end (keep = 1). Records what the target's
 * log must say about it. */
static void attack(tst_ctx_t *ctx, const sock_addr_t *to, const char *target, const void *buf, size_t len,
                   int keep, const char *expect)
{
    int fd = socket(to->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, &to->sa, sock_addr_len(to)) != 0)
        tst_fatal(ctx, "attacker: connect to %s failed: %s", target, strerror(errno));
    sock_addr_t me;
    socklen_t alen = sizeof me;
    memset(&me, 0, sizeof me);
    getsockname(fd, &me.sa, &alen);
    if (sh->nconns >= MAX_CONNS)
        tst_fatal(ctx, "attacker: more than %d connections", MAX_CONNS);
    attack_conn_t *c = &sh->conns[sh->nconns++];
    sock_addr_str(&me, c->from, sizeof c->from);
    snprintf(c->target, sizeof c->target, "%s", target);
    snprintf(c->expect, sizeof c->expect, "%s", expect);
    size_t off = 0;
    while (off < len) {
        /* Never blocks: a rank's listener only accepts once rank 3 comes,
         * and the target may drop us before we are done. */
        ssize_t w = send(fd, (const char *)buf + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    if (keep && nheld < MAX_CONNS)
        held[nheld++] = fd;
    else
        close(fd);
}

static bs_hello_t forged_hello(const bs_id_t *id, int rank, int nranks)
{
    bs_hello_t h;
    memset(&h, 0, sizeof h);
    h.magic = BS_MAGIC;
    h.version = BS_VERSION;
    memcpy(h.secret, id->secret, sizeof h.secret);
    h.rank = rank;
    h.nranks = nranks;
    h.info.addr = id->root; /* any valid address */
    h.info.rank = rank;
    snprintf(h.info.hostname, sizeof h.info.hostname, "attacker");
    return h;
}

/* The attacks both kinds of listener get; self is the rank of a ring
 * listener (-1 for the root). */
static void attack_all(tst_ctx_t *ctx, const bs_id_t *id, const sock_addr_t *to, const char *target, int self)
{
    char trunc_stall[64], silent[64];
    bs_hello_t h = forged_hello(id, 1, NRANKS);
    snprintf(trunc_stall, sizeof trunc_stall, "100 of %zu bytes", sizeof h);
    snprintf(silent, sizeof silent, "0 of %zu bytes", sizeof h);

    bs_hello_t bad = h;
    bad.secret[5] ^= 0x40;
    attack(ctx, to, target, &bad, sizeof bad, 0, "wrong secret");
    unsigned char junk[65536];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)(tst_mix64(i) >> 7);
    attack(ctx, to, target, junk, sizeof h, 1, "not a ccl bootstrap frame");
    attack(ctx, to, target, junk, sizeof junk, 0, "not a ccl bootstrap frame");
    attack(ctx, to, target, &h, 100, 0, "truncated frame");
    attack(ctx, to, target, &h, 100, 1, trunc_stall);
    bad = forged_hello(id, 1, BS_MAX_RANKS + 1);
    attack(ctx, to, target, &bad, sizeof bad, 0, "out of range");
    bad = forged_hello(id, 1, -7);
    attack(ctx, to, target, &bad, sizeof bad, 1, "out of range");
    bad = forged_hello(id, 1, NRANKS);
    memset(bad.info.hostname, 'x', sizeof bad.info.hostname);
    attack(ctx, to, target, &bad, sizeof bad, 0, "not terminated");
    static const char http[] = "GET / HTTP/1.0\r\n\r\n";
    attack(ctx, to, target, http, sizeof http - 1, 0, "truncated frame");
    attack(ctx, to, target, NULL, 0, 0, "closed without sending anything");
    attack(ctx, to, target, NULL, 0, 1, silent);
    attack(ctx, to, target, NULL, 0, 1, silent);
    if (self >= 0) {
        /* A valid frame from someone who is not the neighbour due. */
        bad = forged_hello(id, self, NRANKS);
        attack(ctx, to, target, &bad, sizeof bad, 1, "was due");
    }
}

static void attacker_body(tst_ctx_t *ctx)
{
    bs_id_t id;
    memcpy(&id, ctx->id.internal, sizeof id);
    /* Wait for ranks 0..2 to be inside init, each with its ring listener. */
    sock_addr_t lst[NRANKS - 1][4];
    double until = tst_now() + tst_timeout(60);
    for (int r = 0; r < NRANKS - 1; r++) {
        tst_set_case(ctx, "attacker: waiting for the listener of rank %d", r);
        int pid, n = 0;
        while ((pid = __atomic_load_n(&sh->pid[r], __ATOMIC_ACQUIRE)) == 0 ||
               (n = find_listeners(pid, lst[r], 4)) == 0) {
            if (tst_now() > until)
                tst_fatal(ctx, "attacker: rank %d never opened a listening socket", r);
            usleep(5000);
        }
        if (n != 1)
            tst_fatal(ctx, "attacker: rank %d has %d listening sockets, expected its ring listener only", r, n);
    }
    tst_set_case(ctx, "attacker: attacking");
    /* A flood of silent connections first: the root keeps only
     * BS_ACCEPT_MAX_PENDING, the oldest go first, and rank 3 still gets in. */
    for (int i = 0; i < BS_ACCEPT_MAX_PENDING + 8; i++)
        attack(ctx, &id.root, "bootstrap root", NULL, 0, 1, "");
    attack_all(ctx, &id, &id.root, "bootstrap root", -1);
    /* Rank 3 has not registered: a valid hello for it with bytes after it
     * must be dropped as oversized, or the real rank 3 would be refused. */
    unsigned char big[sizeof(bs_hello_t) + 64];
    memset(big, 0x33, sizeof big);
    bs_hello_t h3 = forged_hello(&id, NRANKS - 1, NRANKS);
    memcpy(big, &h3, sizeof h3);
    attack(ctx, &id.root, "bootstrap root", big, sizeof big, 1, "oversized");
    for (int r = 0; r < NRANKS - 1; r++) {
        char target[32];
        snprintf(target, sizeof target, "rank %d", r);
        attack_all(ctx, &id, &lst[r][0], target, r);
    }
    printf("  attacker: %d connections (%d held open) to the root and ranks 0-%d\n", sh->nconns, nheld,
           NRANKS - 2);
    fflush(stdout);
    sh->t_attacked = tst_now(); /* published by the release store below */
    __atomic_store_n(&sh->attacked, 1, __ATOMIC_RELEASE);
    /* Hold the silent ones until every rank is through. */
    tst_set_case(ctx, "attacker: holding %d connections open", nheld);
    until = tst_now() + tst_timeout(120);
    while (__atomic_load_n(&sh->finished, __ATOMIC_ACQUIRE) < NRANKS && tst_now() < until)
        usleep(10000);
    for (int i = 0; i < nheld; i++)
        close(held[i]);
}

/* ---- the ranks -------------------------------------------------------------------- */

static int body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    int r = ctx->rank;
    if (r == ATTACKER) {
        attacker_body(ctx);
        return 0;
    }
    __atomic_store_n(&sh->pid[r], (int)getpid(), __ATOMIC_RELEASE);
    if (r == NRANKS - 1) {
        tst_set_case(ctx, "waiting for the attacker");
        double until = tst_now() + tst_timeout(90);
        while (!__atomic_load_n(&sh->attacked, __ATOMIC_ACQUIRE)) {
            if (tst_now() > until)
                tst_fatal(ctx, "the attacker never finished");
            usleep(5000);
        }
    }
    tst_set_case(ctx, "ccl_comm_init_rank under attack");
    ccl_comm_t comm = NULL;
    ccl_result_t rc = ccl_comm_init_rank(&comm, NRANKS, ctx->id, r);
    double end = tst_now();
    if (rc != CCL_SUCCESS)
        tst_fatal(ctx, "ccl_comm_init_rank failed under attack: %s: %s", ccl_get_error_string(rc),
                  ccl_get_last_error(NULL));
    if (!__atomic_load_n(&sh->attacked, __ATOMIC_ACQUIRE))
        tst_fatal(ctx, "init finished before the attacker was done: rank %d cannot have joined", NRANKS - 1);
    double since = end - sh->t_attacked;
    if (since > tst_timeout(INIT_LIMIT_S))
        tst_fail(ctx, "init finished %.2f s after rank %d started (limit %d s): a stray connection stalled it",
                 since, NRANKS - 1, tst_timeout(INIT_LIMIT_S));
    printf("  rank %d: init done %.2f s after rank %d started\n", r, since, NRANKS - 1);

    tst_set_case(ctx, "allreduce after the attack");
    int32_t *buf = malloc(COUNT * sizeof *buf);
    if (!buf)
        tst_fatal(ctx, "out of memory");
    for (int i = 0; i < COUNT; i++)
        buf[i] = r * 1000003 + i;
    TST_CCL(ctx, comm, ccl_allreduce(buf, buf, COUNT, CCL_INT32, CCL_SUM, comm, NULL));
    int bad = 0;
    for (int i = 0; i < COUNT; i++) {
        int32_t want = 1000003 * (NRANKS * (NRANKS - 1) / 2) + NRANKS * i;
        if (buf[i] != want && bad++ == 0)
            tst_fail(ctx, "allreduce: element %d is %d, expected %d", i, buf[i], want);
    }
    free(buf);
    TST_CCL(ctx, comm, ccl_comm_destroy(comm));
    __atomic_add_fetch(&sh->finished, 1, __ATOMIC_ACQ_REL);
    fflush(stdout);
    return 0;
}

/* ---- the logs --------------------------------------------------------------------- */

/* Appends every log file of the run into one buffer. */
static char *read_logs(void)
{
    size_t cap = 1 << 20, len = 0;
    char *all = malloc(cap);
    DIR *d = opendir(sh->logdir);
    if (!all || !d)
        return all;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[400];
        snprintf(path, sizeof path, "%s/%s", sh->logdir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t got;
        while (len + 4096 < cap && (got = fread(all + len, 1, 4096, f)) > 0)
            len += got;
        fclose(f);
        unlink(path);
    }
    closedir(d);
    all[len] = '\0';
    return all;
}

/* A WARN line about connection c must exist and give its reason. (A
 * source port may recur, towards another target or after a close, so the
 * target is part of the needle and any line with it may give the reason.) */
static int check_logged(const char *logs, const attack_conn_t *c)
{
    char needle[160], line[512] = "";
    snprintf(needle, sizeof needle, "%s: dropped a connection from %s: ", c->target, c->from);
    for (const char *at = strstr(logs, needle); at; at = strstr(at + 1, needle)) {
        size_t linelen = strcspn(at, "\n");
        snprintf(line, sizeof line, "%.*s", (int)(linelen < sizeof line - 1 ? linelen : sizeof line - 1), at);
        if (!c->expect[0] || strstr(line, c->expect))
            return 0;
    }
    if (!line[0])
        printf("FAIL the %s logged no drop of the attack connection from %s (expected \"%s\")\n", c->target,
               c->from, c->expect);
    else
        printf("FAIL the %s dropped %s with the wrong reason: \"%s\" (expected \"%s\")\n", c->target, c->from,
               line, c->expect);
    return 1;
}

int main(void)
{
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    memset(sh, 0, sizeof *sh);
    snprintf(sh->logdir, sizeof sh->logdir, "/tmp/ccl-attack-XXXXXX");
    if (!mkdtemp(sh->logdir)) {
        perror("mkdtemp");
        return 1;
    }
    char pattern[200];
    snprintf(pattern, sizeof pattern, "%s/log.%%p", sh->logdir);
    /* Params are read once per process, at the first ccl call: set before
     * the fork, every rank and the root (in this process) log to files. */
    setenv("CCL_DEBUG", "WARN", 1);
    setenv("CCL_DEBUG_FILE", pattern, 1);
    setenv("CCL_TIMEOUT", "60", 0);
    /* The root must live in this process and each rank have one listener. */
    unsetenv("CCL_COMM_ID");
    int failed = tst_run_ranks("bootstrap attack", NRANKS + 1, 240, body, NULL);
    /* The root thread logs its last drops as it ends, after the ranks. */
    usleep(300000);
    char *logs = read_logs();
    rmdir(sh->logdir);
    int unlogged = 0;
    for (int i = 0; logs && i < sh->nconns; i++)
        unlogged += check_logged(logs, &sh->conns[i]);
    if (!logs || sh->nconns == 0) {
        printf("FAIL no attack connections or no logs to check\n");
        failed = 1;
    }
    printf("%d attack connections, %d without the expected WARN line\n", sh->nconns, unlogged);
    free(logs);
    return failed || unlogged ? 1 : 0;
}
