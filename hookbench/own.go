package hookbench

import (
	"context"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/probe/ioctl"
	"github.com/hotlane/hotlane/verify"
	"github.com/hotlane/hotlane/workloads"
)

// ownComm names the threads that drive the tracer; they are its lane.
const ownComm = "hl-hookbench"

// OwnLoad says what drives hotlane's programs in ProfileOwn, for the report.
func OwnLoad(d time.Duration) string {
	return fmt.Sprintf("%s of threads bouncing a byte over pipes (tracer) and of FIONREAD on a pipe (ioctl probe), per measure", d)
}

// ProfileOwn attaches hotlane's run-queue tracer and its ioctl probe, each
// on the hook it picks on this kernel, and profiles their programs (see
// Profile) under a load that makes them run, for d per measure. A tool
// that cannot attach on this kernel is an error.
func ProfileOwn(ctx context.Context, d time.Duration) ([]ProgramCost, error) {
	table, err := policy.Default(ownComm).Compile("")
	if err != nil {
		return nil, err
	}
	tr, err := verify.Attach(verify.TracerConfig{Table: table})
	if err != nil {
		return nil, fmt.Errorf("attach the tracer: %w", err)
	}
	defer tr.Close()
	out, err := Profile(ctx, tr.Programs(), func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		_, err := workloads.Messaging{Comm: ownComm, Pairs: 1}.Run(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("profile the tracer: %w", err)
	}

	pr, err := ioctl.Attach(ctx, ioctl.Config{PID: os.Getpid()})
	if err != nil {
		return nil, fmt.Errorf("attach the ioctl probe: %w", err)
	}
	defer pr.Close()
	probed, err := Profile(ctx, pr.Programs(), func(ctx context.Context) error { return ioctlLoop(ctx, d) })
	if err != nil {
		return nil, fmt.Errorf("profile the ioctl probe: %w", err)
	}
	return append(out, probed...), nil
}

// ioctlLoop issues FIONREAD (TIOCINQ) on a pipe for d: an ioctl that needs no
// device node, so it runs in a bare initramfs too.
func ioctlLoop(ctx context.Context, d time.Duration) error {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return fmt.Errorf("pipe: %w", err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if err := ctx.Err(); err != nil {
			return err
		}
		for range 1000 {
			if _, err := unix.IoctlGetInt(p[0], unix.TIOCINQ); err != nil {
				return fmt.Errorf("FIONREAD on a pipe: %w", err)
			}
		}
	}
	return nil
}
