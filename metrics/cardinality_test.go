package metrics

import (
	"strings"
	"testing"

	"github.com/hotlane/hotlane/probe/ioctl"
	"github.com/hotlane/hotlane/verify"
)

// 20,000 made-up commands on /dev/null export as the device's 32 busiest
// commands and one "other" series, not 20,000 error series and 60,000
// bucket series: the scrape stays small however the commands are made.
func TestIoctlLabelsCapped(t *testing.T) {
	null := ioctl.Device{Type: ioctl.TypeChar, Major: 1, Minor: 3, Path: "/dev/null"}
	r := &ioctl.Result{}
	for i := range 20000 {
		h := &verify.Histogram{}
		h.Record(uint64(1000 + i%5000))
		r.Commands = append(r.Commands, ioctl.Stats{Device: null, Command: ioctl.DecodeCommand(0x40000000 | uint32(i)), Calls: 1, Errors: 1, Hist: h})
	}
	limits := ioctl.DefaultLimits()
	r.Limit(limits)
	c := NewIoctlCollector()
	c.Final(r)
	got := gather(t, c)
	series := 0
	for k := range got {
		if strings.HasPrefix(k, "hotlane_ioctl_errors_total{") {
			series++
		}
	}
	if series != limits.Commands+1 {
		t.Errorf("%d error series, want %d (the busiest commands and other)", series, limits.Commands+1)
	}
	want(t, got, `hotlane_ioctl_errors_total{command="other",device="/dev/null"}`, float64(20000-limits.Commands))
	want(t, got, `hotlane_probe_lost_total{probe="ioctl",reason="calls counted under command \"other\": commands beyond the 32 busiest of their device (--max-commands)"}`, float64(20000-limits.Commands))
}
