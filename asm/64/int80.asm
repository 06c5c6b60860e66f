; asm/64/int80.asm: int 0x80 from a 64-bit process: the i386 ABI, by interrupt.
;
; Contract (System V AMD64):
;   long tw_syscall3(long nr, long a1, long a2, long a3)
;   in:  rdi = nr (i386 table!), rsi = a1, rdx = a2, rcx = a3
;   out: rax = raw kernel result, sign-extended from eax; -4095..-1 is -errno
;   clobbers: rax, rcx, rdx, r8-r11 (r8-r11 were zeroed by kernels before
;             4.15 and are treated as lost); rbx is saved and restored
;
; Why this file exists: int 0x80 works from 64-bit code, and the kernel
; treats such a call as a 32-bit (compat) system call: it looks the number
; up in the i386 table (write is 4, not 1) and reads only ebx, ecx, edx.
; That is a classic porting bug, and a way to time int 0x80 without a
; 32-bit toolchain.  Tracers see it as compat: syscalls:sys_enter_write
; never fires for it; raw_syscalls:sys_enter does, with id 4.
;
; WARNING: every pointer argument is truncated to 32 bits.  A 64-bit
; process's stack, heap and libraries live above 4 GiB, so callers must pass
; buffers from tw_alloc(), which this variant links from alloc_low.c
; (MAP_32BIT).  The stub cannot tell pointers from integers, so it does not
; check.  Since Linux 6.7 the kernel handles it in C (do_int80_emulation).

%include "tw.inc"

bits 64
default rel
section .text

; Call-frame information (tw.inc) follows the push and the pop, so that a
; profiler sampling inside int 0x80 can walk from here back to the caller.
TW_FUNC tw_syscall3
	push	rbx			; callee-saved in the C ABI, but it carries a1
	CFI_ADJUST_CFA_OFFSET 8
	CFI_REL_OFFSET rbx, 0
	mov	r8, rcx			; a3, before ecx is overwritten by a2
	mov	eax, edi		; nr
	mov	ebx, esi		; a1 (upper half dropped: the i386 ABI)
	mov	ecx, edx		; a2
	mov	edx, r8d		; a3
	int	0x80
	movsxd	rax, eax		; the i386 ABI returns a 32-bit value
	pop	rbx
	CFI_ADJUST_CFA_OFFSET -8
	CFI_RESTORE rbx
	ret
TW_ENDFUNC

section .rodata
global tw_mechanism:data, tw_mech_hint:data
tw_mechanism:	db "int80", 0
tw_mech_hint:	db "int 0x80 needs IA32 emulation (kernel booted without ia32_emulation=0, CONFIG_IA32_EMULATION=y)", 0

TW_NOEXEC_STACK
