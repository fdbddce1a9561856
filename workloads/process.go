package workloads

import (
	"fmt"
	"os/exec"
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
// empty, with its output kept in the returned buffer for error messages.
func startProcess(dir string, argv ...string) (*process, *tailBuffer, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	out := &tailBuffer{}
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
		err = fmt.Errorf("did not exit within %s of SIGINT; killed", grace)
	}
	p.kill()
	return err
}

// kill kills the process group and waits for the process.
func (p *process) kill() {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// tailBuffer keeps the last few KiB a process wrote, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailBytes = 4096

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > tailBytes {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(b), nil
}

// contains reports whether the text still held contains s.
func (t *tailBuffer) contains(s string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Contains(string(t.buf), s)
}

// last returns the last non-empty line written, or "(no output)".
func (t *tailBuffer) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return "(no output)"
}
