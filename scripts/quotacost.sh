#!/bin/sh
# quotacost.sh ROUNDS [DEPTH] - what a cpu.max quota costs hotlane's
# callbacks: perf bench sched messaging in a cgroup DEPTH levels below the
# root (default 1) whose level-1 ancestor's cpu.max is "max" or ten CPUs'
# worth (never reached), alternated ROUNDS times, each under
# `hotlane run -q --cost`. Inside a hotlane guest; writes to /results
# each run's callback costs (cost-none-N.txt, cost-quota-N.txt) and
# messaging's times (msg-none.txt, msg-quota.txt). From the host:
#   hotlane vm --timeout 30m --mttcg --judges --add /bin/sh --add /bin/cat \
#     --add /bin/sleep --add /bin/grep --add /bin/mkdir --add /usr/bin/seq \
#     --add scripts/quotacost.sh:/q.sh -- /bin/sh /q.sh 3
set -u
M="/usr/bin/perf bench sched messaging --group 2 --nr_loops 10"
G=/sys/fs/cgroup
echo +cpu > $G/cgroup.subtree_control
mkdir $G/work
W=$G/work
for l in $(seq 2 "${2:-1}"); do
  echo +cpu > $W/cgroup.subtree_control
  mkdir $W/l$l
  W=$W/l$l
done
$M > /dev/null 2>&1
for r in $(seq 1 $1); do for q in none quota; do
  if [ $q = quota ]; then echo "1000000 100000" > $G/work/cpu.max; else echo max > $G/work/cpu.max; fi
  /init run -q --cost > /results/cost-$q-$r.txt 2>&1 & HL=$!
  while [ "$(cat /sys/kernel/sched_ext/state)" != enabled ]; do sleep 0.2; done
  sleep 1
  sh -c "echo \$\$ > $W/cgroup.procs; for i in 1 2 3; do $M; done" 2>&1 | grep Total >> /results/msg-$q.txt
  kill -INT $HL; wait $HL
  while [ "$(cat /sys/kernel/sched_ext/state)" != disabled ]; do sleep 0.2; done
done; done
