package sched

import (
	"errors"

	"github.com/hotlane/hotlane/loader"
)

// Errors Load returns; test them with errors.Is.
var (
	// ErrNoSchedExt: the running kernel was built without sched_ext.
	ErrNoSchedExt = errors.New("this kernel lacks CONFIG_SCHED_CLASS_EXT: run hotlane inside `hotlane vm` or use a 6.12+ kernel built with it")
	// ErrOtherScheduler: another BPF scheduler is already enabled.
	ErrOtherScheduler = errors.New("another sched_ext scheduler is running")
	// ErrUnsupportedKernel: sched_ext is there but its kfuncs are of a
	// generation hotlane has no object for.
	ErrUnsupportedKernel = errors.New("unsupported sched_ext kfunc generation")
	// ErrPermission: loading needs privileges the process lacks.
	ErrPermission = errors.New("loading a BPF scheduler needs root (CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN)")
	// ErrDeviceHooks: the policy has device matchers, and the kernel
	// would not load or attach the fentry programs that see device use.
	ErrDeviceHooks = loader.ErrDeviceHooks
	// ErrNoCost: Cost on a scheduler loaded without Config.MeasureCost.
	ErrNoCost = errors.New("scheduler loaded without MeasureCost")
)
