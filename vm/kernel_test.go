package vm

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// nobody is the unprivileged user the attacks below are made as.
const nobody = 65534

// btfELF is the smallest ELF that ExtractVmlinux accepts: a .BTF section
// and the section name table.
func btfELF(t *testing.T) []byte {
	t.Helper()
	btf := []byte("not really BTF, but a .BTF section")
	names := []byte("\x00.BTF\x00.shstrtab\x00")
	dataOff := uint64(binary.Size(elf.Header64{}))
	shOff := dataOff + uint64(len(btf)+len(names))
	hdr := elf.Header64{
		Type: uint16(elf.ET_REL), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Shoff: shOff, Ehsize: uint16(binary.Size(elf.Header64{})), Shentsize: uint16(binary.Size(elf.Section64{})),
		Shnum: 3, Shstrndx: 2,
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS], hdr.Ident[elf.EI_DATA], hdr.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	sections := []elf.Section64{
		{},
		{Name: 1, Type: uint32(elf.SHT_PROGBITS), Off: dataOff, Size: uint64(len(btf)), Addralign: 1},
		{Name: 6, Type: uint32(elf.SHT_STRTAB), Off: dataOff + uint64(len(btf)), Size: uint64(len(names)), Addralign: 1},
	}
	var b bytes.Buffer
	for _, v := range []any{hdr, btf, names, sections} {
		if err := binary.Write(&b, binary.LittleEndian, v); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// fakeBzImage writes an x86 boot image around a gzip-compressed ELF, laid
// out as the boot protocol's setup header says, and returns its path and
// the ELF.
func fakeBzImage(t *testing.T, dir string) (path string, vmlinux []byte) {
	t.Helper()
	vmlinux = btfELF(t)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(vmlinux)
	zw.Close()
	const setupSects = 1
	img := make([]byte, (setupSects+1)*512)
	img[0x1f1] = setupSects
	copy(img[0x202:], "HdrS")
	binary.LittleEndian.PutUint32(img[0x248:], 0)                // payload offset
	binary.LittleEndian.PutUint32(img[0x24c:], uint32(gz.Len())) // payload length
	img = append(img, gz.Bytes()...)
	path = filepath.Join(dir, "vmlinuz")
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, vmlinux
}

func TestExtractVmlinux(t *testing.T) {
	dir := t.TempDir()
	bz, want := fakeBzImage(t, dir)
	out := filepath.Join(dir, "vmlinux")
	if err := ExtractVmlinux(context.Background(), bz, out); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, want) {
		t.Errorf("extracted %d bytes (%v), want the %d of the ELF", len(got), err, len(want))
	}
}

// The extraction of a local kernel's vmlinux into the cache, as root,
// with another user's files planted at the names it writes to: a link
// named after the old predictable temporary file (NAME.tmp) pointing to a
// file of root's, or a file of the attacker's under that name. Neither
// root's file nor the attacker's changes, and the cached vmlinux is a new
// file of root's.
func TestVmlinuxExtractionResistsPlantedFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the victim is a 0600 file of root's, the attacker another user: only root can set that up")
	}
	for _, plant := range []string{"link", "file"} {
		t.Run(plant, func(t *testing.T) {
			dir := t.TempDir()
			bz, want := fakeBzImage(t, dir)
			victim := filepath.Join(dir, "victim")
			if err := os.WriteFile(victim, []byte("SECRET"), 0o600); err != nil {
				t.Fatal(err)
			}
			// The attacker made the cache's directory first (as with a
			// fixed name in /tmp) and knows the name the vmlinux gets.
			cache := filepath.Join(dir, "cache")
			out, err := localVmlinuxPath(cache, bz)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{cache, filepath.Dir(out)} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(d, nobody, nobody); err != nil {
					t.Fatal(err)
				}
			}
			planted := out + ".tmp"
			switch plant {
			case "link":
				if err := os.Symlink(victim, planted); err != nil {
					t.Fatal(err)
				}
			case "file":
				// Kept writable by the attacker, to change the cached
				// vmlinux later if it became it.
				if err := os.WriteFile(planted, nil, 0o666); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(planted, 0o666); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Lchown(planted, nobody, nobody); err != nil {
				t.Fatal(err)
			}

			k, err := ResolveKernel(context.Background(), cache, bz, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(victim); string(got) != "SECRET" {
				t.Errorf("root's file holds %d bytes (%.16q), want it untouched", len(got), got)
			}
			if k.Vmlinux != out {
				t.Fatalf("vmlinux at %s, want %s", k.Vmlinux, out)
			}
			got, err := os.ReadFile(out)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("the cached vmlinux has %d bytes (%v), want the %d of the ELF", len(got), err, len(want))
			}
			fi, err := os.Lstat(out)
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			if !fi.Mode().IsRegular() || st.Uid != 0 || fi.Mode().Perm() != 0o644 {
				t.Errorf("the cached vmlinux is %v, uid %d: want a regular 0644 file of root's", fi.Mode(), st.Uid)
			}
			if pfi, err := os.Lstat(planted); err == nil && os.SameFile(fi, pfi) {
				t.Error("the cached vmlinux is the attacker's file")
			}
			if plant == "file" {
				if got, _ := os.ReadFile(planted); len(got) > 0 {
					t.Errorf("the attacker's file got %d bytes written into it", len(got))
				}
			}
		})
	}
}

func TestDefaultCacheDirNeverShared(t *testing.T) {
	for _, tc := range []struct {
		name               string
		hotlane, xdg, home string
		euid               int
		want               string
		wantErr            error
	}{
		{name: "HOTLANE_CACHE", hotlane: "/c", home: "/h", want: "/c"},
		{name: "XDG_CACHE_HOME", xdg: "/x", home: "/h", want: "/x/hotlane"},
		{name: "HOME", home: "/h", euid: 1000, want: "/h/.cache/hotlane"},
		{name: "root without HOME", euid: 0, want: "/var/cache/hotlane"},
		{name: "user without HOME", euid: 1000, wantErr: ErrNoCacheDir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HOTLANE_CACHE", tc.hotlane)
			t.Setenv("XDG_CACHE_HOME", tc.xdg)
			t.Setenv("HOME", tc.home)
			got, err := defaultCacheDir(tc.euid)
			if got != tc.want || !errors.Is(err, tc.wantErr) {
				t.Errorf("defaultCacheDir(%d) = %q, %v; want %q, %v", tc.euid, got, err, tc.want, tc.wantErr)
			}
			if got != "" && strings.HasPrefix(got, os.TempDir()) {
				t.Errorf("defaultCacheDir(%d) = %q: a shared directory", tc.euid, got)
			}
		})
	}
}

func TestCheckCacheDir(t *testing.T) {
	dir := t.TempDir()
	own := filepath.Join(dir, "own")
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]error{
		own:                          nil,
		filepath.Join(dir, "absent"): nil,
		shared:                       ErrUnsafeCache,
	} {
		if err := CheckCacheDir(path); !errors.Is(err, want) {
			t.Errorf("CheckCacheDir(%s) = %v, want %v", filepath.Base(path), err, want)
		}
	}
	if os.Geteuid() != 0 {
		t.Log("not root: cannot make a directory of another user's, so that case is left out")
		return
	}
	theirs := filepath.Join(dir, "theirs")
	if err := os.Mkdir(theirs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if err := CheckCacheDir(theirs); !errors.Is(err, ErrUnsafeCache) || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Errorf("CheckCacheDir(a directory of nobody's) = %v, want %v naming the owner", err, ErrUnsafeCache)
	}
}
