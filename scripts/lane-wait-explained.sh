#!/bin/sh
# Where the lane's median wait goes in the outside-tool scenario (a
# diagnostic, not a test): stress-ng --cpu 4 as background, cyclictest
# (100 Hz, one thread) as the lane, and `hotlane verify` with a bound no
# wait can meet, so every wait is explained (what ran on the CPU
# meanwhile, and how much of it was sched_ext callbacks), under EEVDF and
# then under `hotlane run --inference-comm cyclictest`. Run with
#   bin/hotlane vm --mttcg --timeout 4m --add /bin/sh --add /bin/cat \
#     --add /bin/kill --add /usr/bin/sleep --add /usr/bin/head --add /bin/grep \
#     --add /usr/bin/cyclictest --add /usr/bin/stress-ng \
#     --add scripts/lane-wait-explained.sh:/x.sh -- /bin/sh /x.sh
set -u
stress-ng --cpu 4 -q &
STRESS=$!
sleep 1
for mode in eevdf hotlane; do
	if [ $mode = hotlane ]; then
		/init run -q --inference-comm cyclictest > /tmp/run.log 2>&1 &
		RUN=$!
		i=0
		while [ "$(cat /sys/kernel/sched_ext/state)" != enabled ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	fi
	cyclictest -q -D 16 -i 10000 -t 1 > /dev/null 2>&1 &
	CT=$!
	# Under EEVDF and the hogs cyclictest takes seconds to start its thread.
	sleep 4
	echo "== $mode"
	/init verify -q --inference-comm cyclictest --bound 'inference:max<=1us' --ext-callbacks \
		--duration 8s --no-histograms --top 1 2>&1 | grep -v '^violation' | head -40
	wait $CT
	if [ $mode = hotlane ]; then
		kill -INT $RUN
		wait $RUN
	fi
done
kill $STRESS
