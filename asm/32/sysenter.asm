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
; CPU support: whether a CPU takes sysenter from 32-bit code under a 64-bit
; kernel (compatibility mode) depends on its vendor; one that does not raises
; #UD, which the probe sees as SIGILL.  scripts/twtools/machine/vendors.py
; keeps which vendor does what, and `scripts/tw doctor` says it for this
; machine.

%include "tw.inc"

bits 32
section .text

; Call-frame information (tw.inc) follows every push and pop, and describes
; two frames in each function.  The function's own: two pushes, then a call
; to %%enter.  And %%enter's, which is a frame of its own because it is
; reached by a call: there the CFA is esp+4 again and the return address
; leads back into the function, whose rows hold there.  %%enter's rows are
; those of __kernel_vsyscall (vdso32/system_call.S) for the same three
; pushes, so they agree with the vDSO's CFI for the landing pad, where the
; kernel resumes and where a sample taken during the system call says the
; process is.
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
	mov	ebp, esp		; sysenter loses esp; the kernel reads it from ebp
	sysenter
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
tw_mechanism:	db "sysenter", 0
tw_mech_hint:	db "sysenter from 32-bit code works only on CPUs that take it in compatibility mode, and returns through the 32-bit vDSO; `scripts/tw doctor` says whether this machine does", 0

TW_NOEXEC_STACK
