#!/usr/bin/env bash
# agent.sh - runs inside each VM that run.sh boots (it is the VM's command):
# runs the jobs the host drops into the 9p share, so one boot serves the
# whole suite and the host decides, case by case, what runs next.
#
#   /tmp/out/jobs/NAME.job   a bash script the host wrote (renamed into place)
#   -> NAME.run              claimed: renamed, then run in the background
#   -> NAME.log, NAME.rc     its output, then its exit status (renamed into place)
#   /tmp/out/ready           written once the agent runs (the VM is up)
#   /tmp/out/stop            written by the host: finish the running jobs, power off
#
# Jobs bound their own run time (timeout); the agent never kills one.
set -u
J=/tmp/out/jobs
mkdir -p "$J"
# A FIFO nobody writes: `read -t` on it sleeps without forking sleep(1),
# which costs a lot of emulated instructions under TCG.
mkfifo /tmp/agent.tick && exec 9<>/tmp/agent.tick
echo "$(hostname) $(cut -d' ' -f1 /proc/uptime)" >/tmp/out/ready
while [[ ! -e /tmp/out/stop ]]; do
    for f in "$J"/*.job; do
        [[ -e "$f" ]] || continue
        n=${f%.job}
        mv "$f" "$n.run" || continue
        (
            bash "$n.run" >"$n.log" 2>&1 </dev/null
            echo $? >"$n.rc.tmp"
            mv "$n.rc.tmp" "$n.rc"
        ) &
    done
    read -r -t 0.2 -u 9 _
done
wait
