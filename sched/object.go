package sched

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/hotlane/hotlane/bpf"
	"github.com/hotlane/hotlane/loader"
)

// object is one compilation of bpf/sched.bpf.c (see bpf/include/scx_api.h).
type object struct {
	name string // the HL_SCX_API it was built for
	load func() (*ebpf.CollectionSpec, error)
}

// objectFor picks the compilation whose kfunc names are exactly the ones
// the kernel resolves unambiguously. The generations are told apart by
// name, never by kernel version: distributions backport.
//
//	612  scx_bpf_dispatch / scx_bpf_consume / scx_bpf_dispatch_from_dsq   (Linux 6.12)
//	613  scx_bpf_dsq_insert / scx_bpf_dsq_move_to_local / scx_bpf_dsq_move (6.13 .. 6.18)
//	700  scx_bpf_dsq_insert___v2 / scx_bpf_dsq_move_to_local___v2 / scx_bpf_dsq_move (7.1+)
//
// and, in each, scx_bpf_reenqueue_local (___v2 in 700).
//
// 6.19 and 7.0 pair the ___v2 insert with the old move_to_local; no object
// is built for that mix, and the error says so.
func objectFor(k loader.Kfuncs) (object, error) {
	switch {
	case k.DsqInsert == "scx_bpf_dispatch" && k.DsqMoveToLocal == "scx_bpf_consume" && k.DsqInsertVtime == "scx_bpf_dispatch_vtime" && k.DsqMove == "scx_bpf_dispatch_from_dsq" && k.ReenqueueLocal == "scx_bpf_reenqueue_local":
		return object{"612", bpf.LoadSched612}, nil
	case k.DsqInsert == "scx_bpf_dsq_insert" && k.DsqMoveToLocal == "scx_bpf_dsq_move_to_local" && k.DsqInsertVtime == "scx_bpf_dsq_insert_vtime" && k.DsqMove == "scx_bpf_dsq_move" && k.ReenqueueLocal == "scx_bpf_reenqueue_local":
		return object{"613", bpf.LoadSched613}, nil
	case k.DsqInsert == "scx_bpf_dsq_insert___v2" && k.DsqMoveToLocal == "scx_bpf_dsq_move_to_local___v2" && k.DsqInsertVtime == "scx_bpf_dsq_insert_vtime" && k.DsqMove == "scx_bpf_dsq_move" && k.ReenqueueLocal == "scx_bpf_reenqueue_local___v2":
		return object{"700", bpf.LoadSched700}, nil
	}
	return object{}, fmt.Errorf("%w: this kernel's scx kfuncs (insert %s, vtime insert %s, move_to_local %s, move %s, reenqueue_local %s) match none of the generations hotlane is built for (6.12, 6.13-6.18, 7.1+)",
		ErrUnsupportedKernel, k.DsqInsert, k.DsqInsertVtime, k.DsqMoveToLocal, k.DsqMove, k.ReenqueueLocal)
}
