; asm/32/syscall.asm: enter the kernel with syscall from 32-bit code, as the 32-bit vDSO does on CPUs that take it.
;
; Contract (i386 cdecl; tw_syscall.h):
;   long tw_syscall3(long nr, long a1, long a2, long a3)
;   in:  [esp+4] nr (i386 table), [esp+8] a1, [esp+12] a2, [esp+16] a3
;   out: eax = raw kernel result; -4095..-1 is -errno
;   clobbers: eax, ecx, edx; ebx and ebp are saved and restored
;   long tw_syscall3_jmp(...)   the same, leaving by an indirect jump
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
; CPU support: whether a CPU takes syscall from 32-bit code under a 64-bit
; kernel (compatibility mode) depends on its vendor; one that does not raises
; #UD, which the probe sees as SIGILL.  scripts/twtools/machine/vendors.py
; keeps which vendor does what, and `scripts/tw doctor` says it for this
; machine.

%include "tw.inc"

bits 32
section .text

; Call-frame information (tw.inc) follows every push and pop, and describes
; two frames in each function, as in sysenter.asm: the function's, and
; %%enter's own, which is reached by a call and so starts with the CFA at
; esp+4 again.  %%enter's rows are those of __kernel_vsyscall for the same
; three pushes, which agree with the vDSO's CFI for the landing pad the
; kernel returns to.
;
; The whole stub, for both ways out: %1 is ret, or jmp for tw_syscall3_jmp,
; which leaves by pop ecx; jmp ecx.  Only the stub's own return changes: the
; kernel still returns to the vDSO's landing pad, whose ret comes back here.
%macro STUB 1
	push	ebx			; ebx is callee-saved in cdecl, but it carries a1
	CFI_ADJUST_CFA_OFFSET 4
	CFI_REL_OFFSET ebx, 0
	push	ebp			; callee-saved, and the frame below overwrites it
	CFI_ADJUST_CFA_OFFSET 4
	CFI_REL_OFFSET ebp, 0
	mov	eax, [esp+12]		; nr (two pushes: arguments moved up by 8)
	mov	ebx, [esp+16]		; a1
	mov	ecx, [esp+20]		; a2
	mov	edx, [esp+24]		; a3
	call	TW_AT(%%enter)		; the landing pad's ret returns here
	pop	ebp
	CFI_ADJUST_CFA_OFFSET -4
	CFI_RESTORE ebp
	pop	ebx
	CFI_ADJUST_CFA_OFFSET -4
	CFI_RESTORE ebx
 %ifidn %1, jmp
	TW_LEAVE_BY_JMP ecx
	CFI_ENTRY_ROW			; the frame below starts like a function
 %else
	ret				; after ret the entry row holds again, which
 %endif				; is the first row of the frame below too
	TW_HERE %%enter
	push	ecx			; the frame __kernel_vsyscall pushes,
	CFI_ADJUST_CFA_OFFSET 4		; in its order: the landing pad pops
	CFI_REL_OFFSET ecx, 0		; ebp, edx, ecx and then rets
	push	edx
	CFI_ADJUST_CFA_OFFSET 4
	CFI_REL_OFFSET edx, 0
	push	ebp
	CFI_ADJUST_CFA_OFFSET 4
	CFI_REL_OFFSET ebp, 0
	mov	ebp, ecx		; syscall clobbers ecx: the compat ABI wants a2 in ebp
	syscall
	; Never reached: the kernel returns to the vDSO landing pad.  Should a
	; kernel ever return here, trap rather than run into whatever follows.
	ud2
%endmacro

TW_FUNC tw_syscall3
	STUB ret
TW_ENDFUNC

TW_FUNC tw_syscall3_jmp
	STUB jmp
TW_ENDFUNC

; No tw_loop3: the instruction cannot sit inline in a loop, because the
; kernel does not return after it but to the landing pad, whose ret needs
; the return address a call pushed (tw_syscall.h, "Loop shapes").

section .rodata
global tw_mechanism:data, tw_mech_hint:data
tw_mechanism:	db "syscall", 0
tw_mech_hint:	db "syscall from 32-bit code works only on CPUs that take it in compatibility mode, and returns through the 32-bit vDSO; `scripts/tw doctor` says whether this machine does", 0

TW_NOEXEC_STACK
