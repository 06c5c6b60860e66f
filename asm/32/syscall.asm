; asm/32/syscall.asm: enter the kernel with syscall from 32-bit code, as the vDSO does on AMD.
;
; Contract (i386 cdecl):
;   long tw_syscall3(long nr, long a1, long a2, long a3)
;   in:  [esp+4] nr (i386 table), [esp+8] a1, [esp+12] a2, [esp+16] a3
;   out: eax = raw kernel result; -4095..-1 is -errno
;   clobbers: eax, ecx, edx; ebx and ebp are saved and restored
;
; Why this file exists: AMD's syscall works in compatibility mode, and on AMD
; CPUs the kernel patches __kernel_vsyscall to use it (X86_FEATURE_SYSCALL32).
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
; CPU support: Intel CPUs raise #UD (SIGILL) for syscall in compatibility
; mode; AMD CPUs support it.

%include "tw.inc"

bits 32
section .text

global tw_syscall3:function
tw_syscall3:
	push	ebx
	push	ebp
	mov	eax, [esp+12]		; nr (two pushes: arguments moved up by 8)
	mov	ebx, [esp+16]		; a1
	mov	ecx, [esp+20]		; a2
	mov	edx, [esp+24]		; a3
	call	.enter			; the landing pad's ret returns here
	pop	ebp
	pop	ebx
	ret
.enter:
	push	ecx			; the frame __kernel_vsyscall pushes
	push	edx
	push	ebp
	mov	ebp, ecx		; syscall clobbers ecx: the compat ABI wants a2 in ebp
	syscall
	ud2				; never reached: the kernel returns to the landing pad

section .rodata
global tw_mechanism:data, tw_mech_hint:data
tw_mechanism:	db "syscall", 0
tw_mech_hint:	db "Intel CPUs raise #UD for syscall from 32-bit code; only AMD supports it in compatibility mode", 0

TW_NOEXEC_STACK
