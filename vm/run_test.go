package vm

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func resultStream(t *testing.T, code int, files map[string]string, truncate int) []byte {
	t.Helper()
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for name, body := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))})
		tw.Write([]byte(body))
	}
	tw.Close()
	var out bytes.Buffer
	fmt.Fprintf(&out, "boot noise\n%s exit=%d size=%d\n", resultHeader, code, tb.Len())
	out.Write(tb.Bytes()[:tb.Len()-truncate])
	return out.Bytes()
}

func TestReadResults(t *testing.T) {
	dir := t.TempDir()
	port := filepath.Join(dir, "port")
	os.WriteFile(port, resultStream(t, 3, map[string]string{"report.json": `{"ok":true}`, "sub/x.txt": "x"}, 0), 0o644)
	out := filepath.Join(dir, "out")
	code, err := readResults(port, out)
	if err != nil || code != 3 {
		t.Fatalf("readResults = %d, %v; want 3, nil", code, err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "sub/x.txt")); string(b) != "x" {
		t.Errorf("sub/x.txt = %q", b)
	}

	os.WriteFile(port, resultStream(t, 0, map[string]string{"a": "aaaa"}, 100), 0o644)
	if _, err := readResults(port, out); err == nil {
		t.Error("truncated result stream accepted")
	}
	os.WriteFile(port, []byte("the guest died before reporting\n"), 0o644)
	if _, err := readResults(port, out); err == nil {
		t.Error("stream without header accepted")
	}
	os.WriteFile(port, resultStream(t, 0, map[string]string{"../escape": "x"}, 0), 0o644)
	if _, err := readResults(port, out); err == nil {
		t.Error("result path escaping the results directory accepted")
	}
}

func TestCheckStatic(t *testing.T) {
	if err := checkStatic("/bin/sh"); err == nil {
		t.Error("checkStatic(/bin/sh) accepted a dynamic binary")
	}
}

// The kernel hands /init the runner's mark only as an environment
// variable it does not recognise: NAME=VALUE, the name without a dot
// (taken for a module parameter and dropped) and not in lower case (which
// could begin with a __setup() option's name). That the kernel passes it
// is checked by every test that boots the guest.
func TestKernelCommandLineMarksInit(t *testing.T) {
	params := strings.Fields(kernelCommandLine)
	if !slices.Contains(params, guestInitEnv+"=1") {
		t.Fatalf("kernel command line %q lacks %s=1", kernelCommandLine, guestInitEnv)
	}
	if strings.ContainsAny(guestInitEnv, ".") || strings.ToUpper(guestInitEnv) != guestInitEnv {
		t.Errorf("%s: the kernel would not hand it to init", guestInitEnv)
	}
}
