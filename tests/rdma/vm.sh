#!/usr/bin/env bash
# vm.sh - boots one qemu VM (TCG) with soft-RoCE (rdma_rxe, device rxe0) on
# its NIC, this machine's root file system read-only over 9p as its /, runs
# one command in it and powers it off. run.sh sources it for its functions;
# run directly it is a tool for trying things by hand:
#
#   tests/rdma/vm.sh [-i ID] [-l GROUP:PORT] [-s DIR] [-m MiB] [-c CPUS] [-t SECONDS] [--] COMMAND
#   tests/rdma/vm.sh --check             what is missing to boot a VM (exit 1 if anything)
#   tests/rdma/vm.sh --monitor SOCK CMD  send a qemu monitor command (e.g. 'set_link lan off')
#
#   -i ID     1..254: hostname vmID, address 10.77.0.ID/24 on eth0 (default 1)
#   -l G:P    the L2 segment: VMs given the same multicast group and port
#             share one Ethernet (default: a fresh one, so the VM is alone)
#   -s DIR    host folder the guest sees, writable, at /tmp/out (default: a
#             temporary one, removed at the end); the command's output goes
#             to DIR/out.log (and to this terminal), its status to DIR/exit;
#             the console's end is printed if the VM stops without a status
#   -m, -c    memory (default 1024 MiB) and vCPUs (default 1: see README.md
#             for why a second one makes cross-thread wakeups slow)
#   -t        power the VM off after this many seconds (default 600)
# e.g. two VMs on one segment, RC ping-pong over RoCE v2 (GID 1 is ::ffff:10.77.0.ID):
#   tests/rdma/vm.sh -i 1 -l 239.77.0.1:47001 'ibv_rc_pingpong -g 1 -n 100' &
#   tests/rdma/vm.sh -i 2 -l 239.77.0.1:47001 'sleep 3; ibv_rc_pingpong -g 1 -n 100 10.77.0.1'
#
# The guest: Debian's kernel from /boot with an initramfs of busybox and the
# modules it needs; the command runs as root, chrooted into the 9p root, in
# the folder vm.sh was started from (the repository root under run.sh), with
# fresh tmpfs on /tmp, /run and /dev/shm, and its own hostname and boot id,
# so ccl sees one host per VM. KVM does not run nested on these machines,
# so qemu emulates (TCG): guest code runs 10-50x slower than the host's;
# nothing measured in a VM is a speed figure.
#
# The segment: qemu's socket netdev on a multicast group on the host's
# loopback. Any number of VMs join it (socket listen/connect would be one
# point-to-point pair); each sees its own frames looped back too, which
# Linux ignores. Each VM has a monitor on a unix socket (its path is printed
# at start) where `set_link lan off` cuts its link.
#
# Environment: NICE (niceness of qemu, default 0), QEMU (default
# qemu-system-x86_64), QEMU_CPU (default max: TCG's widest x86, so ccl's
# runtime CPU dispatch takes its usual paths), VM_KERNEL (a version in
# /lib/modules; default the newest that has rdma_rxe and a /boot/vmlinuz),
# VM_MTU (eth0's MTU, default 1500: rxe's active MTU is then 1024).
set -uo pipefail

VM_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VM_QEMU=${QEMU:-qemu-system-x86_64}
VM_NICE=${NICE:-0}
VM_CPU=${QEMU_CPU:-max}
VM_MTU=${VM_MTU:-1500}
# Loaded in this order with busybox insmod (dependencies first, computed on
# the host with modprobe --show-depends): busybox's modprobe and the
# kernel's module compression need not agree.
VM_MODULES="crc32_generic virtio_pci virtio_net 9pnet_virtio 9p rdma_rxe ib_uverbs"

# vm_kernel: the kernel version to boot.
vm_kernel() {
    local k
    if [[ -n "${VM_KERNEL:-}" ]]; then
        echo "$VM_KERNEL"
        return
    fi
    for k in $(find /lib/modules -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort -rV); do
        [[ -r /boot/vmlinuz-$k ]] || continue
        compgen -G "/lib/modules/$k/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko*" >/dev/null || continue
        echo "$k"
        return
    done
    return 1
}

# vm_missing: one line per thing missing to boot a VM; nothing when all is there.
vm_missing() {
    local c k
    command -v "$VM_QEMU" >/dev/null 2>&1 || echo "$VM_QEMU not found (Debian: qemu-system-x86)"
    if ! k=$(vm_kernel); then
        if ! compgen -G "/boot/vmlinuz-*" >/dev/null; then
            echo "no kernel image /boot/vmlinuz-* (Debian: linux-image-amd64)"
        else
            echo "no kernel in /boot whose /lib/modules has rdma_rxe (Debian: linux-image-amd64)"
        fi
    elif [[ ! -r /boot/vmlinuz-$k ]]; then
        echo "no kernel image /boot/vmlinuz-$k (VM_KERNEL=$k)"
    elif ! modprobe -S "$k" --show-depends rdma_rxe >/dev/null 2>&1; then
        echo "no rdma_rxe module for kernel $k, or modprobe cannot resolve it (Debian: linux-image-amd64, kmod)"
    fi
    # ldd fails on a static executable: the initramfs has no libraries.
    if [[ ! -x /bin/busybox ]] || ldd /bin/busybox >/dev/null 2>&1; then
        echo "no static /bin/busybox for the initramfs (Debian: busybox-static)"
    fi
    for c in cpio gzip; do
        command -v "$c" >/dev/null 2>&1 || echo "$c not found (Debian: $c)"
    done
    [[ -x /usr/bin/rdma || -x /sbin/rdma || -x /usr/sbin/rdma || -x /bin/rdma ]] ||
        echo "rdma (the tool that adds rxe0) not found (Debian: iproute2)"
    command -v ibv_devinfo >/dev/null 2>&1 || echo "ibv_devinfo not found (Debian: ibverbs-utils)"
    compgen -G "/usr/lib/*/libibverbs/librxe-rdmav*.so" >/dev/null ||
        echo "the rxe verbs provider (librxe) not found (Debian: ibverbs-providers, from rdma-core)"
    command -v socat >/dev/null 2>&1 || command -v python3 >/dev/null 2>&1 ||
        echo "neither socat nor python3 to talk to qemu's monitor (Debian: socat)"
    return 0
}

# vm_initrd FILE: builds the initramfs every VM boots (the VM's number and
# working folder come from the kernel command line, so one image serves all).
vm_initrd() {
    local out=$1 k r f m
    k=$(vm_kernel) || return 1
    r=$(mktemp -d "${TMPDIR:-/tmp}/ccl-vm-initrd.XXXXXX") || return 1
    mkdir -p "$r"/{bin,proc,sys,dev,host,modules}
    cp /bin/busybox "$r/bin/"
    for f in sh mount umount insmod chroot poweroff ip cat cut hostname mkdir sync; do
        ln -s busybox "$r/bin/$f"
    done
    # insmod lines in dependency order, each module once.
    local i=0
    for m in $VM_MODULES; do
        modprobe -S "$k" --show-depends "$m" | awk '$1 == "insmod" { print $2 }'
    done | awk '!seen[$0]++' | while read -r f; do
        i=$((i + 1))
        local dst
        dst="$r/modules/$(printf %02d $i)-$(basename "${f%.ko*}").ko"
        case $f in
        *.ko.xz) xz -dc "$f" >"$dst" ;;
        *.ko.zst) zstd -qdc "$f" >"$dst" ;;
        *.ko.gz) gzip -dc "$f" >"$dst" ;;
        *) cp "$f" "$dst" ;;
        esac || exit 1
    done || {
        rm -rf "$r"
        return 1
    }
    cp "$VM_HERE/guest_init.sh" "$r/init"
    chmod +x "$r/init"
    (cd "$r" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$out"
    local rc=$?
    rm -rf "$r"
    return $rc
}

# vm_start ID GROUP:PORT DIR INITRD SECONDS [MiB [CPUS]]: starts a VM in the
# background; DIR/share is its /tmp/out, DIR/console.log its console,
# DIR/monitor.sock its monitor. DIR/share/cmd must hold the command. The pid
# of qemu's timeout wrapper (qemu is killed after SECONDS) goes to VM_PID and
# DIR/wrapper.pid, qemu's own to DIR/qemu.pid; call vm_start in this shell,
# not in $(...), to be able to wait for VM_PID.
vm_start() {
    local id=$1 lan=$2 dir=$3 initrd=$4 limit=$5 mem=${6:-1024} cpus=${7:-1} k
    k=$(vm_kernel) || return 1
    mkdir -p "$dir/share" || return 1
    rm -f "$dir/monitor.sock" "$dir/qemu.pid" "$dir/wrapper.pid" "$dir/share/exit"
    local tcg=tcg
    ((cpus > 1)) && tcg=tcg,thread=multi
    nice -n "$VM_NICE" timeout -s KILL "$limit" "$VM_QEMU" \
        -accel "$tcg" -cpu "$VM_CPU" -m "$mem" -smp "$cpus" \
        -nodefaults -no-user-config -display none -no-reboot \
        -kernel "/boot/vmlinuz-$k" -initrd "$initrd" \
        -append "console=ttyS0 ${VM_QUIET-quiet} panic=-1 ccl_vm.id=$id ccl_vm.cwd=$PWD ccl_vm.mtu=$VM_MTU" \
        -serial "file:$dir/console.log" \
        -monitor "unix:$dir/monitor.sock,server=on,wait=off" \
        -pidfile "$dir/qemu.pid" \
        -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
        -virtfs "local,path=$dir/share,mount_tag=share,security_model=none" \
        -netdev "socket,id=lan,mcast=$lan,localaddr=127.0.0.1" \
        -device "virtio-net-pci,netdev=lan,mac=52:54:00:4c:00:$(printf %02x "$id")" \
        </dev/null >"$dir/qemu.log" 2>&1 &
    VM_PID=$!
    echo "$VM_PID" >"$dir/wrapper.pid"
}

# vm_stop DIR: kills the VM started in DIR (qemu, then its timeout wrapper),
# each only while its pid still names that program (a finished VM's pid may
# have been reused).
vm_stop() {
    local f pid comm
    for f in qemu:qemu wrapper:timeout; do
        pid=$(cat "$1/${f%:*}.pid" 2>/dev/null) || continue
        comm=$(cat "/proc/$pid/comm" 2>/dev/null)
        [[ "$pid" =~ ^[0-9]+$ && "$comm" == "${f#*:}"* ]] && kill -KILL "$pid" 2>/dev/null
        rm -f "$1/${f%:*}.pid"
    done
    return 0
}

# vm_monitor SOCK COMMAND: one human-monitor command; prints qemu's reply.
vm_monitor() {
    local sock=$1 cmd=$2
    if command -v socat >/dev/null 2>&1; then
        printf '%s\n' "$cmd" | socat -t 1 - "UNIX-CONNECT:$sock" | tr -d '\r' | grep -v '^QEMU .* monitor\|^(qemu)'
        return "${PIPESTATUS[1]}"
    fi
    python3 - "$sock" "$cmd" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(2)
def until_prompt():
    buf = b""
    while not buf.endswith(b"(qemu) "):
        d = s.recv(4096)
        if not d:
            break
        buf += d
    return buf
until_prompt()
s.sendall(sys.argv[2].encode() + b"\n")
out = until_prompt().decode(errors="replace").replace("\r", "")
lines = [l for l in out.split("\n")[1:] if not l.startswith("(qemu)")]
sys.stdout.write("".join(l + "\n" for l in lines if l.strip()))
PY
}

# vm_lan: a fresh segment (multicast group and port) for one run.
vm_lan() {
    echo "239.77.$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1)):$((20000 + RANDOM % 30000))"
}

vm_main() {
    local id=1 lan="" dir="" mem=1024 cpus=1 limit=600 tmp=""
    case "${1:-}" in
    --check)
        local miss
        miss=$(vm_missing)
        [[ -z "$miss" ]] && {
            echo "vm.sh: all there (kernel $(vm_kernel))"
            return 0
        }
        echo "$miss"
        return 1
        ;;
    --monitor)
        [[ $# -eq 3 ]] || {
            echo "usage: vm.sh --monitor SOCK COMMAND" >&2
            return 2
        }
        vm_monitor "$2" "$3"
        return
        ;;
    esac
    local o
    while getopts "i:l:s:m:c:t:h" o; do
        case $o in
        i) id=$OPTARG ;; l) lan=$OPTARG ;; s) dir=$OPTARG ;; m) mem=$OPTARG ;;
        c) cpus=$OPTARG ;; t) limit=$OPTARG ;;
        *)
            sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
            return 2
            ;;
        esac
    done
    shift $((OPTIND - 1))
    [[ $# -gt 0 ]] || {
        echo "vm.sh: no command (vm.sh -h)" >&2
        return 2
    }
    if ! [[ "$id" =~ ^[0-9]+$ ]] || ((id < 1 || id > 254)); then
        echo "vm.sh: -i $id: 1..254" >&2
        return 2
    fi
    local miss
    miss=$(vm_missing)
    if [[ -n "$miss" ]]; then
        echo "vm.sh: cannot boot a VM here:" >&2
        printf '  %s\n' "${miss//$'\n'/$'\n'  }" >&2
        return 1
    fi
    [[ -n "$lan" ]] || lan=$(vm_lan)
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/ccl-vm.XXXXXX") || return 1
    local vmdir=$tmp/vm
    if [[ -n "$dir" ]]; then
        mkdir -p "$dir" || return 1
        mkdir -p "$vmdir" && ln -s "$(cd "$dir" && pwd)" "$vmdir/share"
    fi
    mkdir -p "$vmdir/share"
    # shellcheck disable=SC2064 # expand now: the paths are fixed
    trap "vm_stop '$vmdir'; rm -rf '$tmp'" EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    printf '%s\n' "$*" >"$vmdir/share/cmd"
    rm -f "$vmdir/share/exit" "$vmdir/share/out.log"
    : >"$vmdir/share/out.log"
    vm_initrd "$tmp/initrd.gz" || {
        echo "vm.sh: building the initramfs failed" >&2
        return 1
    }
    vm_start "$id" "$lan" "$vmdir" "$tmp/initrd.gz" "$limit" "$mem" "$cpus" || return 1
    local pid=$VM_PID
    echo "vm.sh: vm$id (10.77.0.$id) on segment $lan; monitor $vmdir/monitor.sock" >&2
    tail -n +1 -f --pid="$pid" "$vmdir/share/out.log" 2>/dev/null
    wait "$pid" 2>/dev/null
    if [[ ! -s "$vmdir/share/exit" ]]; then
        echo "vm.sh: vm$id ended without the command's status; its console:" >&2
        tail -n 20 "$vmdir/console.log" | sed 's/^/  /' >&2
        return 1
    fi
    return "$(cat "$vmdir/share/exit")"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    vm_main "$@"
    exit
fi
