#!/bin/sh
# cpumax.sh COMMAND... - cgroup cpu.max under the kernel's own scheduler and
# under the sched_ext scheduler COMMAND starts, in turn, two rounds. Inside
# a hotlane guest (the guest's stress-ng comes with `hotlane vm --judges`):
# three cgroups of stress-ng CPU hogs, a with cpu.max 2 CPUs and 6 hogs, b
# 1 CPU and 4 hogs, c no quota and 4 hogs; it prints each cgroup's
# cpu.stat usage over 10 s, in hundredths of a CPU. COMMAND's output goes
# to /results/hl-ROUND.txt; its cpu.max line is printed.
#
#   hotlane vm --mttcg --judges --topology sockets=2,cores=4 --memory 4G \
#     --add /bin/sh --add /bin/cat --add /bin/grep --add /usr/bin/cut \
#     --add /bin/sleep --add /bin/mkdir --add scripts/cpumax.sh:/cpumax.sh \
#     -- /bin/sh /cpumax.sh /init run -q
CG=/sys/fs/cgroup
echo +cpu > $CG/cgroup.subtree_control
for g in a b c; do mkdir -p $CG/$g; done
echo "200000 100000" > $CG/a/cpu.max
echo "100000 100000" > $CG/b/cpu.max
start() { sh -c "echo \$\$ > $CG/$1/cgroup.procs; exec /usr/bin/stress-ng --cpu $2 --cpu-method loop --timeout 900s --quiet" & }
start a 6; start b 4; start c 4
sleep 3
usage() { grep usage_usec $CG/$1/cpu.stat | cut -d' ' -f2; }
measure() {
	a0=$(usage a); b0=$(usage b); c0=$(usage c)
	sleep 10
	a1=$(usage a); b1=$(usage b); c1=$(usage c)
	echo "$1: a (quota 2 CPUs) $(( (a1 - a0) / 100000 ))/100 CPUs, b (quota 1) $(( (b1 - b0) / 100000 ))/100, c (none) $(( (c1 - c0) / 100000 ))/100"
}
for round in 1 2; do
	measure EEVDF
	"$@" > /results/hl-$round.txt 2>&1 & HL=$!
	while [ "$(cat /sys/kernel/sched_ext/state)" != enabled ]; do sleep 0.2; done
	sleep 2
	measure hotlane
	grep -h "cpu.max" /results/hl-$round.txt
	kill -INT $HL; wait $HL
	while [ "$(cat /sys/kernel/sched_ext/state)" != disabled ]; do sleep 0.2; done
	sleep 2
done
