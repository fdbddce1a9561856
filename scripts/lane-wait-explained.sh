#!/bin/sh
# Where the lane's median wait goes in the outside-tool scenario (a
# diagnostic, not a test): stress-ng --cpu 4 as background, cyclictest
# (100 Hz, one thread) as the lane, and `hotlane verify` with a bound no
# wait can meet, so every wait is explained (what ran on the CPU
# meanwhile), under EEVDF and then under `hotlane run --inference-comm
# cyclictest`; then once more under hotlane with --ext-callbacks, for how
# much of the waiting was sched_ext callbacks. That last pass is apart:
# its fentry/fexit hooks on every callback (ops.tick in the timer
# interrupt among them) slow hotlane's own path, and compared with EEVDF
# they made timer delivery look slower for every class. Run with
#   bin/hotlane vm --mttcg --timeout 4m --add /bin/sh --add /bin/cat \
#     --add /bin/kill --add /usr/bin/sleep --add /usr/bin/head --add /bin/grep \
#     --add /usr/bin/cyclictest --add /usr/bin/stress-ng \
#     --add scripts/lane-wait-explained.sh:/x.sh -- /bin/sh /x.sh
set -u
stress-ng --cpu 4 -q &
STRESS=$!
sleep 1
for mode in eevdf hotlane hotlane+callbacks; do
	if [ $mode = hotlane ]; then
		/init run -q --inference-comm cyclictest > /tmp/run.log 2>&1 &
		RUN=$!
		i=0
		while [ "$(cat /sys/kernel/sched_ext/state)" != enabled ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	fi
	extra=""
	[ $mode = hotlane+callbacks ] && extra=--ext-callbacks
	cyclictest -q -D 16 -i 10000 -t 1 > /dev/null 2>&1 &
	CT=$!
	# Under EEVDF and the hogs cyclictest takes seconds to start its thread.
	sleep 4
	echo "== $mode"
	/init verify -q --inference-comm cyclictest --bound 'inference:max<=1us' $extra \
		--duration 8s --no-histograms --top 1 2>&1 | grep -v '^violation' | head -40
	wait $CT
done
kill -INT $RUN
wait $RUN
kill $STRESS
