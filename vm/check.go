package vm

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"syscall"
)

// Validate checks everything Run needs except the kernel, looking only at
// this machine: the command and its environment, that Init is a static
// binary, that every file to add is a regular file (and every executable's
// libraries are found), that ResultsDir is not a file, and that qemu is
// installed. Fetching a kernel or building a scheduler can take minutes on
// a fresh machine, so callers run Validate first; Run runs it again.
func (cfg *Config) Validate() error {
	if len(cfg.Args) == 0 || cfg.Args[0] == "" {
		return errors.New("no command to run in the guest")
	}
	for _, e := range cfg.Env {
		if name, _, ok := strings.Cut(e, "="); !ok || name == "" || strings.ContainsAny(name, " \t\n") {
			return fmt.Errorf("guest environment %q is not NAME=VALUE", e)
		}
	}
	if t := cfg.Topology; t != nil {
		if err := t.Check(); err != nil {
			return err
		}
		if cfg.CPUs != 0 && cfg.CPUs != t.CPUs() {
			return fmt.Errorf("%w: %s is %d CPUs, not the %d asked for; leave out the CPU count or make them agree", ErrTopology, t, t.CPUs(), cfg.CPUs)
		}
		if _, err := t.qemuArgs(cfg.memory()); err != nil {
			return err
		}
	}
	if err := checkStatic(cfg.Init); err != nil {
		return err
	}
	for _, guest := range sortedKeys(cfg.Files) {
		if err := checkHostFile(cfg.Files[guest], guest); err != nil {
			return err
		}
		if err := CheckGuestPath(cfg.Files[guest], guest, nil); err != nil {
			return err
		}
	}
	for _, guest := range sortedKeys(cfg.Executables) {
		host := cfg.Executables[guest]
		if err := checkHostFile(host, guest); err != nil {
			return err
		}
		if err := CheckGuestPath(host, guest, nil); err != nil {
			return err
		}
		if _, err := sharedLibraries(host); err != nil {
			return err
		}
	}
	if cfg.ResultsDir != "" {
		if fi, err := os.Stat(cfg.ResultsDir); err == nil && !fi.IsDir() {
			return fmt.Errorf("results directory %s is a file, not a directory", cfg.ResultsDir)
		}
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		return ErrQemuMissing
	}
	return nil
}

// checkHostFile checks that host, to be put in the guest at guest, is a
// regular file: the initramfs holds only those.
func checkHostFile(host, guest string) error {
	what := "cannot add " + host + " to the guest"
	if guest != host {
		what += " as " + guest
	}
	fi, err := os.Stat(host)
	switch {
	case errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%s: no such file", what)
	case err != nil:
		return fmt.Errorf("%s: %w", what, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s: not a regular file", what)
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ErrRunnerOwnedPath is returned for a file to add at a guest path the
// runner fills itself.
var ErrRunnerOwnedPath = errors.New("the runner puts its own file there")

// CheckGuestPath refuses to add host at a guest path the runner fills
// itself, which the added file would silently replace: /init (this
// binary, which runs the command and reports back), the runner's
// configuration under /hotlane, the directories, device nodes and links
// every image has, and /usr/bin/NAME for each example scheduler of scx
// the runner builds.
func CheckGuestPath(host, guest string, scx []string) error {
	im := NewInitramfs()
	p := im.resolve(guest)
	var whose string
	switch {
	case p == "":
		whose = "it is the root directory"
	case p == im.resolve("/init"):
		whose = "it is hotlane itself, which runs the command and reports back"
	case p == im.resolve(path.Dir(guestConfigPath)) || strings.HasPrefix(p, im.resolve(path.Dir(guestConfigPath))+"/"):
		whose = "it holds the runner's configuration"
	default:
		if _, ok := im.entries[p]; ok {
			whose = "every guest has it"
		}
		for _, name := range scx {
			if p == im.resolve(ScxGuestPath(name)) {
				whose = "--scx " + name + " builds it"
			}
		}
	}
	if whose == "" {
		return nil
	}
	return fmt.Errorf("cannot add %s to the guest as %s: %w (%s)", host, guest, ErrRunnerOwnedPath, whose)
}

// ParseAdd splits a HOST[:GUEST] file specification; GUEST defaults to
// HOST. Whether HOST exists is Validate's business.
func ParseAdd(spec string) (host, guest string, err error) {
	host, guest, hasGuest := strings.Cut(spec, ":")
	switch {
	case host == "":
		return "", "", fmt.Errorf("%q names no host file; write HOST[:GUEST], e.g. ./sched.test:/sched.test", spec)
	case hasGuest && guest == "":
		return "", "", fmt.Errorf("%q has an empty guest path; write HOST[:GUEST], or HOST alone for the same path in the guest", spec)
	case !hasGuest:
		guest = host
	}
	return host, guest, nil
}

// CheckCommand checks the guest command before anything boots. A first
// argument without a slash is a hotlane subcommand (see Config.Args) and
// must be one of subcommands; a path must be /init or one of guestPaths,
// the files the guest is given, since the initramfs holds nothing else.
func CheckCommand(args, subcommands, guestPaths []string) error {
	if len(args) == 0 || args[0] == "" {
		return errors.New("no command to run in the guest")
	}
	cmd := args[0]
	if !strings.Contains(cmd, "/") {
		if slices.Contains(subcommands, cmd) {
			return nil
		}
		return fmt.Errorf("%q is not a hotlane command the guest can run (%s); a program must be given as a path, added to the guest", cmd, strings.Join(subcommands, ", "))
	}
	// The guest runs the command from /, and the initramfs merges /bin
	// into /usr/bin as Debian does: compare paths as the image stores them.
	im := NewInitramfs()
	want := im.resolve(cmd)
	if want == im.resolve("/init") {
		return nil
	}
	for _, p := range guestPaths {
		if im.resolve(p) == want {
			return nil
		}
	}
	return fmt.Errorf("%s is not in the guest: add the program with --add HOST:%s, or run a hotlane command", cmd, cmd)
}
