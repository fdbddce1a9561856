//go:build ignore

// The Go toolchain must not see this file: a .c file in a package without cgo
// is a build error. bpf2go compiles it; see gen.go.

/*
 * ioctl.bpf.c - latency of ioctl(2), per device, command and process.
 *
 * The Go side is probe/ioctl. At syscall entry we stamp the time and the
 * fd's device in task-local storage; at exit we count the call into
 *
 *   ioctl_stats   (device, cmd, process) -> calls, errors, sum, max, comm
 *   ioctl_hist    (device, cmd, process, bucket) -> count
 *   ioctl_errno   (device, cmd, process, errno) -> count
 *
 * and stream calls at least slow_ns long through the ioctl_events ring
 * buffer. Every way an event can be lost is counted in ioctl_counters.
 *
 * Why the histogram is a sparse hash keyed by bucket, not a value holding
 * HL_HIST_BUCKETS counters: such a value is 15 KiB, the number of (device,
 * cmd, process) keys is not known in advance, and a per-CPU map multiplies
 * it by the CPUs. Latencies of one key occupy a few dozen buckets, so a
 * hash of (key, bucket) -> u64 costs about 100 bytes per bucket in use,
 * stays exact across CPUs with an atomic add, and a full map is a counted
 * loss. Go sums the buckets of each key into a verify.Histogram.
 *
 * Four hook families, one pair of programs each; the loader keeps only the
 * pair it attaches (probe/ioctl chooses, cheapest first):
 *
 *   fentry/fexit on __x64_sys_ioctl (and __ia32_compat_sys_ioctl for
 *     32-bit processes): run for ioctl only, through a BPF trampoline;
 *   tracepoint syscalls/sys_{enter,exit}_ioctl: run for ioctl only (other
 *     syscalls pass a bitmap test), but the perf tracepoint glue costs
 *     more per call, and 32-bit (compat) syscalls are not reported;
 *   tp_btf and raw_tp on sys_enter/sys_exit: run for every syscall of
 *     every task and keep only ioctl by number (16 on x86-64, 54 for
 *     32-bit tasks).
 *
 * With wakeups_on, two more programs (tp_btf on sched_switch and
 * sched_waking) follow a thread through the sleeps inside its call: how
 * long it slept until something (a device's completion interrupt, say)
 * woke it, and how long it then waited to run. They run on every context
 * switch of the machine, so they are opt-in.
 *
 * Measured on the 6.18 build host (probe/ioctl BenchmarkOverhead, best of
 * 6): the tracepoints add about 400 ns to a counted ioctl and nothing
 * measurable to other syscalls; tp_btf adds 260 ns to the ioctl and
 * 105 ns to every other syscall on the machine (raw_tp 320 and 125).
 */
#include "vmlinux.h"
#include "hotlane_bpf.h"
#include "hist.bpf.h"

LICENSE("GPL");

/* Not in vmlinux.h (macros). */
#define S_IFMT 0170000
#define S_IFCHR 0020000
#define S_IFBLK 0060000

/*
 * ftype is i_mode's file type shifted down (S_IFMT >> 12): 1 fifo, 2 char
 * device, 4 directory, 6 block device, 8 regular file, 10 symlink, 12
 * socket, and 0 for anonymous inodes (eventfd, KVM vCPUs, ...), whose mode
 * has no type bits. 15 is no type: the fd was not open.
 */
#define FTYPE_CHR (S_IFCHR >> 12)
#define FTYPE_BLK (S_IFBLK >> 12)
#define FTYPE_BADFD 15

#define NR_IOCTL_64 16		/* __NR_ioctl, x86-64 */
#define NR_IOCTL_32 54		/* __NR_ioctl, i386: 32-bit tasks */
#define TS_COMPAT 0x0002	/* thread_info.status: in a 32-bit syscall */
#define MAX_ERRNO 4095

/* ---- configuration, set by the loader before loading (.rodata) ---------- */

/* Only this process (thread-group id); 0: every process. */
const volatile __u32 filter_tgid;
/* Only threads whose comm, or whose process's comm, starts with the
 * first filter_comm_len (1..15) bytes of filter_comm; 0: every thread. */
const volatile __u32 filter_comm_len;
const volatile char filter_comm[16];
/* Only fds of the character or block device with this kernel dev_t
 * (major << 20 | minor). */
const volatile bool filter_dev_on;
const volatile __u32 filter_dev;
/* Follow the calls through their sleeps and wake-ups. */
const volatile bool wakeups_on;
/* Stream calls that take at least slow_ns. */
const volatile bool slow_on;
const volatile __u64 slow_ns;
/* Distinct commands of one device that get rows of their own: the first
 * ones seen. Calls of later commands are counted under OTHER_CMD, so that
 * a process making up commands on /dev/null fills that device's share of
 * the tables, not the share every other device needs. 0: no cap. */
const volatile __u32 max_cmds_per_dev;

/* The command of the row of a device's commands beyond the cap:
 * _IOC(3, 0xff, 0xff, 0x3fff), which no driver defines. */
#define OTHER_CMD 0xffffffffu

/* ---- maps ----------------------------------------------------------------- */

/*
 * One key layout for the three tables; slot is 0 in ioctl_stats, the
 * histogram bucket in ioctl_hist and the errno in ioctl_errno.
 */
struct ioctl_key {
	__u32 dev;	/* i_rdev for char/block devices, else the fs's s_dev */
	__u32 cmd;
	__u32 tgid;
	__u16 ftype;
	__u16 slot;
};

struct ioctl_stats {
	__u64 calls;
	__u64 errors;
	__u64 sum_ns;
	__u64 max_ns;
	char comm[16];	/* the process's (thread-group leader's) comm */
	/* With wakeups_on: */
	__u64 slept_calls;	/* calls that slept at least once */
	__u64 wakeups;		/* wake-ups inside calls */
	__u64 asleep_ns;	/* time asleep inside calls */
	__u64 wait_ns;		/* time waiting to run inside calls */
	__u64 max_wait_ns;	/* the longest wait to run in one call */
};

/* What entry leaves for exit; ts == 0 means no call in flight. */
struct ioctl_start {
	__u64 ts;
	__u64 arg;
	__u32 dev;
	__u32 cmd;
	__u32 fd;
	__u16 ftype;
	__u16 pad;
	/* With wakeups_on, for the call in flight: */
	__u64 slept_at;		/* it left the CPU asleep then; 0: not asleep */
	__u64 runnable_at;	/* it was woken (or preempted) then; 0: not waiting */
	__u64 asleep_ns;
	__u64 wait_ns;
	__u32 wakeups;
	__u32 pad2;
};

/* A slow call, streamed through ioctl_events. */
struct ioctl_event {
	__u64 start_ns;	/* bpf_ktime_get_ns (CLOCK_MONOTONIC) at entry */
	__u64 latency_ns;
	__s64 ret;
	__u64 arg;
	__u32 dev;
	__u32 cmd;
	__u32 fd;
	__u32 tgid;
	__u32 pid;	/* the thread */
	__u16 ftype;
	__u16 pad;
	char comm[16];	/* the thread's comm */
	/* With wakeups_on: */
	__u64 asleep_ns;
	__u64 wait_ns;
	__u32 wakeups;
	__u32 pad2;
};

/* Never set: it puts struct ioctl_event into BTF, which ring buffer
 * records otherwise leave out, so that bpf2go generates its Go type. */
const struct ioctl_event *ioctl_event_btf __attribute__((unused));

/* Per-CPU event counters; the lost_* ones are every way to lose a call. */
struct ioctl_counters {
	__u64 calls;
	__u64 errors;
	__u64 slow;
	__u64 lost_ringbuf;	/* slow call not streamed: ring buffer full */
	__u64 lost_hist;	/* latency not counted: ioctl_hist full */
	__u64 lost_stats;	/* call not counted: ioctl_stats full */
	__u64 lost_errno;	/* errno not counted: ioctl_errno full */
	__u64 lost_start;	/* entry not stamped: task storage unavailable */
	__u64 folded_cmds;	/* call counted under OTHER_CMD (max_cmds_per_dev) */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ioctl_start);
} ioctl_start SEC(".maps");

/*
 * The tables are not preallocated: memory grows with the keys in use (a
 * histogram bucket in use costs about 100 bytes), and an entry that cannot
 * be allocated is a counted loss like a full table.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, struct ioctl_key);
	__type(value, struct ioctl_stats);
} ioctl_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 262144);
	__type(key, struct ioctl_key);
	__type(value, __u64);
} ioctl_hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, struct ioctl_key);
	__type(value, __u64);
} ioctl_errno SEC(".maps");

/* The commands admitted to rows of their own, and how many each device
 * has (max_cmds_per_dev). */
struct ioctl_dev_key {
	__u32 dev;
	__u16 ftype;
	__u16 pad;
};

struct ioctl_cmd_key {
	__u32 dev;
	__u32 cmd;
	__u16 ftype;
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, struct ioctl_dev_key);
	__type(value, __u32);
} ioctl_dev_cmds SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, struct ioctl_cmd_key);
	__type(value, __u8);
} ioctl_cmds SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} ioctl_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ioctl_counters);
} ioctl_counters SEC(".maps");

/* ---- helpers --------------------------------------------------------------- */

static __always_inline struct ioctl_counters *counters(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&ioctl_counters, &zero);
}

#define bump(c, field)                                                     \
	do {                                                               \
		if (c)                                                     \
			__sync_fetch_and_add(&(c)->field, 1);              \
	} while (0)

static __always_inline bool comm_is(const char *comm)
{
#pragma unroll
	for (int i = 0; i < 16; i++) {
		if (i >= filter_comm_len)
			return true;
		if (comm[i] != filter_comm[i])
			return false;
	}
	return true;
}

/* The thread's comm or its process's comm starts with filter_comm. */
static __always_inline bool comm_matches(struct task_struct *task)
{
	char comm[16];
	struct task_struct *leader;

	if (bpf_get_current_comm(comm, sizeof(comm)) == 0 && comm_is(comm))
		return true;
	leader = CORE_READ(task, group_leader);
	if (!leader || bpf_probe_read_kernel(comm, sizeof(comm), &leader->comm))
		return false;
	return comm_is(comm);
}

/*
 * The device behind fd: current->files->fdt->fd[fd]->f_inode. The table is
 * read without the file lock, as /proc does under RCU; a racing close can
 * at worst make us see the old file or none.
 */
static __always_inline void resolve_fd(struct task_struct *task, __u32 fd,
				       __u32 *dev, __u16 *ftype)
{
	struct files_struct *files;
	struct fdtable *fdt;
	struct file **fds;
	struct file *file = NULL;
	struct inode *inode;
	struct super_block *sb;
	umode_t mode;

	*dev = 0;
	*ftype = FTYPE_BADFD;
	files = CORE_READ(task, files);
	if (!files)
		return;
	fdt = CORE_READ(files, fdt);
	if (!fdt || fd >= CORE_READ(fdt, max_fds))
		return;
	fds = CORE_READ(fdt, fd);
	if (!fds || bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]) || !file)
		return;
	inode = CORE_READ(file, f_inode);
	if (!inode)
		return;
	mode = CORE_READ(inode, i_mode);
	*ftype = (mode & S_IFMT) >> 12;
	if (*ftype == FTYPE_CHR || *ftype == FTYPE_BLK) {
		*dev = CORE_READ(inode, i_rdev);
		return;
	}
	sb = CORE_READ(inode, i_sb);
	if (sb)
		*dev = CORE_READ(sb, s_dev);
}

/* Count one more in a (key -> u64) table; false if the table is full. */
static __always_inline bool count_key(void *map, struct ioctl_key *key)
{
	__u64 one = 1, *v;

	v = bpf_map_lookup_elem(map, key);
	if (v) {
		__sync_fetch_and_add(v, 1);
		return true;
	}
	if (bpf_map_update_elem(map, key, &one, BPF_NOEXIST) == 0)
		return true;
	/* Another CPU may have created it meanwhile. */
	v = bpf_map_lookup_elem(map, key);
	if (v) {
		__sync_fetch_and_add(v, 1);
		return true;
	}
	return false;
}

/*
 * The command a call is counted under: its own while its device has fewer
 * than max_cmds_per_dev commands with rows (or already has this one),
 * else OTHER_CMD. Two CPUs admitting the same new command at once may
 * both count it; the device's budget is then one smaller, no more.
 */
static __always_inline __u32 admit_cmd(struct ioctl_counters *c, __u32 dev, __u16 ftype, __u32 cmd)
{
	struct ioctl_cmd_key ck = { .dev = dev, .cmd = cmd, .ftype = ftype };
	struct ioctl_dev_key dk = { .dev = dev, .ftype = ftype };
	__u32 zero = 0, *n;
	__u8 one = 1;

	if (!max_cmds_per_dev || cmd == OTHER_CMD || bpf_map_lookup_elem(&ioctl_cmds, &ck))
		return cmd;
	n = bpf_map_lookup_elem(&ioctl_dev_cmds, &dk);
	if (!n) {
		bpf_map_update_elem(&ioctl_dev_cmds, &dk, &zero, BPF_NOEXIST);
		n = bpf_map_lookup_elem(&ioctl_dev_cmds, &dk);
	}
	if (!n || *n >= max_cmds_per_dev)
		goto other;
	__sync_fetch_and_add(n, 1);
	if (bpf_map_update_elem(&ioctl_cmds, &ck, &one, BPF_NOEXIST) == 0 || bpf_map_lookup_elem(&ioctl_cmds, &ck))
		return cmd;
other:
	bump(c, folded_cmds);
	return OTHER_CMD;
}

/* ---- entry and exit ---------------------------------------------------------- */

static __always_inline void ioctl_enter(__u64 fd, __u64 cmd, __u64 arg)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct ioctl_start *s;
	bool match = true;
	__u16 ftype;
	__u32 dev;

	if (filter_tgid && tgid != filter_tgid)
		return;
	if (filter_comm_len)
		match = comm_matches(task);
	if (match) {
		resolve_fd(task, fd, &dev, &ftype);
		if (filter_dev_on && (dev != filter_dev ||
				      (ftype != FTYPE_CHR && ftype != FTYPE_BLK)))
			match = false;
	}
	if (!match) {
		/* Forget a call whose exit we missed, so this exit cannot
		 * be taken for it. */
		s = bpf_task_storage_get(&ioctl_start, task, NULL, 0);
		if (s)
			s->ts = 0;
		return;
	}
	s = bpf_task_storage_get(&ioctl_start, task, NULL,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!s) {
		struct ioctl_counters *c = counters();

		bump(c, lost_start);
		return;
	}
	s->arg = arg;
	s->dev = dev;
	s->cmd = cmd;
	s->fd = fd;
	s->ftype = ftype;
	s->slept_at = 0;
	s->runnable_at = 0;
	s->asleep_ns = 0;
	s->wait_ns = 0;
	s->wakeups = 0;
	s->ts = bpf_ktime_get_ns();
}

/* Atomically raises *max to v. */
static __always_inline void raise_max(__u64 *max, __u64 v)
{
	__u64 old = *max;

	for (int i = 0; i < 4 && v > old; i++) {
		__u64 seen = __sync_val_compare_and_swap(max, old, v);

		if (seen == old)
			break;
		old = seen;
	}
}

static __always_inline void ioctl_exit(long ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 id = bpf_get_current_pid_tgid();
	struct ioctl_counters *c;
	struct ioctl_start *s;
	struct ioctl_stats *st;
	struct ioctl_key key = {};
	struct task_struct *leader;
	bool failed = ret < 0 && ret >= -MAX_ERRNO;
	__u64 start, lat;

	s = bpf_task_storage_get(&ioctl_start, task, NULL, 0);
	if (!s || !s->ts)
		return;
	start = s->ts;
	s->ts = 0;
	lat = bpf_ktime_get_ns() - start;

	c = counters();
	key.dev = s->dev;
	key.cmd = admit_cmd(c, s->dev, s->ftype, s->cmd);
	key.tgid = id >> 32;
	key.ftype = s->ftype;

	bump(c, calls);
	if (failed)
		bump(c, errors);

	st = bpf_map_lookup_elem(&ioctl_stats, &key);
	if (!st) {
		struct ioctl_stats zero = {};

		bpf_map_update_elem(&ioctl_stats, &key, &zero, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&ioctl_stats, &key);
	}
	if (st) {
		__sync_fetch_and_add(&st->calls, 1);
		__sync_fetch_and_add(&st->sum_ns, lat);
		if (failed)
			__sync_fetch_and_add(&st->errors, 1);
		raise_max(&st->max_ns, lat);
		if (wakeups_on && s->wakeups) {
			__sync_fetch_and_add(&st->slept_calls, 1);
			__sync_fetch_and_add(&st->wakeups, s->wakeups);
			__sync_fetch_and_add(&st->asleep_ns, s->asleep_ns);
			__sync_fetch_and_add(&st->wait_ns, s->wait_ns);
			raise_max(&st->max_wait_ns, s->wait_ns);
		}
		/* Refreshed on every call, so a process that exec'd shows
		 * its new name. */
		leader = CORE_READ(task, group_leader);
		if (leader)
			bpf_probe_read_kernel(st->comm, sizeof(st->comm), &leader->comm);
	} else {
		bump(c, lost_stats);
	}

	key.slot = hl_hist_bucket(lat);
	if (!count_key(&ioctl_hist, &key))
		bump(c, lost_hist);

	if (failed) {
		key.slot = -ret;
		if (!count_key(&ioctl_errno, &key))
			bump(c, lost_errno);
	}

	if (slow_on && lat >= slow_ns) {
		struct ioctl_event *e;

		e = bpf_ringbuf_reserve(&ioctl_events, sizeof(*e), 0);
		if (!e) {
			bump(c, lost_ringbuf);
			return;
		}
		e->start_ns = start;
		e->latency_ns = lat;
		e->ret = ret;
		e->arg = s->arg;
		e->dev = key.dev;
		e->cmd = s->cmd;	/* the call's own, folded or not */
		e->fd = s->fd;
		e->tgid = key.tgid;
		e->pid = (__u32)id;
		e->ftype = key.ftype;
		e->pad = 0;
		e->asleep_ns = s->asleep_ns;
		e->wait_ns = s->wait_ns;
		e->wakeups = s->wakeups;
		e->pad2 = 0;
		bpf_get_current_comm(e->comm, sizeof(e->comm));
		bpf_ringbuf_submit(e, 0);
		bump(c, slow);
	}
}

/* In a 32-bit syscall: the registers and numbers are i386's. */
static __always_inline bool in_compat_syscall(void)
{
	struct task_struct *task = bpf_get_current_task_btf();

	return CORE_READ(task, thread_info.status) & TS_COMPAT;
}

/* ---- fentry/fexit: the syscall functions themselves ------------------------ */

/* __x64_sys_ioctl(const struct pt_regs *regs): arguments in di, si, dx. */
SEC("fentry/__x64_sys_ioctl")
int ioctl_fentry(u64 *ctx)
{
	struct pt_regs *regs = (struct pt_regs *)ctx[0];

	ioctl_enter(regs->di, regs->si, regs->dx);
	return 0;
}

SEC("fexit/__x64_sys_ioctl")
int ioctl_fexit(u64 *ctx)
{
	ioctl_exit((long)ctx[1]);
	return 0;
}

/* __ia32_compat_sys_ioctl(const struct pt_regs *regs): bx, cx, dx. */
SEC("fentry/__ia32_compat_sys_ioctl")
int ioctl_fentry32(u64 *ctx)
{
	struct pt_regs *regs = (struct pt_regs *)ctx[0];

	ioctl_enter((__u32)regs->bx, (__u32)regs->cx, (__u32)regs->dx);
	return 0;
}

SEC("fexit/__ia32_compat_sys_ioctl")
int ioctl_fexit32(u64 *ctx)
{
	ioctl_exit((long)ctx[1]);
	return 0;
}

/* ---- classic syscall tracepoints (tracefs) --------------------------------- */

/* The sys_enter_ioctl record is laid out as trace_event_raw_sys_enter:
 * args[] = fd, cmd, arg. */
SEC("tracepoint/syscalls/sys_enter_ioctl")
int ioctl_tp_enter(struct trace_event_raw_sys_enter *ctx)
{
	ioctl_enter(ctx->args[0], ctx->args[1], ctx->args[2]);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_ioctl")
int ioctl_tp_exit(struct trace_event_raw_sys_exit *ctx)
{
	ioctl_exit(ctx->ret);
	return 0;
}

/* ---- raw syscall tracepoints: every syscall, filtered by number ------------ */

/* sys_enter is (struct pt_regs *regs, long id); sys_exit is
 * (struct pt_regs *regs, long ret), the number being regs->orig_ax. */

SEC("tp_btf/sys_enter")
int ioctl_btf_enter(u64 *ctx)
{
	struct pt_regs *regs = (struct pt_regs *)ctx[0];
	long id = (long)ctx[1];

	if (likely(id != NR_IOCTL_64 && id != NR_IOCTL_32))
		return 0;
	if (in_compat_syscall()) {
		if (id == NR_IOCTL_32)
			ioctl_enter((__u32)regs->bx, (__u32)regs->cx, (__u32)regs->dx);
	} else if (id == NR_IOCTL_64) {
		ioctl_enter(regs->di, regs->si, regs->dx);
	}
	return 0;
}

SEC("tp_btf/sys_exit")
int ioctl_btf_exit(u64 *ctx)
{
	struct pt_regs *regs = (struct pt_regs *)ctx[0];
	long id = regs->orig_ax;

	if (likely(id != NR_IOCTL_64 && id != NR_IOCTL_32))
		return 0;
	if (id == (in_compat_syscall() ? NR_IOCTL_32 : NR_IOCTL_64))
		ioctl_exit((long)ctx[1]);
	return 0;
}

SEC("raw_tp/sys_enter")
int ioctl_raw_enter(u64 *ctx)
{
	struct pt_regs *regs = (struct pt_regs *)ctx[0];
	long id = (long)ctx[1];

	if (likely(id != NR_IOCTL_64 && id != NR_IOCTL_32))
		return 0;
	if (in_compat_syscall()) {
		if (id == NR_IOCTL_32)
			ioctl_enter((__u32)CORE_READ(regs, bx), (__u32)CORE_READ(regs, cx),
				    (__u32)CORE_READ(regs, dx));
	} else if (id == NR_IOCTL_64) {
		ioctl_enter(CORE_READ(regs, di), CORE_READ(regs, si), CORE_READ(regs, dx));
	}
	return 0;
}

SEC("raw_tp/sys_exit")
int ioctl_raw_exit(u64 *ctx)
{
	struct pt_regs *regs = (struct pt_regs *)ctx[0];
	long id = CORE_READ(regs, orig_ax);

	if (likely(id != NR_IOCTL_64 && id != NR_IOCTL_32))
		return 0;
	if (id == (in_compat_syscall() ? NR_IOCTL_32 : NR_IOCTL_64))
		ioctl_exit((long)ctx[1]);
	return 0;
}

/* ---- the wake-up chain inside a call (wakeups_on) ---------------------------- */

/*
 * sched_switch(bool preempt, prev, next, unsigned int prev_state): prev
 * leaves the CPU asleep (a state other than running) or preempted; next
 * gets it, ending a wait to run.
 */
SEC("tp_btf/sched_switch")
int ioctl_switch(u64 *ctx)
{
	bool preempt = ctx[0];
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	unsigned int prev_state = ctx[3];
	struct ioctl_start *s;
	__u64 now = bpf_ktime_get_ns();

	s = bpf_task_storage_get(&ioctl_start, prev, NULL, 0);
	if (s && s->ts) {
		/* A preempted task stays queued whatever its state says. */
		if (!preempt && prev_state)
			s->slept_at = now;
		else
			s->runnable_at = now;	/* it waits to run again */
	}
	s = bpf_task_storage_get(&ioctl_start, next, NULL, 0);
	if (s && s->ts && s->runnable_at) {
		s->wait_ns += now - s->runnable_at;
		s->runnable_at = 0;
	}
	return 0;
}

/* sched_waking(p): the waker's try_to_wake_up, where a wait to run starts
 * under every scheduler (as the latency tracer counts it). */
SEC("tp_btf/sched_waking")
int ioctl_waking(u64 *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx[0];
	struct ioctl_start *s = bpf_task_storage_get(&ioctl_start, p, NULL, 0);
	__u64 now;

	if (!s || !s->ts || !s->slept_at)
		return 0;
	now = bpf_ktime_get_ns();
	s->asleep_ns += now - s->slept_at;
	s->slept_at = 0;
	s->runnable_at = now;
	s->wakeups++;
	return 0;
}
