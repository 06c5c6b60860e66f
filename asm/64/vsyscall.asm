; asm/64/vsyscall.asm: call into the legacy vsyscall page from 64-bit code.
;
; Contract (System V AMD64; tw_syscall.h):
;   long tw_syscall3(long nr, long a1, long a2, long a3)
;   in:  rdi = nr (x86-64 table: gettimeofday, time or getcpu), rsi = a1,
;        rdx = a2, rcx = a3
;   out: rax = what the page's function returns (0, the time, -errno);
;        -ENOSYS for any other nr, without calling anything
;   clobbers: rax, rcx, rdx, rsi, rdi, r8-r11 (the C ABI's caller-saved set)
;   long tw_syscall3_jmp(...)   the same, leaving by an indirect jump
;   long tw_loop3(struct tw_loop *l, long n)   the call inline, n times
;   long tw_loop3_empty(struct tw_loop *l, long n)  the same loop, no call
;
; Why this file exists: before the vDSO, 64-bit Linux mapped one page of
; kernel-provided code at a fixed address, 0xffffffffff600000, and programs
; (glibc's time functions, static binaries, some runtimes) called into it:
; gettimeofday at +0, time at +0x400, getcpu at +0x800.  A fixed address is a
; gift to exploits, so current kernels run no code from that page at all:
; under vsyscall=xonly (the default) it is mapped execute-only, under
; vsyscall=emulate readable too, and in both the instruction fetch faults.
; The page-fault handler recognises the address and emulates the call
; (arch/x86/entry/vsyscall/vsyscall_64.c, emulate_vsyscall): it performs the
; function, stores rax, and does the function's ret itself, popping the
; return address off the user stack.
; So this is a way into the kernel by an exception, not by a system call
; instruction: raw_syscalls tracepoints never see it, and ptrace sees no
; system call (seccomp is consulted, as if it were one).  Under
; vsyscall=none the page is not mapped and the call dies with SIGSEGV.
;
; Kernel side: the page at 0xffffffffff600000 is mapped execute-only
; (vsyscall=xonly, the default since Linux 5.3) or readable
; (vsyscall=emulate); fetching an instruction from it raises a page fault,
; do_user_addr_fault sees the vsyscall address, and emulate_vsyscall
; (arch/x86/entry/vsyscall/vsyscall_64.c) checks the entry point (+0x000
; gettimeofday, +0x400 time, +0x800 getcpu), runs the call's x86-64 body
; (seccomp applies), sets rax and pops the return address as the page's own
; ret would have. No raw_syscalls tracepoint fires; exceptions:page_fault_user
; does. Under vsyscall=none there is no page and the call is a SIGSEGV.
;
; The page's functions follow the C calling convention: arguments in rdi,
; rsi, rdx, result in rax, so the system call's arguments pass through
; unchanged.  The emulation also checks that each pointer argument is
; writable, and returns -EFAULT if not.

%include "tw.inc"

bits 64
default rel
section .text

; The page and its three entries (vsyscall_64.c, addr_to_vsyscall_nr).
%define VSYSCALL_PAGE		0xffffffffff600000
%define VSYSCALL_GETTIMEOFDAY	(VSYSCALL_PAGE + 0x000)
%define VSYSCALL_TIME		(VSYSCALL_PAGE + 0x400)
%define VSYSCALL_GETCPU		(VSYSCALL_PAGE + 0x800)

; The x86-64 system call numbers of the same functions, which tw_syscall3
; receives, come from the kernel's headers through timewrite/vsyscall_nrs.c,
; which lists them in tw_nrs in this order: gettimeofday, time, getcpu.
extern tw_nrs

; rax = the page entry for nr in rdi, or 0.  The addresses fit in a signed
; 32-bit immediate (they are -0xa00000 and up), so each mov is 7 bytes.
%macro TARGET 0
	mov	rax, VSYSCALL_GETTIMEOFDAY
	cmp	rdi, [rel tw_nrs + 0 * 8]
	je	TW_AT(%%found)
	mov	rax, VSYSCALL_TIME
	cmp	rdi, [rel tw_nrs + 1 * 8]
	je	TW_AT(%%found)
	mov	rax, VSYSCALL_GETCPU
	cmp	rdi, [rel tw_nrs + 2 * 8]
	je	TW_AT(%%found)
	xor	eax, eax
	TW_HERE %%found
%endmacro

; The whole stub, for both ways out: %1 is ret, or jmp for tw_syscall3_jmp,
; which leaves by pop rcx; jmp rcx.  The call into the page pushes a return
; address that the kernel pops without a ret ever running, so the CPU's
; return-stack predictor still holds it when the stub's own ret runs: that
; ret is the one the jmp shape replaces.  No push and no frame: the stack
; pointer moves only for the call, so the CIE's row holds at every
; instruction of the function.
%macro STUB 1
	TARGET
	test	rax, rax
	jz	TW_AT(%%nosys)
	mov	rdi, rsi		; a1
	mov	rsi, rdx		; a2
	mov	rdx, rcx		; a3
	call	rax			; faults; the kernel emulates the call and its ret
 %ifidn %1, jmp
	TW_LEAVE_BY_JMP rcx
	CFI_ENTRY_ROW			; the code below is reached from the entry row
 %else
	ret
 %endif
	TW_HERE %%nosys
	mov	rax, -ENOSYS
	ret
%endmacro

; tw_syscall3 and its twin that leaves by jmp (tw.inc).
TW_STUB_TWINS STUB

; The inline loop, and its empty twin: %1 is what stands where the call into
; the page is.  The page's functions keep the C ABI's callee-saved registers
; (the emulation changes only rax, and the stack pointer by the ret it does),
; so the state lives in those: rbx the count, r12 the struct, r13 the
; target; the passes are tw.inc's TW_LOOP64_CALLS, which reloads the
; arguments on every pass.  An nr the page has no entry for fails every call
; with -ENOSYS, calling nothing.
%macro LOOP 1
	TW_PUSH	rbx, r12, r13
	mov	r12, rdi		; struct tw_loop *
	mov	rbx, rsi		; n
	mov	qword [r12 + TWL_BAD], 0
	mov	rdi, [r12 + TWL_NR]
	TARGET
	mov	r13, rax		; the page entry, kept across the calls
	TW_LOOP64_CALLS r13, {%1}, {}
	TW_POP	r13, r12, rbx
	ret
%endmacro

; The empty twin (tw.inc) loads the accepted low bound into rax, where the
; emulated call's result would be, and neither calls nor faults.
TW_LOOP_TWINS LOOP, {call r13}, {mov rax, [r12 + TWL_LO]}

TW_MECHANISM "vsyscall", "the legacy vsyscall page must be mapped (vsyscall=xonly, the default, or emulate; not vsyscall=none, nor a kernel built without CONFIG_X86_VSYSCALL_EMULATION); `scripts/tw doctor` says how it is here"
