package workloads

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is an outside program the bench started in its own process
// group (exec.Cmd.SysProcAttr.Setpgid), so that stopping it also stops
// whatever it started.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result, once done is closed
}

// startProcess starts argv in its own process group, in dir unless
// empty, with the last keep bytes of its output (0: tailBytes, enough for
// error messages) kept in the returned buffer.
func startProcess(dir string, keep int, argv ...string) (*process, *tailBuffer, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	out := &tailBuffer{limit: keep}
	if keep <= 0 {
		out.limit = tailBytes
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, out, nil
}

// runUntilDone starts argv in dir, keeping keep bytes of its output as
// startProcess does, and waits until ctx is done; the program exiting
// first is an error. The caller stops the program (stop) and, whatever
// happens, kills what is left (kill).
func runUntilDone(ctx context.Context, dir, name string, keep int, argv []string) (*process, *tailBuffer, error) {
	p, out, err := startProcess(dir, keep, argv...)
	if err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", name, err)
	}
	select {
	case <-ctx.Done():
		return p, out, nil
	case <-p.done:
		return p, out, fmt.Errorf("%s exited during the run: %s", name, out.last())
	}
}

// startGrace is how long an outside program's workers run, at least,
// after a run that ended before they were started.
const startGrace = 500 * time.Millisecond

// awaitStart waits, after the run ended, until started says the program
// has started its workers, for 10 s at most, and when they had not started
// by the end of the run gives them startGrace more: a program stopped
// before it started writes no results (stress-ng dies of the signal,
// rt-app writes empty logs), and one stopped just after has measured
// nothing. The program exiting meanwhile is an error.
func (p *process) awaitStart(out *tailBuffer, name string, started func() bool) error {
	late := !started()
	for deadline := time.Now().Add(10 * time.Second); !started() && time.Now().Before(deadline); {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited during the run: %s", name, out.last())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if late {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited during the run: %s", name, out.last())
		case <-time.After(startGrace):
		}
	}
	return nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGINT to the process group and waits up to grace for the
// process to exit, then kills the group with SIGKILL. Anything left in the
// group is killed either way. The error says when SIGINT was not enough.
func (p *process) stop(grace time.Duration) error {
	pgid := p.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGINT)
	var err error
	select {
	case <-p.done:
	case <-time.After(grace):
		err = &hungError{grace: grace, threads: threadStates(pgid)}
	}
	p.kill()
	return err
}

// hungError is a program still running grace after SIGINT, with its
// threads as /proc showed them just before the SIGKILL.
type hungError struct {
	grace   time.Duration
	threads []threadState
}

func (e *hungError) Error() string {
	said := make([]string, len(e.threads))
	for i, t := range e.threads {
		said[i] = t.String()
	}
	return fmt.Sprintf("did not exit within %s of SIGINT; killed; its threads then: %s", e.grace, strings.Join(said, ", "))
}

// waitsOnItself says that every thread left was asleep: nothing was
// runnable and waiting for a CPU, so the program was waiting on itself
// (a wake-up it lost), which no scheduler can mend. A runnable thread
// after the whole grace is a starved thread, which a scheduler can.
func (e *hungError) waitsOnItself() bool {
	for _, t := range e.threads {
		if t.State != "S" {
			return false
		}
	}
	return len(e.threads) > 0
}

// threadState is one thread of a process as /proc shows it.
type threadState struct {
	Comm  string
	State string // stat's state letter: R runnable, S asleep, D in I/O, ...
	Wchan string // the kernel function it sleeps in
}

func (t threadState) String() string {
	if t.Wchan == "" || t.Wchan == "0" {
		return t.Comm + " " + t.State
	}
	return t.Comm + " " + t.State + " in " + t.Wchan
}

// threadStates reads the threads of process pid from /proc; a thread that
// exits meanwhile is left out.
func threadStates(pid int) []threadState {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tids, _ := os.ReadDir(dir)
	var out []threadState
	for _, tid := range tids {
		stat, err := os.ReadFile(filepath.Join(dir, tid.Name(), "stat"))
		if err != nil {
			continue
		}
		comm, fields, ok := parseStat(string(stat))
		if !ok {
			continue
		}
		t := threadState{Comm: comm, State: fields[0]}
		if w, err := os.ReadFile(filepath.Join(dir, tid.Name(), "wchan")); err == nil {
			t.Wchan = strings.TrimSpace(string(w))
		}
		out = append(out, t)
	}
	return out
}

// parseStat splits a /proc/PID/stat (or task/TID/stat) line, "ID (COMM)
// STATE ...", into the comm and the fields after it, the state first.
// COMM may hold spaces and parentheses.
func parseStat(stat string) (comm string, fields []string, ok bool) {
	open, shut := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || shut < open {
		return "", nil, false
	}
	fields = strings.Fields(stat[shut+1:])
	return stat[open+1 : shut], fields, len(fields) > 0
}

// kill kills the process group and waits for the process.
func (p *process) kill() {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// tailBuffer keeps the last few KiB a process wrote, for error messages.
type tailBuffer struct {
	mu    sync.Mutex
	buf   []byte
	limit int
}

const tailBytes = 4096

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.limit {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.limit:]...)
	}
	return len(b), nil
}

// contains reports whether the text still held contains s.
func (t *tailBuffer) contains(s string) bool { return t.count(s) > 0 }

// count is how many times the text still held contains s.
func (t *tailBuffer) count(s string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Count(string(t.buf), s)
}

// String returns the text still held.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// last returns the last non-empty line written, or "(no output)".
func (t *tailBuffer) last() string { return lastLine(t.String()) }

// lastLine returns the last non-empty line of text, or "(no output)".
func lastLine(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return "(no output)"
}
