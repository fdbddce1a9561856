package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotlane/hotlane/sched"
)

// SchedulerCollector exports the running scheduler's counters and its
// state at each scrape: per class the tasks enqueued, started and woken
// straight onto an idle CPU; the policy's decisions (preemptions, guard
// turns, …); whether it is enabled; and how its earlier loads ended, by
// exit kind, so that an ejection restarted by --restart-on-error still
// shows on a dashboard.
type SchedulerCollector struct {
	src live[sched.Stats]

	mu      sync.Mutex // guards what follows: the loads, not one load's counters
	loads   uint64
	exits   map[string]uint64
	object  string
	enabled bool

	perClass, events, enabledDesc, loadsDesc, exitsDesc *prometheus.Desc
}

// NewSchedulerCollector returns a collector with no scheduler yet.
func NewSchedulerCollector() *SchedulerCollector {
	return &SchedulerCollector{
		exits:       map[string]uint64{},
		perClass:    desc("scheduler", "tasks_total", "Per class: tasks enqueued, started running (dispatched) and woken straight onto an idle CPU (direct_idle), since this load of the scheduler.", "class", "event"),
		events:      desc("scheduler", "decisions_total", "The policy's decisions since this load: preempt_kicks, idle_kicks, guard_turns, kthread_direct, lane_kept, fair_resumed, cpu_released, fair_preempts, fair_steals, fair_kept, fair_affine, fair_pulls, throttled, lane_queued, lane_steals, pinned_local, pinned_unserved, classify_uncached, device_uses_lost, quotas_unenforced.", "decision"),
		enabledDesc: desc("scheduler", "enabled", "1 while hotlane's scheduler is loaded and enabled, with its kfunc generation.", "object"),
		loadsDesc:   desc("scheduler", "loads_total", "Times the scheduler was loaded and enabled (more than one after --restart-on-error restarts)."),
		exitsDesc:   desc("scheduler", "exits_total", "Loads that ended, by the kernel's exit kind (SCX_EXIT_UNREG, SCX_EXIT_ERROR, SCX_EXIT_ERROR_STALL, …).", "kind"),
	}
}

// Started makes the collector read s (sched.RunOptions.Started).
func (c *SchedulerCollector) Started(s *sched.Scheduler) {
	c.src.start(s.Stats)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.object, c.enabled = s.Object, true
	c.loads++
}

// Stopping reads s a last time and notes how it ended
// (sched.RunOptions.Stopping): an unload with no exit recorded yet
// (Ctrl-C, SIGTERM) counts as SCX_EXIT_UNREG, which the kernel records
// for it a moment later.
func (c *SchedulerCollector) Stopping(s *sched.Scheduler) {
	if st, err := s.Stats(); err == nil {
		c.src.final(st)
	} else {
		c.src.stop()
	}
	kind := "SCX_EXIT_UNREG"
	if info, done, err := s.Exited(); err == nil && done {
		kind = info.KindName
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.exits[kind]++
	c.enabled = false
}

// Describe implements prometheus.Collector.
func (c *SchedulerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.perClass, c.events, c.enabledDesc, c.loadsDesc, c.exitsDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *SchedulerCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	enabled := 0.0
	if c.enabled {
		enabled = 1
	}
	gauge(ch, c.enabledDesc, enabled, c.object)
	counter(ch, c.loadsDesc, float64(c.loads))
	for kind, n := range c.exits {
		counter(ch, c.exitsDesc, float64(n), kind)
	}
	c.mu.Unlock()
	st, ok := c.src.get(ch, c.events)
	if !ok {
		return
	}
	for _, cl := range st.Classes {
		for event, v := range map[string]uint64{"enqueued": cl.Enqueued, "dispatched": cl.Dispatched, "direct_idle": cl.DirectIdle} {
			counter(ch, c.perClass, float64(v), cl.Class, event)
		}
	}
	for decision, v := range map[string]uint64{
		"preempt_kicks": st.PreemptKicks, "idle_kicks": st.IdleKicks, "guard_turns": st.GuardDispatches,
		"kthread_direct": st.KthreadDirect, "lane_kept": st.LaneKept, "fair_resumed": st.FairResumed,
		"cpu_released": st.CPUReleased, "fair_preempts": st.FairPreempts, "fair_steals": st.FairSteals, "fair_kept": st.FairKept, "fair_affine": st.FairAffine, "fair_pulls": st.FairPulls, "throttled": st.Throttled,
		"lane_queued": st.LaneQueued, "lane_steals": st.LaneSteals, "pinned_local": st.PinnedLocal, "pinned_unserved": st.PinnedUnserved,
		"classify_uncached": st.ClassifyUncached, "device_uses_lost": st.DeviceUsesLost, "quotas_unenforced": st.QuotasUnenforced,
	} {
		counter(ch, c.events, float64(v), decision)
	}
}
