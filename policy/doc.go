// Package policy owns hotlane's task classes: the JSON policy file that
// defines them, its validation, the built-in default policy, and compiling a
// policy into the rule table that the BPF classifier
// (bpf/include/classify.bpf.h) evaluates in the kernel. The scheduler and the
// tracer load the same table, so both put a task in the same class.
//
// A policy is an ordered list of 1 to 8 classes; a task belongs to the first
// class that matches it:
//
//	{
//	  "classes": [
//	    {
//	      "name": "inference",
//	      "high_priority": true,
//	      "slice": "2ms",
//	      "match": [
//	        {"comm_prefix": "infer"},
//	        {"process_comm": "triton", "cgroup": "/inference.slice"}
//	      ]
//	    },
//	    {"name": "normal"}
//	  ]
//	}
//
// A class matches when any of its matchers does; a matcher matches when all
// of its fields hold: comm_prefix, comm (the thread's name), process_comm_prefix,
// process_comm (the group leader's name), pid, tgid, cgroup (a cgroup v2 path
// relative to the cgroup2 mount; the task is in it or below it), sched_ext
// (true: the task chose SCHED_EXT), device (the thread opened, or issued an
// ioctl on, a device: a path glob resolved at Compile, or "MAJOR:MINOR",
// "MAJOR:FIRST-LAST", "MAJOR:*") and device_process (a thread of its process
// did), each with an optional idle time after which the match ends. Names
// are compared as bytes, at most 15. Each matcher becomes one BPF rule; a
// policy has at most 32, and at most 8 distinct device and idle pairs.
//
// The last class is the catch-all: it has no matchers and every other class
// has some. Knobs and their defaults:
//
//   - slice: how long a task runs before others get a turn, a Go duration
//     from 100us to 100ms; default 2ms for high_priority classes, else 5ms.
//   - weight: share of the fair lane, 1 to 10000; default 100.
//   - high_priority: the class uses the high-priority lane, consumed before
//     the fair one; default false. The catch-all cannot be high priority.
//   - preempt: a waking task that finds no idle CPU preempts one running a
//     lower class; needs high_priority; default true for high_priority
//     classes, else false. Without it a lane task preempts only a fair
//     task that has run its minimum slice, and otherwise waits for a free
//     CPU or a fair task's next tick; "preempt": false is for a lane that
//     must not disturb the others.
//
// Class names are 1 to 15 characters of a-z, 0-9, _ and -, and unique.
//
// Parse and Load report problems as *Error, one line that names the file,
// the line and column for JSON-level mistakes, and the class and matcher
// concerned; all match ErrInvalidPolicy with errors.Is.
package policy
