package vm

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Paths and markers shared by the host side and the guest's /init.
const (
	guestConfigPath = "/hotlane/guest.json"
	// GuestResultsDir is where a guest command leaves files for the host;
	// the runner copies the directory back after the command exits. The
	// command also finds it in $HOTLANE_RESULTS.
	GuestResultsDir = "/results"
	// EnvInGuest is set to "1" for commands run by the guest's /init, so
	// VM-only tests know where they run.
	EnvInGuest = "HOTLANE_IN_VM"
	// envHostCPUs is the number of CPUs of the host that booted the
	// guest, for HostCPUs.
	envHostCPUs = "HOTLANE_HOST_CPUS"

	bootMarker   = "hotlane-init: running"
	resultHeader = "HOTLANE-RESULT v1"

	// guestInitEnv marks the guest's /init. The runner puts
	// guestInitEnv=1 on the kernel command line, and the kernel hands a
	// NAME=VALUE parameter it does not know to init as an environment
	// variable (unknown_bootoption in init/main.c). A name with a dot
	// would be taken for a module's parameter and dropped, and one in
	// lower case could begin with the name of a __setup() option (they
	// are matched by prefix) and be taken by it; this is neither.
	guestInitEnv = "HOTLANE_GUEST_INIT"
)

// IsGuestInit reports whether this process is the /init of a VM the
// runner booted: PID 1 with the runner's mark in its environment. PID 1
// alone says nothing: a container, or unshare --pid --fork, makes any
// program PID 1, and GuestInit would mount over its /proc and /sys and
// power off. guestMain gives the command it runs an environment of its
// own, so the mark goes no further than /init.
func IsGuestInit() bool {
	return os.Getpid() == 1 && os.Getenv(guestInitEnv) == "1"
}

// guestConfig is what the host asks /init to do.
type guestConfig struct {
	Args []string `json:"args"`
	Env  []string `json:"env,omitempty"`
	// HostCPUs is how many CPUs the host has (HostCPUs).
	HostCPUs int `json:"host_cpus,omitempty"`
}

// InGuest reports whether this process was started by the VM runner's
// /init.
func InGuest() bool { return os.Getenv(EnvInGuest) == "1" }

// HostCPUs is, in a guest, how many CPUs the host that booted it has (0
// if unknown). A guest with more vCPUs than that shares the host's CPUs
// between them: a vCPU the host does not run stretches every wait and
// every run on it, in wall-clock time, however the guest schedules.
func HostCPUs() int {
	n, _ := strconv.Atoi(os.Getenv(envHostCPUs))
	return n
}

// GuestInit is the entry point when the hotlane binary runs as /init inside
// the VM: mount the pseudo file systems, run the command the host asked
// for, send its exit code and results back over the second serial port and
// power off. It never returns: if pid 1 exited the kernel would panic.
func GuestInit() {
	code := -1
	if err := guestMain(&code); err != nil {
		fmt.Fprintf(os.Stderr, "hotlane-init: %v\n", err)
	}
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		fmt.Fprintf(os.Stderr, "hotlane-init: power off: %v\n", err)
	}
	select {}
}

func guestMain(code *int) error {
	if err := mountPseudoFS(); err != nil {
		return err
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	raw, err := os.ReadFile(guestConfigPath)
	if err != nil {
		return fmt.Errorf("read %s: %w", guestConfigPath, err)
	}
	var cfg guestConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("parse %s: %w", guestConfigPath, err)
	}
	if len(cfg.Args) == 0 {
		return errors.New("no command to run")
	}
	results, err := openResultPort()
	if err != nil {
		return err
	}
	defer results.Close()

	fmt.Printf("%s %s\n", bootMarker, strings.Join(cfg.Args, " "))
	cmd := exec.Command(cfg.Args[0], cfg.Args[1:]...)
	cmd.Stdin = nil
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	cmd.Dir = "/"
	cmd.Env = append([]string{
		"PATH=/usr/bin:/usr/sbin:/bin:/sbin",
		"HOME=/tmp",
		EnvInGuest + "=1",
		"HOTLANE_RESULTS=" + GuestResultsDir,
		envHostCPUs + "=" + strconv.Itoa(cfg.HostCPUs),
	}, cfg.Env...)
	runErr := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case runErr == nil:
		*code = 0
	case errors.As(runErr, &exitErr):
		*code = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(interface{ Signaled() bool }); ok && ws.Signaled() {
			fmt.Fprintf(os.Stderr, "hotlane-init: %s: %v\n", cfg.Args[0], runErr)
		}
	default:
		fmt.Fprintf(os.Stderr, "hotlane-init: %v\n", runErr)
		*code = 127
	}
	if report, err := kernelStallReport(); err != nil {
		fmt.Fprintf(os.Stderr, "hotlane-init: RCU stalls not looked for: %v\n", err)
	} else if report != "" {
		fmt.Fprintf(os.Stderr, "hotlane-init: the kernel reported an RCU stall; its log from there:\n%s\n", report)
	}
	return sendResults(results, *code, GuestResultsDir)
}

func mountPseudoFS() error {
	mounts := []struct {
		fstype, target string
		flags          uintptr
	}{
		{"proc", "/proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
		{"sysfs", "/sys", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
		{"devtmpfs", "/dev", unix.MS_NOSUID},
		{"tmpfs", "/tmp", unix.MS_NOSUID | unix.MS_NODEV},
		{"tmpfs", "/run", unix.MS_NOSUID | unix.MS_NODEV},
		{"tracefs", "/sys/kernel/tracing", 0},
		{"debugfs", "/sys/kernel/debug", 0},
		{"bpf", "/sys/fs/bpf", 0},
		{"cgroup2", "/sys/fs/cgroup", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
	}
	for _, m := range mounts {
		if err := os.MkdirAll(m.target, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.fstype, m.target, m.fstype, m.flags, ""); err != nil {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.target, err)
		}
	}
	return os.MkdirAll(GuestResultsDir, 0o755)
}

// openResultPort opens the second serial port in raw mode, so results
// pass byte for byte (no newline translation, no echo).
func openResultPort() (*os.File, error) {
	f, err := os.OpenFile("/dev/ttyS1", os.O_WRONLY|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("open result port: %w", err)
	}
	t, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("result port termios: %w", err)
	}
	// cfmakeraw
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	if err := unix.IoctlSetTermios(int(f.Fd()), unix.TCSETS, t); err != nil {
		f.Close()
		return nil, fmt.Errorf("result port raw mode: %w", err)
	}
	return f, nil
}

// sendResults writes the exit code and a tar of dir, framed so the host can
// tell a complete result from a guest that died mid-way.
func sendResults(w io.Writer, code int, dir string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: int64(len(data)), ModTime: time.Now()}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		return fmt.Errorf("collect results: %w", err)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "\n%s exit=%d size=%d\n", resultHeader, code, buf.Len()); err != nil {
		return err
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return err
	}
	// tcdrain: the data must reach the host before power-off.
	if f, ok := w.(*os.File); ok {
		unix.IoctlSetInt(int(f.Fd()), unix.TCSBRK, 1)
	}
	return nil
}

// loopbackUp brings lo up, as any init does, so that a command in the
// guest can serve on 127.0.0.1 (run --listen, verify --listen).
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: read its flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	return nil
}
