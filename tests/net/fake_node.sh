#!/bin/sh
# fake_node.sh - runs a command as one rank of a job whose ranks pretend to
# sit on different hosts, so that ccl connects them with its net transport
# (TCP) instead of shared memory, all on this machine.
#
#   HOSTMAP=0,0,1 mpirun -np 3 tests/net/fake_node.sh <command...>
#
# HOSTMAP lists, by rank (OMPI_COMM_WORLD_RANK or PMI_RANK), the node each
# rank is on; CCL_HOSTID=fake-node<N> makes ccl believe it. The real
# multi-node tests, with one network namespace and hostname per node, are in
# tests/cluster/.
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-}}
if [ -z "$rank" ] || [ -z "${HOSTMAP:-}" ]; then
    echo "fake_node.sh: needs HOSTMAP and a launcher's OMPI_COMM_WORLD_RANK or PMI_RANK" >&2
    exit 2
fi
node=$(echo "$HOSTMAP" | cut -d, -f$((rank + 1)))
if [ -z "$node" ]; then
    echo "fake_node.sh: HOSTMAP=$HOSTMAP has no entry for rank $rank" >&2
    exit 2
fi
CCL_HOSTID=fake-node$node
export CCL_HOSTID
exec "$@"
