package vm

import (
	"os/exec"
	"syscall"
)

// killedWithRunner makes the kernel send cmd's process SIGKILL when the
// runner dies, whatever kills it: SIGKILL, or SIGPIPE from a console
// reader that went away (`hotlane vm ... | head`). Without it qemu ran on,
// orphaned, its guest taking host CPU from every later measurement (85
// minutes of a 2-vCPU guest, 2026-11-28). The signal follows the thread
// that starts the child; Go ends no thread that runs unlocked goroutines,
// so only the runner's death sends it.
func killedWithRunner(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
