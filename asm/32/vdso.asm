; asm/32/vdso.asm: enter the kernel through the vDSO's __kernel_vsyscall.
;
; Contract (i386 cdecl):
;   long tw_syscall3(long nr, long a1, long a2, long a3)
;   in:  [esp+4] nr (i386 table), [esp+8] a1, [esp+12] a2, [esp+16] a3
;        tw_vsyscall (vdso_init.c): the AT_SYSINFO address, or 0
;   out: eax = raw kernel result; -4095..-1 is -errno;
;        -ENOSYS without calling anything when there is no AT_SYSINFO
;   clobbers: eax, ecx, edx; ebx is saved and restored
;
; Why this file exists: this is what glibc's i686 build does for every
; system call (call *%gs:0x10, I386_USE_SYSENTER), and what the seed's
; hypothesis says glibc 2.5 might not have done.  __kernel_vsyscall takes
; the i386 int 0x80 register convention and picks the fastest instruction
; the kernel patched in at boot: sysenter or syscall, whichever this CPU
; takes from 32-bit code, or plain int 0x80 (always under FRED, kernels 6.9+
; on CPUs that have it).  It
; preserves every register but eax.

%include "tw.inc"

extern tw_vsyscall

bits 32
section .text

; Call-frame information (tw.inc) follows every push and pop.  Inside
; __kernel_vsyscall the vDSO's own CFI takes over; it leads back to the
; return address `call esi' pushed, where the rows below hold.
TW_FUNC tw_syscall3
	mov	eax, [tw_vsyscall]	; non-PIC absolute load; the Makefile links -no-pie
	test	eax, eax
	jz	.nosysinfo
	push	ebx			; callee-saved in cdecl, but it carries a1
	CFI_ADJUST_CFA_OFFSET 4
	CFI_REL_OFFSET ebx, 0
	push	esi			; callee-saved; it holds the call target
	CFI_ADJUST_CFA_OFFSET 4
	CFI_REL_OFFSET esi, 0
	mov	esi, eax		; keep the target: eax must carry nr
	mov	eax, [esp+12]		; nr (two pushes: arguments moved up by 8)
	mov	ebx, [esp+16]		; a1
	mov	ecx, [esp+20]		; a2
	mov	edx, [esp+24]		; a3
	call	esi
	pop	esi
	CFI_ADJUST_CFA_OFFSET -4
	CFI_RESTORE esi
	pop	ebx
	CFI_ADJUST_CFA_OFFSET -4
	CFI_RESTORE ebx
	ret
	; Reached by the jz above, before any push: the entry row holds, and
	; the pops have just restored exactly that row.
.nosysinfo:
	mov	eax, -ENOSYS
	ret
TW_ENDFUNC

section .rodata
global tw_mechanism:data, tw_mech_hint:data
tw_mechanism:	db "vdso", 0
tw_mech_hint:	db "the kernel gave no AT_SYSINFO (booted with vdso32=0, or no 32-bit vDSO)", 0

TW_NOEXEC_STACK
