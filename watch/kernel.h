/*
 * kernel.h	The kernel's structures as the watch's BPF programs read them: only the
 *		fields read, each by name.  preserve_access_index makes every access a CO-RE
 *		relocation: libbpf finds each field's offset in the running kernel's BTF
 *		(/sys/kernel/btf/vmlinux) when it loads the program, so one object built here runs
 *		on any kernel whose BTF has these names, whatever their layout.  No vmlinux.h:
 *		generating one needs bpftool and a BTF kernel at build time; these few names do not.
 *
 * The tracepoints' own records are read the same way (trace_event_raw_<event>): their
 * layout moved between kernels (sched_process_fork's comms became __data_loc strings in
 * 6.x), and the BTF has them.
 */
#ifndef TW_WATCH_KERNEL_H
#define TW_WATCH_KERNEL_H

#include <linux/bpf.h>		/* the UAPI: map types, helper flags, __u32 and the rest */

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef int pid_t;

#define CORE __attribute__((preserve_access_index))

struct pt_regs { unsigned long ip, cs; } CORE;
struct thread_info { u32 status; } CORE;
struct vdso_image { unsigned long size; } CORE;
struct mm_context { void *vdso; const struct vdso_image *vdso_image; } CORE;
typedef struct mm_context mm_context_t;
struct file;
struct mm_struct {
	unsigned long start_code, end_code; mm_context_t context; struct file *exe_file;
} CORE;
struct super_block { u32 s_dev; unsigned long s_flags, s_magic; } CORE;
struct inode {
	unsigned short i_mode; u32 i_rdev; unsigned long i_ino; struct super_block *i_sb;
	u32 i_generation;
} CORE;
/* The inode's change time moved between kernels: i_ctime_sec and i_ctime_nsec (6.11 and
 * later), __i_ctime (6.6 to 6.10), i_ctime (before): each is a "flavour" of struct inode
 * (libbpf drops what follows ___), and the program reads whichever the running kernel has. */
struct timespec64 { long long tv_sec; long tv_nsec; } CORE;
struct inode___v611 { long long i_ctime_sec; u32 i_ctime_nsec; } CORE;
struct inode___v66 { struct timespec64 __i_ctime; } CORE;
struct inode___old { struct timespec64 i_ctime; } CORE;
/* A file's own path: its dentry chain up to its mount's root, then the mount's mount point in
 * the parent mount, and so on to the root of the mount namespace (exec.bpf.c walks it).  qstr's
 * len sits in an anonymous struct in the kernel: libbpf matches a member through it. */
struct qstr { u32 hash, len; const unsigned char *name; } CORE;
struct hlist_bl_node { struct hlist_bl_node *next, **pprev; } CORE;
struct dentry {
	struct hlist_bl_node d_hash; struct dentry *d_parent; struct qstr d_name;
} CORE;
struct vfsmount { struct dentry *mnt_root; } CORE;
struct mount;
/* A mount in a namespace has mnt_ns; a namespace's own root is mnt_ns->root.  A detached mount
 * (umount -l) has none, a kernel-internal one (shm_mnt, where a memfd lives) an invalid one. */
struct mnt_namespace { struct mount *root; } CORE;
struct mount {
	struct mount *mnt_parent; struct dentry *mnt_mountpoint; struct vfsmount mnt;
	struct mnt_namespace *mnt_ns;
} CORE;
struct path { struct vfsmount *mnt; struct dentry *dentry; } CORE;
struct file { unsigned int f_flags; struct inode *f_inode; struct path f_path; } CORE;
struct fdtable { unsigned int max_fds; struct file **fd; } CORE;
struct files_struct { struct fdtable *fdt; } CORE;
struct task_struct {
	struct thread_info thread_info;
	void *stack;
	pid_t tgid;
	struct task_struct *real_parent, *group_leader;
	struct mm_struct *mm;
	struct files_struct *files;
	u64 start_boottime;
	char comm[16];
} CORE;

struct trace_entry { unsigned short type; } CORE;
struct trace_event_raw_sched_process_exec {
	struct trace_entry ent; u32 __data_loc_filename; pid_t pid, old_pid;
} CORE;
struct trace_event_raw_sched_process_fork { struct trace_entry ent; pid_t parent_pid, child_pid; } CORE;
struct trace_event_raw_sys_enter { struct trace_entry ent; long id; unsigned long args[6]; } CORE;
struct trace_event_raw_sys_exit { struct trace_entry ent; long id; long ret; } CORE;
/* page_fault_user's class was x86_exceptions before Linux 6.x renamed it exceptions: both
 * are named, and the program reads whichever the running kernel has. */
struct trace_event_raw_exceptions { struct trace_entry ent; unsigned long address; } CORE;
struct trace_event_raw_x86_exceptions { struct trace_entry ent; unsigned long address; } CORE;

/* The user registers a task entered the kernel with sit at the top of its stack.  Where the
 * kernel has bpf_task_pt_regs (5.15 and later) it says where; before that they are found as
 * x86-64's task_pt_regs finds them, THREAD_SIZE 16 KiB and no top padding, as bpftrace's
 * scripts read them (a KASAN kernel's 32 KiB stacks need the helper).  The choice is made when
 * libbpf loads the program: the branch the kernel cannot run is never verified. */
#define TW_THREAD_SIZE 16384

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

static __always_inline struct pt_regs *user_regs(struct task_struct *t)
{
	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs))
		return (struct pt_regs *)bpf_task_pt_regs((struct task_struct *)bpf_get_current_task_btf());
	return (struct pt_regs *)((unsigned long)BPF_CORE_READ(t, stack) + TW_THREAD_SIZE
				  - bpf_core_type_size(struct pt_regs));
}

#define TW_CONFIG_MAP struct { \
	__uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); \
	__type(key, u32); __type(value, struct tw_config); } config SEC(".maps")

#endif
