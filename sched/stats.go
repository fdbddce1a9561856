package sched

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/report"
)

// statsRecord mirrors struct hl_stats in bpf/include/sched_ctx.bpf.h.
type statsRecord struct {
	Enqueued        [policy.MaxClasses]uint64
	Dispatched      [policy.MaxClasses]uint64
	DirectIdle      [policy.MaxClasses]uint64
	PreemptKicks    uint64
	IdleKicks       uint64
	GuardDispatches uint64
	KthreadDirect   uint64
	LaneKept        uint64
	FairResumed     uint64
	CPUReleased     uint64
	FairPreempts    uint64
	FairSteals      uint64
	LaneQueued      uint64
	LaneSteals      uint64
	PinnedLocal     uint64
	PinnedUnserved  uint64
	FairKept        uint64
	FairAffine      uint64
	FairPulls       uint64
	Throttled       uint64
}

// ClassStats are one class's counters.
type ClassStats struct {
	Class      string `json:"class"`
	Enqueued   uint64 `json:"enqueued"`
	Dispatched uint64 `json:"dispatched"`
	DirectIdle uint64 `json:"direct_idle"`
}

// Stats are the scheduler's counters, summed over CPUs: totals since load,
// or the change over an interval (see Sub).
type Stats struct {
	// Header: started_at is when the scheduler was enabled, elapsed_ns
	// the time since then; a JSON line's counts are the interval's.
	report.Header
	Time         time.Time    `json:"time"`
	Classes      []ClassStats `json:"classes"`
	PreemptKicks uint64       `json:"preempt_kicks"`
	IdleKicks    uint64       `json:"idle_kicks"`
	// GuardDispatches counts starvation guard turns started: each gives
	// one CPU's fair queue half the starvation bound, however many tasks
	// that serves. (The JSON name predates turns.)
	GuardDispatches uint64 `json:"starvation_guard_dispatches"`
	KthreadDirect   uint64 `json:"kthread_direct"`
	// LaneKept counts lane tasks whose slice ran out while no other lane
	// task waited: they kept their CPU instead of queueing behind fair work.
	LaneKept uint64 `json:"lane_kept"`
	// FairResumed counts fair tasks that, preempted by the lane or a
	// kthread, went back to their CPU with the rest of their slice.
	FairResumed uint64 `json:"fair_resumed"`
	// CPUReleased counts CPUs taken by RT or DL work whose local queue
	// was handed back to the scheduler.
	CPUReleased uint64 `json:"cpu_released"`
	// FairPreempts counts fair wake-ups whose earlier deadline preempted
	// the fair task running on their CPU.
	FairPreempts uint64 `json:"fair_preempts"`
	// FairSteals counts fair tasks an idle CPU took from another LLC.
	FairSteals uint64 `json:"fair_steals"`
	// FairKept counts fair tasks whose slice ran out and that kept their
	// CPU, their deadline still the earliest for it.
	FairKept uint64 `json:"fair_kept"`
	// FairAffine counts fair tasks woken synchronously by a fair task
	// that went to the waker's CPU to run next (wake-affine).
	FairAffine uint64 `json:"fair_affine"`
	// FairPulls counts fair wake-ups with no idle CPU whose waker ran in
	// another LLC a fair task they would preempt: the wakee was queued
	// in the waker's LLC and the waker's CPU preempted, as EEVDF's
	// wake-affine pulls a wakee to its waker.
	FairPulls uint64 `json:"fair_pulls"`
	// Throttled counts tasks held until the next period because their
	// cgroup, or one above it, had used its cpu.max quota.
	Throttled uint64 `json:"throttled"`
	// LaneQueued counts lane tasks that found no CPU to take (every one
	// looked at ran the lane) and waited in their LLC's lane queue.
	LaneQueued uint64 `json:"lane_queued"`
	// LaneSteals counts lane tasks a CPU took from another LLC's queue.
	LaneSteals uint64 `json:"lane_steals"`
	// PinnedLocal counts tasks that could not leave their CPU (migration
	// disabled) queued on it.
	PinnedLocal uint64 `json:"pinned_local"`
	// PinnedUnserved counts dispatches that moved nothing while tasks
	// waited in the CPU's own queue: a CPU left idle beside its work.
	PinnedUnserved uint64 `json:"pinned_unserved"`
	// ClassifyUncached counts classifications that could not be cached
	// (task storage unavailable): those tasks were classified afresh,
	// correctly but at a higher cost.
	ClassifyUncached uint64 `json:"classify_uncached"`
	// DeviceUsesLost counts device opens and ioctls that a device matcher
	// should have noted but could not (task storage unavailable): the
	// task joins the device's class only at a later use.
	DeviceUsesLost uint64 `json:"device_uses_lost"`
	// QuotasUnenforced counts cgroup cpu.max quotas the scheduler could
	// not keep (its table of MaxQuotas is full): those cgroups run unlimited.
	QuotasUnenforced uint64 `json:"quotas_unenforced"`
}

// Stats reads the counters.
func (s *Scheduler) Stats() (Stats, error) {
	var perCPU []statsRecord
	if err := s.objs.Stats.Lookup(uint32(0), &perCPU); err != nil {
		return Stats{}, fmt.Errorf("read scheduler stats: %w", err)
	}
	var sum statsRecord
	for _, r := range perCPU {
		for i := range sum.Enqueued {
			sum.Enqueued[i] += r.Enqueued[i]
			sum.Dispatched[i] += r.Dispatched[i]
			sum.DirectIdle[i] += r.DirectIdle[i]
		}
		sum.PreemptKicks += r.PreemptKicks
		sum.IdleKicks += r.IdleKicks
		sum.GuardDispatches += r.GuardDispatches
		sum.KthreadDirect += r.KthreadDirect
		sum.LaneKept += r.LaneKept
		sum.FairResumed += r.FairResumed
		sum.CPUReleased += r.CPUReleased
		sum.FairPreempts += r.FairPreempts
		sum.FairSteals += r.FairSteals
		sum.FairKept += r.FairKept
		sum.FairAffine += r.FairAffine
		sum.FairPulls += r.FairPulls
		sum.Throttled += r.Throttled
		sum.LaneQueued += r.LaneQueued
		sum.LaneSteals += r.LaneSteals
		sum.PinnedLocal += r.PinnedLocal
		sum.PinnedUnserved += r.PinnedUnserved
	}
	now := time.Now()
	st := sum.stats(s.classes, now)
	st.Header = s.header
	st.Elapsed = now.Sub(s.header.StartedAt)
	if err := s.objs.ClassifyStorageFailures.Get(&st.ClassifyUncached); err != nil {
		return Stats{}, fmt.Errorf("read classifier failures: %w", err)
	}
	if err := s.objs.DevUseFailures.Get(&st.DeviceUsesLost); err != nil {
		return Stats{}, fmt.Errorf("read lost device uses: %w", err)
	}
	if err := s.objs.QuotaFailures.Get(&st.QuotasUnenforced); err != nil {
		return Stats{}, fmt.Errorf("read unenforced quotas: %w", err)
	}
	return st, nil
}

func (r statsRecord) stats(classes []string, now time.Time) Stats {
	st := Stats{
		Time:            now,
		PreemptKicks:    r.PreemptKicks,
		IdleKicks:       r.IdleKicks,
		GuardDispatches: r.GuardDispatches,
		KthreadDirect:   r.KthreadDirect,
		LaneKept:        r.LaneKept,
		FairResumed:     r.FairResumed,
		CPUReleased:     r.CPUReleased,
		FairPreempts:    r.FairPreempts,
		FairSteals:      r.FairSteals,
		FairKept:        r.FairKept,
		FairAffine:      r.FairAffine,
		FairPulls:       r.FairPulls,
		Throttled:       r.Throttled,
		LaneQueued:      r.LaneQueued,
		LaneSteals:      r.LaneSteals,
		PinnedLocal:     r.PinnedLocal,
		PinnedUnserved:  r.PinnedUnserved,
	}
	for i, name := range classes {
		st.Classes = append(st.Classes, ClassStats{Class: name, Enqueued: r.Enqueued[i], Dispatched: r.Dispatched[i], DirectIdle: r.DirectIdle[i]})
	}
	return st
}

// Sub returns the counts accumulated since prev.
func (s Stats) Sub(prev Stats) Stats {
	d := s
	d.Classes = make([]ClassStats, len(s.Classes))
	for i, c := range s.Classes {
		d.Classes[i] = c
		if i < len(prev.Classes) {
			d.Classes[i].Enqueued -= prev.Classes[i].Enqueued
			d.Classes[i].Dispatched -= prev.Classes[i].Dispatched
			d.Classes[i].DirectIdle -= prev.Classes[i].DirectIdle
		}
	}
	d.PreemptKicks -= prev.PreemptKicks
	d.IdleKicks -= prev.IdleKicks
	d.GuardDispatches -= prev.GuardDispatches
	d.KthreadDirect -= prev.KthreadDirect
	d.LaneKept -= prev.LaneKept
	d.FairResumed -= prev.FairResumed
	d.CPUReleased -= prev.CPUReleased
	d.FairPreempts -= prev.FairPreempts
	d.FairSteals -= prev.FairSteals
	d.FairKept -= prev.FairKept
	d.FairAffine -= prev.FairAffine
	d.FairPulls -= prev.FairPulls
	d.Throttled -= prev.Throttled
	d.LaneQueued -= prev.LaneQueued
	d.LaneSteals -= prev.LaneSteals
	d.PinnedLocal -= prev.PinnedLocal
	d.PinnedUnserved -= prev.PinnedUnserved
	d.ClassifyUncached -= prev.ClassifyUncached
	d.DeviceUsesLost -= prev.DeviceUsesLost
	d.QuotasUnenforced -= prev.QuotasUnenforced
	return d
}

// WriteLine writes the stats as one human-readable line.
func (s Stats) WriteLine(w io.Writer) error {
	var b strings.Builder
	b.WriteString(s.Time.Format("15:04:05"))
	for _, c := range s.Classes {
		fmt.Fprintf(&b, " | %s enq %d run %d idle %d", c.Class, c.Enqueued, c.Dispatched, c.DirectIdle)
	}
	fmt.Fprintf(&b, " | preempt %d idle-kick %d guard %d kthread %d lane-kept %d fair-resumed %d rt-released %d fair-preempt %d fair-steal %d fair-kept %d fair-affine %d fair-pull %d lane-queued %d lane-steal %d pinned-local %d pinned-unserved %d",
		s.PreemptKicks, s.IdleKicks, s.GuardDispatches, s.KthreadDirect, s.LaneKept, s.FairResumed, s.CPUReleased,
		s.FairPreempts, s.FairSteals, s.FairKept, s.FairAffine, s.FairPulls, s.LaneQueued, s.LaneSteals, s.PinnedLocal, s.PinnedUnserved)
	if s.Throttled > 0 {
		fmt.Fprintf(&b, " throttled %d", s.Throttled)
	}
	if s.ClassifyUncached > 0 {
		fmt.Fprintf(&b, " uncached-classify %d", s.ClassifyUncached)
	}
	if s.DeviceUsesLost > 0 {
		fmt.Fprintf(&b, " device-uses-lost %d", s.DeviceUsesLost)
	}
	if s.QuotasUnenforced > 0 {
		fmt.Fprintf(&b, " quotas-unenforced %d", s.QuotasUnenforced)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the stats as one JSON line.
func (s Stats) WriteJSON(w io.Writer) error {
	return json.NewEncoder(w).Encode(s)
}
