// Package vm runs hotlane inside a throw-away virtual machine with a
// sched_ext kernel: it fetches a Debian kernel with apt into a cache outside
// the repository, builds an initramfs whose /init is the static hotlane
// binary, boots qemu under TCG and collects the guest's exit code, console
// output and result files. It is how CI exercises sched_ext on hosts whose
// own kernel lacks it.
package vm
