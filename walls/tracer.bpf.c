// SPDX-License-Identifier: GPL-2.0
/*
 * tracer.bpf.c	The tracer wall of `tw ab --wall tracer:raw_syscalls`: what an observability
 *		agent attaches to every system call of the machine, as small as such an agent
 *		gets.  At raw_syscalls:sys_enter it counts the call by number and keeps the time
 *		per thread; at raw_syscalls:sys_exit it puts the call's time into a log2
 *		histogram (BCC's `syscount -L` does the same).  Loaded, attached and detached by
 *		walls/tracerbpf.c.
 *
 * Why it costs every call of every process, not only the traced one: attaching a program
 * to a raw_syscalls tracepoint sets SYSCALL_WORK_SYSCALL_TRACEPOINT on every thread
 * (syscall_regfunc), so every call takes the entry's slow path (syscall_trace_enter) and its
 * exit work, then runs these programs.  The price is what the slow path adds plus what the
 * programs do; tw ab measures the sum, and docs/walls.md says which part is which.
 */
#include "kernel.h"	/* watch/'s: the kernel's names, CO-RE */
#include "tracer.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TRACER_NRS);
	__type(key, u32);
	__type(value, u64);
} calls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TRACER_SLOTS);
	__type(key, u32);
	__type(value, u64);
} hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TRACER_THREADS);
	__type(key, u32);
	__type(value, u64);
} start SEC(".maps");

/* The tracepoints' records: the fields after the common header, as the format files give. */
struct enter_args { u64 pad; long id; unsigned long args[6]; };
struct exit_args { u64 pad; long id; long ret; };

SEC("tracepoint/raw_syscalls/sys_enter")
int on_enter(struct enter_args *ctx)
{
	u32 nr = ctx->id < 0 || ctx->id >= TRACER_NRS ? TRACER_NRS - 1 : (u32)ctx->id;
	u32 tid = (u32)bpf_get_current_pid_tgid();
	u64 now = bpf_ktime_get_ns(), *c = bpf_map_lookup_elem(&calls, &nr);

	if (c)
		(*c)++;
	bpf_map_update_elem(&start, &tid, &now, BPF_ANY);
	return 0;
}

SEC("tracepoint/raw_syscalls/sys_exit")
int on_exit(struct exit_args *ctx)
{
	u32 tid = (u32)bpf_get_current_pid_tgid(), slot = 0;
	u64 *t0 = bpf_map_lookup_elem(&start, &tid), d, *h;

	if (!t0)
		return 0;
	d = bpf_ktime_get_ns() - *t0;
	bpf_map_delete_elem(&start, &tid);
	/* log2, unrolled: the verifier wants a bound */
#pragma unroll
	for (int i = 0; i < TRACER_SLOTS - 1; i++)
		if (d >> (i + 1))
			slot = i + 1;
	h = bpf_map_lookup_elem(&hist, &slot);
	if (h)
		(*h)++;
	return 0;
}

/*
 * The same count at sys_enter, attached another way: a raw tracepoint (BPF_RAW_TRACEPOINT_OPEN,
 * a BPF link of type raw_tracepoint) or a BTF tracepoint (tp_btf, a link of type tracing), as
 * agents built on libbpf attach.  No perf event: `bpftool perf list` does not show them, `bpftool
 * link list` does.  tracerbpf --attach raw_tp|tp_btf loads one of these instead of the pair
 * above (tests/test_walls_host.py: tw's look for other tracers finds them).  Both count alike:
 * ctx[1] is the syscall's number in each (TP_PROTO(regs, id)).
 */
static __always_inline int count_enter(unsigned long long *ctx)
{
	long id = (long)ctx[1];
	u32 nr = id < 0 || id >= TRACER_NRS ? TRACER_NRS - 1 : (u32)id;
	u64 *c = bpf_map_lookup_elem(&calls, &nr);

	if (c)
		(*c)++;
	return 0;
}

SEC("raw_tp/sys_enter")
int on_enter_raw(unsigned long long *ctx)
{
	return count_enter(ctx);
}

SEC("tp_btf/sys_enter")
int on_enter_btf(unsigned long long *ctx)
{
	return count_enter(ctx);
}
