/*
 * maps.h	The keys and values of tw watch's BPF maps: one declaration, included by the
 *		programs (exec.bpf.c, window.bpf.c) and by the loader that reads the maps
 *		(watchbpf.c), so that the two sides cannot disagree on a layout.  Fixed-width
 *		UAPI types only (linux/types.h), which both compilers have.
 */
#ifndef TW_WATCH_MAPS_H
#define TW_WATCH_MAPS_H

#include <linux/types.h>

#define TW_STRLEN 200		/* a file name's bytes kept, its NUL included (bpftrace's 200) */
#define TW_COMM 16		/* TASK_COMM_LEN */
#define TW_HIST_SLOTS 64	/* slot 0 holds 0 ns, slot k [2^(k-1), 2^k) */

/* What the loader sets after loading and before attaching (and, for the exec tracer, flips
 * every interval): one array slot, read by the programs that need it.  keys and keys32: the
 * exec map's keys a phase may take for 64-bit and for 32-bit files, each its own budget. */
struct tw_config { __u32 own_pid, phase, keys, keys32; };

/* exec.bpf.c: one map for both phases, keyed by the file executed, not by a name: its device
 * (the kernel's dev_t), inode and generation (below), and whether the new image runs 32-bit
 * code.  One file started by a thousand names (symbolic links, hard links, ./x, ../b/x) is one
 * key.  The name execve was given (as started: a label) is the value's, the last one seen. */
struct exec_key { __u32 phase, is32, dev, pad; __u64 ino, gen; };
struct exec_val { __u64 n, first_ns, last_ns; char started[TW_STRLEN]; };

/* A file's generation: the inode's i_generation, which ext4, XFS, btrfs, tmpfs (a memfd too)
 * and others draw anew each time they allocate an inode, so that an inode number freed (a
 * package upgrade, rm) and given to another file names another generation; on a file system
 * that sets none (0), the inode's change time in ns with bit 63 set.  (device, inode,
 * generation) is the file: a path cached for one is never given to another. */
#define TW_GEN_CTIME (1ULL << 63)

/* The file's absolute path, resolved in the kernel from the file's own dentry and mount (not
 * from the name given): one entry per file, an LRU map.  The path is buf[off .. TW_PATHLEN),
 * built from its end; why says when it could not be: the file was deleted (the path it had is
 * kept), the walk passed TW_DEPTH components, the path is longer than TW_PATHLEN - 1 bytes,
 * the file is anonymous (a memfd: its dentry is its own parent and no mount's root; the
 * kernel's name for it, "memfd:NAME", is kept), or its mount is not in any mount namespace
 * (detached by umount -l: the path below the detached mount is kept). */
#define TW_PATHLEN 1024		/* a power of two: the walk masks offsets with it */
#define TW_NAMEMAX 256		/* a component's bytes read at most (NAME_MAX 255) */
#define TW_DEPTH 48		/* components and mount crossings walked at most */
enum { PATH_OK = 0, PATH_DELETED = 1, PATH_TOO_DEEP = 2, PATH_TOO_LONG = 3, PATH_NO_FILE = 4,
       PATH_NO_LOOP = 5, PATH_ANON = 6, PATH_DETACHED = 7 };
struct file_id { __u32 dev, pad; __u64 ino, gen; };
struct path_val { __u32 off, why; char buf[TW_PATHLEN + TW_NAMEMAX]; };

/* window.bpf.c: a process image is (pid, the group leader's start_boottime, gen), gen the
 * execs the pid made inside the window. */
struct image { __u32 pid, gen; __u64 start; };
struct call_key {
	struct image im; char comm[TW_COMM]; __u16 cs; __u8 compat, origin, insn, own; __u8 pad[2];
};
struct wexec_key { struct image im; char file[TW_STRLEN]; };
struct exit_key { __u32 pid, pad; __u64 start; };
struct fork_key { __u32 child, parent; __u64 start; __u32 gen, pad; };
struct vsys_key { struct image im; char comm[TW_COMM]; };
struct wlat_key { struct image im; __u32 ifmt, major; __u64 magic; __u32 sync, pad; };
struct wlat_val { __u64 sum_ns; __u64 slot[TW_HIST_SLOTS]; };

/* call_key's origin and insn (the loader prints their names). */
enum { ORIGIN_VDSO = 1, ORIGIN_TEXT = 2, ORIGIN_OTHER = 3 };
enum { INSN_INT80 = 1, INSN_SYSCALL = 2, INSN_SYSENTER = 3, INSN_UNKNOWN = 4, INSN_VDSO = 5 };

#endif
