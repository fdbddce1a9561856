package workloads

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A decode server with two streams, each with its helper, serves requests
// and says so consistently: every stream has tokens, each request began
// with a first token and every later token has an inter-token latency, no
// token came sooner than the device time after its submission, and no
// request's first token took longer than the run.
func TestDecodeServes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs threads for half a second")
	}
	d := Decode{Comm: "dec-test", HelperComm: "dec-helper", Streams: 2, Tokens: 4, Prefill: time.Millisecond,
		Host: 100 * time.Microsecond, DeviceTime: 500 * time.Microsecond, Device: "/dev/full", Helper: 20 * time.Microsecond}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	r, err := d.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := DecodeSummaries([]DecodeResult{r})
	t.Logf("%+v", s)
	if len(s) != 3 || s[0].Name != "dec-test" || s[1].Name != "dec-test stream 1" || s[2].Stream != 2 {
		t.Errorf("summaries %+v, want the server's then its two streams'", s)
	}
	if len(r.Streams) != 2 || len(r.TIDs) != 2 || r.CPU <= 0 || r.Total.TokensPerSecond() <= 0 || r.Total.Requests == 0 {
		t.Fatalf("%d streams, TIDs %v, CPU %s, %d tokens, %d requests over %s", len(r.Streams), r.TIDs, r.CPU, r.Total.Tokens, r.Total.Requests, r.Total.Ran)
	}
	// The stream threads' CPU time is their own: no more than they ran
	// (not what their OS threads did before the streams locked them).
	if r.CPU > time.Duration(len(r.Streams))*r.Total.Ran {
		t.Errorf("stream threads used %s of CPU in %s", r.CPU, r.Total.Ran)
	}
	var tokens uint64
	for i, st := range r.Streams {
		tokens += st.Tokens
		started := st.TTFT.Count()
		switch {
		case st.Tokens == 0 || st.Requests == 0:
			t.Errorf("stream %d: %d tokens, %d requests", i, st.Tokens, st.Requests)
		case started < st.Requests || started > st.Requests+1:
			t.Errorf("stream %d: %d first tokens for %d requests finished", i, started, st.Requests)
		case st.ITL.Count() != st.Tokens-started:
			t.Errorf("stream %d: %d inter-token samples for %d tokens of %d requests", i, st.ITL.Count(), st.Tokens, started)
		case st.ITL.Min() < uint64(d.DeviceTime) || st.TTFT.Min() < uint64(d.DeviceTime):
			t.Errorf("stream %d: a token sooner than the device time %s: ITL min %d ns, TTFT min %d ns", i, d.DeviceTime, st.ITL.Min(), st.TTFT.Min())
		case st.TTFT.Max() > uint64(st.Ran) || st.Ran > r.Total.Ran:
			t.Errorf("stream %d: TTFT max %d ns over its run %s (the server's %s)", i, st.TTFT.Max(), st.Ran, r.Total.Ran)
		}
	}
	if tokens != r.Total.Tokens || r.Total.TTFT.Count() != r.Streams[0].TTFT.Count()+r.Streams[1].TTFT.Count() {
		t.Errorf("total %d tokens and %d first tokens are not the streams' sums", r.Total.Tokens, r.Total.TTFT.Count())
	}
}

// A decode server without device or helpers still serves; one whose
// device cannot be opened says which device and what to give instead.
func TestDecodeDeviceAndHelperOptional(t *testing.T) {
	d := DefaultDecode()
	d.Device, d.Helper, d.Tokens, d.Prefill = "", 0, 2, 0
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if r, err := d.Run(ctx); err != nil || r.Total.Tokens == 0 {
		t.Errorf("no device, no helper: %v, %d tokens", err, r.Total.Tokens)
	}
	d.Device, d.Helper = "/nonexistent/accel0", DefaultDecodeHelper
	_, err := d.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "open its device /nonexistent/accel0") || !strings.Contains(err.Error(), DefaultDecodeDevice) {
		t.Errorf("missing device: %v", err)
	}
}

func TestDecodeValidates(t *testing.T) {
	for _, tc := range []struct {
		change func(*Decode)
		want   string
	}{
		{func(d *Decode) { d.Comm = "much-too-long-name" }, "comm"},
		{func(d *Decode) { d.HelperComm = "" }, "helper_comm"},
		{func(d *Decode) { d.HelperComm, d.Helper = "", 0 }, ""},
		{func(d *Decode) { d.Streams = 0 }, "streams 0"},
		{func(d *Decode) { d.Streams = MaxThreads }, "with helpers"},
		{func(d *Decode) { d.Tokens = 0 }, "tokens 0"},
		{func(d *Decode) { d.DeviceTime = 0 }, "device_time 0s"},
		{func(d *Decode) { d.Host = 2 * time.Second }, "host 2s"},
	} {
		d := DefaultDecode()
		tc.change(&d)
		err := d.validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", d, err, tc.want)
		}
	}
}

// The bench's report has each decode server's figures per variant, with
// ratios to the baseline's and to the unloaded, in JSON and in the text.
func TestReportDecode(t *testing.T) {
	const ms = time.Millisecond
	stats := func(tokens uint64, itl ...time.Duration) DecodeStats {
		return DecodeStats{Tokens: tokens, Requests: 1, TTFT: *hist(10 * ms), ITL: *hist(itl...), Ran: time.Second}
	}
	result := func(s DecodeStats) []DecodeResult {
		return []DecodeResult{{Comm: "infer-decode", Total: s, Streams: []DecodeStats{s}}}
	}
	runs := testRuns()
	runs[0].Decode, runs[0].Rounds = result(stats(100, 8*ms, 8*ms)), 1
	runs[1].Decode, runs[1].Rounds = result(stats(300, 2*ms, 4*ms)), 1
	rep := NewReport(testStart, runs, nil, ScxSimple, nil)
	rep.SetUnloaded(result(stats(400, 2*ms, 2*ms)))
	d := rep.Runs[1].Summary.Decode
	if len(d) != 1 || d[0].TokensPerSecond != 300 || d[0].TokensVsBaseline != 3 || d[0].TokensVsUnloaded != 0.75 ||
		d[0].ITL.P99 != 4*ms || d[0].ITLP99VsUnloaded != 2 || d[0].ITLP99VsBaseline != 0.5 {
		t.Errorf("hotlane's decode summary %+v", d)
	}
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"unloaded infer-decode 400.0 - - 1 10.0ms 10.0ms 2.00ms 2.00ms 2.00ms -",
		"scx_simple infer-decode 100.0 1.000 0.250 1 10.0ms 10.0ms 8.00ms 8.00ms 8.00ms 4.000",
		"hotlane infer-decode 300.0 3.000 0.750 1 10.0ms 10.0ms 2.03ms 4.00ms 4.00ms 2.000",
	} {
		if !strings.Contains(squashed(out), want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
}

func squashed(s string) string { return strings.Join(strings.Fields(s), " ") }
