package workloads

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The request server serves requests: every request served has a
// wake-up and a request latency, no request ends sooner than its sleep,
// and no wake-up is longer than its request.
func TestRequestServerServes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs threads for a second")
	}
	s := DefaultRequestServer(2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r, err := s.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("served %d (%.0f/s), unfinished %d; wake-up p99 %d ns, request p99 %d ns", r.Served, r.PerSecond(), r.Unfinished,
		r.WakeUp.QuantileUpper(0.99), r.Request.QuantileUpper(0.99))
	if r.Served == 0 || r.WakeUp.Count() != r.Served || r.Request.Count() != r.Served || r.Ran < 900*time.Millisecond {
		t.Fatalf("served %d, wake-ups %d, requests %d over %s", r.Served, r.WakeUp.Count(), r.Request.Count(), r.Ran)
	}
	if r.Request.Min() < uint64(s.Sleep) || r.WakeUp.Max() > r.Request.Max() {
		t.Errorf("request min %d ns below the sleep %s, or wake-up max %d above request max %d", r.Request.Min(), s.Sleep, r.WakeUp.Max(), r.Request.Max())
	}
	// Arrivals are at most one per interval per message thread.
	if arrived := r.Served + r.Unfinished; float64(arrived) > s.RateHz*r.Ran.Seconds()+float64(s.Messengers) {
		t.Errorf("%d requests in %s at %g/s", arrived, r.Ran, s.RateHz)
	}
}

// A server asked for more than its workers can do falls behind: it
// serves no more than its one worker's CPU time allows, and the backlog
// shows as requests unfinished.
func TestRequestServerFallsBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("runs threads for a second")
	}
	s := RequestServer{Comm: "slow", Messengers: 1, Workers: 1, RateHz: 1000, Compute: 10 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r, err := s.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if most := uint64(r.Ran/s.Compute) + 1; r.Served == 0 || r.Served > most || r.Unfinished == 0 {
		t.Errorf("served %d (at most %d) with %d unfinished, want some served and a backlog", r.Served, most, r.Unfinished)
	}
}

func TestRequestServerValidates(t *testing.T) {
	for _, tc := range []struct {
		s    RequestServer
		want string
	}{
		{RequestServer{Comm: "much-too-long", Messengers: 1, Workers: 1, RateHz: 1}, "1..11 bytes"},
		{RequestServer{Comm: "rpc", Workers: 1, RateHz: 1}, "at least 1 each"},
		{RequestServer{Comm: "rpc", Messengers: 1, Workers: 1}, "rate_hz 0"},
		{RequestServer{Comm: "rpc", Messengers: 1, Workers: 1, RateHz: 1, Sleep: 2 * time.Second}, "must be 0..1s"},
	} {
		if err := tc.s.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.s, err, tc.want)
		}
	}
}
