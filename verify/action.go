package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultActionsPerSecond is how many violations a second start the
// --on-violation command unless told otherwise: a command is heavier than
// a line (a perf snapshot, a page), and one a second is enough to catch a
// pattern.
const DefaultActionsPerSecond = 1

// ViolationEnvPrefix begins the names of the environment variables that
// carry a violation's figures to an --on-violation command.
const ViolationEnvPrefix = "HOTLANE_VIOLATION_"

// ViolationEnv is v's figures as NAME=VALUE settings for a command's
// environment, each name ViolationEnvPrefix and:
//
//	PID, TGID, COMM, CLASS   the task that waited (PID is the thread's)
//	CPU                      the CPU that ended the wait
//	AT_NS                    when the felt wait ended (CLOCK_MONOTONIC)
//	LATENCY_NS               the figure the bound checked: the wait in VIEW
//	VIEW                     felt or wait
//	BOUND_NS                 the class's threshold, the bound's tightest limit
//	WAIT_NS, FELT_NS         the wait from the wake-up, and as felt
//	TIMER_DELIVERY_NS        a timer's expiry to the wake-up (timer wake-ups)
//	PREV_PID, PREV_COMM      what ran on the CPU just before the switch-in
//	CAUSE                    the explanation's largest part (rt_dl, irq, ...)
//	PARTS                    every part, KIND=NS separated by spaces
//	RAN                      the tasks that ran meanwhile: COMM[PID] KIND/CLASS NS, comma-separated
//	FROM_CPU                 where the task last ran, if it migrated
//	EXPLANATION              the explanation as the violation line prints it
//
// Figures the violation does not have (no explanation, no timer) are
// left out rather than set empty.
func ViolationEnv(v Violation) []string {
	env := []string{}
	set := func(name string, value any) {
		env = append(env, ViolationEnvPrefix+name+"="+fmt.Sprint(value))
	}
	set("PID", v.PID)
	set("TGID", v.TGID)
	set("COMM", v.Comm)
	set("CLASS", v.Class)
	set("CPU", v.CPU)
	set("AT_NS", int64(v.At))
	set("LATENCY_NS", int64(v.Measured()))
	set("VIEW", string(orFelt(v.View)))
	if v.Bound > 0 {
		set("BOUND_NS", int64(v.Bound))
	}
	set("WAIT_NS", int64(v.Latency))
	set("FELT_NS", int64(v.Felt))
	if v.Caused {
		set("TIMER_DELIVERY_NS", int64(v.TimerDelivery))
	}
	set("PREV_PID", v.PrevPID)
	set("PREV_COMM", v.PrevComm)
	if e := v.Why; e != nil {
		set("CAUSE", e.Cause)
		parts := make([]string, len(e.Parts))
		for i, p := range e.Parts {
			parts[i] = p.Kind + "=" + strconv.FormatInt(int64(p.Time), 10)
		}
		set("PARTS", strings.Join(parts, " "))
		ran := make([]string, len(e.Tasks))
		for i, t := range e.Tasks {
			ran[i] = fmt.Sprintf("%s[%d] %s %d", t.Comm, t.PID, t.kindAndClass(), int64(t.Time))
		}
		set("RAN", strings.Join(ran, ", "))
		if e.Migrated {
			set("FROM_CPU", e.FromCPU)
		}
		set("EXPLANATION", e.String())
	}
	return env
}

func orFelt(v View) View {
	if v == "" {
		return ViewFelt
	}
	return v
}

// ActionCounts say what became of the violations an --on-violation
// command was to run for.
type ActionCounts struct {
	// Started counts the commands started; Failed those that could not
	// start or exited non-zero, FirstError says why the first did.
	Started    uint64 `json:"started"`
	Failed     uint64 `json:"failed"`
	FirstError string `json:"first_error,omitempty"`
	// NotStarted counts violations over the rate limit, or that came
	// while the command still ran for an earlier one.
	NotStarted uint64 `json:"not_started"`
}

// actions starts a command for violations, one at a time, at most a
// limit a second.
type actions struct {
	ctx   context.Context
	argv  []string
	out   io.Writer
	limit perSecond
	busy  chan struct{}
	wg    sync.WaitGroup

	mu     sync.Mutex
	counts ActionCounts
}

// newActions runs argv for violations, writing its output to out (nil:
// standard error), killing it when ctx ends.
func newActions(ctx context.Context, argv []string, rate int, out io.Writer) *actions {
	if out == nil {
		out = os.Stderr
	}
	if rate <= 0 {
		rate = DefaultActionsPerSecond
	}
	return &actions{ctx: ctx, argv: argv, out: out, limit: perSecond{max: rate}, busy: make(chan struct{}, 1)}
}

// run starts the command for v unless the rate limit or the command still
// running for an earlier violation holds it back. It does not wait: the
// violation stream must be read on.
func (a *actions) run(v Violation) {
	select {
	case a.busy <- struct{}{}:
	default:
		a.count(func(c *ActionCounts) { c.NotStarted++ })
		return
	}
	if ok, _ := a.limit.admit(v.At); !ok {
		<-a.busy
		a.count(func(c *ActionCounts) { c.NotStarted++ })
		return
	}
	cmd := exec.CommandContext(a.ctx, a.argv[0], a.argv[1:]...)
	cmd.Env = append(os.Environ(), ViolationEnv(v)...)
	cmd.Stdout, cmd.Stderr = a.out, a.out
	// A child that keeps the output open must not hold verify up.
	cmd.WaitDelay = time.Second
	a.count(func(c *ActionCounts) { c.Started++ })
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer func() { <-a.busy }()
		if err := cmd.Run(); err != nil {
			a.count(func(c *ActionCounts) {
				c.Failed++
				if c.FirstError == "" {
					c.FirstError = actionError(a.argv, err)
				}
			})
		}
	}()
}

func actionError(argv []string, err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return fmt.Sprintf("%s: %s", argv[0], exit.ProcessState)
	}
	return err.Error()
}

func (a *actions) count(fn func(*ActionCounts)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	fn(&a.counts)
}

// wait waits for the command still running, if one is, and returns the
// counts.
func (a *actions) wait() ActionCounts {
	a.wg.Wait()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.counts
}
