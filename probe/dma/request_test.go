package dma

import (
	"strings"
	"testing"
	"time"
)

func TestRequestOptions(t *testing.T) {
	events := []string{"dma_map_phys", "dma_unmap_phys"}
	o := Request{Hooks: HooksFentry, Latency: LatencyOff, Events: events}.Options()
	if o.Hooks != HooksFentry || o.Latency != LatencyOff || strings.Join(o.Events, ",") != "dma_map_phys,dma_unmap_phys" {
		t.Errorf("Options() = %+v, want the hooks, latency and events asked for", o)
	}
}

func TestRequestRunOptions(t *testing.T) {
	var progress, log strings.Builder
	for _, tt := range []struct {
		name     string
		duration time.Duration
		probe    *Probe
		want     string
	}{
		{"until stopped, no latency", 0, &Probe{hooks: []string{"tp_btf/dma_map_phys", "tp_btf/dma_unmap_phys"}},
			"hotlane probe dma: attached tp_btf/dma_map_phys, tp_btf/dma_unmap_phys (map latency: not measured); Ctrl-C to stop\n"},
		{"for a while, with latency", 10 * time.Second, &Probe{hooks: []string{"fexit/dma_map_page_attrs"}, latHooks: []string{"fentry/dma_map_page_attrs"}},
			"hotlane probe dma: attached fexit/dma_map_page_attrs (map latency: fentry/dma_map_page_attrs); stopping after 10s or Ctrl-C\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			log.Reset()
			ro := Request{Duration: tt.duration, Interval: time.Second, Progress: &progress, Log: &log}.RunOptions()
			if ro.Duration != tt.duration || ro.Interval != time.Second || ro.Progress != &progress {
				t.Errorf("RunOptions() = %+v, want the duration, interval and progress asked for", ro)
			}
			ro.Started(tt.probe)
			if log.String() != tt.want {
				t.Errorf("started line %q, want %q", log.String(), tt.want)
			}
		})
	}
	if ro := (Request{}).RunOptions(); ro.Started != nil || ro.Progress != nil {
		t.Error("without a log: the start or progress still said")
	}
}
