#!/bin/sh
# messaging-profile.sh COMMAND... - where the CPU goes under perf bench sched
# messaging (2 groups of processes, 20 loops), first under the kernel's own
# scheduler, then under the sched_ext scheduler COMMAND starts (which must
# switch sched_ext to enabled within 30 s; it is stopped with SIGINT at the
# end). Inside a hotlane guest; writes to /results: each run's time
# (msg-eevdf.txt, msg-scx.txt), the scheduler's output (scx.txt: with
# 'run --cost', each callback's BPF run time) and `perf report` of one
# profiled run under each (rep-eevdf.txt, rep-scx.txt, and the callers of
# the scheduler's hottest symbols in rep-scx-callers.txt).
#
# The profile samples on cpu-clock, a timer interrupt: no sample lands
# where interrupts are off, so time in scheduler callbacks (called with the
# runqueue locked) shows at the places interrupts come back on
# (_raw_spin_unlock_irqrestore, finish_task_switch).
#
# Run from the host, e.g. (8 vCPUs in two LLCs):
#   hotlane vm --mttcg --judges --topology sockets=2,cores=4 --memory 4G \
#     --add /bin/sh --add /bin/cat --add /bin/sleep --add /bin/grep \
#     --add scripts/messaging-profile.sh:/profile.sh \
#     -- /bin/sh /profile.sh /init run -q --cost
set -u
perf=/usr/bin/perf
messaging="$perf bench sched messaging --group 2 --nr_loops 20"
cd /tmp || exit 2
echo 0 >/proc/sys/kernel/kptr_restrict
echo -1 >/proc/sys/kernel/perf_event_paranoid

if [ "$(cat /sys/kernel/sched_ext/state)" != disabled ]; then
	echo "sched_ext is not disabled: the first runs would not be EEVDF's" >&2
	exit 2
fi
$messaging >/dev/null 2>&1 # warm-up: the first run pays for TCG's translation
for _ in 1 2; do $messaging >>/results/msg-eevdf.txt 2>&1; done
$perf record -a -g -F 499 -e cpu-clock -o /tmp/eevdf.data -- $messaging >>/results/msg-eevdf.txt 2>&1

"$@" >/results/scx.txt 2>&1 &
pid=$!
waited=0
while [ "$(cat /sys/kernel/sched_ext/state)" != enabled ]; do
	if ! kill -0 "$pid" 2>/dev/null || [ "$waited" -ge 60 ]; then
		echo "sched_ext not enabled by: $*" >&2
		cat /results/scx.txt >&2
		kill -INT "$pid" 2>/dev/null
		exit 2
	fi
	sleep 0.5
	waited=$((waited + 1))
done
for _ in 1 2 3; do $messaging >>/results/msg-scx.txt 2>&1; done
$perf record -a -g -F 499 -e cpu-clock -o /tmp/scx.data -- $messaging >>/results/msg-scx.txt 2>&1
kill -INT "$pid"
wait "$pid"

report="$perf report --stdio --no-children --sort sym"
$report -i /tmp/eevdf.data --percent-limit 0.3 -g none >/results/rep-eevdf.txt 2>&1
$report -i /tmp/scx.data --percent-limit 0.3 -g none >/results/rep-scx.txt 2>&1
$report -i /tmp/scx.data --percent-limit 2 -g caller,0.5,callee --max-stack 12 >/results/rep-scx-callers.txt 2>&1
grep -h "Total time" /results/msg-eevdf.txt /results/msg-scx.txt
