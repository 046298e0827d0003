/*
 * socket.c - non-blocking TCP with deadlines, and interface selection.
 */
#include "bootstrap/socket.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/param.h"
#include "base/wait.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *sock_addr_str(const sock_addr_t *addr, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (addr->sa.sa_family == AF_INET) {
        inet_ntop(AF_INET, &addr->sin.sin_addr, host, sizeof host);
        snprintf(buf, len, "%s:%u", host, ntohs(addr->sin.sin_port));
    } else if (addr->sa.sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &addr->sin6.sin6_addr, host, sizeof host);
        snprintf(buf, len, "[%s]:%u", host, ntohs(addr->sin6.sin6_port));
    } else {
        snprintf(buf, len, "(no address)");
    }
    return buf;
}

socklen_t sock_addr_len(const sock_addr_t *addr)
{
    return addr->sa.sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

ccl_result_t sock_addr_split(const char *text, char *host, size_t hostlen, int *port)
{
    const char *colon = strrchr(text, ':');
    if (!colon || colon == text || !colon[1])
        return err_set(CCL_ERR_INVALID_ARGUMENT, "address \"%s\" is not host:port", text);
    const char *h = text;
    size_t hlen = (size_t)(colon - text);
    if (text[0] == '[' && colon[-1] == ']') { /* [v6]:port */
        if (hlen < 3)
            return err_set(CCL_ERR_INVALID_ARGUMENT, "address \"%s\" has an empty [host]", text);
        h++;
        hlen -= 2;
    }
    if (hlen >= hostlen)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "host in \"%s\" is too long", text);
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    char *end = NULL;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    /* A digit first: strtol would also take blanks and signs. */
    if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || errno != 0 || p <= 0 || p > 65535)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "port in \"%s\" is not 1..65535", text);
    *port = (int)p;
    return CCL_SUCCESS;
}

int sock_addr_valid(const sock_addr_t *addr)
{
    if (addr->sa.sa_family == AF_INET)
        return addr->sin.sin_port != 0;
    if (addr->sa.sa_family == AF_INET6)
        return addr->sin6.sin6_port != 0;
    return 0;
}

ccl_result_t sock_addr_parse(const char *text, sock_addr_t *addr)
{
    char host[256];
    int port = 0;
    ccl_result_t res = sock_addr_split(text, host, sizeof host, &port);
    if (res != CCL_SUCCESS)
        return res;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &ai);
    if (rc != 0 || !ai)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "cannot resolve \"%s\": %s", host, gai_strerror(rc));
    memset(addr, 0, sizeof *addr);
    memcpy(addr, ai->ai_addr, ai->ai_addrlen < sizeof *addr ? ai->ai_addrlen : sizeof *addr);
    freeaddrinfo(ai);
    if (addr->sa.sa_family == AF_INET)
        addr->sin.sin_port = htons((uint16_t)port);
    else
        addr->sin6.sin6_port = htons((uint16_t)port);
    return CCL_SUCCESS;
}

/* NCCL's CCL_SOCKET_IFNAME syntax: "eth,ib" prefixes; "^docker" excludes;
 * "=eth0" exact names. */
static int sock_ifname_matches(const char *name, const char *spec)
{
    int exclude = 0, exact = 0;
    if (*spec == '^') { exclude = 1; spec++; }
    if (*spec == '=') { exact = 1; spec++; }
    int match = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok && !match; tok = strtok_r(NULL, ",", &save))
        match = exact ? strcmp(name, tok) == 0 : strncmp(name, tok, strlen(tok)) == 0;
    return exclude ? !match : match;
}

/* Preference classes, best first. Without CCL_SOCKET_IFNAME, bridges and
 * container/VM links (docker*, veth*, virbr*) only serve when no ordinary
 * interface exists, and loopback only when nothing else does: it is enough
 * for ranks on one host. Within a class IPv4 comes before IPv6, and
 * link-local IPv6 is never used (it needs a scope the peer cannot know). */
enum { SOCK_CLASS_NONE = -1, SOCK_CLASS_LOOPBACK = 4 };

static int sock_if_class(const struct ifaddrs *i, const char *spec)
{
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP))
        return SOCK_CLASS_NONE;
    int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6)
        return SOCK_CLASS_NONE;
    if (fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr))
        return SOCK_CLASS_NONE;
    int v6 = fam == AF_INET6;
    if (spec[0])
        return sock_ifname_matches(i->ifa_name, spec) ? v6 : SOCK_CLASS_NONE;
    if (i->ifa_flags & IFF_LOOPBACK)
        return v6 ? SOCK_CLASS_NONE : SOCK_CLASS_LOOPBACK;
    int virt = !strncmp(i->ifa_name, "docker", 6) || !strncmp(i->ifa_name, "veth", 4) ||
               !strncmp(i->ifa_name, "virbr", 5);
    return 2 * virt + v6;
}

int sock_list_local_addrs(sock_addr_t *addrs, char (*names)[SOCK_IFNAME_LEN], int max)
{
    const char *spec = param_str(PARAM_SOCKET_IFNAME);
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0)
        return 0;
    int n = 0;
    /* One address per interface: walking the classes in order, the first
     * address an interface shows is its best one. */
    for (int cls = 0; cls <= SOCK_CLASS_LOOPBACK && n < max; cls++) {
        for (const struct ifaddrs *i = ifs; i && n < max; i = i->ifa_next) {
            if (sock_if_class(i, spec) != cls)
                continue;
            int seen = 0;
            for (int k = 0; k < n && !seen; k++)
                seen = strncmp(names[k], i->ifa_name, SOCK_IFNAME_LEN) == 0;
            if (seen)
                continue;
            memset(&addrs[n], 0, sizeof addrs[n]);
            memcpy(&addrs[n], i->ifa_addr,
                   i->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
            snprintf(names[n], SOCK_IFNAME_LEN, "%s", i->ifa_name);
            n++;
        }
    }
    freeifaddrs(ifs);
    return n;
}

ccl_result_t sock_pick_local_addr(sock_addr_t *addr, char *ifname, size_t ifname_len)
{
    char name[1][SOCK_IFNAME_LEN];
    if (sock_list_local_addrs(addr, name, 1) < 1)
        return err_set(CCL_ERR_SYSTEM, "no network interface matches CCL_SOCKET_IFNAME=\"%s\"",
                       param_str(PARAM_SOCKET_IFNAME));
    snprintf(ifname, ifname_len, "%s", name[0]);
    return CCL_SUCCESS;
}

static int sock_set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) ? -1 : 0;
}

static void sock_tune(int fd)
{
    int one = 1;
    /* Bootstrap messages are small request/response exchanges. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
}

/* Milliseconds left until the deadline, for poll(); 0 once it passed. */
static int sock_ms_left(uint64_t deadline)
{
    uint64_t now = clock_now_ns();
    if (now >= deadline)
        return 0;
    uint64_t ms = (deadline - now) / 1000000 + 1;
    return wait_poll_cap_ms(ms > 1000 ? 1000 : (int)ms);
}

ccl_result_t sock_listen(const sock_addr_t *addr, int *fd_out, sock_addr_t *bound)
{
    ccl_result_t res = CCL_SUCCESS;
    char abuf[80];
    int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        CCL_FAIL(CCL_ERR_SYSTEM, "socket() failed: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, &addr->sa, sock_addr_len(addr)) != 0)
        CCL_FAIL(CCL_ERR_SYSTEM, "bind to %s failed: %s", sock_addr_str(addr, abuf, sizeof abuf),
                 strerror(errno));
    if (listen(fd, 1024) != 0 || sock_set_nonblock(fd) != 0)
        CCL_FAIL(CCL_ERR_SYSTEM, "listen on %s failed: %s", sock_addr_str(addr, abuf, sizeof abuf),
                 strerror(errno));
    socklen_t len = sizeof *bound;
    memset(bound, 0, sizeof *bound);
    if (getsockname(fd, &bound->sa, &len) != 0)
        CCL_FAIL(CCL_ERR_SYSTEM, "getsockname failed: %s", strerror(errno));
    *fd_out = fd;
    fd = -1;
out:
    if (fd >= 0)
        close(fd);
    return res;
}

/* retry_refused: the listener may not be up yet (init), so a refusal is
 * retried; otherwise it is final (CCL_ERR_REMOTE). */
static ccl_result_t sock_connect_until(const sock_addr_t *addr, uint64_t deadline, int retry_refused, int *fd_out)
{
    char abuf[80];
    int last_errno = 0;
    uint64_t backoff_us = 1000;
    while (clock_now_ns() < deadline) {
        if (wait_check_cancel("connecting") != CCL_SUCCESS)
            return CCL_ERR_ABORTED;
        int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            return err_set(CCL_ERR_SYSTEM, "socket() failed: %s", strerror(errno));
        int rc = connect(fd, &addr->sa, sock_addr_len(addr));
        if (rc != 0 && errno == EINPROGRESS) {
            struct pollfd p = {fd, POLLOUT, 0};
            while ((rc = poll(&p, 1, sock_ms_left(deadline))) == 0 && clock_now_ns() < deadline) {
                if (wait_check_cancel("connecting") != CCL_SUCCESS) {
                    close(fd);
                    return CCL_ERR_ABORTED;
                }
            }
            int err = 0;
            socklen_t el = sizeof err;
            if (rc > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0)
                rc = 0;
            else
                errno = err ? err : ETIMEDOUT, rc = -1;
        }
        if (rc == 0) {
            sock_tune(fd);
            *fd_out = fd;
            return CCL_SUCCESS;
        }
        last_errno = errno;
        close(fd);
        if (last_errno == ECONNREFUSED && !retry_refused)
            return err_set(CCL_ERR_REMOTE, "connect to %s refused: nothing listens there any more",
                           sock_addr_str(addr, abuf, sizeof abuf));
        if (last_errno != ECONNREFUSED && last_errno != ETIMEDOUT && last_errno != EAGAIN &&
            last_errno != ECONNRESET && last_errno != EHOSTUNREACH && last_errno != ENETUNREACH)
            break;
        /* The listener is not up yet (ranks start in any order): retry. */
        usleep((useconds_t)backoff_us);
        if (wait_check_cancel("connecting") != CCL_SUCCESS)
            return CCL_ERR_ABORTED;
        if (backoff_us < 100000)
            backoff_us *= 2;
    }
    return err_set(last_errno == 0 || last_errno == ETIMEDOUT || last_errno == ECONNREFUSED ? CCL_ERR_TIMEOUT : CCL_ERR_SYSTEM,
                   "connect to %s failed: %s", sock_addr_str(addr, abuf, sizeof abuf),
                   last_errno ? strerror(last_errno) : "timed out");
}

ccl_result_t sock_connect(const sock_addr_t *addr, uint64_t deadline, int *fd_out)
{
    return sock_connect_until(addr, deadline, 1, fd_out);
}

ccl_result_t sock_connect_live(const sock_addr_t *addr, uint64_t deadline, int *fd_out)
{
    return sock_connect_until(addr, deadline, 0, fd_out);
}

ccl_result_t sock_accept(int lfd, uint64_t deadline, int *fd_out)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) {
            sock_tune(fd);
            *fd_out = fd;
            return CCL_SUCCESS;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
            return err_set(CCL_ERR_SYSTEM, "accept failed: %s", strerror(errno));
        if (wait_check_cancel("waiting for a connection") != CCL_SUCCESS)
            return CCL_ERR_ABORTED;
        int ms = sock_ms_left(deadline);
        if (ms == 0)
            return err_set(CCL_ERR_TIMEOUT, "no connection arrived before the timeout (CCL_TIMEOUT)");
        struct pollfd p = {lfd, POLLIN, 0};
        poll(&p, 1, ms);
    }
}

ccl_result_t sock_connect_start(const sock_addr_t *addr, int *fd_out)
{
    char abuf[80];
    int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return err_set(CCL_ERR_SYSTEM, "socket() failed: %s", strerror(errno));
    if (connect(fd, &addr->sa, sock_addr_len(addr)) != 0 && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        return err_set(CCL_ERR_REMOTE, "connect to %s failed: %s", sock_addr_str(addr, abuf, sizeof abuf),
                       strerror(e));
    }
    sock_tune(fd);
    *fd_out = fd;
    return CCL_SUCCESS;
}

int sock_connect_check(int fd, int *ready)
{
    struct pollfd p = {fd, POLLOUT, 0};
    *ready = 0;
    if (poll(&p, 1, 0) <= 0)
        return 0;
    int err = 0;
    socklen_t el = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
        return errno;
    *ready = err == 0;
    return err;
}

ccl_result_t sock_try_accept(int lfd, int *fd_out)
{
    *fd_out = -1;
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
        sock_tune(fd);
        *fd_out = fd;
        return CCL_SUCCESS;
    }
    /* ECONNABORTED: the connector gave up while queued; not our failure. */
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
        return CCL_SUCCESS;
    return err_set(CCL_ERR_SYSTEM, "accept failed: %s", strerror(errno));
}

void sock_set_keepalive(int fd, int idle_s, int interval_s, int count)
{
    /* Best effort: without these the kernel defaults (2 h idle) still apply. */
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

/* One progress step of a transfer: returns bytes moved, 0 on would-block,
 * -1 with errno, or -2 on EOF. */
static ssize_t sock_io_step(int fd, void *buf, size_t len, int is_send)
{
    ssize_t n = is_send ? send(fd, buf, len, MSG_NOSIGNAL) : recv(fd, buf, len, 0);
    if (n > 0)
        return n;
    if (n == 0 && !is_send)
        return -2;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    return -1;
}

ccl_result_t sock_sendrecv(int sfd, const void *sbuf, size_t slen, int rfd, void *rbuf,
                           size_t rlen, uint64_t deadline)
{
    size_t sdone = 0, rdone = 0;
    while (sdone < slen || rdone < rlen) {
        struct pollfd p[2];
        int np = 0, si = -1, ri = -1;
        if (sdone < slen) { si = np; p[np++] = (struct pollfd){sfd, POLLOUT, 0}; }
        if (rdone < rlen) { ri = np; p[np++] = (struct pollfd){rfd, POLLIN, 0}; }
        if (wait_check_cancel("exchanging bootstrap messages") != CCL_SUCCESS)
            return CCL_ERR_ABORTED;
        int ms = sock_ms_left(deadline);
        if (ms == 0)
            return err_set(CCL_ERR_TIMEOUT, "socket transfer timed out (%zu/%zu bytes sent, %zu/%zu received)",
                           sdone, slen, rdone, rlen);
        if (poll(p, (nfds_t)np, ms) <= 0)
            continue;
        if (si >= 0 && (p[si].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t n = sock_io_step(sfd, (char *)sbuf + sdone, slen - sdone, 1);
            if (n < 0)
                return err_set(CCL_ERR_REMOTE, "send failed: %s", strerror(errno));
            sdone += (size_t)n;
        }
        if (ri >= 0 && (p[ri].revents & (POLLIN | POLLERR | POLLHUP))) {
            ssize_t n = sock_io_step(rfd, (char *)rbuf + rdone, rlen - rdone, 0);
            if (n == -2)
                return err_set(CCL_ERR_REMOTE, "connection closed by the peer after %zu of %zu bytes",
                               rdone, rlen);
            if (n < 0)
                return err_set(CCL_ERR_REMOTE, "recv failed: %s", strerror(errno));
            rdone += (size_t)n;
        }
    }
    return CCL_SUCCESS;
}

ccl_result_t sock_send_all(int fd, const void *buf, size_t len, uint64_t deadline)
{
    return sock_sendrecv(fd, buf, len, -1, NULL, 0, deadline);
}

ccl_result_t sock_recv_all(int fd, void *buf, size_t len, uint64_t deadline)
{
    return sock_sendrecv(-1, NULL, 0, fd, buf, len, deadline);
}

void sock_close(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}
