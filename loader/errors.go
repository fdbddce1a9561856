package loader

import "errors"

// Sentinel errors returned (wrapped) by this package; test for them with
// errors.Is.
var (
	// ErrNoBTF means the kernel exposes no BTF (CONFIG_DEBUG_INFO_BTF off),
	// so tp_btf, fentry, kfuncs and sched_ext cannot be used.
	ErrNoBTF = errors.New("kernel BTF not available")
	// ErrNoSchedExt means the kernel was built without
	// CONFIG_SCHED_CLASS_EXT: BTF has neither sched_ext_ops nor scx kfuncs.
	ErrNoSchedExt = errors.New("kernel has no sched_ext (CONFIG_SCHED_CLASS_EXT)")
	// ErrUnknownKfuncAPI means the kernel has sched_ext but none of the scx
	// kfunc generations hotlane knows.
	ErrUnknownKfuncAPI = errors.New("unknown scx kfunc API generation")
	// ErrKfuncNotFound means no function of that exact name is in kernel BTF.
	ErrKfuncNotFound = errors.New("kfunc not found in kernel BTF")
	// ErrKfuncAmbiguous means cilium/ebpf cannot resolve the name to exactly
	// one kernel function (e.g. plain scx_bpf_dsq_insert on 7.x kernels,
	// which also carry ___v2 and ___v2_impl variants).
	ErrKfuncAmbiguous = errors.New("kfunc name is ambiguous in kernel BTF")
	// ErrEnumNotFound means no enum in the BTF has a value of that name.
	ErrEnumNotFound = errors.New("enum value not found in BTF")
	// ErrUnknownFeature means a feature name is not one Probe reports.
	ErrUnknownFeature = errors.New("unknown feature")
)

// ErrMissingCapabilities is returned by RequireCapabilities.
var ErrMissingCapabilities = errors.New("missing capabilities")

// ErrDeviceHooks: a policy has device matchers and the kernel would not
// load or attach the fentry programs on security_file_open and
// security_file_ioctl that see device use (some sandboxes refuse fentry).
var ErrDeviceHooks = errors.New("the policy's device matchers need fentry programs on security_file_open and security_file_ioctl, which this kernel refused; use a policy without device matchers here")
