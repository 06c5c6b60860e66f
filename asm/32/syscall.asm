; asm/32/syscall.asm: enter the kernel with syscall from 32-bit code, as the 32-bit vDSO does on CPUs that take it.
;
; Contract: asm/32/sysenter.asm's to the letter (i386 cdecl; tw_syscall.h),
; since the body is the same: tw_syscall3(nr, a1, a2, a3) and its twin
; tw_syscall3_jmp, arguments on the stack, the raw result (-errno for
; -4095..-1) in eax; eax, ecx and edx clobbered.
;
; Why this file exists: some CPUs take syscall in compatibility mode, and on
; those the kernel patches __kernel_vsyscall to use it (X86_FEATURE_SYSCALL32).
;
; Kernel side: MSR_CSTAR -> entry_SYSCALL_compat -> do_fast_syscall_32, which
; takes the second argument from ebp (syscall overwrote ecx) and returns to
; the vDSO's landing pad with sysretl. Under FRED the kernel answers syscall
; from 32-bit code with #UD (fred_other -> exc_invalid_op).
;
; WARNING: syscall overwrites ecx with the return address (and r11, invisible
; here, with eflags), so the kernel's compat ABI takes the second argument in
; ebp instead of ecx (entry_SYSCALL_compat).  Like sysenter, it then returns
; to the vDSO's int80_landing_pad, not here (do_fast_syscall_32 sets
; regs->ip to it), and reloads ebp from the user stack.  So we build the
; frame __kernel_vsyscall builds (arch/x86/entry/vdso/vdso32/system_call.S):
; push ecx, edx, ebp, then ebp = ecx, and reach syscall by a call so the
; landing pad's ret returns to us.
;
; CPU support: the mirror image of sysenter.asm's.  AMD-compatible CPUs take
; syscall in compatibility mode, Intel ones raise #UD (SIGILL in the probe);
; machine/vendors.py records it and `scripts/tw doctor` reports it.
;
; Body: the same as asm/32/sysenter.asm's (asm/include/tw_fast32.inc); only
; the entry sequence, TW_FAST32_ENTER_syscall, is this file's own.

%include "tw_fast32.inc"
TW_FAST32 syscall
