; asm/32/int80.asm: enter the kernel with the legacy software interrupt.
;
; Contract (i386 cdecl):
;   long tw_syscall3(long nr, long a1, long a2, long a3)
;   in:  [esp+4] nr (i386 table), [esp+8] a1, [esp+12] a2, [esp+16] a3
;   out: eax = raw kernel result; -4095..-1 is -errno (errno is not touched)
;   clobbers: eax, ecx, edx (caller-saved in cdecl); ebx is saved and restored
;
; Why this file exists: int 0x80 is how i386 Linux entered the kernel before
; sysenter (2.5.53) and how glibc's generic i386/i586 builds (glibc 2.5
; among them) entered it for every call, with no vDSO.  The seed report's
; hypothesis is about exactly this instruction.
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

; Call-frame information (tw.inc) follows every push and pop, so that a
; profiler sampling inside int 0x80 can walk from here back to the caller.
TW_FUNC tw_syscall3
	push	ebx			; ebx is callee-saved in cdecl, but it carries a1
	CFI_ADJUST_CFA_OFFSET 4
	CFI_REL_OFFSET ebx, 0
	mov	eax, [esp+8]		; nr (the push moved the arguments up by 4)
	mov	ebx, [esp+12]		; a1
	mov	ecx, [esp+16]		; a2
	mov	edx, [esp+20]		; a3
	int	0x80
	pop	ebx
	CFI_ADJUST_CFA_OFFSET -4
	CFI_RESTORE ebx
	ret
TW_ENDFUNC

section .rodata
global tw_mechanism:data, tw_mech_hint:data
tw_mechanism:	db "int80", 0
tw_mech_hint:	db "int 0x80 needs IA32 emulation (kernel booted without ia32_emulation=0, CONFIG_IA32_EMULATION=y)", 0

TW_NOEXEC_STACK
