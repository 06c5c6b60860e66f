// SPDX-License-Identifier: GPL-2.0
/*
 * exec.bpf.c	Every exec on the machine, counted in the kernel: the always-on half of
 *		`tw watch`.  Loaded and read by watchbpf.c (`watchbpf exec`).
 *
 * One program, on sched:sched_process_exec, which fires once per successful execve
 * whatever the program does next: a program that lives one millisecond is counted.  Nothing
 * is sent to user space per event; the counts stay in one map, keyed by the phase, the file
 * executed (the new image's mm->exe_file: its device and inode), the file name execve was given
 * (as given, a label: a relative name stays relative; TW_STRLEN bounds it) and the bitness: the
 * user code segment the new image will start in, from the registers at the top of its kernel
 * stack (load_elf_binary has set them by now: 0x23 is 32-bit code, which needs IA32 emulation;
 * anything else is 64-bit).
 *
 * A program is its file.  Its absolute path is resolved here, from the file's own dentry and
 * mount, not from the name given (which may be relative, a symbolic link, or any of a file's
 * hard links): the dentry chain is walked up to its mount's root, then across to the mount
 * point in the parent mount, up to the root of the mount namespace, as d_path does (bpf_d_path
 * cannot be called from a tracepoint).  The walk is bounded (TW_DEPTH steps, TW_PATHLEN
 * bytes); a file deleted before its exec (run through /proc/self/fd), a walk past the bound or
 * a longer path is said in `why`, and the watch then names the file by device and inode.
 * The path goes into an LRU map keyed by the file (2 x --keys: every file both phases' keys
 * name), walked once while the file is in it, for execs that have a key.
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

/* A 224-byte key is too large to build twice on the 512-byte stack, a path far larger: one
 * scratch of each a CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct exec_key);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct path_val);
} pathbuf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);	/* the reader sets it to --keys before loading */
	__type(key, struct file_id);
	__type(value, struct path_val);
} paths SEC(".maps");

TW_CONFIG_MAP;

/* The file's path, built from its end (buf[TW_PATHLEN - 1] is the last byte): each component
 * is written before the one walked before it, behind a '/'.  Offsets are masked with
 * TW_PATHLEN - 1 and sizes with TW_NAMEMAX - 1, so the verifier sees every write inside buf.
 * One step a bpf_loop call (5.17 and later): a plain bounded loop of TW_DEPTH steps, each with
 * a branch, is more states than the verifier takes (E2BIG); a callback is verified once. */
struct walk { u64 d, m; u32 off, done; };

static long walk_step(u64 i, void *data)
{
	struct walk *w = data;
	struct dentry *d = (struct dentry *)w->d;
	struct mount *m = (struct mount *)w->m;
	struct dentry *parent = BPF_CORE_READ(d, d_parent);
	u32 zero = 0;
	struct path_val *pv = bpf_map_lookup_elem(&pathbuf, &zero);

	if (!pv)
		return 1;
	if (d == BPF_CORE_READ(m, mnt.mnt_root) || d == parent) {
		struct mount *mp = BPF_CORE_READ(m, mnt_parent);

		if (mp == m) {
			w->done = 1;	/* the namespace's root */
			return 1;
		}
		w->d = (u64)BPF_CORE_READ(m, mnt_mountpoint);
		w->m = (u64)mp;
		return 0;
	}
	u32 len = BPF_CORE_READ(d, d_name.len);
	const unsigned char *name = BPF_CORE_READ(d, d_name.name);
	u32 off = w->off;

	if (len >= TW_NAMEMAX || len + 1 >= off || off > TW_PATHLEN) {
		if (pv->why == PATH_OK)
			pv->why = PATH_TOO_LONG;
		w->done = 1;
		return 1;
	}
	off -= len + 1;
	bpf_probe_read_kernel(&pv->buf[(off + 1) & (TW_PATHLEN - 1)], len & (TW_NAMEMAX - 1), name);
	pv->buf[off & (TW_PATHLEN - 1)] = '/';
	w->off = off;
	w->d = (u64)parent;
	return 0;
}

static __always_inline void walk(struct file *f, struct path_val *pv)
{
	struct dentry *d = BPF_CORE_READ(f, f_path.dentry);
	struct vfsmount *vm = BPF_CORE_READ(f, f_path.mnt);
	struct walk w = { (u64)d, (u64)vm - bpf_core_field_offset(struct mount, mnt), TW_PATHLEN, 0 };

	pv->why = PATH_OK;
	/* d_unlinked: out of the hash and not a root: the file was deleted before the exec */
	if (!BPF_CORE_READ(d, d_hash.pprev) && BPF_CORE_READ(d, d_parent) != d)
		pv->why = PATH_DELETED;
	if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_loop)) {
		pv->why = PATH_NO_LOOP;
		pv->off = TW_PATHLEN - 1;
		pv->buf[TW_PATHLEN - 1] = '/';
		return;
	}
	bpf_loop(TW_DEPTH, walk_step, &w, 0);
	if (!w.done && pv->why == PATH_OK)
		pv->why = PATH_TOO_DEEP;
	if (w.off >= TW_PATHLEN) {	/* the root itself */
		w.off = TW_PATHLEN - 1;
		pv->buf[TW_PATHLEN - 1] = '/';
	}
	pv->off = w.off;
}

/* The path of a file a key holds, walked once while the LRU map keeps it: only for execs that
 * have a key, so the map (2 x --keys files) holds every file both phases name. */
static __always_inline void remember_path(struct file *f, struct exec_key *k)
{
	struct file_id id = { k->dev, 0, k->ino };
	u32 zero = 0;

	if (!f || bpf_map_lookup_elem(&paths, &id))
		return;
	struct path_val *pv = bpf_map_lookup_elem(&pathbuf, &zero);
	if (pv) {
		walk(f, pv);
		bpf_map_update_elem(&paths, &id, pv, BPF_ANY);
	}
}

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

	struct file *f = BPF_CORE_READ(t, mm, exe_file);
	if (f) {
		k->dev = BPF_CORE_READ(f, f_inode, i_sb, s_dev);
		k->ino = BPF_CORE_READ(f, f_inode, i_ino);
	}

	u64 now = bpf_ktime_get_ns();
	u64 *c = bpf_map_lookup_elem(&n, &ph);
	if (c)
		__sync_fetch_and_add(c, 1);
	struct exec_val *v = bpf_map_lookup_elem(&execs, k);
	if (!v) {
		struct exec_val nv = { 1, now, now };
		u64 *taken = bpf_map_lookup_elem(&keys, &ph);

		if (!taken || *taken >= cf->keys)
			return 0;	/* this phase is full: n tells (and no path is needed) */
		/* Two CPUs may both find no key: the one that loses adds to the winner's. */
		if (bpf_map_update_elem(&execs, k, &nv, BPF_NOEXIST) == 0) {
			__sync_fetch_and_add(taken, 1);
			remember_path(f, k);
			return 0;
		}
		v = bpf_map_lookup_elem(&execs, k);
		if (!v)
			return 0;
	}
	__sync_fetch_and_add(&v->n, 1);
	if (now > v->last_ns)
		v->last_ns = now;
	remember_path(f, k);
	return 0;
}
