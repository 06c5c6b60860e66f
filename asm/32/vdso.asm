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
; the kernel patched in at boot: sysenter on Intel, syscall on AMD, or plain
; int 0x80 (always under FRED, kernels 6.9+ on CPUs that have it).  It
; preserves every register but eax.

%include "tw.inc"

extern tw_vsyscall

bits 32
section .text

global tw_syscall3:function
tw_syscall3:
	mov	eax, [tw_vsyscall]	; non-PIC absolute load; the Makefile links -no-pie
	test	eax, eax
	jz	.nosysinfo
	push	ebx
	push	esi
	mov	esi, eax		; keep the target: eax must carry nr
	mov	eax, [esp+12]		; nr (two pushes: arguments moved up by 8)
	mov	ebx, [esp+16]		; a1
	mov	ecx, [esp+20]		; a2
	mov	edx, [esp+24]		; a3
	call	esi
	pop	esi
	pop	ebx
	ret
.nosysinfo:
	mov	eax, -ENOSYS
	ret

section .rodata
global tw_mechanism:data, tw_mech_hint:data
tw_mechanism:	db "vdso", 0
tw_mech_hint:	db "the kernel gave no AT_SYSINFO (booted with vdso32=0, or no 32-bit vDSO)", 0

TW_NOEXEC_STACK
