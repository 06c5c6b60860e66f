; asm/64/syscall.asm: enter the kernel with syscall from 64-bit code.
;
; Contract (System V AMD64; tw_syscall.h):
;   long tw_syscall3(long nr, long a1, long a2, long a3)
;   in:  rdi = nr (x86-64 table), rsi = a1, rdx = a2, rcx = a3
;   out: rax = raw kernel result; -4095..-1 is -errno
;   clobbers: rax, rcx, rdx, rsi, rdi, r11 (all caller-saved)
;   long tw_syscall3_jmp(...)   the same, leaving by an indirect jump
;   long tw_loop3(struct tw_loop *l, long n)        syscall inline, n times
;   long tw_loop3_empty(struct tw_loop *l, long n)  the same loop, no syscall
;
; Why this file exists: syscall is the only fast 64-bit entry, on every x86-64
; CPU, and what glibc's x86-64 wrappers inline.  This is the floor the other
; mechanisms are measured against.
;
; Kernel side: MSR_LSTAR -> entry_SYSCALL_64 -> do_syscall_64, the x86-64
; table; the kernel returns with sysretq when it can, else iret. Under FRED
; the CPU delivers it to fred_entry_from_user -> fred_other -> do_syscall_64,
; and the return is ERETU.
;
; The kernel ABI takes nr in rax and arguments in rdi, rsi, rdx, r10, r8, r9;
; the C ABI delivered them one register to the left.  The CPU overwrites rcx
; with the return rip and r11 with rflags, which is why the kernel ABI moves
; the fourth argument from rcx to r10.  Every other register comes back as
; it went in (entry_SYSCALL_64 saves and restores them), which the inline
; loop relies on to keep its state in r8-r10.

%include "tw.inc"

bits 64
default rel
section .text

; Extra work for a known difference (docs/syscost.md, "A build that costs a
; little more"): `make TW_EXTRA_WORK=N` puts N multiplies into the
; call, before the entry, so that a second build of this stub costs a little
; more per call and `tw ab` has a known difference to find.  They write r11,
; which syscall overwrites anyway, so the contract is unchanged.
;
; Whether each multiply waits for the one before is TW_EXTRA_CHAIN's to say,
; and nothing else changes between its two values.  With TW_EXTRA_CHAIN=1
; (the default) each is imul r11, r11: a chain of N multiply latencies.  With
; TW_EXTRA_CHAIN=0 each is imul r11, r10, 1, which reads only r10: the N
; multiplies run side by side.  The chained build costs more per call by
; what the core cannot overlap with the entry, which only a measurement can
; say (docs/syscost.md gives some).  Both encodings are four bytes, so the
; two builds lay out every byte alike: their difference is the waiting, not
; where the code sits, to which the jmp shape is sensitive.
; The default, TW_EXTRA_WORK=0, emits nothing: the code is the same as
; without the knob.
%ifndef TW_EXTRA_WORK
 %define TW_EXTRA_WORK 0
%endif
%ifndef TW_EXTRA_CHAIN
 %define TW_EXTRA_CHAIN 1
%endif
%if TW_EXTRA_WORK < 0
 %error "TW_EXTRA_WORK must be 0 or more"
%endif

; The body tw_syscall3 and tw_syscall3_jmp share: only the way out differs.
%macro ENTER 0
	mov	rax, rdi		; nr
	mov	rdi, rsi		; a1
	mov	rsi, rdx		; a2
	mov	rdx, rcx		; a3
 %rep TW_EXTRA_WORK
  %if TW_EXTRA_CHAIN
	imul	r11, r11		; each waits for the one before
  %else
	imul	r11, r10, 1		; none waits for another
  %endif
 %endrep
	syscall
%endmacro

; No push and no frame: the stack pointer never moves, so the row every FDE
; starts with (tw.inc's CIE: CFA = rsp+8, return address at [rsp]) holds at
; every instruction, and TW_FUNC needs nothing more to let an unwinder find
; the caller.  The registers syscall clobbers (rcx, r11) are caller-saved.
TW_FUNC tw_syscall3
	ENTER
	ret
TW_ENDFUNC

; The same call leaving by pop rcx; jmp rcx (rcx is clobbered by syscall
; anyway): the return-stack predictor is not asked where to go after the
; kernel returns.  TW_LEAVE_BY_JMP writes the two rows the pop needs.
TW_FUNC tw_syscall3_jmp
	ENTER
	TW_LEAVE_BY_JMP rcx
TW_ENDFUNC

; The inline loop, and its empty twin: %1 is what stands where the kernel
; entry is.  State lives where neither syscall nor the kernel touches it:
; rbx the count, r12 the struct, rdi/rsi/rdx the arguments (the kernel
; preserves them), rax is loaded with nr on every pass.
%macro LOOP 1
	TW_PUSH	rbx, r12
	mov	r12, rdi		; struct tw_loop *
	mov	rbx, rsi		; n
	mov	qword [r12 + TWL_BAD], 0
	mov	rdi, [r12 + TWL_A1]	; a1-a3 where syscall takes them; the
	mov	rsi, [r12 + TWL_A2]	; kernel returns with them as they were,
	mov	rdx, [r12 + TWL_A3]	; so they are loaded once
	test	rbx, rbx
	jle	TW_AT(%%done)
	TW_HERE %%again
	mov	rax, [r12 + TWL_NR]	; nr again: the last pass's result is in rax
	%1
	TW_LOOP64_END rbx, %%again, %%done	; check, count down, bad count in rax
	TW_POP	r12, rbx
	ret
%endmacro

; The empty twin (tw.inc) loads the accepted low bound into rax, where
; syscall returns the result, and does not enter the kernel.
TW_LOOP_TWINS LOOP, {syscall}, {mov rax, [r12 + TWL_LO]}

TW_MECHANISM "syscall", ""
