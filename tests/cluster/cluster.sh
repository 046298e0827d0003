#!/usr/bin/env bash
# cluster.sh - a multi-node test cluster on one machine: K "nodes", each a
# network namespace with its own hostname (a persistent UTS namespace), all
# joined by veth pairs to a bridge that lives in a "switch" namespace of its
# own. Nothing in the root namespace changes: every interface, address and
# route is inside the cluster's namespaces. Needs root.
#
#   cluster.sh up K [--rate 2gbit] [--delay 1ms] [--mtu N] [--owner PID]
#   cluster.sh down                   remove the cluster (safe to repeat)
#   cluster.sh status                 nodes, addresses, link limits
#   cluster.sh exec NODE cmd...       cmd in NODE's namespaces (NODE: 2 or node2)
#   cluster.sh mpirun args...         Open MPI's mpirun, started on node1, pinned
#                                     to the cluster subnet
#   cluster.sh run [-M m | -L a,b,..] [mpirun options] cmd...
#                                     cmd on m ranks per node (default 1) or a ranks
#                                     on node1, b on node2, ... through mpirun; every
#                                     CCL_* variable is forwarded, and CCL_COMM_ID is
#                                     set to node1's address and a fresh port if unset
#   cluster.sh check [PART...]        the correctness checks (tests/cluster/checks.sh)
#   cluster.sh link NODE down|up      cut NODE off the switch (its port goes down,
#                                     as a pulled cable) or connect it again
#   cluster.sh hosts [-M m | -L ..]   the -H list for mpirun, e.g. node1:2,node2:2
#   cluster.sh preflight              exit 0 if a cluster can be built here, else
#                                     print why and exit 77
#   cluster.sh gc                     remove clusters whose --owner process is gone
#
# Layout (cluster NAME, default "ccl"; CLUSTER_NAME selects another):
#   namespaces  cclc-NAME-sw (bridge br0, ports p1..pK) and cclc-NAME-node1..K
#               (lo and eth0; node i is $CLUSTER_SUBNET.i/24, default 10.77.0.i)
#   hostnames   node1..nodeK, one UTS namespace per node
#   hosts       /etc/netns/cclc-NAME-nodeI/hosts, which `ip netns exec` mounts
#               over /etc/hosts: every node's name -> its address
#   state       /run/ccl-cluster/NAME: size, limits, owner, the UTS namespace
#               files, Open MPI's rsh agent (a wrapper around `ip netns exec`)
#               and its session directory
# With --rate, both directions of every node's link go through tbf at that
# rate (the node's eth0 and its switch port); --delay adds netem before it.
#
# Clusters with different names never collide (same subnet is fine: each
# cluster's addresses only exist inside its own namespaces). `up` removes a
# leftover cluster of the same name and any cluster whose --owner process has
# died; scripts pass --owner $$ and call `down` from a trap.
set -euo pipefail

# shellcheck source=tests/cluster/paths.sh
. "$(dirname "${BASH_SOURCE[0]}")/paths.sh"
NAME=${CLUSTER_NAME:-ccl}
SUBNET=${CLUSTER_SUBNET:-10.77.0}
RUNDIR=/run/ccl-cluster
NSPREFIX=cclc
STATE="$RUNDIR/$NAME"

die() {
    echo "cluster.sh: $*" >&2
    exit 1
}

[[ "$NAME" =~ ^[A-Za-z0-9]{1,16}$ ]] || die "CLUSTER_NAME '$NAME': use 1 to 16 letters or digits"
[[ "$SUBNET" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "CLUSTER_SUBNET '$SUBNET': give three octets, e.g. 10.77.0"

ns_sw() { echo "$NSPREFIX-$1-sw"; }
ns_node() { echo "$NSPREFIX-$1-node$2"; }

# Number of nodes of the cluster that is up, or an error.
cluster_size() {
    [[ -r "$STATE/size" ]] || die "cluster '$NAME' is not up (run: $0 up K)"
    cat "$STATE/size"
}

# node index from "3", "node3" or the node's address.
node_index() {
    local n=$1
    case "$n" in
    node[0-9]*) n=${n#node} ;;
    "$SUBNET".*) n=${n##*.} ;;
    esac
    if ! [[ "$n" =~ ^[0-9]+$ ]] || ((n < 1 || n > $(cluster_size))); then
        die "no node '$1' in cluster '$NAME' (nodes 1..$(cluster_size))"
    fi
    echo "$n"
}

# ---- preflight -----------------------------------------------------------------

# Prints why a cluster cannot be built here, or nothing.
preflight_reason() {
    if [[ $(id -u) -ne 0 ]]; then
        echo "not root (network namespaces need root)"
        return
    fi
    local t
    for t in ip unshare nsenter flock; do
        command -v "$t" >/dev/null 2>&1 || {
            echo "$t not found"
            return
        }
    done
    ip netns list >/dev/null 2>&1 || {
        echo "'ip netns' does not work here"
        return
    }
    unshare --net --uts true 2>/dev/null || {
        echo "cannot create network and UTS namespaces (unshare --net --uts failed)"
        return
    }
}

# ---- teardown --------------------------------------------------------------------

# Kills what still runs in a namespace (orted, ranks), then deletes it.
ns_remove() {
    local ns=$1 pids
    ip netns list 2>/dev/null | awk '{print $1}' | grep -qx -- "$ns" || return 0
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    if [[ -n "$pids" ]]; then
        # shellcheck disable=SC2086 # a list of pids
        kill -TERM $pids 2>/dev/null || true
        sleep 0.3
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        # shellcheck disable=SC2086
        [[ -z "$pids" ]] || kill -KILL $pids 2>/dev/null || true
    fi
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
}

# Removes cluster $1 entirely; works on half-built clusters too.
teardown() {
    local name=$1 dir="$RUNDIR/$1" ns f
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$NSPREFIX-$name-(sw|node[0-9]+)\$" || true); do
        [[ "$ns" == *-sw ]] && continue
        ns_remove "$ns"
    done
    ns_remove "$(ns_sw "$name")"
    for ns in /etc/netns/"$NSPREFIX-$name"-node*; do
        [[ -e "$ns" ]] && rm -rf "$ns"
    done
    rmdir /etc/netns 2>/dev/null || true
    if [[ -d "$dir/uts" ]]; then
        for f in "$dir"/uts/*; do
            [[ -e "$f" ]] || continue
            umount "$f" 2>/dev/null || true
        done
    fi
    rm -rf "$dir"
}

# Start time of a process (field 22 of /proc/PID/stat), so a reused pid is
# not taken for the owner.
proc_start() {
    awk '{ sub(/^.*\) /, ""); print $20 }' "/proc/$1/stat" 2>/dev/null
}

owner_alive() {
    local pid start
    read -r pid start <"$1/owner" 2>/dev/null || return 1
    [[ -n "$pid" && "$(proc_start "$pid")" == "$start" ]]
}

gc() {
    local dir name ns
    for dir in "$RUNDIR"/*/; do
        [[ -d "$dir" && -e "$dir/owner" ]] || continue
        owner_alive "$dir" && continue
        name=$(basename "$dir")
        echo "cluster.sh: removing cluster '$name' (its owner has exited)" >&2
        teardown "$name"
    done
    # Namespaces of a cluster whose state folder is gone (a crash during up).
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$NSPREFIX-[A-Za-z0-9]+-(sw|node[0-9]+)\$" || true); do
        name=${ns#"$NSPREFIX"-}
        name=${name%-*}
        [[ -d "$RUNDIR/$name" ]] && continue
        echo "cluster.sh: removing stale namespace $ns" >&2
        teardown "$name"
    done
}

# ---- up -------------------------------------------------------------------------

# tc on both ends of node i's link: eth0 in the node, p<i> in the switch.
limit_link() {
    local ns=$1 dev=$2 rate=$3 delay=$4 burst=$5
    local parent="root"
    if [[ -n "$delay" ]]; then
        tc -n "$ns" qdisc add dev "$dev" root handle 1: netem delay "$delay" limit 100000 ||
            die "up: --delay needs tc's netem qdisc (kernel module sch_netem)"
        parent="parent 1:1"
    fi
    if [[ -n "$rate" ]]; then
        # shellcheck disable=SC2086 # $parent is two words or one
        tc -n "$ns" qdisc add dev "$dev" $parent handle 10: tbf rate "$rate" burst "$burst" latency 50ms ||
            die "up: --rate needs tc's tbf qdisc (kernel module sch_tbf)"
    fi
}

write_rsh_agent() {
    local k=$1
    cat >"$STATE/rsh" <<EOF
#!/bin/sh
# Open MPI's rsh agent for cluster '$NAME' (written by tests/cluster/cluster.sh):
# called as "rsh [options] HOST command words...", like ssh it runs the words
# as one shell command line, here in HOST's network and UTS namespaces.
while [ \$# -gt 0 ]; do
    case "\$1" in -*) shift ;; *) break ;; esac
done
host=\$1
shift
case "\$host" in
node[0-9]*) n=\${host#node} ;;
$SUBNET.*) n=\${host##*.} ;;
*) n= ;;
esac
case "\$n" in
''|*[!0-9]*) echo "ccl cluster rsh: unknown host '\$host'" >&2; exit 255 ;;
esac
if [ "\$n" -lt 1 ] || [ "\$n" -gt $k ]; then
    echo "ccl cluster rsh: unknown host '\$host'" >&2
    exit 255
fi
exec ip netns exec $NSPREFIX-$NAME-node\$n nsenter --uts=$STATE/uts/node\$n -- /bin/sh -c "\$*"
EOF
    chmod 755 "$STATE/rsh"
}

up() {
    local k="" rate="" delay="" mtu="" owner=""
    while [[ $# -gt 0 ]]; do
        case "$1" in
        --rate) rate=$2; shift 2 ;;
        --delay) delay=$2; shift 2 ;;
        --mtu) mtu=$2; shift 2 ;;
        --owner) owner=$2; shift 2 ;;
        -*) die "up: unknown option $1" ;;
        *) k=$1; shift ;;
        esac
    done
    if ! [[ "$k" =~ ^[0-9]+$ ]] || ((k < 1 || k > 250)); then
        die "up: give the number of nodes (1..250)"
    fi
    local why
    why=$(preflight_reason)
    [[ -z "$why" ]] || die "up: $why"
    if [[ -n "$rate$delay" ]]; then
        command -v tc >/dev/null 2>&1 || die "up: --rate/--delay need tc (iproute2)"
    fi
    if [[ -n "$owner" ]]; then
        [[ -n "$(proc_start "$owner")" ]] || die "up: --owner $owner: no such process"
    fi

    mkdir -p "$RUNDIR"
    gc
    teardown "$NAME" # a leftover of the same name
    mkdir -p "$STATE/uts" "$STATE/tmp"
    # A failure from here on removes the half-built cluster.
    trap 'teardown "$NAME"' EXIT
    [[ -z "$owner" ]] || echo "$owner $(proc_start "$owner")" >"$STATE/owner"

    # tbf needs a bucket of at least one full (GSO) packet and about a timer
    # tick of traffic at the rate: 1 ms at the rate, at least 256 KiB.
    local burst=262144
    if [[ -n "$rate" ]]; then
        local bps
        bps=$(tc_rate_bps "$rate") || die "up: --rate '$rate': use e.g. 2gbit, 500mbit"
        ((bps / 8 / 1000 > burst)) && burst=$((bps / 8 / 1000))
    fi

    local sw i ns
    sw=$(ns_sw "$NAME")
    ip netns add "$sw"
    ip -n "$sw" link set lo up
    ip -n "$sw" link add br0 type bridge
    ip -n "$sw" link set br0 up
    for ((i = 1; i <= k; i++)); do
        ns=$(ns_node "$NAME" "$i")
        ip netns add "$ns"
        ip -n "$ns" link set lo up
        ip -n "$sw" link add "p$i" type veth peer name eth0 netns "$ns"
        if [[ -n "$mtu" ]]; then
            ip -n "$sw" link set "p$i" mtu "$mtu"
            ip -n "$ns" link set eth0 mtu "$mtu"
        fi
        ip -n "$sw" link set "p$i" master br0
        ip -n "$sw" link set "p$i" up
        ip -n "$ns" addr add "$SUBNET.$i/24" dev eth0
        ip -n "$ns" link set eth0 up
        if [[ -n "$rate$delay" ]]; then
            limit_link "$ns" eth0 "$rate" "$delay" "$burst"
            limit_link "$sw" "p$i" "$rate" "$delay" "$burst"
        fi
        touch "$STATE/uts/node$i"
        unshare --uts="$STATE/uts/node$i" hostname "node$i"
    done
    for ((i = 1; i <= k; i++)); do
        ns=$(ns_node "$NAME" "$i")
        mkdir -p "/etc/netns/$ns"
        {
            echo "# cluster '$NAME' (tests/cluster/cluster.sh); removed by 'cluster.sh down'"
            echo "127.0.0.1 localhost"
            local j
            for ((j = 1; j <= k; j++)); do
                echo "$SUBNET.$j node$j"
            done
        } >"/etc/netns/$ns/hosts"
    done
    write_rsh_agent "$k"
    echo "$rate" >"$STATE/rate"
    echo "$delay" >"$STATE/delay"
    echo "$k" >"$STATE/size" # last: the cluster counts as up from here
    trap - EXIT
    echo "cluster '$NAME' up: $k node(s), node1..node$k at $SUBNET.1..$SUBNET.$k${rate:+, links limited to $rate}${delay:+, delay $delay}"
}

# Bits per second of a tc rate such as 2gbit, 500mbit, 100kbit.
tc_rate_bps() {
    awk -v r="$1" 'BEGIN {
        if (match(r, /^[0-9.]+/) == 0) exit 1
        v = substr(r, 1, RLENGTH); u = tolower(substr(r, RLENGTH + 1))
        if (u == "gbit") v *= 1e9; else if (u == "mbit") v *= 1e6;
        else if (u == "kbit") v *= 1e3; else if (u != "bit" && u != "") exit 1
        printf "%d\n", v }'
}

status() {
    local k i ns
    k=$(cluster_size)
    echo "cluster '$NAME': $k node(s); rate: $(cat "$STATE/rate"); delay: $(cat "$STATE/delay")"
    for ((i = 1; i <= k; i++)); do
        ns=$(ns_node "$NAME" "$i")
        printf 'node%d  %s  %s  %s\n' "$i" "$ns" "$(ip -n "$ns" -br -4 addr show dev eth0 | awk '{print $3}')" \
            "$(tc -n "$ns" qdisc show dev eth0 2>/dev/null | awk '$2 == "tbf" || $2 == "netem"' | tr '\n' ' ')"
    done
}

# ---- running things in the nodes ---------------------------------------------------

node_exec() {
    local i
    i=$(node_index "$1")
    shift
    [[ $# -gt 0 ]] || die "exec: no command"
    exec ip netns exec "$(ns_node "$NAME" "$i")" nsenter --uts="$STATE/uts/node$i" -- "$@"
}

# The environment every mpirun of the cluster gets (command-line --mca
# options override these): the rsh agent, the cluster subnet for Open MPI's
# own wire-up and its TCP BTL, vader only between ranks of one node.
mpirun_env() {
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_plm_rsh_agent="$STATE/rsh"
    export OMPI_MCA_plm_rsh_no_tree_spawn=1
    export OMPI_MCA_oob_tcp_if_include="$SUBNET.0/24"
    export OMPI_MCA_btl_tcp_if_include="$SUBNET.0/24"
    export OMPI_MCA_btl="${OMPI_MCA_btl:-tcp,self,vader}"
    export OMPI_MCA_orte_tmpdir_base="$STATE/tmp"
    # All nodes share this machine's cores: ranks may outnumber them, binding
    # would pile every node's ranks onto the same cores, and busy polling
    # ranks would starve the others (8 B allreduce: ms instead of us).
    export OMPI_MCA_rmaps_base_oversubscribe=1
    export OMPI_MCA_hwloc_base_binding_policy=none
    export OMPI_MCA_mpi_yield_when_idle="${OMPI_MCA_mpi_yield_when_idle:-1}"
}

cluster_mpirun() {
    cluster_size >/dev/null
    mpirun_env
    node_exec 1 mpirun "$@"
}

# Prints the -H list for "-M m" (m ranks on every node) or "-L a,b,..."
# (a on node1, b on node2, ...; a 0 leaves a node out).
hosts_list() {
    local k m="" layout="" i out="" n
    k=$(cluster_size)
    case "${1:-}" in
    -M) m=$2 ;;
    -L) layout=$2 ;;
    "") m=1 ;;
    *) die "hosts: use -M m or -L a,b,..." ;;
    esac
    if [[ -n "$m" ]]; then
        layout=$(for ((i = 1; i <= k; i++)); do printf '%s,' "$m"; done)
        layout=${layout%,}
    fi
    IFS=, read -r -a counts <<<"$layout"
    ((${#counts[@]} <= k)) || die "layout $layout has more entries than the $k nodes"
    for ((i = 0; i < ${#counts[@]}; i++)); do
        n=${counts[$i]}
        [[ "$n" =~ ^[0-9]+$ ]] || die "layout $layout: '$n' is not a count"
        ((n > 0)) && out+="node$((i + 1)):$n,"
    done
    [[ -n "$out" ]] || die "layout $layout has no ranks"
    echo "${out%,}"
}

# run [-M m | -L a,b,..] [--] [mpirun options] cmd...
cluster_run() {
    local sel=(-M 1) opts=() h np v
    case "${1:-}" in
    -M | -L) sel=("$1" "${2:-}"); shift 2 ;;
    esac
    [[ "${1:-}" == "--" ]] && shift
    [[ $# -gt 0 ]] || die "run: no command"
    h=$(hosts_list "${sel[@]}")
    np=$(awk -F, '{ for (i = 1; i <= NF; i++) { split($i, a, ":"); s += a[2] } print s }' <<<"$h")
    # ccl's rendezvous: rank 0 (the first slot of node1) listens there.
    # A port per run, so a previous run's socket in TIME_WAIT never matters.
    export CCL_COMM_ID=${CCL_COMM_ID:-$SUBNET.1:$((29500 + RANDOM % 400))}
    for v in $(compgen -e | grep '^CCL_' || true); do
        opts+=(-x "$v")
    done
    cluster_mpirun -H "$h" -np "$np" "${opts[@]}" "$@"
}

# The switch end of the node's veth: the node sees its carrier go, and no
# packet passes either way; nothing else changes.
node_link() {
    local i
    i=$(node_index "$1")
    case "${2:-}" in
    up | down) ip -n "$(ns_sw "$NAME")" link set "p$i" "$2" ;;
    *) die "link: use link NODE down|up" ;;
    esac
}

# ---- main ---------------------------------------------------------------------------

cmd=${1:-}
[[ $# -gt 0 ]] && shift
case "$cmd" in
up)
    exec {lockfd}>>"/run/ccl-cluster.lock"
    flock -w 60 "$lockfd" || die "up: another cluster.sh holds /run/ccl-cluster.lock"
    up "$@"
    ;;
down)
    exec {lockfd}>>"/run/ccl-cluster.lock"
    flock -w 60 "$lockfd" || die "down: another cluster.sh holds /run/ccl-cluster.lock"
    teardown "$NAME"
    ;;
gc)
    exec {lockfd}>>"/run/ccl-cluster.lock"
    flock -w 60 "$lockfd" || die "gc: another cluster.sh holds /run/ccl-cluster.lock"
    gc
    ;;
status) status ;;
exec) node_exec "$@" ;;
mpirun) cluster_mpirun "$@" ;;
run) cluster_run "$@" ;;
hosts) hosts_list "$@" ;;
link) node_link "$@" ;;
check) exec "$HERE/checks.sh" "$@" ;;
preflight)
    why=$(preflight_reason)
    if [[ -n "$why" ]]; then
        echo "$why"
        exit 77
    fi
    ;;
-h | --help | help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' ;;
*) die "unknown command '$cmd' (try: $0 --help)" ;;
esac
