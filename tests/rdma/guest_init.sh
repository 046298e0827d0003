#!/bin/sh
# guest_init.sh - /init of the initramfs vm.sh builds (busybox sh, inside
# the VM): loads the modules, mounts the host's root read-only over 9p with
# fresh tmpfs where a host needs to write, brings up eth0 with 10.77.0.ID
# and soft-RoCE rxe0 on it, runs /tmp/out/cmd (the 9p share) chrooted into
# that root and powers off. ID and the working folder come from the kernel
# command line (ccl_vm.id=, ccl_vm.cwd=). Status lines go to the console.
# Prefixed with the guest uptime: where a slow boot spends its time.
say() { echo "ccl-vm [$(cut -d" " -f1 /proc/uptime 2>/dev/null)]: $*"; }

mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
id=1
cwd=/
mtu=1500
# shellcheck disable=SC2013 # the command line is one line of words
for a in $(cat /proc/cmdline); do
    case $a in
    ccl_vm.id=*) id=${a#ccl_vm.id=} ;;
    ccl_vm.cwd=*) cwd=${a#ccl_vm.cwd=} ;;
    ccl_vm.mtu=*) mtu=${a#ccl_vm.mtu=} ;;
    esac
done
for m in /modules/*.ko; do
    insmod "$m" || say "insmod $m failed"
done

H=/host
# msize: ccl-perf and its libraries are read over this mount; the default
# (8 KiB on some kernels) makes every exec crawl.
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=524288 hostroot $H || {
    say "cannot mount the host root over 9p"
    poweroff -f
}
mount -t proc proc $H/proc
mount -t sysfs sys $H/sys
mount -t devtmpfs dev $H/dev
mkdir -p $H/dev/shm $H/dev/pts
mount -t tmpfs shm $H/dev/shm
mount -t devpts devpts $H/dev/pts
# /tmp and /run hold sockets, locks and pid files: the host's must not show.
mount -t tmpfs tmp $H/tmp
mount -t tmpfs run $H/run
mkdir -p $H/tmp/out
mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288 share $H/tmp/out || say "cannot mount the share"
hostname "vm$id"

ip link set lo up
ip link set eth0 mtu "$mtu" up || say "cannot set eth0's MTU to $mtu"
ip addr add "10.77.0.$id/24" dev eth0
# PATH as a root login's: rdma and friends live in /usr/sbin.
P=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
chroot $H /usr/bin/env PATH=$P rdma link add rxe0 type rxe netdev eth0 >$H/tmp/out/rxe.log 2>&1 ||
    say "rdma link add rxe0 failed: $(cat $H/tmp/out/rxe.log)"
say "vm$id up, 10.77.0.$id"

# Root may pin memory (ibv_reg_mr) without RLIMIT_MEMLOCK, but a lower limit
# would still show in ulimit-minded code: lift it.
# shellcheck disable=SC2016 # $1 expands in the chrooted shell
chroot $H /usr/bin/env -i PATH=$P HOME=/tmp TERM=dumb VM_ID="$id" \
    /bin/sh -c 'ulimit -l unlimited 2>/dev/null; cd "$1" || cd /; exec /bin/sh /tmp/out/cmd' sh "$cwd" \
    >>$H/tmp/out/out.log 2>&1
rc=$?
echo "$rc" >$H/tmp/out/exit.tmp
# rename: the host polls for exit and must never read it half-written.
chroot $H /bin/mv /tmp/out/exit.tmp /tmp/out/exit
sync
umount $H/tmp/out
say "vm$id: command exited $rc"
poweroff -f
