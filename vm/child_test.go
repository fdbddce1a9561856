package vm

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runnerHelperEnv makes the test binary act as a runner: it starts a
// long sleep as qemu is started, prints the sleep's pid and waits.
const runnerHelperEnv = "HOTLANE_TEST_RUNNER_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(runnerHelperEnv) == "1" {
		cmd := exec.Command("sleep", "300")
		killedWithRunner(cmd)
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println(cmd.Process.Pid)
		cmd.Wait()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A runner killed outright takes its child with it, as a runner killed
// by SIGPIPE takes qemu.
func TestChildDiesWithRunner(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("sleep not found:", err)
	}
	runner := exec.Command(os.Args[0], "-test.run=^$")
	runner.Env = append(os.Environ(), runnerHelperEnv+"=1")
	out, err := runner.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		runner.Process.Kill()
		t.Fatalf("the runner printed no child pid: %v", err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		runner.Process.Kill()
		t.Fatalf("the runner printed %q, not a pid", line)
	}
	if !alive(child) {
		t.Fatalf("child %d is not running before the runner is killed", child)
	}
	runner.Process.Kill()
	runner.Wait()

	deadline := time.Now().Add(10 * time.Second)
	for alive(child) {
		if time.Now().After(deadline) {
			syscall.Kill(child, syscall.SIGKILL)
			t.Fatalf("child %d still runs 10s after its runner was killed", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive says whether pid runs: it exists and is not a zombie waiting
// for whoever inherited it to reap it.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command's closing parenthesis.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
