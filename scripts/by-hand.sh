#!/bin/sh
# The outside-tool scenario run by hand, as a new user would, inside the VM
# (not a test; see docs/results.md): stress-ng --cpu 4 as background,
# then cyclictest (100 Hz, one thread, 8 s) under EEVDF and under
# `hotlane run --inference-comm cyclictest`, each with cyclictest's default
# 50 us timer slack and with 1 ns (SCHED_FIFO gets none). Two rounds;
# cyclictest's p50/p90/p99 in us from its own histogram. Run with
#   bin/hotlane vm --mttcg --timeout 8m --add /bin/sh --add /bin/cat \
#     --add /usr/bin/awk --add /usr/bin/sleep --add /usr/bin/cyclictest \
#     --add /usr/bin/stress-ng --add scripts/by-hand.sh:/by-hand.sh -- /bin/sh /by-hand.sh
set -u
stress-ng --cpu 4 -q &
sleep 1
pct() {
	awk '/^[0-9]/ { c[$1 + 0] = $2; n += $2 }
	END {
		split("50 90 99", q, " ")
		for (j = 1; j <= 3; j++) {
			s = 0
			for (i = 0; i < 20000; i++) { s += c[i]; if (s >= n * q[j] / 100) { printf "p%d %d  ", q[j], i; break } }
		}
		printf "samples %d\n", n
	}' "$1"
}
measure() { # name slack_ns
	sh -c "echo $2 > /proc/\$\$/timerslack_ns; exec cyclictest -q -D 8 -i 10000 -t 1 -h 20000 --histfile=/tmp/h" > /dev/null 2>&1
	echo "$1 slack=$2ns: $(pct /tmp/h)"
}
for round in 1 2; do
	measure eevdf 50000
	measure eevdf 1
	/init run -q --inference-comm cyclictest > /tmp/run.log 2>&1 &
	RUN=$!
	# hotlane's own loader competes with the hogs: wait until it is enabled.
	i=0
	while [ "$(cat /sys/kernel/sched_ext/state)" != enabled ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	echo "hotlane enabled after ${i}00 ms"
	measure hotlane 50000
	measure hotlane 1
	kill $RUN
	wait $RUN
done
