// SPDX-License-Identifier: GPL-2.0
/*
 * exec.bpf.c	Every exec on the machine, counted in the kernel: the always-on half of
 *		`tw watch`.  Loaded and read by watchbpf.c (`watchbpf exec`).
 *
 * One program, on sched:sched_process_exec, which fires once per successful execve
 * whatever the program does next: a program that lives one millisecond is counted.  Nothing
 * is sent to user space per event; the counts stay in one map, keyed by the phase, the file
 * name execve was given (as given: a relative name stays relative; TW_STRLEN bounds it) and
 * the bitness: the user code segment the new image will start in, from the registers at the
 * top of its kernel stack (load_elf_binary has set them by now: 0x23 is 32-bit code, which
 * needs IA32 emulation; anything else is 64-bit).
 *
 * Two phases: the program writes to the one `phase` names; every interval the reader flips
 * it, waits for programs that read the old value to finish, then reads and deletes the old
 * phase's keys, so no exec is lost between the read and the delete.  The map holds both
 * phases; each may take at most config.keys of them (keys[phase] counts what it took), so a
 * full phase is full at the same size whatever the other holds.  n[phase] counts every exec
 * (an array slot never fails to update), so the reader can tell how many execs a full map
 * dropped: n minus the sum of the map's counts.
 *
 * tw's own processes are not counted: an exec whose parent or grandparent is own_pid (its
 * window, its overhead probe, the vDSO reader and their children).
 *
 * Overhead: sched_process_exec runs once per execve, not per system call; attaching it does
 * not touch the system-call path (`tw watch --overhead` measures a null call with and
 * without it).
 */
#include "kernel.h"
#include "maps.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";	/* bpf_probe_read_kernel_str is GPL-only */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);	/* the reader sets it (watchbpf --keys) before loading */
	__type(key, struct exec_key);
	__type(value, struct exec_val);
} execs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, u32);
	__type(value, u64);
} n SEC(".maps"), keys SEC(".maps");

/* A 208-byte key is too large to build twice on the 512-byte stack: one scratch a CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct exec_key);
} scratch SEC(".maps");

TW_CONFIG_MAP;

SEC("tracepoint/sched/sched_process_exec")
int on_exec(struct trace_event_raw_sched_process_exec *ctx)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct task_struct *parent = BPF_CORE_READ(t, real_parent);
	u32 zero = 0;
	struct tw_config *cf = bpf_map_lookup_elem(&config, &zero);

	if (!cf || (u32)BPF_CORE_READ(parent, tgid) == cf->own_pid ||
	    (u32)BPF_CORE_READ(parent, real_parent, tgid) == cf->own_pid)
		return 0;
	u32 ph = cf->phase & 1;

	struct exec_key *k = bpf_map_lookup_elem(&scratch, &zero);
	if (!k)
		return 0;
	__builtin_memset(k, 0, sizeof(*k));	/* the whole key is hashed: no stale bytes */
	k->phase = ph;

	struct pt_regs *r = user_regs(t);
	k->is32 = BPF_CORE_READ(r, cs) == 0x23;
	u32 loc = BPF_CORE_READ(ctx, __data_loc_filename);
	bpf_probe_read_kernel_str(k->file, sizeof(k->file), (char *)ctx + (loc & 0xffff));

	u64 now = bpf_ktime_get_ns();
	u64 *c = bpf_map_lookup_elem(&n, &ph);
	if (c)
		__sync_fetch_and_add(c, 1);
	struct exec_val *v = bpf_map_lookup_elem(&execs, k);
	if (!v) {
		struct exec_val nv = { 1, now, now };
		u64 *taken = bpf_map_lookup_elem(&keys, &ph);

		if (!taken || *taken >= cf->keys)
			return 0;	/* this phase is full: n tells */
		/* Two CPUs may both find no key: the one that loses adds to the winner's. */
		if (bpf_map_update_elem(&execs, k, &nv, BPF_NOEXIST) == 0) {
			__sync_fetch_and_add(taken, 1);
			return 0;
		}
		v = bpf_map_lookup_elem(&execs, k);
		if (!v)
			return 0;
	}
	__sync_fetch_and_add(&v->n, 1);
	if (now > v->last_ns)
		v->last_ns = now;
	return 0;
}
