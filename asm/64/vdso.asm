; asm/64/vdso.asm: call the 64-bit vDSO's time functions: no kernel entry.
;
; Contract (System V AMD64; tw_syscall.h):
;   long tw_syscall3(long nr, long a1, long a2, long a3)
;   in:  rdi = nr (x86-64 table: gettimeofday, clock_gettime or time),
;        rsi = a1, rdx = a2, rcx = a3
;        tw_nrs, tw_vdso64_fn, tw_vdso64_int (vdso64_init.c): the numbers,
;        the vDSO's functions for them (null if missing), and whether each
;        returns int
;   out: rax = the function's result, sign-extended where it returns int;
;        -ENOSYS for any other nr, or a function the vDSO lacks, without
;        calling anything
;   clobbers: rax, rcx, rdx, rsi, rdi, r8-r11 (the C ABI's caller-saved set)
;   long tw_syscall3_jmp(...)   the same, leaving by an indirect jump
;   long tw_loop3(struct tw_loop *l, long n)   the call inline, n times
;   long tw_loop3_empty(struct tw_loop *l, long n)  the same loop, no call
;
; Why this file exists: this is the no-entry baseline.  gettimeofday,
; clock_gettime and time need no kernel work a process could not do itself
; given the clock's parameters, which the kernel publishes in a page mapped
; into every process; the vDSO's functions read it (and fall back to a real
; system call only for clocks it cannot read, which CLOCK_MONOTONIC never
; is with a TSC or kvm-clock clocksource).  What the same operation costs
; through 64-syscall, minus what it costs here, is what entering the kernel
; costs it.  The vDSO's functions are C functions: arguments in rdi, rsi,
; rdx as for the system call, the C ABI's registers clobbered, and the
; stack 16-byte aligned at the call, which the pushes below keep.
;
; Kernel side: none: __vdso_clock_gettime, __vdso_gettimeofday and __vdso_time
; read the kernel's time data (the vvar page mapped beside the vDSO) and the
; TSC in user mode; only a clock they cannot read (a clocksource without a
; vDSO mode) sends them into the kernel by a real syscall.

%include "tw.inc"

extern tw_nrs, tw_vdso64_fn, tw_vdso64_int

bits 64
default rel
section .text

; rax = the function for nr in rdi (or 0), %1 = whether it returns int.
; vdso64_init.c keeps its three tables in the same order.
%macro TARGET 1
 %assign %%i 0
 %rep 3
	mov	rax, [rel tw_vdso64_fn + %%i * 8]
	mov	%1, [rel tw_vdso64_int + %%i * 8]
	cmp	rdi, [rel tw_nrs + %%i * 8]
	je	TW_AT(%%found)
  %assign %%i %%i + 1
 %endrep
	xor	eax, eax
	TW_HERE %%found
%endmacro

; The whole stub, for both ways out: %1 is ret, or jmp for tw_syscall3_jmp,
; which leaves by pop rcx; jmp rcx.  rbx is pushed to align the stack for
; the call (the entry leaves rsp 8 off a multiple of 16) and holds the int
; flag across it.
%macro STUB 1
	TW_PUSH	rbx
	TARGET	rbx
	test	rax, rax
	jnz	TW_AT(%%have)
	mov	rax, -ENOSYS
	jmp	TW_AT(%%out)
	TW_HERE %%have
	mov	rdi, rsi		; a1
	mov	rsi, rdx		; a2
	mov	rdx, rcx		; a3
	call	rax
	test	rbx, rbx
	jz	TW_AT(%%out)
	movsxd	rax, eax		; an int result
	TW_HERE %%out
	TW_POP	rbx
 %ifidn %1, jmp
	TW_LEAVE_BY_JMP rcx
 %else
	ret
 %endif
%endmacro

; tw_syscall3 and its twin that leaves by jmp (tw.inc).
TW_STUB_TWINS STUB

; After each call: a function that returns int leaves its result in eax
; alone, so where the int flag (r13) says so, eax is sign-extended into rax
; before the check.
%macro INT_RESULT 0
	test	r13, r13
	jz	TW_AT(%%wide)
	movsxd	rax, eax
	TW_HERE %%wide
%endmacro

; The inline loop, and its empty twin: %1 is what stands where the call is.
; State lives in callee-saved registers, which the vDSO's functions keep:
; rbx the count, r12 the struct, rbp the function, r13 the int flag; r14
; is pushed only so that the five pushes leave the stack aligned for the
; call.  The passes are tw.inc's TW_LOOP64_CALLS.
%macro LOOP 1
	TW_PUSH	rbx, rbp, r12, r13, r14
	mov	r12, rdi		; struct tw_loop *
	mov	rbx, rsi		; n
	mov	qword [r12 + TWL_BAD], 0
	mov	rdi, [r12 + TWL_NR]
	TARGET	r13
	mov	rbp, rax		; the function, kept across the calls
	TW_LOOP64_CALLS rbp, {%1}, INT_RESULT
	TW_POP	r14, r13, r12, rbp, rbx
	ret
%endmacro

; The empty twin (tw.inc) loads the accepted low bound into rax, where the
; function's result would be, and calls nothing.
TW_LOOP_TWINS LOOP, {call rbp}, {mov rax, [r12 + TWL_LO]}

TW_MECHANISM "vdso", "the kernel gave this process no 64-bit vDSO with __vdso_gettimeofday, __vdso_clock_gettime and __vdso_time (AT_SYSINFO_EHDR; booted with vdso=0?)"
