/*
 * ops.c: the tables of syscost's operations and loop shapes (ops.h).
 */
#include "ops.h"
#include "tw_sysnr.h"

const char *const op_names[OP_COUNT] = {
	"null", "getppid", "write-devnull", "write-file", "write-sync",
	"gettimeofday", "clock_gettime", "time", "cpuid", "verw", "lfence",
};
/* The system call each operation makes. */
const long op_nrs[OP_COUNT] = {
	TW_NR_invalid, TW_NR_getppid, TW_NR_write, TW_NR_write, TW_NR_write,
	TW_NR_gettimeofday, TW_NR_clock_gettime, TW_NR_time, TW_NR_NONE, TW_NR_NONE,
	TW_NR_NONE,
};

const char *const shape_names[SHAPE_COUNT] = { "ret", "jmp", "inline" };
