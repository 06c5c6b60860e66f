"""The walls' shared words, defined once for the layers that measure them and the layers that
explain them: the SYSCALL_WORK flags a wall sets on a task, and the wall and the cells of the
report's first screen (which the census prices other processes' calls with too)."""

# SYSCALL_WORK_* bits (include/linux/thread_info.h, enum syscall_work_bit): what sends a call
# off the fast path at entry (syscall_trace_enter) and into the exit work.
WORK_BITS = {1: "SECCOMP", 2: "SYSCALL_TRACEPOINT", 4: "SYSCALL_TRACE", 8: "SYSCALL_EMU",
             16: "SYSCALL_AUDIT", 32: "SYSCALL_USER_DISPATCH", 64: "SYSCALL_EXIT_TRAP"}
WORK_SECCOMP, WORK_TRACEPOINT, WORK_AUDIT = 1, 2, 16


def work_names(bits, drop=WORK_TRACEPOINT):
    """The SYSCALL_WORK flags set in bits, by name (SYSCALL_TRACEPOINT left out by default:
    a probe on raw_syscalls that read them sets it on every task)."""
    return [n for b, n in sorted(WORK_BITS.items()) if bits & b and not b & drop]


# The first screen's line: what the container profile adds to a getppid made through glibc's
# wrapper (how real programs make it) and through int 0x80, the far end of the matrix.  A few
# seconds in every mode (tw run's walls stage).
HEADLINE_WALL = "seccomp:container"
HEADLINE_CELLS = (("64-libc", "getppid"), ("32-int80", "getppid"))
HEADLINE_WORDS = {("64-libc", "getppid"): "through glibc's wrapper (64-bit)",
                  ("64-syscall", "getppid"): "the 64-bit `syscall`",
                  ("32-int80", "getppid"): "int 0x80 (32-bit)"}
# The cells another process's calls are priced with (tw census, tw watch), best first: a
# native call as glibc makes it, then as the bare instruction (a walls.json written before
# glibc's cell led); a compat call through int 0x80 from 32-bit code, then from 64-bit code.
PRICE_CELLS = {"native": (("64-libc", "getppid"), ("64-syscall", "getppid")),
               "compat": (("32-int80", "getppid"), ("64-int80", "getppid"))}
