#!/usr/bin/env bash
# deps.sh - checks for what tests/rdma (ccl in qemu VMs over soft-RoCE) needs
# and, on Debian as root, installs what is missing. Quick when nothing is:
# no apt, no network, only file checks.
#
#   tests/rdma/deps.sh
#
#   qemu-system-x86      qemu-system-x86_64 (TCG; -virtfs for the 9p root)
#   linux-image-amd64    a /boot/vmlinuz-* whose /lib/modules has rdma_rxe
#   busybox-static       a static /bin/busybox for the VMs' initramfs
#   cpio                 to pack the initramfs
#   rdma-core            the verbs stack's udev rules and config
#   ibverbs-providers    librxe, the verbs provider of rxe devices (only a
#                        Recommends of libibverbs1, so name it)
#   ibverbs-utils        ibv_devinfo, ibv_rc_pingpong (the sanity cases)
#   perftest             ib_send_bw and friends, for trying things by hand
#   iproute2             rdma, which adds rxe0 inside each VM
#   socat                talks to qemu's monitor (only without python3)
#
# All present: prints nothing, exits 0. Something missing, root and apt-get
# available: `apt-get update` once, then `apt-get install -y
# --no-install-recommends <packages>`. Otherwise (not root, no apt-get, or
# DEPS_NOINSTALL=1): names the missing packages and the command that installs
# them. Missing packages are a warning (exit 0), as in scripts/deps.sh:
# tests/rdma/run.sh reports itself SKIPPED without them.
#
# Environment:
#   DEPS_NOINSTALL=1         report only, never run apt-get
#   DEPS_DRYRUN=1            print the apt-get commands instead of running them
#   DEPS_PRETEND_MISSING="p ..."  treat these Debian packages as missing
# shellcheck disable=SC2317  # the check functions are called through need()
set -u

PRETEND=" ${DEPS_PRETEND_MISSING:-} "
missing=() # Debian packages
notes=()   # one line per failed check

have_cmd() { command -v "$1" >/dev/null 2>&1; }
# Where root's PATH has them and a user's may not.
have_sbin() { have_cmd "$1" || [[ -x /usr/sbin/$1 || -x /sbin/$1 || -x /usr/bin/$1 ]]; }

kernel_with_rxe() {
    compgen -G "/lib/modules/*/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko*" >/dev/null || return 1
    local m k
    for m in /lib/modules/*/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko*; do
        k=${m#/lib/modules/}
        k=${k%%/*}
        [[ -e /boot/vmlinuz-$k ]] && return 0
    done
    return 1
}

# ldd fails on a static executable ("not a dynamic executable").
static_busybox() { [[ -x /bin/busybox ]] && ! ldd /bin/busybox >/dev/null 2>&1; }

installed() { [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]; }
have_rdma_core() {
    if have_cmd dpkg-query; then
        installed rdma-core
    else
        [[ -d /etc/rdma || -e /lib/udev/rules.d/60-rdma-persistent-naming.rules ]]
    fi
}

have_rxe_provider() { compgen -G "/usr/lib/*/libibverbs/librxe-rdmav*.so" >/dev/null; }
have_monitor_client() { have_cmd socat || have_cmd python3; }

# need <what it is> <check command...> -- <package>
need() {
    local what=$1 check=() pkg
    shift
    while [[ $# -gt 0 && $1 != -- ]]; do check+=("$1"); shift; done
    pkg=$2
    if [[ "$PRETEND" != *" $pkg "* ]] && "${check[@]}"; then
        return
    fi
    notes+=("  $what (Debian: $pkg)")
    missing+=("$pkg")
}

check_all() {
    missing=() notes=()
    need "qemu-system-x86_64" have_cmd qemu-system-x86_64 -- qemu-system-x86
    need "a kernel image in /boot with the rdma_rxe module" kernel_with_rxe -- linux-image-amd64
    need "a static /bin/busybox" static_busybox -- busybox-static
    need "cpio" have_cmd cpio -- cpio
    need "rdma-core" have_rdma_core -- rdma-core
    need "the rxe verbs provider (librxe)" have_rxe_provider -- ibverbs-providers
    need "ibv_devinfo and ibv_rc_pingpong" have_cmd ibv_rc_pingpong -- ibverbs-utils
    need "perftest (ib_send_bw)" have_cmd ib_send_bw -- perftest
    need "rdma (iproute2)" have_sbin rdma -- iproute2
    need "socat or python3 for qemu's monitor" have_monitor_client -- socat
}

run() {
    if [[ ${DEPS_DRYRUN:-0} == 1 ]]; then
        echo "rdma deps: would run: $*"
        return 0
    fi
    "$@"
}

check_all
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -eq 0 ]] && have_cmd apt-get && [[ ${DEPS_NOINSTALL:-0} != 1 ]]; then
    echo "rdma deps: missing:"
    printf '%s\n' "${notes[@]}"
    echo "rdma deps: installing: ${missing[*]}"
    ok=1
    run apt-get update -q || ok=0 # the install may still work from older lists
    run env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" || ok=0
    [[ $ok == 1 ]] || echo "rdma deps: warning: apt-get failed; see its output above" >&2
    [[ ${DEPS_DRYRUN:-0} == 1 ]] && exit 0
    check_all
    if [[ ${#missing[@]} -eq 0 ]]; then
        echo "rdma deps: all installed"
        exit 0
    fi
fi

{
    echo "rdma deps: missing:"
    printf '%s\n' "${notes[@]}"
    if have_cmd apt-get; then
        sudo=
        [[ $(id -u) -ne 0 ]] && sudo="sudo "
        echo "rdma deps: install them with:"
        echo "  ${sudo}apt-get update && ${sudo}DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
    else
        echo "rdma deps: no apt-get here; install the equivalents of these Debian packages: ${missing[*]}"
    fi
    echo "rdma deps: warning: tests/rdma/run.sh will report itself SKIPPED"
} >&2
exit 0
