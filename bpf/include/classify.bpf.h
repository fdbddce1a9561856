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
 * from (comm, group leader comm, cgroup, scheduling policy). A prctl(PR_SET_NAME) or a cgroup
 * move changes one of those and the next event reclassifies the task; pid
 * reuse cannot return a stale class because the storage dies with the task.
 */
#ifndef HOTLANE_CLASSIFY_BPF_H
#define HOTLANE_CLASSIFY_BPF_H

#define HL_MAX_CLASSES 8
#define HL_MAX_RULES 32
#define HL_COMM_LEN 16
#define HL_SCHED_EXT 7 /* SCHED_EXT policy number (uapi/linux/sched.h) */

/* Fields a rule checks; a rule matches when all of them hold. */
enum hl_match_kind {
	HL_MATCH_COMM_PREFIX  = 1 << 0, /* task comm starts with comm[:comm_len] */
	HL_MATCH_COMM_EXACT   = 1 << 1, /* task comm equals comm */
	HL_MATCH_PCOMM_PREFIX = 1 << 2, /* group leader's comm starts with pcomm */
	HL_MATCH_PCOMM_EXACT  = 1 << 3, /* group leader's comm equals pcomm */
	HL_MATCH_PID          = 1 << 4, /* thread id */
	HL_MATCH_TGID         = 1 << 5, /* process id */
	HL_MATCH_CGROUP       = 1 << 6, /* in cgroup v2 cgroup_id or below it */
	HL_MATCH_SCHED_EXT    = 1 << 7, /* task chose SCHED_EXT with sched_setscheduler */
};

struct hl_rule {
	__u32 class_id;
	__u32 kinds;		/* enum hl_match_kind bits */
	char comm[HL_COMM_LEN];
	char pcomm[HL_COMM_LEN];
	__u32 comm_len;		/* bytes of comm to compare for a prefix */
	__u32 pcomm_len;
	__u32 pid;
	__u32 tgid;
	__u64 cgroup_id;	/* kernfs id (inode number) of the cgroup directory */
	__u32 cgroup_level;	/* its depth below the root, to find the ancestor */
	__u32 _pad;
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
const volatile struct hl_rule hl_rules[HL_MAX_RULES];

/* What a cached class was computed from. */
struct hl_task_class {
	__u64 comm[2];		/* task comm, as two words for a cheap compare */
	__u64 pcomm[2];
	__u64 cgroup_id;
	__u32 policy;
	__u32 class_id;
	__u32 valid;
	__u32 _pad;
	/* When the scheduler last put the task in its fair queue. */
	__u64 queued_at;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct hl_task_class);
} hl_task_classes SEC(".maps");

/* Counted when task storage cannot be created (out of memory): the task is
 * then classified afresh on every event instead of being misclassified. */
__u64 hl_classify_storage_failures;

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
	const char *comm = (const char *)id->comm, *pcomm = (const char *)id->pcomm;

	for (__u32 i = 0; i < HL_MAX_RULES; i++) {
		const volatile struct hl_rule *r = &hl_rules[i];
		__u32 k;

		if (i >= hl_nr_rules)
			break;
		k = r->kinds;
		if ((k & HL_MATCH_PID) && id->pid != r->pid)
			continue;
		if ((k & HL_MATCH_TGID) && id->tgid != r->tgid)
			continue;
		if ((k & HL_MATCH_SCHED_EXT) && id->policy != HL_SCHED_EXT)
			continue;
		if ((k & HL_MATCH_COMM_PREFIX) && !hl_prefix_eq(comm, r->comm, r->comm_len))
			continue;
		if ((k & HL_MATCH_COMM_EXACT) && !hl_prefix_eq(comm, r->comm, HL_COMM_LEN))
			continue;
		if ((k & HL_MATCH_PCOMM_PREFIX) && !hl_prefix_eq(pcomm, r->pcomm, r->pcomm_len))
			continue;
		if ((k & HL_MATCH_PCOMM_EXACT) && !hl_prefix_eq(pcomm, r->pcomm, HL_COMM_LEN))
			continue;
		if ((k & HL_MATCH_CGROUP) && !hl_cgroup_match(id->cgroup, r->cgroup_id, r->cgroup_level))
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
	    c->cgroup_id == id->cgroup_id && c->policy == id->policy)
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
	c->class_id = class_id;
	c->valid = 1;
	return class_id;
}

static __always_inline __u32 hl_classify_cached(struct task_struct *p, const struct hl_task_identity *id)
{
	return hl_class_in(bpf_task_storage_get(&hl_task_classes, p, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE), id);
}

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

/* hl_classify classifies a trusted task pointer through the cache and
 * hands back the task's cache entry in *ctx (NULL without storage), so a
 * caller that keeps more per-task state there looks it up once. */
static __always_inline __u32 hl_classify(struct task_struct *p, struct hl_task_class **ctx)
{
	struct hl_task_identity id = {};
	struct hl_task_class *c;

	hl_read_identity_trusted(p, &id);
	c = bpf_task_storage_get(&hl_task_classes, p, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	*ctx = c;
	return hl_class_in(c, &id);
}

#endif /* HOTLANE_CLASSIFY_BPF_H */
