#!/bin/bash
# messaging-ab.sh NAME=COMMAND ... - perf bench sched messaging under each
# scheduler in turn, in two rounds, inside a hotlane guest. NAME=eevdf runs
# it under the kernel's own scheduler; any other COMMAND is started and
# must switch sched_ext to enabled within 30 s (else it is reported and
# skipped, so that no run silently measures EEVDF); it is stopped with
# SIGINT after the run. Prints one line per run: NAME and perf's "Total
# time" (lower is better).
#
# Run from the host, e.g. (8 vCPUs in two LLCs, two hotlane builds):
#   hotlane vm --mttcg --judges --topology sockets=2,cores=4 --memory 4G \
#     --add /bin/bash --add /usr/bin/grep --add /usr/bin/sleep --add /usr/bin/cat --add /usr/bin/seq \
#     --add scripts/messaging-ab.sh:/ab.sh --add OLD:/old --add NEW:/new \
#     -- /bin/bash /ab.sh eevdf=eevdf 'old=/old run' 'new=/new run'
set -u
for round in 1 2; do
	for v in "$@"; do
		name=${v%%=*}
		cmd=${v#*=}
		pid=
		if [ "$cmd" != eevdf ]; then
			$cmd >/tmp/ab-sched.log 2>&1 &
			pid=$!
			for _ in $(seq 60); do
				[ "$(cat /sys/kernel/sched_ext/state)" = enabled ] && break
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.5
			done
			if [ "$(cat /sys/kernel/sched_ext/state)" != enabled ]; then
				echo "$name: sched_ext not enabled; skipped:" >&2
				cat /tmp/ab-sched.log >&2
				kill -INT "$pid" 2>/dev/null
				wait "$pid"
				continue
			fi
		elif [ "$(cat /sys/kernel/sched_ext/state)" != disabled ]; then
			echo "$name: sched_ext is not disabled; skipped" >&2
			continue
		fi
		echo "round $round $name: $(/usr/bin/perf bench sched messaging -t -g 2 -l 20 2>&1 | grep 'Total time')"
		if [ -n "$pid" ]; then
			kill -INT "$pid"
			wait "$pid"
		fi
	done
done
