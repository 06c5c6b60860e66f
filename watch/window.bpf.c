// SPDX-License-Identifier: GPL-2.0
/*
 * window.bpf.c	One duty-cycle window of `tw watch`: every process's system calls counted
 *		per entry path, and every write(2)'s latency as a log2 histogram per process
 *		image, kind of file and synchronous or not.  Loaded and read by watchbpf.c
 *		(`watchbpf window`).
 *
 * The entry-path half is traces/census.bt's (the same keys, read by the same code:
 * measure.census.rows), without its per-number map, with the origin read for compat calls
 * only (a native call is priced as `syscall` wherever it came from, so its origin is recorded
 * as "other", unread), and tw's own processes marked from `own` (filled at fork) instead of a
 * walk up the parents.  It is attached only for a window: an attached raw_syscalls tracepoint
 * sends every system call of every process down the slow path (130-290 ns a call on the
 * project's AMD guest, before the program runs), so tw watch opens it for --window seconds
 * every --window-period and states what each window cost.
 *
 * A process image is (pid, the group leader's start_boottime, gen): gen counts the execs the
 * pid made inside the window, since a pid alone does not name a program (census.bt's header).
 *
 * Write latency: at sys_enter of write (1 on x86-64, 4 on i386: the caller's ABI), the fd's
 * file is looked up in the task's fd table and kept with the start time per thread; at
 * sys_exit the latency goes into a log2 histogram keyed by image, the inode's S_IFMT >> 12
 * (8 a file, 1 a FIFO, 12 a socket, 2 a character device, 6 a block device), its super
 * block's magic (statfs's f_type: tw watch names it from the mounted file systems), the
 * device's major number (a tty is 4, 5 or 136-143) and sync: 1 when the file was opened
 * O_SYNC or O_DSYNC or its file system is mounted synchronous.  Only write(2) is timed.
 *
 * Every map is preallocated to the reader's key limit (watchbpf --keys); a full map drops
 * updates, and the reader says which filled.
 */
#include "kernel.h"
#include "maps.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

#define TS_COMPAT 0x2		/* arch/x86/include/asm/thread_info.h */

struct wstart { u64 ns; struct file *f; };

#define HASH(name, k, v) struct { \
	__uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 8192); \
	__type(key, k); __type(value, v); } name SEC(".maps")
HASH(calls, struct call_key, u64);
HASH(execs, struct wexec_key, u64);
HASH(exits, struct exit_key, u64);
HASH(forks, struct fork_key, u64);
HASH(vsys, struct vsys_key, u64);
HASH(wlat, struct wlat_key, struct wlat_val);
HASH(gen, u32, u32);		/* pid -> execs inside the window */
HASH(own, u32, u8);		/* pid -> 1: tw's own processes */
HASH(wstarts, u32, struct wstart);	/* tid -> a write in flight */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct wexec_key);
} scratch SEC(".maps");

TW_CONFIG_MAP;

static __always_inline void count(void *map, const void *key)
{
	u64 one = 1, *c = bpf_map_lookup_elem(map, key);

	if (c) {
		__sync_fetch_and_add(c, 1);
		return;
	}
	if (bpf_map_update_elem(map, key, &one, BPF_NOEXIST) != 0 &&
	    (c = bpf_map_lookup_elem(map, key)))
		__sync_fetch_and_add(c, 1);	/* another CPU made it first */
}

static __always_inline void image_of(struct image *im, struct task_struct *t, u32 pid)
{
	u32 *g = bpf_map_lookup_elem(&gen, &pid);

	im->pid = pid;
	im->gen = g ? *g : 0;
	im->start = BPF_CORE_READ(t, group_leader, start_boottime);
}

SEC("tracepoint/raw_syscalls/sys_enter")
int on_enter(struct trace_event_raw_sys_enter *ctx)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	u64 id = bpf_get_current_pid_tgid();
	u32 pid = id >> 32, tid = (u32)id;
	struct pt_regs *r = user_regs(t);
	u64 ip = BPF_CORE_READ(r, ip);
	struct call_key k = {};
	u8 *own_p = bpf_map_lookup_elem(&own, &pid);

	image_of(&k.im, t, pid);
	bpf_get_current_comm(k.comm, sizeof(k.comm));
	k.compat = (BPF_CORE_READ(t, thread_info.status) & TS_COMPAT) ? 1 : 0;
	k.cs = BPF_CORE_READ(r, cs);
	k.own = own_p ? *own_p : 0;
	k.origin = ORIGIN_OTHER;
	k.insn = INSN_SYSCALL;
	if (k.compat) {
		/* Where a compat call came from: the vDSO, the program's text, or elsewhere (a
		 * library); outside the vDSO, the two bytes before the return address name the
		 * instruction that entered (cd 80, 0f 05, 0f 34). */
		struct mm_struct *mm = BPF_CORE_READ(t, mm);
		u64 vdso = (u64)BPF_CORE_READ(mm, context.vdso);
		u64 size = BPF_CORE_READ(mm, context.vdso_image, size);

		if (vdso && ip >= vdso && ip < vdso + size) {
			k.origin = ORIGIN_VDSO;
			k.insn = INSN_VDSO;
		} else {
			u16 b = 0;

			/* ip is the address after the 2-byte instruction: the instruction is in the
			 * text when [ip - 2, ip) is (a static program's exit is often its last). */
			if (ip - 2 >= BPF_CORE_READ(mm, start_code) && ip <= BPF_CORE_READ(mm, end_code))
				k.origin = ORIGIN_TEXT;
			bpf_probe_read_user(&b, sizeof(b), (void *)(ip - 2));
			k.insn = b == 0x80cd ? INSN_INT80 : b == 0x050f ? INSN_SYSCALL :
				 b == 0x340f ? INSN_SYSENTER : INSN_UNKNOWN;
		}
	}
	count(&calls, &k);

	if (ctx->id != (k.compat ? 4 : 1))
		return 0;
	u64 fd = ctx->args[0];
	struct fdtable *fdt = BPF_CORE_READ(t, files, fdt);
	if (fd >= BPF_CORE_READ(fdt, max_fds))
		return 0;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct wstart w = { bpf_ktime_get_ns(), 0 };
	bpf_probe_read_kernel(&w.f, sizeof(w.f), fds + fd);
	if (w.f)
		bpf_map_update_elem(&wstarts, &tid, &w, BPF_ANY);
	return 0;
}

static __always_inline u32 log2_slot(u64 v)
{
	u32 s = 0;

	for (int i = 0; i < TW_HIST_SLOTS - 1 && v; i++) {
		v >>= 1;
		s++;
	}
	return s;	/* 0 for 0, k for [2^(k-1), 2^k) */
}

SEC("tracepoint/raw_syscalls/sys_exit")
int on_exit(struct trace_event_raw_sys_exit *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 pid = id >> 32, tid = (u32)id;
	struct wstart *w;

	if (ctx->id != 1 && ctx->id != 4)
		return 0;
	w = bpf_map_lookup_elem(&wstarts, &tid);
	if (!w)
		return 0;
	u64 ns = bpf_ktime_get_ns() - w->ns;
	struct file *f = w->f;
	bpf_map_delete_elem(&wstarts, &tid);

	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct inode *i = BPF_CORE_READ(f, f_inode);
	struct wlat_key k = {};
	image_of(&k.im, t, pid);
	k.ifmt = BPF_CORE_READ(i, i_mode) >> 12;
	k.magic = BPF_CORE_READ(i, i_sb, s_magic);
	k.major = BPF_CORE_READ(i, i_rdev) >> 20;
	k.sync = ((BPF_CORE_READ(f, f_flags) & 0x101000) ||	/* O_SYNC, O_DSYNC */
		  (BPF_CORE_READ(i, i_sb, s_flags) & 16)) ? 1 : 0;	/* SB_SYNCHRONOUS */

	struct wlat_val *v = bpf_map_lookup_elem(&wlat, &k);
	if (!v) {
		static const struct wlat_val zero;

		bpf_map_update_elem(&wlat, &k, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&wlat, &k);
		if (!v)
			return 0;	/* full */
	}
	u32 s = log2_slot(ns);
	if (s < TW_HIST_SLOTS)
		__sync_fetch_and_add(&v->slot[s], 1);
	__sync_fetch_and_add(&v->sum_ns, ns);
	return 0;
}

SEC("tracepoint/sched/sched_process_exec")
int on_exec(struct trace_event_raw_sched_process_exec *ctx)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	u32 pid = bpf_get_current_pid_tgid() >> 32, zero = 0, one = 1;
	u32 *g = bpf_map_lookup_elem(&gen, &pid);
	struct wexec_key *k = bpf_map_lookup_elem(&scratch, &zero);

	if (g)
		__sync_fetch_and_add(g, 1);
	else
		bpf_map_update_elem(&gen, &pid, &one, BPF_ANY);
	if (!k)
		return 0;
	__builtin_memset(k, 0, sizeof(*k));
	image_of(&k->im, t, pid);
	u32 loc = BPF_CORE_READ(ctx, __data_loc_filename);
	bpf_probe_read_kernel_str(k->file, sizeof(k->file), (char *)ctx + (loc & 0xffff));
	count(&execs, k);
	return 0;
}

SEC("tracepoint/sched/sched_process_fork")
int on_fork(struct trace_event_raw_sched_process_fork *ctx)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	u32 pid = bpf_get_current_pid_tgid() >> 32;
	u32 child = BPF_CORE_READ(ctx, child_pid);
	u8 yes = 1;
	u32 zero = 0;
	struct tw_config *cf = bpf_map_lookup_elem(&config, &zero);
	struct fork_key k = { .child = child, .parent = pid };
	struct image im;

	bpf_map_delete_elem(&gen, &child);
	/* tw's own processes: its children and theirs (one lookup a call, not a walk). */
	if ((cf && pid == cf->own_pid) || bpf_map_lookup_elem(&own, &pid))
		bpf_map_update_elem(&own, &child, &yes, BPF_ANY);
	else
		bpf_map_delete_elem(&own, &child);
	image_of(&im, t, pid);
	k.start = im.start;
	k.gen = im.gen;
	count(&forks, &k);
	return 0;
}

SEC("tracepoint/sched/sched_process_exit")
int on_exit_task(void *ctx)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	u64 id = bpf_get_current_pid_tgid();
	struct exit_key k = { .pid = id >> 32 };

	if ((u32)id != id >> 32)
		return 0;	/* a thread, not the process */
	k.start = BPF_CORE_READ(t, start_boottime);
	count(&exits, &k);
	return 0;
}

/* A call through the vsyscall page faults at 0xffffffffff600xxx and is emulated in the
 * fault handler: no syscall tracepoint fires, this one does.  The reader does not load it
 * where the kernel has no exceptions:page_fault_user. */
SEC("tracepoint/exceptions/page_fault_user")
int on_fault(void *ctx)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct vsys_key k = {};
	unsigned long address;

	if (bpf_core_type_exists(struct trace_event_raw_exceptions))
		address = BPF_CORE_READ((struct trace_event_raw_exceptions *)ctx, address);
	else
		address = BPF_CORE_READ((struct trace_event_raw_x86_exceptions *)ctx, address);
	if (address >> 12 != 0xffffffffff600ULL)
		return 0;
	image_of(&k.im, t, bpf_get_current_pid_tgid() >> 32);
	bpf_get_current_comm(k.comm, sizeof(k.comm));
	count(&vsys, &k);
	return 0;
}
