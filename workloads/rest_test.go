package workloads

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// judgedRuns are EEVDF and hotlane with a judge of each kind and a
// request server: under hotlane perf's messaging took twice as long, its
// pipe did half the operations per second, rt-app's p99 wake-up was the
// same, the request server served as many with twice the p99.
func judgedRuns() []Run {
	const ms = time.Millisecond
	judges := func(messaging time.Duration, pipeOps float64, wake time.Duration) []Judgement {
		return []Judgement{
			{Judge: "perf-messaging", Headline: HeadlineTime, Unit: "runs", Runs: 4, Work: 4, Time: 4 * messaging},
			{Judge: "perf-pipe", Headline: HeadlineRate, Unit: "ops", Runs: 2, Work: pipeOps, Time: 2 * time.Second},
			{Judge: "rt-app-periodic", Headline: HeadlineLatency, LatencyOf: "wake-up", Runs: 1, Latency: hist(wake, wake), Missed: 3},
			{Judge: "sysbench-cpu", Headline: HeadlineRate, Unit: "events"}, // finished no run
		}
	}
	server := func(p99 time.Duration) []RequestServerResult {
		return []RequestServerResult{{WakeUp: *hist(ms / 10), Request: *hist(p99), Served: 1000, Unfinished: 2, Ran: time.Second}}
	}
	return []Run{
		{Scheduler: EEVDF, Rounds: 1, Fair: hist(ms, 2*ms), Lane: hist(4 * ms), Judgements: judges(500*ms, 2000, ms), RequestServers: server(2 * ms)},
		{Scheduler: HotlaneName, Rounds: 1, Fair: hist(2*ms, 4*ms), Lane: hist(ms), Judgements: judges(time.Second, 1000, ms), RequestServers: server(4 * ms)},
	}
}

// One table per variant answers what the lane cost everyone else: the
// fair classes' wake-up latency, each judge's own figure and the request
// server's, as ratios to EEVDF's, the lane's beside them; a judge with
// nothing finished has no line. The JSON has the same figures.
func TestRestOfTheMachine(t *testing.T) {
	rep := NewReport(testStart, judgedRuns(), nil, EEVDF, nil)
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	heading := "rest of the machine under hotlane"
	for _, want := range [][]string{
		{"fair", "wake-up", "p99", "lower", "4.00ms", "2.00ms", "2.000"},
		{"fair", "wake-up", "max", "lower", "4.00ms", "2.00ms", "2.000"},
		{"perf-messaging", "time/run", "lower", "1.00s", "500ms", "2.000"},
		{"perf-pipe", "higher", "500", "ops/s", "1k", "ops/s", "0.500"},
		{"rt-app-periodic", "wake-up", "p99", "lower", "1.00ms", "1.00ms", "1.000"},
		{"request-server", "higher", "1k", "requests/s", "1k", "requests/s", "1.000"},
		{"request-server", "request", "p99", "lower", "4.00ms", "2.00ms", "2.000"},
		{"lane", "wake-up", "p99", "lower", "1.00ms", "4.00ms", "0.250"},
	} {
		if !strings.Contains(squash(afterHeading(t, out, heading)), strings.Join(want, " ")) {
			t.Errorf("%s lacks %q:\n%s", heading, strings.Join(want, " "), out)
		}
	}
	if strings.Contains(out, "sysbench-cpu events/s") {
		t.Errorf("a judge that finished no run has a figure:\n%s", out)
	}
	// The baseline's own table has ratios of 1.
	if !strings.Contains(squash(out), "perf-pipe higher 1k ops/s 1k ops/s 1.000") {
		t.Errorf("eevdf's table lacks its own figure over itself:\n%s", out)
	}
	// The judges' table: runs, figure, latency, missed.
	if !strings.Contains(squash(out), "rt-app-periodic hotlane 1 1.00ms wake-up 1.00ms 1.00ms 1.00ms 3") {
		t.Errorf("judges' table lacks rt-app's row:\n%s", out)
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	rest := back.Runs[1].Summary.Rest
	found := false
	for _, f := range rest {
		if f.Name == "perf-pipe" {
			found = f.Source == SourceJudge && f.Value == 500 && f.Baseline == 1000 && f.VsBaseline == 0.5 && f.HigherIsBetter && f.Unit == "ops/s"
		}
	}
	if !found || len(back.Runs[1].Judgements) != 4 || back.Runs[1].Judgements[2].Latency.Count() != 2 {
		t.Errorf("report.json: rest %+v, judgements %+v", rest, back.Runs[1].Judgements)
	}
}

// afterHeading is the text after heading, to the next blank line.
func afterHeading(t *testing.T, out, heading string) string {
	t.Helper()
	_, section, ok := strings.Cut(out, heading)
	if !ok {
		t.Fatalf("no %q in:\n%s", heading, out)
	}
	section, _, _ = strings.Cut(section, "\n\n")
	return section
}

// make scale's table: per machine and figure, each variant's value and
// its ratio to the baseline; a failed variant is said once and left
// blank.
func TestRestMarkdown(t *testing.T) {
	small := NewReport(testStart, judgedRuns(), nil, EEVDF, nil)
	runs := append(judgedRuns(), Run{Scheduler: ScxSimple, Failure: "sched_ext was not enabled | within 30s"})
	big := NewReport(testStart, runs, []Skipped{{Name: ScxQmap, Reason: "not found"}}, EEVDF, nil)
	var b strings.Builder
	if err := WriteRestMarkdown(&b, []LabeledReport{{"8 CPUs", small}, {"16 CPUs", big}}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| machine | figure | better | eevdf | hotlane | scx_simple |\n| --- | --- | --- | --- | --- | --- |\n",
		"| 8 CPUs | every variant ran to the end |  |  |  |  |\n",
		"| 8 CPUs | perf-pipe | higher | 1k ops/s | 500 ops/s (0.500) | - |\n",
		"| 16 CPUs | fair wake-up p99 | lower | 2.00ms | 4.00ms (2.000) | - |\n",
		`| 16 CPUs | scx_qmap skipped: not found; scx_simple failed: sched_ext was not enabled \| within 30s |  |  |  |  |`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "| 16 CPUs | perf-messaging time/run |"); n != 1 {
		t.Errorf("%d rows for perf-messaging at 16 CPUs:\n%s", n, out)
	}
	// A figure only a later variant has keeps its place.
	runs = judgedRuns()
	runs[0].Judgements[1].Work = 0 // EEVDF's perf pipe finished nothing
	b.Reset()
	if err := WriteRestMarkdown(&b, []LabeledReport{{"8 CPUs", NewReport(testStart, runs, nil, EEVDF, nil)}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| perf-messaging time/run | lower | 500ms | 1.00s (2.000) |\n| 8 CPUs | perf-pipe | higher | - | 500 ops/s |\n| 8 CPUs | rt-app-periodic") {
		t.Errorf("perf-pipe, which only hotlane has, is not between perf-messaging and rt-app:\n%s", b.String())
	}
}
