package loader

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"

	"github.com/cilium/ebpf/btf"
)

// LoadBTF reads kernel BTF from path: either raw BTF (like
// /sys/kernel/btf/vmlinux) or an ELF vmlinux with a .BTF section. Unlike
// btf.LoadSpec it accepts a stripped vmlinux (no symbol table), which is
// what decompressing a distribution's vmlinuz gives.
func LoadBTF(path string) (*btf.Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load BTF: %w", err)
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil {
		return nil, fmt.Errorf("load BTF from %s: %w", path, err)
	}
	if string(magic[:]) != elf.ELFMAG {
		spec, err := btf.LoadSpecFromReader(f)
		if err != nil {
			return nil, fmt.Errorf("load raw BTF from %s: %w", path, err)
		}
		return spec, nil
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil, fmt.Errorf("load BTF from %s: %w", path, err)
	}
	sec := ef.Section(".BTF")
	if sec == nil {
		return nil, fmt.Errorf("load BTF from %s: no .BTF section: %w", path, ErrNoBTF)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("load BTF from %s: read .BTF: %w", path, err)
	}
	spec, err := btf.LoadSpecFromReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("load BTF from %s: %w", path, err)
	}
	return spec, nil
}
