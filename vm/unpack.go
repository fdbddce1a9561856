package vm

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// unpackSource unpacks the kernel source tarball of a linux-source .deb
// (./usr/src/TOP.tar.xz inside it) into dir: only the members named, or
// all of it when none are. It is
//
//	dpkg-deb --fsys-tarfile DEB | tar -xOf - ./usr/src/TOP.tar.xz | tar -xJf - -C DIR MEMBERS...
//
// with each program given its arguments as a vector: the paths, which come
// from --cache and the environment, never pass through a shell.
func unpackSource(ctx context.Context, deb, top, dir string, members ...string) error {
	return pipeline(ctx,
		[]string{"dpkg-deb", "--fsys-tarfile", deb},
		[]string{"tar", "-xOf", "-", "./usr/src/" + top + ".tar.xz"},
		append([]string{"tar", "-xJf", "-", "-C", dir}, members...),
	)
}

// pipeline runs the commands with each one's standard output connected to
// the next one's standard input, as a shell's | does, and waits for all
// of them. The error names the first command that failed, with the last
// lines it wrote to standard error.
func pipeline(ctx context.Context, argvs ...[]string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmds := make([]*exec.Cmd, len(argvs))
	stderrs := make([]bytes.Buffer, len(argvs))
	var pipeEnds []*os.File
	closePipes := func() {
		for _, f := range pipeEnds {
			f.Close()
		}
		pipeEnds = nil
	}
	defer closePipes()
	for i, argv := range argvs {
		cmds[i] = exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmds[i].Stderr = &stderrs[i]
		if i > 0 {
			r, w, err := os.Pipe()
			if err != nil {
				return err
			}
			pipeEnds = append(pipeEnds, r, w)
			cmds[i-1].Stdout, cmds[i].Stdin = w, r
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			cancel()
			for _, started := range cmds[:i] {
				started.Wait()
			}
			return fmt.Errorf("%s: %w", argvs[i][0], err)
		}
	}
	// Only the children hold the pipes now: a reader that exits gives
	// its writer EPIPE, and the last writer's exit gives its reader EOF.
	closePipes()
	// A writer whose reader gave up dies of SIGPIPE; the reader's own
	// error says why, so it is the one reported.
	var first, broken error
	for i, cmd := range cmds {
		err := cmd.Wait()
		if err == nil {
			continue
		}
		err = fmt.Errorf("%s: %w: %s", strings.Join(argvs[i], " "), err, lastLines(stderrs[i].String(), 5))
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGPIPE {
			broken = cmp.Or(broken, err)
		} else {
			first = cmp.Or(first, err)
		}
	}
	return cmp.Or(first, broken)
}
