; asm/64/syscall.asm: enter the kernel with syscall from 64-bit code.
;
; Contract (System V AMD64):
;   long tw_syscall3(long nr, long a1, long a2, long a3)
;   in:  rdi = nr (x86-64 table), rsi = a1, rdx = a2, rcx = a3
;   out: rax = raw kernel result; -4095..-1 is -errno
;   clobbers: rax, rcx, rdx, rsi, rdi, r11 (all caller-saved)
;
; Why this file exists: syscall is the only fast 64-bit entry, on Intel and
; AMD alike, and what glibc's x86-64 wrappers inline.  This is the floor the
; other mechanisms are measured against.
;
; The kernel ABI takes nr in rax and arguments in rdi, rsi, rdx, r10, r8, r9;
; the C ABI delivered them one register to the left.  The CPU overwrites rcx
; with the return rip and r11 with rflags, which is why the kernel ABI moves
; the fourth argument from rcx to r10.

%include "tw.inc"

bits 64
default rel
section .text

; No push and no frame: the stack pointer never moves, so the row every FDE
; starts with (tw.inc's CIE: CFA = rsp+8, return address at [rsp]) holds at
; every instruction, and TW_FUNC needs nothing more to let an unwinder find
; the caller.  The registers syscall clobbers (rcx, r11) are caller-saved.
TW_FUNC tw_syscall3
	mov	rax, rdi		; nr
	mov	rdi, rsi		; a1
	mov	rsi, rdx		; a2
	mov	rdx, rcx		; a3
	syscall
	ret
TW_ENDFUNC

section .rodata
global tw_mechanism:data, tw_mech_hint:data
tw_mechanism:	db "syscall", 0
tw_mech_hint:	db "", 0

TW_NOEXEC_STACK
