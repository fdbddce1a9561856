// Command ioctl32 issues a known set of ioctls; the probe's tests build
// it with GOARCH=386, so that its calls go through the kernel's 32-bit
// (compat) syscall entry, which the hooks must see too.
//
// Usage: ioctl32 N. It opens its files, prints "ready", waits for a line
// on stdin, then issues N TCGETS on a pty master and 3 TIOCGWINSZ on
// /dev/null (which fail with ENOTTY), prints "done" and exits.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ioctl32:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) != 2 {
		return errors.New("usage: ioctl32 N")
	}
	n, err := strconv.Atoi(os.Args[1])
	if err != nil {
		return err
	}
	master, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	null, err := unix.Open("/dev/null", unix.O_RDWR, 0)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	for range n {
		if _, err := unix.IoctlGetTermios(master, unix.TCGETS); err != nil {
			return fmt.Errorf("TCGETS: %w", err)
		}
	}
	for range 3 {
		if _, err := unix.IoctlGetWinsize(null, unix.TIOCGWINSZ); !errors.Is(err, unix.ENOTTY) {
			return fmt.Errorf("TIOCGWINSZ on /dev/null: %v, want ENOTTY", err)
		}
	}
	fmt.Println("done")
	return nil
}
