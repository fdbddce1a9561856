/*
 * classify.bpf.h - hotlane's task classifier, shared by the scheduler and
 * the latency tracer so both put a task in the same class.
 *
 * The policy (policy/ in Go) is compiled into a rule table that the loader
 * writes into the program's read-only data before load. A rule is an AND of
 * the fields named in its `kinds` mask; rules are ordered as the policy's
 * classes, and the first rule that matches gives the class. A task that no
 * rule matches falls into the last class, the catch-all.
 *
 * The layout of struct hl_rule is mirrored by policy.Rule in Go; a test
 * compares the two through the objects' BTF.
 *
 * Classifying on every event would cost a rule walk per sched_switch, so the
 * result is cached in task-local storage together with what it was computed
 * from (comm, group leader comm, cgroup, scheduling policy, the devices in
 * use). A prctl(PR_SET_NAME), a cgroup move or a device touched or left
 * idle changes one of those and the next event reclassifies the task; pid
 * reuse cannot return a stale class because the storage dies with the task.
 *
 * Device matchers put a thread (device) or its whole process
 * (device_process) in a class once it has opened a device of a set, or
 * issued an ioctl on one: hl_device_used(), called from fentry programs on
 * security_file_open() and security_file_ioctl(), stamps the thread's and
 * the group leader's task storage with the time. A set with an idle time
 * stops matching that long after the last use. The identity is the file's
 * inode (i_rdev of a character or block device), as the ioctl probe reads
 * it, so a device is the same whoever looks.
 */
#ifndef HOTLANE_CLASSIFY_BPF_H
#define HOTLANE_CLASSIFY_BPF_H

#define HL_MAX_CLASSES 8
#define HL_MAX_RULES 32
#define HL_COMM_LEN 16
#define HL_SCHED_EXT 7 /* SCHED_EXT policy number (uapi/linux/sched.h) */

/* Fields a rule checks; a rule matches when all of them hold. */
enum hl_match_kind {
	HL_MATCH_COMM_PREFIX  = 1 << 0, /* task comm starts with comm (comm_mask) */
	HL_MATCH_COMM_EXACT   = 1 << 1, /* task comm equals comm */
	HL_MATCH_PCOMM_PREFIX = 1 << 2, /* group leader's comm starts with pcomm */
	HL_MATCH_PCOMM_EXACT  = 1 << 3, /* group leader's comm equals pcomm */
	HL_MATCH_PID          = 1 << 4, /* thread id */
	HL_MATCH_TGID         = 1 << 5, /* process id */
	HL_MATCH_CGROUP       = 1 << 6, /* in cgroup v2 cgroup_id or below it */
	HL_MATCH_SCHED_EXT    = 1 << 7, /* task chose SCHED_EXT with sched_setscheduler */
	HL_MATCH_DEVICE       = 1 << 8, /* the thread used a device of set devset */
	HL_MATCH_DEVICE_PROCESS = 1 << 9, /* a thread of its process did */
};

struct hl_rule {
	__u32 class_id;
	__u32 kinds;		/* enum hl_match_kind bits */
	char comm[HL_COMM_LEN];
	char pcomm[HL_COMM_LEN];
	/* 0xff for each byte of comm (pcomm) compared: a prefix's bytes, or
	 * all 16 for an exact name, NUL padding included. */
	__u8 comm_mask[HL_COMM_LEN];
	__u8 pcomm_mask[HL_COMM_LEN];
	__u32 pid;
	__u32 tgid;
	__u64 cgroup_id;	/* kernfs id (inode number) of the cgroup directory */
	__u32 cgroup_level;	/* its depth below the root, to find the ancestor */
	__u32 devset;		/* for HL_MATCH_DEVICE*: index in hl_devset_idle_ns */
};

/* Set by the loader before load; const so the verifier sees the bounds. */
const volatile __u32 hl_nr_rules;
const volatile __u32 hl_nr_classes = 1;
/* Every match kind some rule uses, written by the loader: identity fields
 * no rule looks at are not read (the group leader's comm and the cgroup id
 * are pointer chases on every event). All ones, the default, reads all. */
const volatile __u32 hl_rule_kinds = 0xffffffff;
#define HL_NEEDS_PCOMM (hl_rule_kinds & (HL_MATCH_PCOMM_PREFIX | HL_MATCH_PCOMM_EXACT))
#define HL_NEEDS_CGROUP (hl_rule_kinds & HL_MATCH_CGROUP)
#define HL_NEEDS_DEVICE_THREAD (hl_rule_kinds & HL_MATCH_DEVICE)
#define HL_NEEDS_DEVICE_PROCESS (hl_rule_kinds & HL_MATCH_DEVICE_PROCESS)
const volatile struct hl_rule hl_rules[HL_MAX_RULES];

/*
 * Device sets. A range is devices lo..hi of one kind, as the kernel's
 * dev_t (major << 20 | minor); each belongs to one set, and a set is one
 * device matcher's devices and idle time. Mirrored by policy.DeviceRange.
 */
#define HL_MAX_DEVSETS 8
#define HL_MAX_DEV_RANGES 32
#define HL_DEV_CHAR 0
#define HL_DEV_BLOCK 1

struct hl_dev_range {
	__u32 lo;
	__u32 hi;
	__u32 devset;
	__u32 block;	/* HL_DEV_BLOCK for block devices, else character */
};

const volatile struct hl_dev_range hl_dev_ranges[HL_MAX_DEV_RANGES];
const volatile __u32 hl_nr_dev_ranges;
const volatile __u32 hl_nr_devsets;
/* How long after its last use a set stops matching a task; 0: never. */
const volatile __u64 hl_devset_idle_ns[HL_MAX_DEVSETS];

/* What a cached class was computed from. */
struct hl_task_class {
	__u64 comm[2];		/* task comm, as two words for a cheap compare */
	__u64 pcomm[2];
	__u64 cgroup_id;
	__u32 policy;
	__u32 class_id;
	__u32 valid;
	__u32 devices;		/* hl_task_identity.devices */
};

/* The cache's own task storage, for a program that keeps no task context
 * of its own (the tracer); the scheduler's task context holds the entry,
 * and it defines HL_CLASSIFY_OWN_STORAGE. */
#ifndef HL_CLASSIFY_OWN_STORAGE
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct hl_task_class);
} hl_task_classes SEC(".maps");
#endif

/* Counted when task storage cannot be created (out of memory): the task is
 * then classified afresh on every event instead of being misclassified. */
__u64 hl_classify_storage_failures;

/* When a thread, or a thread of a process, last used a device of each set. */
struct hl_dev_use {
	__u64 at[HL_MAX_DEVSETS];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct hl_dev_use);
} hl_dev_threads SEC(".maps");

/* Keyed by the group leader, so every thread of a process finds it. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct hl_dev_use);
} hl_dev_procs SEC(".maps");

/* Device uses that could not be recorded (no memory for task storage):
 * the task is not in the device's class until a later use is recorded. */
__u64 hl_dev_use_failures;

/*
 * What rules look at, read once per classification. Everything is read with
 * CO-RE probe reads, so the same code serves trusted pointers (tp_btf,
 * struct_ops) and untrusted ones (the tracer's raw_tp fallback).
 */
struct hl_task_identity {
	__u64 comm[2];		/* task comm, as two words for a cheap compare */
	__u64 pcomm[2];		/* group leader's comm */
	__u64 cgroup_id;	/* kernfs id of the task's cgroup v2 cgroup */
	void *cgroup;		/* struct cgroup *, for the ancestor walk */
	__u32 pid;
	__u32 tgid;
	__u32 policy;
	/* Device sets in use: bit s for the thread, bit 8 + s for its process.
	 * Known only for trusted task pointers (hl_device_bits); 0 otherwise. */
	__u32 devices;
};

static __always_inline void hl_read_identity(struct task_struct *p, struct hl_task_identity *id)
{
	struct task_struct *leader = HL_NEEDS_PCOMM ? CORE_READ(p, group_leader) : NULL;
	struct css_set *cset = HL_NEEDS_CGROUP ? CORE_READ(p, cgroups) : NULL;
	struct cgroup *cgrp = NULL;
	struct kernfs_node *kn = NULL;

	CORE_READ_INTO(&id->comm, &p->comm);
	if (leader)
		CORE_READ_INTO(&id->pcomm, &leader->comm);
	id->pid = CORE_READ(p, pid);
	id->tgid = CORE_READ(p, tgid);
	id->policy = CORE_READ(p, policy);
	if (cset)
		cgrp = CORE_READ(cset, dfl_cgrp);
	if (cgrp)
		kn = CORE_READ(cgrp, kn);
	if (kn)
		id->cgroup_id = CORE_READ(kn, id);
	id->cgroup = cgrp;
}

/* Does have start with want[:len]? For a len the loader fixes (the
 * tracer's comm filter), so the verifier walks the loop once. */
static __always_inline int hl_prefix_eq(const char *have, const volatile char *want, __u32 len)
{
	for (int i = 0; i < HL_COMM_LEN; i++) {
		if (i >= len)
			return 1;
		if (have[i] != want[i])
			return 0;
	}
	return 1;
}

/*
 * Does a name, read as two words, equal want in the bytes mask selects? A
 * prefix and an exact name are the same compare with different masks, in
 * straight-line code: a byte loop would make the verifier walk every
 * length for every rule.
 */
static __always_inline int hl_name_eq(const __u64 *have, const volatile char *want,
				      const volatile __u8 *mask)
{
	const volatile __u64 *w = (const volatile __u64 *)want, *m = (const volatile __u64 *)mask;

	return !(((have[0] ^ w[0]) & m[0]) | ((have[1] ^ w[1]) & m[1]));
}

/* Is the cgroup at `level` above the task's cgroup the one with `id`?
 * cgroup->ancestors[] is indexed by depth, so this is one read, not a walk. */
static __always_inline int hl_cgroup_match(void *cgroup, __u64 id, __u32 level)
{
	struct cgroup *cgrp = cgroup, *anc = NULL;
	struct kernfs_node *kn = NULL;
	__u64 off;

	if (!cgrp || CORE_READ(cgrp, level) < (int)level || level >= 64)
		return 0;
	off = __builtin_preserve_field_info(cgrp->ancestors, 0 /* BPF_FIELD_BYTE_OFFSET */);
	bpf_probe_read_kernel(&anc, sizeof(anc), (void *)((__u64)cgrp + off + level * sizeof(anc)));
	if (anc)
		kn = CORE_READ(anc, kn);
	return kn && CORE_READ(kn, id) == id;
}

/* Walks the rule table; the first rule whose fields all hold gives the class. */
static __always_inline __u32 hl_classify_identity(const struct hl_task_identity *id)
{
	int i;

	for_each_num(i, 0, hl_nr_rules) {
		const volatile struct hl_rule *r;
		__u32 k;

		if (i < 0 || i >= HL_MAX_RULES)
			break;
		r = &hl_rules[i];
		/* Which rule this is, the verifier cannot know; masked with
		 * the kinds some rule uses, a test no rule needs is known to
		 * be false and is not walked at all. */
		k = r->kinds & hl_rule_kinds;
		if ((k & HL_MATCH_PID) && id->pid != r->pid)
			continue;
		if ((k & HL_MATCH_TGID) && id->tgid != r->tgid)
			continue;
		if ((k & HL_MATCH_SCHED_EXT) && id->policy != HL_SCHED_EXT)
			continue;
		if ((k & (HL_MATCH_COMM_PREFIX | HL_MATCH_COMM_EXACT)) &&
		    !hl_name_eq(id->comm, r->comm, r->comm_mask))
			continue;
		if ((k & (HL_MATCH_PCOMM_PREFIX | HL_MATCH_PCOMM_EXACT)) &&
		    !hl_name_eq(id->pcomm, r->pcomm, r->pcomm_mask))
			continue;
		if ((k & HL_MATCH_CGROUP) && !hl_cgroup_match(id->cgroup, r->cgroup_id, r->cgroup_level))
			continue;
		if ((k & HL_MATCH_DEVICE) && !(id->devices & (1U << (r->devset & 7))))
			continue;
		if ((k & HL_MATCH_DEVICE_PROCESS) && !(id->devices & (1U << (8 + (r->devset & 7)))))
			continue;
		return r->class_id;
	}
	return hl_nr_classes - 1;
}

/*
 * hl_class_in returns the class of a task whose identity the caller has
 * read, from its cache entry c when the task's comm, its leader's comm,
 * its cgroup and its policy are unchanged, and refreshes the entry
 * otherwise; without an entry (c NULL, out of memory) it classifies afresh
 * and counts that. hl_classify_cached finds the entry: p must be a trusted
 * task pointer (tp_btf and struct_ops arguments), since task storage is
 * keyed by the task itself.
 */
static __always_inline __u32 hl_class_in(struct hl_task_class *c, const struct hl_task_identity *id)
{
	__u32 class_id;

	if (c && c->valid && c->comm[0] == id->comm[0] && c->comm[1] == id->comm[1] &&
	    c->pcomm[0] == id->pcomm[0] && c->pcomm[1] == id->pcomm[1] &&
	    c->cgroup_id == id->cgroup_id && c->policy == id->policy && c->devices == id->devices)
		return c->class_id;

	class_id = hl_classify_identity(id);
	if (!c) {
		__sync_fetch_and_add(&hl_classify_storage_failures, 1);
		return class_id;
	}
	c->comm[0] = id->comm[0];
	c->comm[1] = id->comm[1];
	c->pcomm[0] = id->pcomm[0];
	c->pcomm[1] = id->pcomm[1];
	c->cgroup_id = id->cgroup_id;
	c->policy = id->policy;
	c->devices = id->devices;
	c->class_id = class_id;
	c->valid = 1;
	return class_id;
}

/* The device sets of u still in use at now, as bits from bit shift. */
static __always_inline __u32 hl_dev_live(const struct hl_dev_use *u, __u64 now, __u32 shift)
{
	__u32 bits = 0;
	int s;

	for_each_num(s, 0, hl_nr_devsets) {
		__u64 idle;

		if (s < 0 || s >= HL_MAX_DEVSETS)
			break;
		idle = hl_devset_idle_ns[s];
		if (u->at[s] && (!idle || now - u->at[s] < idle))
			bits |= 1U << (s + shift);
	}
	return bits;
}

/*
 * hl_device_bits fills id->devices for a trusted task pointer: the device
 * sets the thread, and its process, used recently enough. Nothing is read
 * unless some rule matches on devices.
 */
static __always_inline void hl_device_bits(struct task_struct *p, struct hl_task_identity *id)
{
	struct hl_dev_use *u;
	struct task_struct *leader;
	__u64 now;

	if (!HL_NEEDS_DEVICE_THREAD && !HL_NEEDS_DEVICE_PROCESS)
		return;
	now = bpf_ktime_get_ns();
	if (HL_NEEDS_DEVICE_THREAD) {
		u = bpf_task_storage_get(&hl_dev_threads, p, NULL, 0);
		if (u)
			id->devices |= hl_dev_live(u, now, 0);
	}
	if (HL_NEEDS_DEVICE_PROCESS) {
		leader = p->group_leader;
		u = leader ? bpf_task_storage_get(&hl_dev_procs, leader, NULL, 0) : NULL;
		if (u)
			id->devices |= hl_dev_live(u, now, 8);
	}
}

/* Stamps u with now for every set in sets. */
static __always_inline void hl_dev_stamp(struct hl_dev_use *u, __u32 sets, __u64 now)
{
	for (__u32 s = 0; s < HL_MAX_DEVSETS; s++)
		if (sets & (1U << s))
			u->at[s] = now;
}

#define HL_S_IFMT 00170000 /* include/uapi/linux/stat.h */
#define HL_S_IFCHR 0020000
#define HL_S_IFBLK 0060000

/*
 * hl_device_used records that the current thread opened f or issued an
 * ioctl on it, if f is a device of some set. For fentry programs on
 * security_file_open() and security_file_ioctl(), whose file argument is
 * a trusted pointer.
 */
static __always_inline void hl_device_used(struct file *f)
{
	struct inode *inode = f ? f->f_inode : NULL;
	struct task_struct *task, *leader;
	struct hl_dev_use *u;
	__u32 mode, rdev, block, sets = 0;
	__u64 now;
	int i;

	if (!inode)
		return;
	mode = inode->i_mode & HL_S_IFMT;
	if (mode != HL_S_IFCHR && mode != HL_S_IFBLK)
		return;
	block = mode == HL_S_IFBLK ? HL_DEV_BLOCK : HL_DEV_CHAR;
	rdev = inode->i_rdev;
	for_each_num(i, 0, hl_nr_dev_ranges) {
		const volatile struct hl_dev_range *r;

		if (i < 0 || i >= HL_MAX_DEV_RANGES)
			break;
		r = &hl_dev_ranges[i];
		if (r->block == block && rdev >= r->lo && rdev <= r->hi)
			sets |= 1U << (r->devset & 7);
	}
	if (!sets)
		return;
	now = bpf_ktime_get_ns();
	task = bpf_get_current_task_btf();
	if (HL_NEEDS_DEVICE_THREAD) {
		u = bpf_task_storage_get(&hl_dev_threads, task, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (u)
			hl_dev_stamp(u, sets, now);
		else
			__sync_fetch_and_add(&hl_dev_use_failures, 1);
	}
	if (HL_NEEDS_DEVICE_PROCESS) {
		leader = task->group_leader;
		u = leader ? bpf_task_storage_get(&hl_dev_procs, leader, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE) : NULL;
		if (u)
			hl_dev_stamp(u, sets, now);
		else
			__sync_fetch_and_add(&hl_dev_use_failures, 1);
	}
}

#ifndef HL_CLASSIFY_OWN_STORAGE
/* For trusted task pointers: with the device sets in use, through the cache. */
static __always_inline __u32 hl_classify_cached(struct task_struct *p, struct hl_task_identity *id)
{
	hl_device_bits(p, id);
	return hl_class_in(bpf_task_storage_get(&hl_task_classes, p, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE), id);
}
#endif

/*
 * hl_read_identity_trusted is hl_read_identity for a trusted task pointer
 * (struct_ops and tp_btf arguments): plain loads, which the verifier turns
 * into exception-handled memory reads, instead of a bpf_probe_read_kernel()
 * call per field. The scheduler classifies on its hot path, so this is the
 * difference between a handful of instructions and ten helper calls.
 */
static __always_inline void hl_read_identity_trusted(struct task_struct *p, struct hl_task_identity *id)
{
	struct task_struct *leader = HL_NEEDS_PCOMM ? p->group_leader : NULL;
	struct css_set *cset = HL_NEEDS_CGROUP ? p->cgroups : NULL;
	struct cgroup *cgrp = cset ? cset->dfl_cgrp : NULL;
	struct kernfs_node *kn = cgrp ? cgrp->kn : NULL;
	__u64 *comm = (__u64 *)p->comm;

	id->comm[0] = comm[0];
	id->comm[1] = comm[1];
	if (leader) {
		comm = (__u64 *)leader->comm;
		id->pcomm[0] = comm[0];
		id->pcomm[1] = comm[1];
	}
	id->pid = p->pid;
	id->tgid = p->tgid;
	id->policy = p->policy;
	id->cgroup_id = kn ? kn->id : 0;
	id->cgroup = cgrp;
}

/* hl_classify_entry classifies a trusted task pointer through a cache
 * entry the caller keeps in task storage of its own (the scheduler's task
 * context holds one), or afresh when c is NULL. */
static __always_inline __u32 hl_classify_entry(struct task_struct *p, struct hl_task_class *c)
{
	struct hl_task_identity id = {};

	hl_read_identity_trusted(p, &id);
	hl_device_bits(p, &id);
	return hl_class_in(c, &id);
}

#endif /* HOTLANE_CLASSIFY_BPF_H */
