package sched

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// taskRecord mirrors struct hl_task in sched_ctx.bpf.h, which begins
// with struct hl_task_class of classify.bpf.h.
type taskRecord struct {
	Comm     [2]uint64
	PComm    [2]uint64
	CgroupID uint64
	Policy   uint32
	ClassID  uint32
	Valid    uint32
	Devices  uint32 // device sets in use when classified: bit s thread, 8+s process

	Vruntime     uint64
	Lag          int64
	Burst        uint64
	Ran          uint64
	TaskCgroupID uint64
	Frame        uint32
	Yielded      uint32
	SleptClock   uint64

	QuotaKey    uint64
	QuotaGen    uint32
	QuotaNPools uint32
	QuotaPools  [4]uint64
}

// ErrTaskNotClassified means the scheduler has not seen the task yet.
var ErrTaskNotClassified = errors.New("task not classified yet")

// TaskClass returns the class the scheduler last put the thread tid in.
// Task-local storage is looked up by a pidfd of the thread.
func (s *Scheduler) TaskClass(tid int) (string, error) {
	// PIDFD_THREAD (O_EXCL): a pidfd for this thread, not its process.
	fd, err := unix.PidfdOpen(tid, unix.O_EXCL)
	if err != nil {
		return "", fmt.Errorf("pidfd of %d: %w", tid, err)
	}
	defer unix.Close(fd)
	var rec taskRecord
	if err := s.objs.Tasks.Lookup(int32(fd), &rec); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return "", fmt.Errorf("thread %d: %w", tid, ErrTaskNotClassified)
		}
		return "", fmt.Errorf("thread %d: %w", tid, err)
	}
	if rec.Valid == 0 {
		return "", fmt.Errorf("thread %d: %w", tid, ErrTaskNotClassified)
	}
	if int(rec.ClassID) >= len(s.classes) {
		return "", fmt.Errorf("thread %d: class id %d out of range", tid, rec.ClassID)
	}
	return s.classes[rec.ClassID], nil
}
