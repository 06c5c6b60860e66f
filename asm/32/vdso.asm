; asm/32/vdso.asm: enter the kernel through the vDSO's __kernel_vsyscall.
;
; Contract (i386 cdecl; tw_syscall.h):
;   long tw_syscall3(long nr, long a1, long a2, long a3)
;   in:  [esp+4] nr (i386 table), [esp+8] a1, [esp+12] a2, [esp+16] a3
;        tw_vsyscall (vdso_init.c): the AT_SYSINFO address, or 0
;   out: eax = raw kernel result; -4095..-1 is -errno;
;        -ENOSYS without calling anything when there is no AT_SYSINFO
;   clobbers: eax, ecx, edx; ebx is saved and restored
;   tw_syscall3_jmp(...)  the same, leaving by an indirect jump
;   tw_loop3, tw_loop3_empty  the call to __kernel_vsyscall inline in a loop
;
; Why this file exists: this is what glibc's i686 build does for every
; system call (call *%gs:0x10, I386_USE_SYSENTER), and what the seed's
; hypothesis says glibc 2.5 might not have done.  __kernel_vsyscall takes
; the i386 int 0x80 register convention and picks the fastest instruction
; the kernel patched in at boot: sysenter or syscall, whichever this CPU
; takes from 32-bit code, or plain int 0x80 (always under FRED, kernels 6.9+
; on CPUs that have it).  It
; preserves every register but eax.
;
; Kernel side: whatever the kernel patched into __kernel_vsyscall at boot
; (ALTERNATIVE in arch/x86/entry/vdso/vdso32/system_call.S): sysenter or
; syscall after a frame of ecx, edx, ebp, returning to the landing pad `pop
; ebp; pop edx; pop ecx; ret`; with no fast instruction (FRED, or neither CPU
; feature) int $0x80 after the frame, and on kernels from 2026 `int $0x80;
; ret` before it.

%include "tw.inc"

extern tw_vsyscall

bits 32
section .text

; The whole stub, for both ways out: %1 is ret, or jmp for tw_syscall3_jmp,
; which leaves by pop ecx; jmp ecx (the vDSO's own ret inside
; __kernel_vsyscall stays: it is what brings the call back here).
; Call-frame information (tw.inc) follows every push and pop.  Inside
; __kernel_vsyscall the vDSO's own CFI takes over; it leads back to the
; return address `call esi' pushed, where the rows below hold.
%macro STUB 1
	mov	eax, [tw_vsyscall]	; non-PIC absolute load; the Makefile links -no-pie
	test	eax, eax
	jz	TW_AT(%%nosysinfo)
	TW_PUSH	ebx		; callee-saved in cdecl, but it carries a1
	TW_PUSH	esi		; callee-saved; it holds the call target
	mov	esi, eax		; keep the target: eax must carry nr
	mov	eax, [esp+12]		; nr (two pushes: arguments moved up by 8)
	mov	ebx, [esp+16]		; a1
	mov	ecx, [esp+20]		; a2
	mov	edx, [esp+24]		; a3
	call	esi
	TW_POP	esi, ebx
 %ifidn %1, jmp
	TW_LEAVE_BY_JMP ecx
	CFI_ENTRY_ROW			; the code below is reached from the entry row
 %else
	ret				; the pops have just restored the entry row,
 %endif				; which holds for the code below
	; Reached by the jz above, before any push.
	TW_HERE %%nosysinfo
	mov	eax, -ENOSYS
	ret
%endmacro

; tw_syscall3 and its twin that leaves by jmp (tw.inc).
TW_STUB_TWINS STUB

; The inline loop, and its empty twin: %1 is what stands where the kernel
; entry is; here that is the call to __kernel_vsyscall itself, whose own
; ret comes back into the loop.  __kernel_vsyscall preserves every register
; but eax: ebx, ecx, edx hold the arguments for every pass, edi the struct,
; esi the count, ebp the target.  Without AT_SYSINFO every call fails:
; first_bad is -ENOSYS and the result n, without calling anything.
%macro LOOP 1
	TW_PUSH	ebx, esi, edi, ebp
	mov	edi, [esp+20]		; struct tw_loop * (four pushes)
	mov	esi, [esp+24]		; n
	mov	dword [edi + TWL_BAD], 0
	mov	ebp, [tw_vsyscall]	; AT_SYSINFO's __kernel_vsyscall, or 0
	TW_LOOP_NEED_FUNCTION ebp, edi, esi, %%done
	TW_LOOP32_PASSES {%1}, %%done
	TW_POP	ebp, edi, esi, ebx
	ret
%endmacro

; The empty twin (tw.inc) loads the accepted low bound into eax, where
; __kernel_vsyscall leaves the result, and enters neither the vDSO nor the
; kernel.
TW_LOOP_TWINS LOOP, {call ebp}, {mov eax, [edi + TWL_LO]}

TW_MECHANISM "vdso", "the kernel gave no AT_SYSINFO (booted with vdso32=0, or no 32-bit vDSO)"
