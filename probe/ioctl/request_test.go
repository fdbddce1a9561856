package ioctl

import (
	"strings"
	"testing"
	"time"

	"github.com/hotlane/hotlane/internal/errtest"
)

func TestRequestValidate(t *testing.T) {
	if err := (Request{}).Validate(); err != nil {
		t.Errorf("Validate() of no arguments = %v", err)
	}
	if err := (Request{Args: []string{"/dev/nvidia0"}}).Validate(); !errtest.Says(err, `unexpected argument "/dev/nvidia0"`) {
		t.Errorf("Validate() of an argument = %v, want it named", err)
	}
}

func TestRequestConfig(t *testing.T) {
	limits := Limits{Commands: 4, Devices: 5, Processes: 6}
	req := Request{PID: 7, Comm: "python3", Dev: "195:0", StreamSlow: true, Slow: time.Millisecond,
		Hook: "fentry", RingBufferBytes: 1 << 20, Wakeups: true, MeasureCost: true, Limits: limits}
	want := Config{Hook: HookFentry, PID: 7, Comm: "python3", Dev: "195:0", StreamSlow: true, Slow: time.Millisecond,
		RingBufferBytes: 1 << 20, Wakeups: true, MeasureCost: true, Limits: limits}
	if got := req.Config(); got != want {
		t.Errorf("Config() = %+v, want %+v", got, want)
	}
}

func TestRequestOptions(t *testing.T) {
	var log strings.Builder
	for _, tt := range []struct {
		name           string
		req            Request
		duration, each time.Duration // the run's, and the progress lines'
	}{
		{"a tenth of the run apart", Request{Duration: 30 * time.Second, Log: &log}, 30 * time.Second, 3 * time.Second},
		{"at least a second apart", Request{Duration: 5 * time.Second, Log: &log}, 5 * time.Second, time.Second},
		{"until stopped: every 5s", Request{Log: &log}, 0, 5 * time.Second},
		{"served without a duration given: until stopped", Request{Duration: 10 * time.Second, Served: true, Log: &log}, 0, 5 * time.Second},
		{"served with a duration given keeps it", Request{Duration: 20 * time.Second, DurationGiven: true, Served: true, Log: &log}, 20 * time.Second, 2 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.req.Options()
			if o.Duration != tt.duration || o.ProgressInterval != tt.each || o.Progress != &log || o.OnSlow == nil || o.Attached == nil {
				t.Errorf("run %s, progress every %s to %v; want %s, every %s, with the slow calls and the attachment said",
					o.Duration, o.ProgressInterval, o.Progress, tt.duration, tt.each)
			}
		})
	}
	o := Request{Duration: time.Second}.Options()
	if o.Progress != nil || o.OnSlow != nil || o.Attached != nil {
		t.Error("without a log: progress, slow calls or the attachment still said")
	}
	o = Request{Log: &log}.Options()
	o.OnSlow(SlowCall{Comm: "python3", Latency: 2 * time.Millisecond})
	if !strings.HasPrefix(log.String(), "slow: ") || !strings.Contains(log.String(), "python3") {
		t.Errorf("a slow call said as %q, want a line starting slow: that names the thread", log.String())
	}
}
