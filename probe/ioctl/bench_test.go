package ioctl

import (
	"context"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkOverhead measures what each hook family adds to an ioctl the
// probe counts (TCGETS on a pty master, this process) and to a syscall it
// does not care about (getppid), against no probe at all. The choice of
// the default hook order rests on it.
func BenchmarkOverhead(b *testing.B) {
	requireRoot(b)
	g := newGenerator(b)
	for _, h := range []Hook{"", HookTracepoint, HookTpBTF, HookRawTP} {
		name := string(h)
		if h == "" {
			name = "none"
		}
		b.Run(name, func(b *testing.B) {
			if h != "" {
				p, err := Attach(context.Background(), Config{Hook: h, PID: os.Getpid()})
				if err != nil {
					b.Skipf("%s: %v", h, err)
				}
				defer p.Close()
			}
			b.Run("ioctl", func(b *testing.B) {
				for b.Loop() {
					unix.IoctlGetTermios(g.master, unix.TCGETS)
				}
			})
			b.Run("getppid", func(b *testing.B) {
				for b.Loop() {
					unix.Getppid()
				}
			})
		})
	}
}
