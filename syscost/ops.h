/*
 * ops.h: syscost's operations and loop shapes, which options.c reads,
 * syscost.c measures and output.c prints; their tables are ops.c's.  Below
 * all three, so that none of them needs a name from a file that needs it back.
 */
#ifndef SYSCOST_OPS_H
#define SYSCOST_OPS_H

#ifdef TW_ABI32
#define ABI_NAME "i386"
#else
#define ABI_NAME "x86_64"
#endif

enum op {
	OP_NULL, OP_GETPPID, OP_WRITE_DEVNULL, OP_WRITE_FILE, OP_WRITE_SYNC,
	OP_GETTIMEOFDAY, OP_CLOCK_GETTIME, OP_TIME, OP_CPUID, OP_VERW, OP_LFENCE,
	OP_COUNT
};
extern const char *const op_names[OP_COUNT];
/* The system call each operation makes. */
extern const long op_nrs[OP_COUNT];
/*
 * cpuid, verw and lfence make no system call: their op_nrs entry is this, and
 * any build with an entry instruction can run them (an instruction in the
 * mechanism's place, timed by the same loop).
 */
#define TW_NR_NONE	(-2L)
#define OP_INSN(op)	((op) == OP_CPUID || (op) == OP_VERW || (op) == OP_LFENCE)
#define OP_WRITES(op)	((op) == OP_WRITE_DEVNULL || (op) == OP_WRITE_FILE || \
			 (op) == OP_WRITE_SYNC)

#define MAX_CALLS	100000000L	/* calls per batch, at most */

enum shape { SHAPE_RET, SHAPE_JMP, SHAPE_INLINE, SHAPE_COUNT };
extern const char *const shape_names[SHAPE_COUNT];

#endif
