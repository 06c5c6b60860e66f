; asm/32/sysenter.asm: enter the kernel with sysenter, as the 32-bit vDSO does on CPUs that take it.
;
; Contract (i386 cdecl; tw_syscall.h):
;   long tw_syscall3(long nr, long a1, long a2, long a3)
;   in:  [esp+4] nr (i386 table), [esp+8] a1, [esp+12] a2, [esp+16] a3
;   out: eax = raw kernel result; -4095..-1 is -errno
;   clobbers: eax, ecx, edx; ebx and ebp are saved and restored
;   long tw_syscall3_jmp(...)   the same, leaving by an indirect jump
;
; Why this file exists: sysenter (Intel, Pentium II on) is the fast 32-bit
; entry Linux has used through the vDSO since 2.5.53.  Writing it by hand
; shows what __kernel_vsyscall hides.
;
; Kernel side: MSR_IA32_SYSENTER_EIP -> entry_SYSENTER_compat ->
; do_SYSENTER_32 -> do_fast_syscall_32, which reads ebp (the sixth argument)
; from the user stack and sets the return address to the vDSO's landing pad,
; just after an int $0x80, so that a restarted call re-enters by int 0x80; the
; return is sysretl, or iret. Under FRED, fred_other -> do_fast_syscall_32.
;
; WARNING: sysenter saves neither the return address nor the user stack
; pointer.  The kernel (entry_SYSENTER_compat, do_fast_syscall_32 in
; arch/x86/entry/syscall_32.c) therefore does not return after this
; instruction: it returns to the vDSO's int80_landing_pad, which runs
;	pop ebp; pop edx; pop ecx; ret
; and it takes the user stack pointer from ebp.  So we must build exactly
; the frame __kernel_vsyscall builds (arch/x86/entry/vdso/vdso32/system_call.S):
; push ecx, edx, ebp, then ebp = esp, and reach the sysenter by a call, so
; that the landing pad's ret comes back to us.  The kernel also reloads ebp
; from [esp] (it is the sixth argument slot), which is why ebp is pushed.
; Without that frame the process crashes on return.  The landing pad lives
; in the vDSO, so a kernel booted with vdso32=0 cannot support this stub.
;
; CPU support: Intel-compatible CPUs take sysenter from 32-bit code under a
; 64-bit kernel (compatibility mode); AMD ones raise #UD there, which the
; probe sees as SIGILL.  scripts/twtools/machine/vendors.py keeps which
; vendor does what, and `scripts/tw doctor` says it for this machine.
;
; Body: asm/include/tw_fast32.inc, one for both 32-bit fast entries (this
; and asm/32/syscall.asm), as in the kernel's vdso32/system_call.S.

%include "tw_fast32.inc"
TW_FAST32 sysenter
