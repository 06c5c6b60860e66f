; asm/32/int80.asm: enter the kernel with the legacy software interrupt.
;
; Contract (i386 cdecl; tw_syscall.h):
;   long tw_syscall3(long nr, long a1, long a2, long a3)
;   in:  [esp+4] nr (i386 table), [esp+8] a1, [esp+12] a2, [esp+16] a3
;   out: eax = raw kernel result; -4095..-1 is -errno (errno is not touched)
;   clobbers: eax, ecx, edx (caller-saved in cdecl); ebx is saved and restored
;   tw_syscall3_jmp, tw_loop3, tw_loop3_empty: tw_syscall.h
;
; Why this file exists: int 0x80 is how i386 Linux entered the kernel before
; sysenter (2.5.53) and how glibc's generic i386/i586 builds (glibc 2.5
; among them) entered it for every call, with no vDSO.  The seed report's
; hypothesis is about exactly this instruction.
;
; Kernel side: IDT vector 0x80 -> entry_INT80_compat (assembly, before Linux
; 6.7) or asm_int80_emulation -> do_int80_emulation (C, 6.7 on; under FRED
; fred_intx -> fred_int80_emulation); the i386 table, arguments in ebx, ecx,
; edx, esi, edi, ebp; the return is iret.
;
; The interrupt goes through the IDT: the CPU pushes a full exception frame,
; checks privileges and, on return, iret restores it, all of which sysenter
; and syscall skip.  Since Linux 6.7 the 64-bit kernel handles it in C
; (do_int80_emulation) rather than through entry_INT80_compat.  Under a
; hypervisor that intercepts exceptions the cost can be tens of times that
; of the fast paths.  Works on every x86-64 CPU, unless the kernel was
; booted with ia32_emulation=0 (or built without CONFIG_IA32_EMULATION).

%include "tw.inc"

bits 32
section .text

; The body tw_syscall3 and tw_syscall3_jmp share: only the way out differs.
; Call-frame information (tw.inc) follows every push and pop, so that a
; profiler sampling inside int 0x80 can walk from here back to the caller.
%macro ENTER 0
	TW_PUSH	ebx		; ebx is callee-saved in cdecl, but it carries a1
	mov	eax, [esp+8]		; nr (the push moved the arguments up by 4)
	mov	ebx, [esp+12]		; a1
	mov	ecx, [esp+16]		; a2
	mov	edx, [esp+20]		; a3
	int	0x80
	TW_POP	ebx
%endmacro

TW_FUNC tw_syscall3
	ENTER
	ret
TW_ENDFUNC

; The same call leaving by pop ecx; jmp ecx (ecx is caller-saved in
; cdecl): the return-stack predictor is not asked where to go after the
; kernel returns (tw_syscall.h).
TW_FUNC tw_syscall3_jmp
	ENTER
	TW_LEAVE_BY_JMP ecx
TW_ENDFUNC

; The inline loop, and its empty twin: %1 is what stands where the kernel
; entry is.  int 0x80 changes no register but eax: ebx, ecx, edx hold the
; arguments for every pass, edi the struct, esi the count.
%macro LOOP 1
	TW_PUSH	ebx, esi, edi
	mov	edi, [esp+16]		; struct tw_loop * (three pushes)
	mov	esi, [esp+20]		; n
	mov	dword [edi + TWL_BAD], 0
	TW_LOOP32_PASSES {%1}, %%done
	TW_POP	edi, esi, ebx
	ret
%endmacro

; The empty twin (tw.inc) loads the accepted low bound into eax, where
; int 0x80 returns the result, and does not enter the kernel.
TW_LOOP_TWINS LOOP, {int 0x80}, {mov eax, [edi + TWL_LO]}

TW_MECHANISM "int80", "int 0x80 needs IA32 emulation (kernel booted without ia32_emulation=0, CONFIG_IA32_EMULATION=y)"
