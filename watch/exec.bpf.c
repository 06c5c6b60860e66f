// SPDX-License-Identifier: GPL-2.0
/*
 * exec.bpf.c	Every exec on the machine, counted in the kernel: the always-on half of
 *		`tw watch`.  Loaded and read by watchbpf.c (`watchbpf exec`).
 *
 * One program, on sched:sched_process_exec, which fires once per successful execve
 * whatever the program does next: a program that lives one millisecond is counted.  Nothing
 * is sent to user space per event; the counts stay in one map, keyed by the phase, the file
 * executed (the new image's mm->exe_file: its device, inode and generation, maps.h) and the
 * bitness: the user code segment the new image will start in, from the registers at the top of
 * its kernel stack (load_elf_binary has set them by now: 0x23 is 32-bit code, which needs IA32
 * emulation; anything else is 64-bit).  The map holds files, not names: one binary behind
 * thousands of symbolic links is one key, and the file name execve was given (as given, a
 * label: a relative name stays relative; TW_STRLEN bounds it) is kept in the value, the last
 * one seen.
 *
 * A program is its file.  Its absolute path is resolved here, from the file's own dentry and
 * mount, not from the name given (which may be relative, a symbolic link, or any of a file's
 * hard links): the dentry chain is walked up to its mount's root, then across to the mount
 * point in the parent mount, up to the root of the mount namespace, as d_path does (bpf_d_path
 * cannot be called from a tracepoint).  The walk is bounded (TW_DEPTH steps, TW_PATHLEN
 * bytes); a file deleted before its exec (run through /proc/self/fd), a walk past the bound, a
 * longer path, an anonymous file (memfd_create + fexecve: its dentry is its own parent, and
 * its name "memfd:NAME" is kept) or a mount detached from every namespace is said in `why`,
 * and the watch then names the file by device and inode (or by its memfd name).
 * The path goes into an LRU map keyed by the file (2 x both bitnesses' keys: every file both
 * phases' keys name), walked once while the file is in it, for execs that have a key.
 *
 * Two phases: the program writes to the one `phase` names; every interval the reader flips
 * it, waits for programs that read the old value to finish, then reads and deletes the old
 * phase's keys, so no exec is lost between the read and the delete.  The map holds both
 * phases; in each, 64-bit files may take at most config.keys keys and 32-bit files at most
 * config.keys32, each budget its own (keys[phase * 2 + is32] counts what it took): a flood of
 * distinct 64-bit programs never takes the room of a 32-bit one, and a full phase is full at
 * the same size whatever the other holds.  n[phase * 2 + is32] counts every exec by bitness
 * (an array slot never fails to update), so the reader can tell how many execs of each
 * bitness a full map dropped: n minus the sum of the map's counts of that bitness.
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
	__uint(max_entries, 8192);	/* the reader sets it (2 x (--keys + --keys32)) before loading */
	__type(key, struct exec_key);
	__type(value, struct exec_val);
} execs SEC(".maps");

/* n and keys: slot phase * 2 + is32. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, u32);
	__type(value, u64);
} n SEC(".maps"), keys SEC(".maps");

/* A 224-byte value is too large to build on the 512-byte stack, a path far larger: one
 * scratch of each a CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct exec_val);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct path_val);
} pathbuf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);	/* the reader sets it before loading */
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

/* One component, d's name, written before what is built so far, behind a '/': 0, or 1 when it
 * does not fit (the path is too long: said in why). */
static __always_inline int prepend(struct walk *w, struct path_val *pv, struct dentry *d)
{
	u32 len = BPF_CORE_READ(d, d_name.len);
	const unsigned char *name = BPF_CORE_READ(d, d_name.name);
	u32 off = w->off;

	if (len >= TW_NAMEMAX || len + 1 >= off || off > TW_PATHLEN) {
		if (pv->why == PATH_OK)
			pv->why = PATH_TOO_LONG;
		return 1;
	}
	off -= len + 1;
	bpf_probe_read_kernel(&pv->buf[(off + 1) & (TW_PATHLEN - 1)], len & (TW_NAMEMAX - 1), name);
	pv->buf[off & (TW_PATHLEN - 1)] = '/';
	w->off = off;
	return 0;
}

static long walk_step(u64 i, void *data)
{
	struct walk *w = data;
	struct dentry *d = (struct dentry *)w->d;
	struct mount *m = (struct mount *)w->m;
	struct dentry *parent = BPF_CORE_READ(d, d_parent);
	struct dentry *root = BPF_CORE_READ(m, mnt.mnt_root);
	u32 zero = 0;
	struct path_val *pv = bpf_map_lookup_elem(&pathbuf, &zero);

	if (!pv)
		return 1;
	if (d != root && d == parent) {
		/* Its own parent and no mount's root: an anonymous file, never linked into a
		 * directory (memfd_create's "memfd:NAME" on the kernel's internal shm mount).  Its
		 * name is all it has; walking on would give "/". */
		if (pv->why == PATH_OK)
			pv->why = PATH_ANON;
		prepend(w, pv, d);
		w->done = 1;
		return 1;
	}
	if (d == root) {
		struct mount *mp = BPF_CORE_READ(m, mnt_parent);

		if (mp == m) {
			/* The top: the namespace's root, unless the mount is in no namespace (detached
			 * by umount -l, or the kernel's own): then what was walked is no path. */
			struct mnt_namespace *ns = BPF_CORE_READ(m, mnt_ns);

			if (BPF_CORE_READ(ns, root) != m && pv->why == PATH_OK)
				pv->why = PATH_DETACHED;
			w->done = 1;
			return 1;
		}
		w->d = (u64)BPF_CORE_READ(m, mnt_mountpoint);
		w->m = (u64)mp;
		return 0;
	}
	if (prepend(w, pv, d)) {
		w->done = 1;
		return 1;
	}
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
 * have a key, so the map (2 x both budgets' keys) holds every file both phases name. */
static __always_inline void remember_path(struct file *f, struct exec_key *k)
{
	struct file_id id = { k->dev, 0, k->ino, k->gen };
	u32 zero = 0;

	if (!f || bpf_map_lookup_elem(&paths, &id))
		return;
	struct path_val *pv = bpf_map_lookup_elem(&pathbuf, &zero);
	if (pv) {
		walk(f, pv);
		bpf_map_update_elem(&paths, &id, pv, BPF_ANY);
	}
}

/* maps.h's generation: i_generation, else the change time marked with TW_GEN_CTIME. */
static __always_inline u64 generation(struct inode *ino)
{
	u32 g = BPF_CORE_READ(ino, i_generation);
	u64 ns;

	if (g)
		return g;
	if (bpf_core_field_exists(((struct inode___v611 *)0)->i_ctime_sec)) {
		struct inode___v611 *i = (void *)ino;

		/* bit 31 of i_ctime_nsec is a flag since 6.13 (I_CTIME_QUERIED, multigrain
		 * timestamps), set when a stat(2) read the time: not part of the time */
		ns = (u64)BPF_CORE_READ(i, i_ctime_sec) * 1000000000ULL +
		     (BPF_CORE_READ(i, i_ctime_nsec) & 0x7fffffffU);
	} else if (bpf_core_field_exists(((struct inode___v66 *)0)->__i_ctime)) {
		struct inode___v66 *i = (void *)ino;

		ns = (u64)BPF_CORE_READ(i, __i_ctime.tv_sec) * 1000000000ULL +
		     BPF_CORE_READ(i, __i_ctime.tv_nsec);
	} else {
		struct inode___old *i = (void *)ino;

		ns = (u64)BPF_CORE_READ(i, i_ctime.tv_sec) * 1000000000ULL +
		     BPF_CORE_READ(i, i_ctime.tv_nsec);
	}
	return ns | TW_GEN_CTIME;
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
	struct exec_key k = {};		/* the whole key is hashed: no stale bytes */

	k.phase = cf->phase & 1;
	struct pt_regs *r = user_regs(t);
	k.is32 = BPF_CORE_READ(r, cs) == 0x23;
	struct file *f = BPF_CORE_READ(t, mm, exe_file);
	if (f) {
		struct inode *ino = BPF_CORE_READ(f, f_inode);

		k.dev = BPF_CORE_READ(ino, i_sb, s_dev);
		k.ino = BPF_CORE_READ(ino, i_ino);
		k.gen = generation(ino);
	}
	u32 loc = BPF_CORE_READ(ctx, __data_loc_filename);
	const char *started = (char *)ctx + (loc & 0xffff);

	u64 now = bpf_ktime_get_ns();
	u32 slot = k.phase * 2 + (k.is32 ? 1 : 0);
	u64 *c = bpf_map_lookup_elem(&n, &slot);
	if (c)
		__sync_fetch_and_add(c, 1);
	struct exec_val *v = bpf_map_lookup_elem(&execs, &k);
	if (!v) {
		u64 *taken = bpf_map_lookup_elem(&keys, &slot);
		struct exec_val *nv = bpf_map_lookup_elem(&scratch, &zero);

		if (!taken || !nv || *taken >= (k.is32 ? cf->keys32 : cf->keys))
			return 0;	/* this bitness's budget is full: n tells (and no path is needed) */
		nv->n = 1;
		nv->first_ns = nv->last_ns = now;
		__builtin_memset(nv->started, 0, sizeof(nv->started));
		bpf_probe_read_kernel_str(nv->started, sizeof(nv->started), started);
		/* Two CPUs may both find no key: the one that loses adds to the winner's. */
		if (bpf_map_update_elem(&execs, &k, nv, BPF_NOEXIST) == 0) {
			__sync_fetch_and_add(taken, 1);
			remember_path(f, &k);
			return 0;
		}
		v = bpf_map_lookup_elem(&execs, &k);
		if (!v)
			return 0;
	}
	__sync_fetch_and_add(&v->n, 1);
	if (now > v->last_ns)
		v->last_ns = now;
	/* The last name it was started by (two CPUs at once may leave either one's). */
	bpf_probe_read_kernel_str(v->started, sizeof(v->started), started);
	remember_path(f, &k);
	return 0;
}
