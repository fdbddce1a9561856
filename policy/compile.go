package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// MatchKind is a set of the fields a Rule checks; it mirrors enum
// hl_match_kind in bpf/include/classify.bpf.h.
type MatchKind uint32

const (
	MatchCommPrefix    MatchKind = 1 << 0 // HL_MATCH_COMM_PREFIX
	MatchCommExact     MatchKind = 1 << 1 // HL_MATCH_COMM_EXACT
	MatchPcommPrefix   MatchKind = 1 << 2 // HL_MATCH_PCOMM_PREFIX
	MatchPcommExact    MatchKind = 1 << 3 // HL_MATCH_PCOMM_EXACT
	MatchPID           MatchKind = 1 << 4 // HL_MATCH_PID
	MatchTGID          MatchKind = 1 << 5 // HL_MATCH_TGID
	MatchCgroup        MatchKind = 1 << 6 // HL_MATCH_CGROUP
	MatchSchedExt      MatchKind = 1 << 7 // HL_MATCH_SCHED_EXT
	MatchDevice        MatchKind = 1 << 8 // HL_MATCH_DEVICE
	MatchDeviceProcess MatchKind = 1 << 9 // HL_MATCH_DEVICE_PROCESS
)

func (k MatchKind) String() string {
	names := []string{"comm_prefix", "comm", "process_comm_prefix", "process_comm", "pid", "tgid", "cgroup", "sched_ext", "device", "device_process"}
	var set []string
	for i, n := range names {
		if k&(1<<i) != 0 {
			set = append(set, n)
		}
	}
	if rest := k &^ (1<<len(names) - 1); rest != 0 {
		set = append(set, fmt.Sprintf("%#x", uint32(rest)))
	}
	if len(set) == 0 {
		return "none"
	}
	return strings.Join(set, "|")
}

// Rule is one compiled matcher. Its memory layout is exactly that of struct
// hl_rule in bpf/include/classify.bpf.h (72 bytes, no implicit padding), so
// an array of rules can be written into the BPF global hl_rules as is.
type Rule struct {
	ClassID     uint32
	Kinds       MatchKind
	Comm        [CommLen]byte // for MatchCommPrefix or MatchCommExact, NUL-padded
	Pcomm       [CommLen]byte // for MatchPcommPrefix or MatchPcommExact
	CommMask    [CommLen]byte // 0xff for each byte of Comm compared: a prefix's, or all for an exact name
	PcommMask   [CommLen]byte
	PID         uint32
	TGID        uint32
	CgroupID    uint64 // inode number of the cgroup directory, the kernfs id
	CgroupLevel uint32 // depth below the cgroup root (the root is 0)
	DevSet      uint32 // for MatchDevice or MatchDeviceProcess: index into Table.DeviceSetIdle
}

// ClassConfig holds a class's knobs for the scheduler; its layout is that of
//
//	struct hl_class { __u64 slice_ns; __u32 weight; __u8 high_priority; __u8 preempt; __u8 _pad[2]; };
type ClassConfig struct {
	SliceNs      uint64
	Weight       uint32
	HighPriority uint8 // 0 or 1
	Preempt      uint8 // 0 or 1
	_            [2]byte
}

// Table is a policy compiled for the BPF classifier. Rules are in class
// order; class ids index Classes and Names. The last class, the catch-all,
// has no rules: the classifier falls back to it.
type Table struct {
	Rules   []Rule
	Classes []ClassConfig
	Names   []string
	// DeviceRanges are the devices of the device matchers, each tagged
	// with its set; DeviceSetIdle holds each set's idle time in ns (0 for
	// none). A set is one device value with one idle time.
	DeviceRanges  []DeviceRange
	DeviceSetIdle []uint64
}

// DeviceRangesArray returns the ranges as the BPF global hl_dev_ranges,
// unused slots zero.
func (t *Table) DeviceRangesArray() [MaxDeviceRanges]DeviceRange {
	var a [MaxDeviceRanges]DeviceRange
	copy(a[:], t.DeviceRanges)
	return a
}

// DeviceSetIdleArray returns the idle times as the BPF global
// hl_devset_idle_ns, unused slots zero.
func (t *Table) DeviceSetIdleArray() [MaxDeviceSets]uint64 {
	var a [MaxDeviceSets]uint64
	copy(a[:], t.DeviceSetIdle)
	return a
}

// HasDeviceRules reports whether some rule matches on devices: only then
// do the scheduler and tracer hook device opens and ioctls.
func (t *Table) HasDeviceRules() bool {
	return MatchKind(t.RuleKinds())&(MatchDevice|MatchDeviceProcess) != 0
}

// BPFVariables returns the classifier's read-only settings by their names
// in classify.bpf.h, for the scheduler and the tracer to write before load.
func (t *Table) BPFVariables() map[string]any {
	return map[string]any{
		"hl_rules":          t.RulesArray(),
		"hl_nr_rules":       t.NrRules(),
		"hl_rule_kinds":     t.RuleKinds(),
		"hl_nr_classes":     t.NrClasses(),
		"hl_dev_ranges":     t.DeviceRangesArray(),
		"hl_nr_dev_ranges":  uint32(len(t.DeviceRanges)),
		"hl_nr_devsets":     uint32(len(t.DeviceSetIdle)),
		"hl_devset_idle_ns": t.DeviceSetIdleArray(),
	}
}

// RulesArray returns the rules as the BPF global hl_rules
// (const volatile struct hl_rule hl_rules[HL_MAX_RULES]), unused slots zero.
func (t *Table) RulesArray() [MaxRules]Rule {
	var a [MaxRules]Rule
	copy(a[:], t.Rules)
	return a
}

// ClassesArray returns the class knobs as an array of HL_MAX_CLASSES
// struct hl_class, unused slots zero.
func (t *Table) ClassesArray() [MaxClasses]ClassConfig {
	var a [MaxClasses]ClassConfig
	copy(a[:], t.Classes)
	return a
}

// NrRules is the value for the BPF global hl_nr_rules.
func (t *Table) NrRules() uint32 { return uint32(len(t.Rules)) }

// RuleKinds is the value for the BPF global hl_rule_kinds: every match
// kind some rule uses. The classifier reads only the parts of a task's
// identity these need (a group leader's comm, a cgroup's id are pointer
// chases on every wake-up).
func (t *Table) RuleKinds() uint32 {
	var k MatchKind
	for _, r := range t.Rules {
		k |= r.Kinds
	}
	return uint32(k)
}

// NrClasses is the value for the BPF global hl_nr_classes.
func (t *Table) NrClasses() uint32 { return uint32(len(t.Classes)) }

// Compile validates the policy and compiles it into a Table. cgroupRoot is
// where cgroup v2 is mounted, "" to find it with CgroupRoot; it is read only
// to resolve cgroup matchers. The cgroup ids are those of the moment: a
// cgroup removed and created again gets a new id, so compile just before
// loading.
func (p *Policy) Compile(cgroupRoot string) (*Table, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	t := &Table{Names: p.ClassNames()}
	type deviceSet struct {
		value string
		idle  time.Duration
	}
	var sets []deviceSet
	for ci, c := range p.Classes {
		t.Classes = append(t.Classes, ClassConfig{
			SliceNs:      uint64(c.Slice / time.Nanosecond),
			Weight:       c.Weight,
			HighPriority: b2u8(c.HighPriority),
			Preempt:      b2u8(c.Preempt),
		})
		for mi, m := range c.Match {
			r := Rule{ClassID: uint32(ci), PID: m.PID, TGID: m.TGID}
			r.Kinds |= setComm(&r.Comm, &r.CommMask, m.CommPrefix, MatchCommPrefix)
			r.Kinds |= setComm(&r.Comm, &r.CommMask, m.Comm, MatchCommExact)
			r.Kinds |= setComm(&r.Pcomm, &r.PcommMask, m.ProcessCommPrefix, MatchPcommPrefix)
			r.Kinds |= setComm(&r.Pcomm, &r.PcommMask, m.ProcessComm, MatchPcommExact)
			if m.PID != 0 {
				r.Kinds |= MatchPID
			}
			if m.TGID != 0 {
				r.Kinds |= MatchTGID
			}
			if m.SchedExt {
				r.Kinds |= MatchSchedExt
			}
			if m.Cgroup != "" {
				if cgroupRoot == "" {
					root, err := CgroupRoot()
					if err != nil {
						e := p.errorf(ci, mi, nil, "cgroup %q: %v", m.Cgroup, err)
						e.err = err
						return nil, e
					}
					cgroupRoot = root
				}
				id, level, msg, err := resolveCgroup(cgroupRoot, m.Cgroup)
				if msg != "" {
					e := p.errorf(ci, mi, nil, "%s", msg)
					if errors.Is(err, fs.ErrNotExist) {
						e.kind = ErrCgroupNotFound
					}
					e.err = err
					return nil, e
				}
				r.Kinds |= MatchCgroup
				r.CgroupID, r.CgroupLevel = id, level
			}
			if dev, field, kind := m.device(); dev != "" {
				set := deviceSet{dev, m.Idle}
				i := slices.Index(sets, set)
				if i < 0 {
					if len(sets) == MaxDeviceSets {
						return nil, p.errorf(ci, mi, nil, "more than %d distinct device and idle pairs in the policy; share one between matchers", MaxDeviceSets)
					}
					ranges, msg, err := resolveDevice(field, dev)
					if msg != "" {
						e := p.errorf(ci, mi, nil, "%s", msg)
						if errors.Is(err, errNoDevice) {
							e.kind = ErrDeviceNotFound
						}
						e.err = err
						return nil, e
					}
					if len(t.DeviceRanges)+len(ranges) > MaxDeviceRanges {
						return nil, p.errorf(ci, mi, nil, "%s %q makes %d device ranges in the policy; at most %d are supported: name the devices by number (e.g. \"195:*\")",
							field, dev, len(t.DeviceRanges)+len(ranges), MaxDeviceRanges)
					}
					i = len(sets)
					sets = append(sets, set)
					t.DeviceSetIdle = append(t.DeviceSetIdle, uint64(m.Idle.Nanoseconds()))
					for _, dr := range ranges {
						dr.DevSet = uint32(i)
						t.DeviceRanges = append(t.DeviceRanges, dr)
					}
				}
				r.Kinds |= kind
				r.DevSet = uint32(i)
			}
			t.Rules = append(t.Rules, r)
		}
	}
	return t, nil
}

// device returns the matcher's device value, its field name and its kind,
// or "" when it has none.
func (m Matcher) device() (value, field string, kind MatchKind) {
	switch {
	case m.Device != "":
		return m.Device, "device", MatchDevice
	case m.DeviceProcess != "":
		return m.DeviceProcess, "device_process", MatchDeviceProcess
	}
	return "", "", 0
}

// setComm fills a comm buffer and its compare mask, and returns kind if s
// is set. Validate has ensured s fits with room for the NUL that ends a
// task's comm. A prefix compares its own bytes; an exact name every byte,
// the NUL padding included (the kernel pads a task's comm with NULs), so
// the classifier compares both kinds the same way: two masked 64-bit
// words, with no loop for the verifier to walk.
func setComm(buf, mask *[CommLen]byte, s string, kind MatchKind) MatchKind {
	if s == "" {
		return 0
	}
	copy(buf[:], s)
	n := len(s)
	if kind == MatchCommExact || kind == MatchPcommExact {
		n = CommLen
	}
	for i := range n {
		mask[i] = 0xff
	}
	return kind
}

// resolveCgroup returns the kernfs id and level of the cgroup at cgPath (a
// clean absolute path, as Validate ensures) below root. On cgroup2 the inode
// number of a cgroup's directory is its kernfs id, the id the BPF side
// compares with cgroup->kn->id. The level counts path components: the
// classifier looks at the task cgroup's ancestor at that depth.
//
// On failure msg says what is wrong and err, if not nil, is the cause.
func resolveCgroup(root, cgPath string) (id uint64, level uint32, msg string, err error) {
	dir := filepath.Join(root, filepath.FromSlash(cgPath))
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, fmt.Sprintf("cgroup %q does not exist under %s; create it first or fix the path", cgPath, root), err
	}
	if err != nil {
		return 0, 0, fmt.Sprintf("cgroup %q: %v", cgPath, err), err
	}
	if !fi.IsDir() {
		return 0, 0, fmt.Sprintf("cgroup %q: %s is not a directory, so not a cgroup", cgPath, dir), nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, fmt.Sprintf("cgroup %q: no inode number for %s", cgPath, dir), nil
	}
	if cgPath != "/" {
		level = uint32(strings.Count(cgPath, "/"))
	}
	return st.Ino, level, "", nil
}

func b2u8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
