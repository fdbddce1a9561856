#!/bin/sh
# The soak benchmark (not a test), run inside the VM by `make soak`: the
# default bench workload under hotlane for $SOAK seconds with the tracer and
# the ioctl and DMA probes attached, sampling the scheduler loader's RSS
# every 10 s. Everything lands in /results (copied back to the host).
set -u
SOAK=${SOAK:-600}
R=/results
/init run -q --stats-json $R/stats.jsonl > $R/run.txt 2>&1 &
RUN=$!
sleep 2
/init workload --duration ${SOAK}s > $R/workload.txt 2>&1 &
W=$!
/init verify --duration ${SOAK}s --bound 'inference:p99<=5ms' --top 5 --no-histograms -q --json $R/verify.json > $R/verify.txt 2>&1 &
V=$!
/init probe ioctl --duration ${SOAK}s -q --json $R/ioctl.json > $R/ioctl.txt 2>&1 &
I=$!
/init probe dma --duration ${SOAK}s -q --json $R/dma.json > $R/dma.txt 2>&1 &
D=$!
n=0
while [ $n -lt $((SOAK / 10)) ]; do
	echo "$((n * 10)) $(grep VmRSS /proc/$RUN/status)" >> $R/rss.txt
	sleep 10
	n=$((n + 1))
done
wait $W; echo "workload exit $?" >> $R/exits.txt
wait $V; echo "verify exit $?" >> $R/exits.txt
wait $I; echo "probe ioctl exit $?" >> $R/exits.txt
wait $D; echo "probe dma exit $?" >> $R/exits.txt
kill -TERM $RUN
wait $RUN; echo "run exit $?" >> $R/exits.txt
# No cat(1) in the guest: the shell prints the summary itself.
while read -r line; do echo "$line"; done < $R/exits.txt
