#!/usr/bin/env bash
# net_bench_netns.sh - net-bench across a veth pair between two network
# namespaces, so the traffic crosses a real (virtual) link instead of
# loopback: the server runs in one namespace at 10.99.0.1, the client in the
# other at 10.99.0.2. Needs root. The namespaces and the pair are deleted on
# exit, whatever happens. Arguments go to the client, e.g.
#   perf/net_bench_netns.sh -r 9 -t 256M -b 128K -e 2M -n 2 -T 1
# BUILD (default build) selects the build folder.
set -euo pipefail

BUILD=${BUILD:-build}
BENCH="$(cd "$(dirname "$0")/.." && pwd)/$BUILD/bin/net-bench"
NS1=ccl-nb-a-$$
NS2=ccl-nb-b-$$
PORT=47123
[[ -x "$BENCH" ]] || { echo "net_bench_netns.sh: $BENCH not built (make tools)" >&2; exit 2; }

server_pid=
cleanup() {
    [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null
    ip netns del "$NS1" 2>/dev/null || true
    ip netns del "$NS2" 2>/dev/null || true
}
trap cleanup EXIT

ip netns add "$NS1"
ip netns add "$NS2"
ip link add veth-nb-a netns "$NS1" type veth peer name veth-nb-b netns "$NS2"
ip -n "$NS1" addr add 10.99.0.1/24 dev veth-nb-a
ip -n "$NS2" addr add 10.99.0.2/24 dev veth-nb-b
for ns in "$NS1" "$NS2"; do
    ip -n "$ns" link set lo up
done
ip -n "$NS1" link set veth-nb-a up
ip -n "$NS2" link set veth-nb-b up

ip netns exec "$NS1" "$BENCH" -s -p "$PORT" &
server_pid=$!
# The client's connect retries until the server listens.
ip netns exec "$NS2" "$BENCH" -c "10.99.0.1:$PORT" "$@"
wait "$server_pid"
server_pid=
