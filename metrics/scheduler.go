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
	mu      sync.Mutex
	stats   func() (sched.Stats, error)
	last    *sched.Stats
	loads   uint64
	exits   map[string]uint64
	object  string
	enabled bool

	perClass, events, enabledDesc, loadsDesc, exitsDesc *prometheus.Desc
}

// NewSchedulerCollector returns a collector with no scheduler yet.
func NewSchedulerCollector() *SchedulerCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "scheduler", name), help, labels, nil)
	}
	return &SchedulerCollector{
		exits:       map[string]uint64{},
		perClass:    d("tasks_total", "Per class: tasks enqueued, started running (dispatched) and woken straight onto an idle CPU (direct_idle), since this load of the scheduler.", "class", "event"),
		events:      d("decisions_total", "The policy's decisions since this load: preempt_kicks, idle_kicks, guard_turns, kthread_direct, lane_kept, fair_resumed, cpu_released, classify_uncached.", "decision"),
		enabledDesc: d("enabled", "1 while hotlane's scheduler is loaded and enabled, with its kfunc generation.", "object"),
		loadsDesc:   d("loads_total", "Times the scheduler was loaded and enabled (more than one after --restart-on-error restarts)."),
		exitsDesc:   d("exits_total", "Loads that ended, by the kernel's exit kind (SCX_EXIT_UNREG, SCX_EXIT_ERROR, SCX_EXIT_ERROR_STALL, …).", "kind"),
	}
}

// Started makes the collector read s (sched.RunOptions.Started).
func (c *SchedulerCollector) Started(s *sched.Scheduler) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats, c.last, c.object, c.enabled = s.Stats, nil, s.Object, true
	c.loads++
}

// Stopping reads s a last time and notes how it ended
// (sched.RunOptions.Stopping): an unload with no exit recorded yet
// (Ctrl-C, SIGTERM) counts as SCX_EXIT_UNREG, which the kernel records
// for it a moment later.
func (c *SchedulerCollector) Stopping(s *sched.Scheduler) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, err := s.Stats(); err == nil {
		c.last = &st
	}
	kind := "SCX_EXIT_UNREG"
	if info, done, err := s.Exited(); err == nil && done {
		kind = info.KindName
	}
	c.exits[kind]++
	c.stats, c.enabled = nil, false
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
	defer c.mu.Unlock()
	enabled := 0.0
	if c.enabled {
		enabled = 1
	}
	ch <- prometheus.MustNewConstMetric(c.enabledDesc, prometheus.GaugeValue, enabled, c.object)
	ch <- prometheus.MustNewConstMetric(c.loadsDesc, prometheus.CounterValue, float64(c.loads))
	for kind, n := range c.exits {
		ch <- prometheus.MustNewConstMetric(c.exitsDesc, prometheus.CounterValue, float64(n), kind)
	}
	if c.stats != nil {
		if st, err := c.stats(); err != nil {
			ch <- prometheus.NewInvalidMetric(c.events, err)
		} else {
			c.last = &st
		}
	}
	if c.last == nil {
		return
	}
	st := c.last
	for _, cl := range st.Classes {
		for event, v := range map[string]uint64{"enqueued": cl.Enqueued, "dispatched": cl.Dispatched, "direct_idle": cl.DirectIdle} {
			ch <- prometheus.MustNewConstMetric(c.perClass, prometheus.CounterValue, float64(v), cl.Class, event)
		}
	}
	for decision, v := range map[string]uint64{
		"preempt_kicks": st.PreemptKicks, "idle_kicks": st.IdleKicks, "guard_turns": st.GuardDispatches,
		"kthread_direct": st.KthreadDirect, "lane_kept": st.LaneKept, "fair_resumed": st.FairResumed,
		"cpu_released": st.CPUReleased, "classify_uncached": st.ClassifyUncached,
	} {
		ch <- prometheus.MustNewConstMetric(c.events, prometheus.CounterValue, float64(v), decision)
	}
}
