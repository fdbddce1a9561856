package loader

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf/btf"
)

// KfuncAPI is a generation of the sched_ext kfunc API. The generation is
// read from kernel BTF, never guessed from the version string: distributions
// backport, and the names are what the verifier checks.
type KfuncAPI int

const (
	// KfuncAPIUnknown is the zero value: no generation detected.
	KfuncAPIUnknown KfuncAPI = iota
	// KfuncAPI612 is the first sched_ext release (6.12): scx_bpf_dispatch,
	// scx_bpf_consume, scx_bpf_dispatch_vtime.
	KfuncAPI612
	// KfuncAPI613 is 6.13 up to 6.18: scx_bpf_dsq_insert,
	// scx_bpf_dsq_move_to_local, scx_bpf_dsq_insert_vtime.
	KfuncAPI613
	// KfuncAPIV2 is 6.19 and later, where scx_bpf_dsq_insert___v2 (returns
	// bool) exists next to the old plain name; from 7.1 also
	// scx_bpf_dsq_move_to_local___v2 (takes enq_flags). Kfuncs says which of
	// the two ___v2 names this kernel has.
	KfuncAPIV2
)

// String returns the short name of the generation: "6.12", "6.13", "v2" or
// "unknown". The same text is used in JSON.
func (a KfuncAPI) String() string {
	switch a {
	case KfuncAPI612:
		return "6.12"
	case KfuncAPI613:
		return "6.13"
	case KfuncAPIV2:
		return "v2"
	default:
		return "unknown"
	}
}

// MarshalText implements encoding.TextMarshaler so JSON carries String().
func (a KfuncAPI) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler, the inverse of
// MarshalText.
func (a *KfuncAPI) UnmarshalText(text []byte) error {
	for _, c := range []KfuncAPI{KfuncAPIUnknown, KfuncAPI612, KfuncAPI613, KfuncAPIV2} {
		if c.String() == string(text) {
			*a = c
			return nil
		}
	}
	return fmt.Errorf("unknown kfunc API %q", text)
}

// Kfuncs is the scx kfunc generation of a kernel and, for each operation
// the scheduler performs, the exact kernel function name to call. Every
// name is one that cilium/ebpf resolves to exactly one kernel function (see
// LookupKfunc), so a BPF object that calls these names loads.
type Kfuncs struct {
	API KfuncAPI `json:"api"`
	// DsqInsert inserts a task into a DSQ: scx_bpf_dsq_insert___v2 (returns
	// bool), scx_bpf_dsq_insert or scx_bpf_dispatch (return void); all take
	// (p, dsq_id, slice, enq_flags).
	DsqInsert string `json:"dsq_insert"`
	// DsqInsertVtime inserts a task into a DSQ's vtime queue, with arguments
	// (p, dsq_id, slice, vtime, enq_flags): scx_bpf_dsq_insert_vtime or
	// scx_bpf_dispatch_vtime.
	DsqInsertVtime string `json:"dsq_insert_vtime"`
	// DsqInsertVtimeArgs is the 6.19+ variant that takes the arguments in a
	// struct scx_bpf_dsq_insert_vtime_args (__scx_bpf_dsq_insert_vtime), or
	// "" when the kernel does not have it.
	DsqInsertVtimeArgs string `json:"dsq_insert_vtime_args,omitempty"`
	// DsqMoveToLocal moves the first task of a DSQ to the local DSQ:
	// scx_bpf_dsq_move_to_local___v2 (dsq_id, enq_flags), or
	// scx_bpf_dsq_move_to_local / scx_bpf_consume (dsq_id).
	DsqMoveToLocal string `json:"dsq_move_to_local"`
	// DsqMove moves one task, found by walking a DSQ with its iterator, to
	// another DSQ: scx_bpf_dsq_move (6.13+) or scx_bpf_dispatch_from_dsq
	// (6.12), both (it, p, dsq_id, enq_flags).
	DsqMove string `json:"dsq_move"`
	// ReenqueueLocal gives the tasks in this CPU's local DSQ back to
	// ops.enqueue (from ops.cpu_release, when RT or DL takes the CPU):
	// scx_bpf_reenqueue_local___v2 (6.19+, returns void) or
	// scx_bpf_reenqueue_local (returns the count; ambiguous next to ___v2).
	ReenqueueLocal string `json:"reenqueue_local"`
}

// ErrNoSchedObject means the kernel's scx kfuncs are a mix no compilation
// of hotlane's scheduler calls (6.19 and 7.0 pair the ___v2 insert with
// the old move_to_local).
var ErrNoSchedObject = errors.New("no scheduler object for this kernel's scx kfuncs")

// SchedObject names the compilation of hotlane's scheduler
// (bpf/include/scx_api.h) whose kfunc names are exactly k's: "612", "613"
// or "700". doctor and run both decide by it, so they agree on whether the
// scheduler can load. The generations are told apart by name, never by
// kernel version: distributions backport.
//
//	612  scx_bpf_dispatch / scx_bpf_consume / scx_bpf_dispatch_from_dsq   (Linux 6.12)
//	613  scx_bpf_dsq_insert / scx_bpf_dsq_move_to_local / scx_bpf_dsq_move (6.13 .. 6.18)
//	700  scx_bpf_dsq_insert___v2 / scx_bpf_dsq_move_to_local___v2 / scx_bpf_dsq_move (7.1+)
//
// and, in each, scx_bpf_reenqueue_local (___v2 in 700).
func (k Kfuncs) SchedObject() (string, error) {
	switch {
	case k.DsqInsert == "scx_bpf_dispatch" && k.DsqMoveToLocal == "scx_bpf_consume" && k.DsqInsertVtime == "scx_bpf_dispatch_vtime" && k.DsqMove == "scx_bpf_dispatch_from_dsq" && k.ReenqueueLocal == "scx_bpf_reenqueue_local":
		return "612", nil
	case k.DsqInsert == "scx_bpf_dsq_insert" && k.DsqMoveToLocal == "scx_bpf_dsq_move_to_local" && k.DsqInsertVtime == "scx_bpf_dsq_insert_vtime" && k.DsqMove == "scx_bpf_dsq_move" && k.ReenqueueLocal == "scx_bpf_reenqueue_local":
		return "613", nil
	case k.DsqInsert == "scx_bpf_dsq_insert___v2" && k.DsqMoveToLocal == "scx_bpf_dsq_move_to_local___v2" && k.DsqInsertVtime == "scx_bpf_dsq_insert_vtime" && k.DsqMove == "scx_bpf_dsq_move" && k.ReenqueueLocal == "scx_bpf_reenqueue_local___v2":
		return "700", nil
	}
	return "", fmt.Errorf("%w: insert %s, vtime insert %s, move_to_local %s, move %s, reenqueue_local %s match none of the generations hotlane is built for (6.12, 6.13-6.18, 7.1+)",
		ErrNoSchedObject, k.DsqInsert, k.DsqInsertVtime, k.DsqMoveToLocal, k.DsqMove, k.ReenqueueLocal)
}

// HasSchedExtOps reports whether the BTF describes struct sched_ext_ops,
// i.e. whether the kernel was built with CONFIG_SCHED_CLASS_EXT.
func HasSchedExtOps(spec *btf.Spec) bool {
	var ops *btf.Struct
	return spec.TypeByName("sched_ext_ops", &ops) == nil
}

// KfuncGenerationFromBTF returns the scx kfunc generation described by spec
// (normally the running kernel's BTF). It returns an error wrapping
// ErrNoSchedExt when spec has no sched_ext at all, and ErrUnknownKfuncAPI
// when it has sched_ext_ops but none of the known kfunc names.
func KfuncGenerationFromBTF(spec *btf.Spec) (KfuncAPI, error) {
	if spec == nil {
		return KfuncAPIUnknown, ErrNoBTF
	}
	switch {
	// A ___v2 name marks the newest generation even though the plain
	// name (and ___v2_impl) are present too.
	case hasFunc(spec, "scx_bpf_dsq_insert___v2"):
		return KfuncAPIV2, nil
	case hasFunc(spec, "scx_bpf_dsq_insert"):
		return KfuncAPI613, nil
	case hasFunc(spec, "scx_bpf_dispatch"):
		return KfuncAPI612, nil
	case HasSchedExtOps(spec):
		return KfuncAPIUnknown, fmt.Errorf("sched_ext_ops present but no scx_bpf_dsq_insert* or scx_bpf_dispatch: %w", ErrUnknownKfuncAPI)
	default:
		return KfuncAPIUnknown, ErrNoSchedExt
	}
}

// KfuncsFromBTF detects the kfunc generation like KfuncGenerationFromBTF
// and picks, for each operation, the newest name that cilium/ebpf can
// resolve unambiguously in spec. When the generation is known but some
// operation has no usable name, the partly filled Kfuncs is returned with
// an error naming the operations.
func KfuncsFromBTF(spec *btf.Spec) (Kfuncs, error) {
	api, err := KfuncGenerationFromBTF(spec)
	if err != nil {
		return Kfuncs{}, err
	}
	k := Kfuncs{API: api}
	var problems []string
	pick := func(op string, names []string, required bool) string {
		var why []string
		for _, name := range names {
			if _, err := LookupKfunc(spec, name); err == nil {
				return name
			} else if !errors.Is(err, ErrKfuncNotFound) {
				why = append(why, err.Error())
			}
		}
		if required {
			msg := fmt.Sprintf("%s: none of %s is usable", op, strings.Join(names, ", "))
			if len(why) > 0 {
				msg += " (" + strings.Join(why, "; ") + ")"
			}
			problems = append(problems, msg)
		}
		return ""
	}
	// Candidate names per operation, newest first.
	k.DsqInsert = pick("dsq_insert", []string{"scx_bpf_dsq_insert___v2", "scx_bpf_dsq_insert", "scx_bpf_dispatch"}, true)
	k.DsqInsertVtime = pick("dsq_insert_vtime", []string{"scx_bpf_dsq_insert_vtime", "scx_bpf_dispatch_vtime"}, true)
	k.DsqInsertVtimeArgs = pick("dsq_insert_vtime_args", []string{"__scx_bpf_dsq_insert_vtime"}, false)
	k.DsqMoveToLocal = pick("dsq_move_to_local", []string{"scx_bpf_dsq_move_to_local___v2", "scx_bpf_dsq_move_to_local", "scx_bpf_consume"}, true)
	k.DsqMove = pick("dsq_move", []string{"scx_bpf_dsq_move", "scx_bpf_dispatch_from_dsq"}, true)
	k.ReenqueueLocal = pick("reenqueue_local", []string{"scx_bpf_reenqueue_local___v2", "scx_bpf_reenqueue_local"}, true)
	if len(problems) > 0 {
		return k, fmt.Errorf("scx kfunc API %s: %s: %w", api, strings.Join(problems, "; "), ErrUnknownKfuncAPI)
	}
	return k, nil
}

// LookupKfunc finds the kernel function called name the way cilium/ebpf's
// linker does when it resolves a kfunc call, so a name that passes here
// also resolves at load time. Errors wrap ErrKfuncNotFound or
// ErrKfuncAmbiguous.
func LookupKfunc(spec *btf.Spec, name string) (*btf.Func, error) {
	if spec == nil {
		return nil, fmt.Errorf("kfunc %s: %w", name, ErrNoBTF)
	}
	var fn *btf.Func
	err := spec.TypeByName(name, &fn)
	switch {
	case err == nil:
		return fn, nil
	case errors.Is(err, btf.ErrNotFound):
		return nil, fmt.Errorf("kfunc %s: %w", name, ErrKfuncNotFound)
	case errors.Is(err, btf.ErrMultipleMatches):
		return nil, fmt.Errorf("kfunc %s: %w", name, ErrKfuncAmbiguous)
	default:
		return nil, fmt.Errorf("kfunc %s: %w", name, err)
	}
}

// hasFunc reports whether spec holds a function named exactly name,
// whether or not cilium/ebpf could resolve it unambiguously.
func hasFunc(spec *btf.Spec, name string) bool {
	types, err := spec.AnyTypesByName(name)
	if err != nil {
		return false
	}
	for _, t := range types {
		if fn, ok := t.(*btf.Func); ok && fn.Name == name {
			return true
		}
	}
	return false
}
