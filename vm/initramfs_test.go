package vm

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type parsedEntry struct {
	Mode uint32
	Data string
	Rdev [2]uint32
}

// parseCpio is an independent newc reader: what the kernel would unpack.
func parseCpio(t *testing.T, gz []byte) (map[string]parsedEntry, []string) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]parsedEntry{}
	var order []string
	off := 0
	align := func() { off = (off + 3) &^ 3 }
	field := func(i int) uint32 {
		v, err := strconv.ParseUint(string(raw[off+6+8*i:off+14+8*i]), 16, 32)
		if err != nil {
			t.Fatalf("bad header field at %d: %v", off, err)
		}
		return uint32(v)
	}
	for {
		if string(raw[off:off+6]) != "070701" {
			t.Fatalf("bad magic at offset %d", off)
		}
		mode, size, rmaj, rmin, namesize := field(1), field(6), field(9), field(10), field(11)
		name := string(raw[off+110 : off+110+int(namesize)-1])
		off += 110 + int(namesize)
		align()
		data := string(raw[off : off+int(size)])
		off += int(size)
		align()
		if name == "TRAILER!!!" {
			return entries, order
		}
		entries[name] = parsedEntry{Mode: mode, Data: data, Rdev: [2]uint32{rmaj, rmin}}
		order = append(order, name)
	}
}

func TestInitramfsLayout(t *testing.T) {
	host := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(host, []byte("#!/bin/sh\necho hi\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	im := NewInitramfs()
	if err := im.AddFile(host, "/init"); err != nil {
		t.Fatal(err)
	}
	if err := im.AddFile(host, "/lib/x86_64-linux-gnu/libfoo.so.1"); err != nil {
		t.Fatal(err)
	}
	im.AddData("/hotlane/guest.json", []byte(`{"args":["/init"]}`), 0o644)
	if err := im.AddFile("/nonexistent", "/x"); err == nil {
		t.Error("AddFile of a missing host file succeeded")
	}

	var buf bytes.Buffer
	if _, err := im.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	entries, order := parseCpio(t, buf.Bytes())

	want := map[string]parsedEntry{
		"init":                                 {Mode: modeRegular | 0o750, Data: "#!/bin/sh\necho hi\n"},
		"usr/lib/x86_64-linux-gnu/libfoo.so.1": {Mode: modeRegular | 0o750, Data: "#!/bin/sh\necho hi\n"},
		"hotlane/guest.json":                   {Mode: modeRegular | 0o644, Data: `{"args":["/init"]}`},
		"dev/console":                          {Mode: modeCharDev | 0o600, Rdev: [2]uint32{5, 1}},
		"lib":                                  {Mode: modeSymlink | 0o777, Data: "usr/lib"},
		"usr/lib/x86_64-linux-gnu":             {Mode: modeDir | 0o755},
	}
	for name, w := range want {
		if diff := cmp.Diff(w, entries[name]); diff != "" {
			t.Errorf("entry %s (-want +got):\n%s", name, diff)
		}
	}
	// The kernel creates files only inside directories it already made.
	seen := map[string]bool{}
	for _, name := range order {
		if dir := filepath.Dir(name); dir != "." && !seen[dir] {
			t.Errorf("%s comes before its directory %s", name, dir)
		}
		seen[name] = true
	}
}

func TestSharedLibrariesOfStaticAndDynamic(t *testing.T) {
	libs, err := sharedLibraries("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	var hasLibc bool
	for _, l := range libs {
		if filepath.Base(l) == "libc.so.6" {
			hasLibc = true
		}
	}
	if !hasLibc {
		t.Errorf("sharedLibraries(/bin/sh) = %v, want libc.so.6 among them", libs)
	}
	script := filepath.Join(t.TempDir(), "script")
	os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755)
	if libs, err := sharedLibraries(script); err != nil || len(libs) != 0 {
		t.Errorf("sharedLibraries(script) = %v, %v; want none, nil", libs, err)
	}
}
