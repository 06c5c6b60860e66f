; asm/64/int80.asm: int 0x80 from a 64-bit process: the i386 ABI, by interrupt.
;
; Contract (System V AMD64; tw_syscall.h):
;   long tw_syscall3(long nr, long a1, long a2, long a3)
;   in:  rdi = nr (i386 table!), rsi = a1, rdx = a2, rcx = a3
;   out: rax = raw kernel result, sign-extended from eax; -4095..-1 is -errno
;   clobbers: rax, rcx, rdx, r8-r11 (r8-r11 were zeroed by kernels before
;             4.15 and are treated as lost); rbx is saved and restored
;   tw_syscall3_jmp, tw_loop3, tw_loop3_empty: as in asm/64/syscall.asm
;
; Why this file exists: int 0x80 works from 64-bit code, and the kernel
; treats such a call as a 32-bit (compat) system call: it looks the number
; up in the i386 table (write is 4, not 1) and reads only ebx, ecx, edx.
; That is a classic porting bug, and a way to time int 0x80 without a
; 32-bit toolchain.  Tracers see it as compat: syscalls:sys_enter_write
; never fires for it; raw_syscalls:sys_enter does, with id 4.
;
; Kernel side: IDT vector 0x80, the same as from 32-bit code: since Linux 6.7
; asm_int80_emulation -> do_int80_emulation (C), before it entry_INT80_compat;
; a compat call of a 64-bit task, looked up in the i386 table, with only the
; low 32 bits of each register; under FRED fred_intx -> fred_int80_emulation.
; The return is iret (ERETU under FRED).
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

; The body tw_syscall3 and tw_syscall3_jmp share: only the way out differs.
; Call-frame information (tw.inc) follows the push and the pop, so that a
; profiler sampling inside int 0x80 can walk from here back to the caller.
%macro ENTER 0
	TW_PUSH	rbx		; callee-saved in the C ABI, but it carries a1
	mov	r8, rcx			; a3, before ecx is overwritten by a2
	mov	eax, edi		; nr
	mov	ebx, esi		; a1 (upper half dropped: the i386 ABI)
	mov	ecx, edx		; a2
	mov	edx, r8d		; a3
	int	0x80
	movsxd	rax, eax		; the i386 ABI returns a 32-bit value
	TW_POP	rbx
%endmacro

TW_FUNC tw_syscall3
	ENTER
	ret
TW_ENDFUNC

; The same call leaving by pop rcx; jmp rcx: the return-stack predictor is
; not asked where to go after the kernel returns (tw_syscall.h).
TW_FUNC tw_syscall3_jmp
	ENTER
	TW_LEAVE_BY_JMP rcx
TW_ENDFUNC

; The inline loop, and its empty twin: %1 is what stands where the kernel
; entry is.  int 0x80 changes no register but eax (kernels before 4.15
; zeroed r8-r11, which the loop leaves alone): ebx, ecx, edx hold the
; arguments for every pass, r12 the struct, r13 the count.
%macro LOOP 1
	TW_PUSH	rbx, r12, r13
	mov	r12, rdi		; struct tw_loop *
	mov	r13, rsi		; n
	mov	qword [r12 + TWL_BAD], 0
	mov	ebx, [r12 + TWL_A1]	; 32 bits each: the i386 ABI
	mov	ecx, [r12 + TWL_A2]	; takes a1-a3 in ebx, ecx, edx,
	mov	edx, [r12 + TWL_A3]	; which int 0x80 keeps: loaded once
	test	r13, r13
	jle	TW_AT(%%done)
	TW_HERE %%again
	mov	eax, [r12 + TWL_NR]	; nr again: the last pass's result is in eax
	%1
	movsxd	rax, eax		; the i386 result is 32 bits: sign-extend
	TW_LOOP64_END r13, %%again, %%done	; check, count down, bad count in rax
	TW_POP	r13, r12, rbx
	ret
%endmacro

; The empty twin (tw.inc) loads the accepted low bound into eax, where
; int 0x80 returns the i386 ABI's 32-bit result, and does not enter the
; kernel.
TW_LOOP_TWINS LOOP, {int 0x80}, {mov eax, [r12 + TWL_LO]}

TW_MECHANISM "int80", "int 0x80 needs IA32 emulation (kernel booted without ia32_emulation=0, CONFIG_IA32_EMULATION=y)"
