#!/bin/sh
# Draws one real violation, on this host, as docs/violation-timeline.svg
# (hotlane verify --plot) and renders it to docs/violation-timeline.png with
# Debian's headless Chromium (apt-get install chromium): a SCHED_FIFO shell
# loop (hl-rthog) bursting on the last CPU beside a sleeper (hl-sleeper, a
# copy of sleep(1) at a lower realtime priority, so that only realtime work
# can keep it waiting), and verify stopping at the first wait over 5 ms. It
# also leaves the run's trace (verify --trace) beside them, to open in
# ui.perfetto.dev. Run as root from the repository:
#   sh scripts/violation-timeline.sh [OUTDIR]
set -eu
OUT=${1:-docs}
TMP=$(mktemp -d)
PIDS=""
trap 'for p in $PIDS; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"' EXIT
for tool in chrt taskset chromium go; do
	command -v "$tool" > /dev/null || { echo "$0: needs $tool" >&2; exit 2; }
done
go build -o "$TMP/hotlane" ./cmd/hotlane
cp "$(command -v sh)" "$TMP/hl-rthog"
cp "$(command -v sleep)" "$TMP/hl-sleeper"
CPU=$(($(nproc) - 1))
chrt -f 10 taskset -c "$CPU" "$TMP/hl-rthog" -c \
	'while :; do i=0; while [ $i -lt 5000 ]; do i=$((i+1)); done; sleep 0.03; done' &
PIDS="$PIDS $!"
chrt -f 5 taskset -c "$CPU" sh -c 'while :; do "$0" 0.001; done' "$TMP/hl-sleeper" &
PIDS="$PIDS $!"
sleep 1
status=0
"$TMP/hotlane" verify --inference-comm hl-sleeper --comm hl-sleeper --bound 'inference:max<=5ms' \
	--duration 30s --stop-on-violation --plot "$OUT/violation-timeline.svg" \
	--trace "$OUT/violation-trace.json" --top 0 --no-histograms -q || status=$?
if [ "$status" -ne 1 ]; then
	echo "$0: verify exited $status, not 1 (stopped at a violation)" >&2
	exit 1
fi
# They name only this script's own tasks: readable, for the docs.
chmod 644 "$OUT/violation-timeline.svg" "$OUT/violation-trace.json"
size=$(sed -n 's/^<svg[^>]* width="\([0-9]*\)" height="\([0-9]*\)".*/\1,\2/p' "$OUT/violation-timeline.svg")
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="$size" \
	--screenshot="$OUT/violation-timeline.png" "file://$(realpath "$OUT/violation-timeline.svg")" 2> /dev/null
echo "$OUT/violation-timeline.svg, $OUT/violation-timeline.png, $OUT/violation-trace.json"
