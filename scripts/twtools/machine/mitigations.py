"""What each CPU-vulnerability verdict means for the cost of entering the kernel.

/sys/devices/system/cpu/vulnerabilities/<file> prints one string per vulnerability, built by
arch/x86/kernel/cpu/bugs.c (its `*_strings[]` arrays, `*_show_state()`, `spectre_v2`'s
`ibpb_state()`, `stibp_state()`, `pbrsb_eibrs_state()`, `spectre_bhi_state()`, and
cpu_show_common()).  This module reads such a string part by part and says, for each part,
what work the kernel does for it, **where that work runs** and **which kernel source does
it**.  The table was built from every string those places can print in Linux 6.1 to 7.2
(tests/fixtures/mitigations/bugs-strings*.tsv, docs/mitigations.md says how they were
extracted), and tests/test_mitigations.py holds it to that whole corpus.

Where a mitigation's work runs (WHERE):

    entry           every kernel entry (system call, exception, interrupt)
    exit            every exit to user space
    kernel_code     every indirect branch or return in kernel code: on every call's path,
                    in proportion to the kernel code it runs (retpolines, return thunks)
    context_switch  a context switch (switch_mm, __switch_to)
    vm              VM exit or entry, on a host running guests (KVM)
    firmware        calls into firmware (EFI runtime services, APM)
    user_space      user space, per process on request (prctl, seccomp)
    static          set once (a control bit, microcode, a feature switched off): no work
                    of the kernel's per call
    never           no work: "Vulnerable", "Not affected", "Unknown"

Rules the table keeps: no part that says "Vulnerable", "Not affected" or "Unknown" is a
mitigation in force (work the kernel still does there is `attempted`, never `in_force`);
work several files ask for is one entry naming them all (the VERW that mds, tsx_async_abort,
mmio_stale_data, reg_file_data_sampling and tsa all ask for, X86_FEATURE_CLEAR_CPU_BUF, is
one VERW on every exit to user); a part the table does not know is `unclassified`, never
guessed.

Each effect carries `instruction` ("verw", "lfence", "ibpb", "wrmsr", "mov cr3" or None):
the one instruction whose price, measured in user space where it can be (VERW with a valid
selector, an lfence), would price the effect; `price_ns` in what in_force returns stays None
(the work is "not priced apart") until such a measurement is given to `in_force(...,
prices={"verw": {...}})`.

    split(file, text)            the parts of one file's string: [part, ...]
    classify(file, text)         [{part, effects, state, note, attempted}] per part; state is
                                 "mitigation", "never" or "unclassified"
    in_force(vulns, prices=None) the effects in force on this machine, each once, with every
                                 file that asks for it: [{id, where, where_text, instruction,
                                 source, what, files, strings, on_path, price_ns}], in WHERE's
                                 order; vulns is a fingerprint's "mitigations" dict
    attempted(vulns)             work the kernel does although the file says "Vulnerable"
    unclassified(vulns)          the parts no row of the table knows: [(file, part)]
    facts_changed(fp_a, fp_b)    the mitigation facts that differ between two fingerprints,
                                 for `tw compare`: [{fact, kind, a, b, where, where_text,
                                 work, added, removed}], the vulnerability files first (those
                                 that add or remove work first of all), then the boot
                                 parameters, the kernel config, the CPU's bug list, the
                                 CPUID leaves, the microcode and the compiler.  `where` is a
                                 list of WHERE keys (empty for a fact that does no work
                                 itself but decides what the kernel selects); added/removed
                                 are effect ids in B and not in A, and in A and not in B.
                                 A fact is compared only when both fingerprints recorded it
                                 (an older fingerprint without the key is not a change).
"""
WHERE = {
    "entry": "every kernel entry",
    "exit": "every exit to user space",
    "kernel_code": "every indirect branch or return in kernel code (on every call's path)",
    "context_switch": "context switch",
    "vm": "VM exit/entry (a host running guests)",
    "firmware": "firmware calls",
    "user_space": "user space only, per process on request (prctl/seccomp)",
    "static": "set once: no work per call",
    "never": "never: no work",
}
# What a null system call's measured path holds: the entry, the exit and the kernel code
# between them; a context switch, a VM exit of this machine's own guests, firmware calls
# are elsewhere.
ON_PATH = ("entry", "exit", "kernel_code")


class Effect:
    __slots__ = ("id", "where", "instruction", "source", "what")

    def __init__(self, id, where, instruction, source, what):
        self.id, self.where, self.instruction = id, tuple(where), instruction
        self.source, self.what = source, what


E = {e.id: e for e in (
    Effect("pti", ("entry", "exit"), "mov cr3",
           "SWITCH_TO_KERNEL_CR3 on entry, SWITCH_TO_USER_CR3_STACK/_NOSTACK before the return "
           "(arch/x86/entry/calling.h, used in arch/x86/entry/entry_64.S and entry_64_compat.S; "
           "X86_FEATURE_PTI, arch/x86/mm/pti.c)",
           "PTI: a CR3 switch to the kernel's page tables on every entry and back on every exit"),
    Effect("swapgs_fence", ("entry",), "lfence",
           "FENCE_SWAPGS_USER_ENTRY/FENCE_SWAPGS_KERNEL_ENTRY (arch/x86/entry/calling.h) in "
           "error_entry, paranoid_entry and the NMI entry (arch/x86/entry/entry_64.S), and "
           "barrier_nospec/array_index_nospec in user copies (arch/x86/include/asm/barrier.h, "
           "include/linux/nospec.h)",
           "Spectre v1: an lfence after swapgs on entries through the IDT (int 0x80, exceptions, "
           "interrupts; not entry_SYSCALL_64) where the CPU needs it, and index masking in "
           "user copies"),
    Effect("retpoline", ("kernel_code",), None,
           "__x86_indirect_thunk_* (arch/x86/lib/retpoline.S), X86_FEATURE_RETPOLINE",
           "retpolines: every indirect call and jump in kernel code goes through a thunk"),
    Effect("lfence_indirect", ("kernel_code",), "lfence",
           "X86_FEATURE_RETPOLINE_LFENCE: lfence; jmp *%reg (arch/x86/lib/retpoline.S, "
           "arch/x86/kernel/alternative.c)",
           "an lfence before every indirect call and jump in kernel code"),
    Effect("eibrs", ("static",), None,
           "spectre_v2_select_mitigation: SPEC_CTRL.IBRS in x86_spec_ctrl_base (Intel eIBRS) or "
           "EFER.AUTOIBRS (AMD Automatic IBRS), arch/x86/kernel/cpu/bugs.c",
           "Enhanced/Automatic IBRS: set once, no write on entry or exit"),
    Effect("ibrs_entry_exit", ("entry", "exit"), "wrmsr",
           "IBRS_ENTER/IBRS_EXIT (arch/x86/entry/calling.h) in entry_SYSCALL_64, the compat "
           "entries, error_entry, paranoid_entry (arch/x86/entry/entry_64.S, entry_64_compat.S); "
           "X86_FEATURE_KERNEL_IBRS",
           "IBRS written on every entry (IBRS_ENTER) and cleared on every exit (IBRS_EXIT): a "
           "wrmsr of SPEC_CTRL each way"),
    Effect("ibpb_switch", ("context_switch",), "ibpb",
           "switch_mm_irqs_off -> cond_mitigation (arch/x86/mm/tlb.c): switch_mm_cond_ibpb / "
           "switch_mm_always_ibpb",
           "IBPB when switching to another process's address space"),
    Effect("ibrs_fw", ("firmware",), "wrmsr",
           "firmware_restrict_branch_speculation_start/_end (arch/x86/include/asm/"
           "nospec-branch.h) around EFI runtime and APM BIOS calls; X86_FEATURE_USE_IBRS_FW",
           "IBRS_FW: IBRS set around firmware calls only"),
    Effect("stibp_always", ("static",), None,
           "SPEC_CTRL.STIBP in x86_spec_ctrl_base (spectre_v2_user=on), arch/x86/kernel/cpu/bugs.c",
           "STIBP on for every task: set once"),
    Effect("stibp_cond", ("context_switch",), "wrmsr",
           "__switch_to_xtra -> __speculation_ctrl_update (arch/x86/kernel/process.c), "
           "switch_to_cond_stibp",
           "STIBP written on a context switch into or out of a task that asked for it"),
    Effect("rsb_fill", ("context_switch", "vm"), None,
           "FILL_RETURN_BUFFER in __switch_to_asm (arch/x86/entry/entry_64.S, "
           "X86_FEATURE_RSB_CTXSW) and after VM exit (arch/x86/kvm/vmx/vmenter.S, "
           "arch/x86/kvm/svm/vmenter.S, X86_FEATURE_RSB_VMEXIT)",
           "RSB filling on context switch and VM exit"),
    Effect("pbrsb_vmexit", ("vm",), None,
           "ISSUE_UNBALANCED_RET_GUARD after VM exit (arch/x86/kvm/vmx/vmenter.S, "
           "X86_FEATURE_RSB_VMEXIT_LITE)",
           "PBRSB: one RSB entry filled after VM exit"),
    Effect("bhi_dis_s", ("static",), None,
           "SPEC_CTRL.BHI_DIS_S (X86_FEATURE_CLEAR_BHB_HW), arch/x86/kernel/cpu/bugs.c",
           "BHI_DIS_S: the hardware control, set once"),
    Effect("bhi_loop", ("entry",), None,
           "CLEAR_BRANCH_HISTORY -> clear_bhb_loop in entry_SYSCALL_64, entry_SYSENTER_compat, "
           "entry_SYSCALL_compat and int80_emulation (arch/x86/entry/entry_64.S, "
           "entry_64_compat.S; X86_FEATURE_CLEAR_BHB_LOOP)",
           "CLEAR_BRANCH_HISTORY: the BHB-clearing loop on every system-call entry"),
    Effect("bhi_loop_vm", ("vm",), None,
           "CLEAR_BRANCH_HISTORY_VMEXIT (arch/x86/kvm/vmx/vmenter.S; X86_FEATURE_CLEAR_BHB_VMEXIT, "
           "before 6.12 CLEAR_BHB_LOOP_ON_VMEXIT)",
           "the BHB-clearing loop after VM exit"),
    Effect("rrsba_dis", ("static",), None,
           "SPEC_CTRL.RRSBA_DIS_S when needed (disable_rrsba, arch/x86/kernel/cpu/bugs.c)",
           "BHI covered by the retpolines in force: no work of its own"),
    Effect("untrain_ret", ("entry", "kernel_code"), None,
           "UNTRAIN_RET -> entry_untrain_ret (retbleed_untrain_ret) on entry, every return "
           "through retbleed_return_thunk (arch/x86/lib/retpoline.S, arch/x86/include/asm/"
           "nospec-branch.h; X86_FEATURE_UNRET, X86_FEATURE_RETHUNK)",
           "retbleed untrained return: the return predictor retrained on every entry and every "
           "kernel return through a thunk"),
    Effect("entry_ibpb", ("entry",), "ibpb",
           "UNTRAIN_RET -> entry_ibpb (arch/x86/entry/entry.S, arch/x86/include/asm/"
           "nospec-branch.h; X86_FEATURE_ENTRY_IBPB)",
           "an IBPB (wrmsr PRED_CMD) on every kernel entry"),
    Effect("call_depth", ("entry", "kernel_code"), None,
           "call depth tracking: RESET_CALL_DEPTH in UNTRAIN_RET on entry, accounting thunks "
           "before calls (arch/x86/kernel/callthunks.c) and call_depth_return_thunk on every "
           "return (X86_FEATURE_CALL_DEPTH)",
           "RSB stuffing: call depth counted on every call and return, the RSB refilled when "
           "it runs low"),
    Effect("srso_safe_ret", ("entry", "kernel_code"), None,
           "UNTRAIN_RET -> srso_untrain_ret / srso_alias_untrain_ret on entry, every return "
           "through srso_return_thunk (Zen 1/2) or srso_alias_return_thunk (Zen 3/4) "
           "(arch/x86/lib/retpoline.S; X86_FEATURE_SRSO / SRSO_ALIAS, RETHUNK, UNRET)",
           "SRSO safe RET: every kernel return goes through the SRSO return thunk"),
    Effect("ibpb_vmexit", ("vm",), "ibpb",
           "X86_FEATURE_IBPB_ON_VMEXIT (arch/x86/kvm/svm/svm.c), or vmscape's IBPB on VM exit",
           "an IBPB on VM exit"),
    Effect("bp_spec_reduce", ("vm",), None,
           "BpSpecReduce while guests run (X86_FEATURE_SRSO_BP_SPEC_REDUCE, arch/x86/kvm/svm/svm.c)",
           "SRSO: reduced speculation while guests run"),
    Effect("verw_exit", ("exit",), "verw",
           "CLEAR_CPU_BUFFERS (arch/x86/include/asm/nospec-branch.h; X86_FEATURE_CLEAR_CPU_BUF) "
           "before sysretq/sysretl/iretq in entry_SYSCALL_64, the compat entries and "
           "common_interrupt_return (arch/x86/entry/entry_64.S, entry_64_compat.S); before "
           "Linux 6.8 and its stable backports, mds_user_clear_cpu_buffers() in "
           "arch_exit_to_user_mode (arch/x86/include/asm/entry-common.h)",
           "one VERW on every exit to user space (CLEAR_CPU_BUFFERS)"),
    Effect("verw_vm", ("vm",), "verw",
           "VERW before VM entry (X86_FEATURE_CLEAR_CPU_BUF_VM, cpu_buf_vm_clear / "
           "mmio_stale_data_clear; arch/x86/kvm/vmx/vmenter.S, arch/x86/kvm/svm/vmenter.S)",
           "one VERW before every VM entry"),
    Effect("ssbd_prctl", ("user_space",), "wrmsr",
           "TIF_SSBD per task (prctl PR_SET_SPECULATION_CTRL, seccomp), written on context "
           "switch by __speculation_ctrl_update (arch/x86/kernel/process.c)",
           "SSBD only for the processes that ask for it"),
    Effect("ssbd_always", ("static",), None,
           "SPEC_CTRL.SSBD in x86_spec_ctrl_base or the AMD LS_CFG/VIRT_SPEC_CTRL MSR, "
           "arch/x86/kernel/cpu/bugs.c",
           "SSBD on for everything: set once"),
    Effect("pte_inversion", ("static",), None,
           "pte/pmd inversion when a non-present entry is written (arch/x86/include/asm/"
           "pgtable-invert.h)",
           "L1TF PTE inversion: no work per call"),
    Effect("l1d_flush_vm", ("vm",), None,
           "vmx_l1d_flush before VM entry (arch/x86/kvm/vmx/vmx.c)",
           "L1TF: an L1D flush before VM entry"),
    Effect("itlb_split", ("vm",), None,
           "KVM maps guest memory with small pages where executable (arch/x86/kvm/mmu)",
           "iTLB multihit: huge pages split in KVM"),
    Effect("microcode", ("static",), None,
           "the CPU's microcode (RDRAND/RDSEED for SRBDS, vector gathers for GDS); "
           "arch/x86/kernel/cpu/bugs.c",
           "microcode: some instructions slower, none on the entry path"),
    Effect("feature_off", ("static",), None,
           "a CPU feature switched off at boot (TSX: arch/x86/kernel/cpu/tsx.c; AVX for GDS; "
           "SMT)",
           "a feature switched off: no work per call"),
    Effect("its_thunks", ("kernel_code",), None,
           "its_return_thunk and __x86_indirect_its_thunk_* for branches in the lower half of "
           "a cache line (arch/x86/lib/retpoline.S, arch/x86/kernel/alternative.c; "
           "X86_FEATURE_INDIRECT_THUNK_ITS)",
           "ITS: indirect branches and returns on affected addresses go through thunks"),
    Effect("ibpb_exit_vm", ("vm",), "ibpb",
           "an IBPB on the first exit to user after a guest ran on that CPU "
           "(X86_FEATURE_IBPB_EXIT_TO_USER, x86_ibpb_exit_to_user; arch/x86/include/asm/"
           "entry-common.h)",
           "VMSCAPE: an IBPB before returning to the VMM after a guest ran"),
)}

_NEVER = ((), None, ())


def _m(*effects, note=None):
    return (tuple(effects), note, ())


def _v(note=None, attempted=()):
    """A verdict that is no mitigation: no effect, a note, and work the kernel still does."""
    return ((), note, tuple(attempted))


def _smt(*words):
    """The "SMT ..." parts a file's show function prints: the state of SMT, no work (STIBP's
    own work is spectre_v2's)."""
    return {f"SMT {w}": (_v("STIBP, counted under spectre_v2") if "STIBP" in w else _NEVER)
            for w in words}
VERW_STRINGS = {"Mitigation: Clear CPU buffers": _m("verw_exit", "verw_vm"),
                "Vulnerable: Clear CPU buffers attempted, no microcode":
                    _v("the kernel still executes VERW on every exit; without the microcode it "
                       "clears nothing", attempted=("verw_exit",))}

# file -> {part (as split() gives it): (effects, note, attempted)}
TABLE = {
    "meltdown": {"Mitigation: PTI": _m("pti"),
                 "Unknown (XEN PV detected, hypervisor mitigation required)": _NEVER},
    "spectre_v1": {
        "Mitigation: usercopy/swapgs barriers and __user pointer sanitization": _m("swapgs_fence"),
        "Vulnerable: __user pointer sanitization and usercopy barriers only; no swapgs barriers":
            _v("no swapgs fences; user copies still mask their indexes")},
    "spectre_v2": {
        "Mitigation: Retpolines": _m("retpoline"),
        "Mitigation: LFENCE": _m("lfence_indirect"),
        "Vulnerable: LFENCE": _v("the kernel still puts an lfence before indirect branches",
                                 attempted=("lfence_indirect",)),
        "Mitigation: Enhanced IBRS": _m("eibrs"),
        "Mitigation: Enhanced / Automatic IBRS": _m("eibrs"),
        "Mitigation: Enhanced IBRS + LFENCE": _m("eibrs", "lfence_indirect"),
        "Mitigation: Enhanced / Automatic IBRS + LFENCE": _m("eibrs", "lfence_indirect"),
        "Mitigation: Enhanced IBRS + Retpolines": _m("eibrs", "retpoline"),
        "Mitigation: Enhanced / Automatic IBRS + Retpolines": _m("eibrs", "retpoline"),
        "Mitigation: IBRS": _m("ibrs_entry_exit"),
        "Vulnerable: eIBRS with unprivileged eBPF": _v(attempted=("eibrs",)),
        "Vulnerable: eIBRS+LFENCE with unprivileged eBPF and SMT":
            _v(attempted=("eibrs", "lfence_indirect")),
        "IBPB: conditional": _m("ibpb_switch"),
        "IBPB: always-on": _m("ibpb_switch"),
        "IBPB: disabled": _NEVER,
        "IBRS_FW": _m("ibrs_fw", note="firmware calls only: not IBRS on entry"),
        "STIBP: disabled": _NEVER,
        "STIBP: forced": _m("stibp_always"),
        "STIBP: always-on": _m("stibp_always"),
        "STIBP: conditional": _m("stibp_cond"),
        "RSB filling": _m("rsb_fill"),
        "PBRSB-eIBRS: Not affected": _NEVER,
        "PBRSB-eIBRS: Vulnerable": _NEVER,
        "PBRSB-eIBRS: SW sequence": _m("pbrsb_vmexit"),
        "BHI: Not affected": _NEVER,
        "BHI: Vulnerable": _NEVER,
        "BHI: BHI_DIS_S": _m("bhi_dis_s"),
        "BHI: SW loop, KVM: SW loop": _m("bhi_loop", "bhi_loop_vm"),
        "BHI: Vulnerable, KVM: SW loop": _v("the host's VM exits still clear the BHB",
                                            attempted=("bhi_loop_vm",)),
        "BHI: Retpoline": _m("rrsba_dis"),
        "vulnerable module loaded": _v("a module built without retpolines is loaded"),
    },
    "spec_store_bypass": {
        "Mitigation: Speculative Store Bypass disabled": _m("ssbd_always"),
        "Mitigation: Speculative Store Bypass disabled via prctl": _m("ssbd_prctl"),
        "Mitigation: Speculative Store Bypass disabled via prctl and seccomp": _m("ssbd_prctl")},
    "l1tf": dict({"Mitigation: PTE Inversion": _m("pte_inversion")},
                 **{f"VMX: {s}": eff for s, eff in (
                     ("auto", _NEVER), ("vulnerable", _NEVER),
                     ("conditional cache flushes", _m("l1d_flush_vm")),
                     ("cache flushes", _m("l1d_flush_vm")), ("EPT disabled", _NEVER),
                     ("flush not necessary", _NEVER))},
                 **_smt("vulnerable", "disabled")),
    "mds": dict(VERW_STRINGS, **_smt("vulnerable", "mitigated", "disabled", "Host state unknown")),
    "tsx_async_abort": dict(VERW_STRINGS, **{"Mitigation: TSX disabled": _m("feature_off")},
                            **_smt("vulnerable", "disabled", "Host state unknown")),
    # mmio alone: VERW before VM entry only; joined to the VERW on exit when another file
    # (mds, taa, rfds) asks for it (mmio_apply_mitigation; 6.1: mds_user_clear or
    # mmio_stale_data_clear).  in_force() resolves "verw_exit_shared".
    "mmio_stale_data": dict({"Mitigation: Clear CPU buffers": _m("verw_exit_shared", "verw_vm"),
                             "Vulnerable: Clear CPU buffers attempted, no microcode":
                                 VERW_STRINGS["Vulnerable: Clear CPU buffers attempted, no microcode"],
                             "Unknown: No mitigations": _NEVER},
                            **_smt("vulnerable", "disabled", "Host state unknown")),
    "reg_file_data_sampling": {"Mitigation: Clear Register File": _m("verw_exit", "verw_vm"),
                               "Vulnerable: No microcode": _NEVER},
    "tsa": {"Mitigation: Clear CPU buffers: user/kernel boundary": _m("verw_exit"),
            "Mitigation: Clear CPU buffers: VM": _m("verw_vm"),
            "Mitigation: Clear CPU buffers": _m("verw_exit", "verw_vm"),
            "Vulnerable: No microcode": _NEVER,
            # 6.1/6.12's backport: in a guest without VERW_CLEAR the kernel forces the VERW on
            # anyway ("Forcing mitigation on in a VM"): the host may have the microcode
            "Vulnerable: Clear CPU buffers attempted, no microcode":
                _v("in a guest the kernel still puts one VERW on every exit",
                   attempted=("verw_exit",))},
    "srbds": {"Mitigation: Microcode": _m("microcode"), "Mitigation: TSX disabled": _m("feature_off"),
              "Vulnerable: No microcode": _NEVER,
              "Unknown: Dependent on hypervisor status": _NEVER},
    "gather_data_sampling": {"Mitigation: Microcode": _m("microcode"),
                             "Mitigation: Microcode (locked)": _m("microcode"),
                             "Mitigation: AVX disabled, no microcode": _m("feature_off"),
                             "Vulnerable: No microcode": _NEVER,
                             "Unknown: Dependent on hypervisor status": _NEVER},
    "retbleed": dict({
        "Mitigation: untrained return thunk": _m("untrain_ret"),
        "Mitigation: IBPB": _m("entry_ibpb", "ibpb_vmexit"),
        "Mitigation: IBRS": _m("ibrs_entry_exit"),
        "Mitigation: Enhanced IBRS": _m("eibrs"),
        "Mitigation: Stuffing": _m("call_depth"),
        "Vulnerable: untrained return thunk / IBPB on non-AMD based uarch":
            _v("the kernel still runs the AMD-only mitigation", attempted=("untrain_ret",))},
        **_smt("vulnerable", "disabled", "enabled with STIBP protection")),
    "spec_rstack_overflow": {
        "Mitigation: Safe RET": _m("srso_safe_ret"),
        "Mitigation: safe RET": _m("srso_safe_ret"),
        "Mitigation: IBPB": _m("entry_ibpb", "ibpb_vmexit"),
        "Mitigation: IBPB on VMEXIT only": _m("ibpb_vmexit"),
        "Mitigation: Reduced Speculation": _m("bp_spec_reduce"),
        "Mitigation: SMT disabled": _m("feature_off"),
        "Mitigation: microcode": _m("microcode"),
        "no microcode": _v("without the microcode (IBPB_BRTYPE) the mitigation is incomplete"),
        "Vulnerable: No microcode": _NEVER,
        "Vulnerable: Safe RET, no microcode":
            _v("the kernel still sends every return through the safe-RET thunk",
               attempted=("srso_safe_ret",)),
        "Vulnerable: Microcode, no safe RET": _NEVER},
    "indirect_target_selection": {
        "Mitigation: Aligned branch/return thunks": _m("its_thunks"),
        "Mitigation: Retpolines, Stuffing RSB": _m("call_depth"),
        "Mitigation: Vulnerable, KVM: Not affected":
            _v("says Vulnerable: only the host/guest boundary was at risk and nothing is done")},
    "itlb_multihit": {"KVM: Mitigation: Split huge pages": _m("itlb_split"),
                      "KVM: Mitigation: VMX disabled": _NEVER,
                      "KVM: Mitigation: VMX unsupported": _NEVER,
                      "KVM: Vulnerable": _NEVER, "Processor vulnerable": _NEVER},
    "vmscape": {"Mitigation: IBPB before exit to userspace": _m("ibpb_exit_vm"),
                "Mitigation: IBPB on VMEXIT": _m("ibpb_vmexit")},
    "old_microcode": {"Unknown: running under hypervisor": _NEVER},
}
# Strings any file can print (cpu_show_common(), drivers/base/cpu.c's default).
GENERIC = {"Not affected": _NEVER, "Vulnerable": _NEVER}
NEVER_PREFIXES = ("Vulnerable", "Not affected", "Unknown", "KVM: Vulnerable")


def _norm(s):
    return " ".join(str(s).split())


def split(file, text):
    """The parts of one file's string, each as TABLE keys it: spectre_v2's main mode and its
    "; "-separated parts ("IBPB: conditional", ..., "BHI: Not affected", and " - vulnerable
    module loaded" as "vulnerable module loaded"; the parts were ", "-separated before Linux
    6.8), "SMT ..." after mds, tsx_async_abort, mmio_stale_data and retbleed, l1tf's "VMX: ..."
    and "SMT ...", spec_rstack_overflow's ", no microcode".  A string the table knows whole
    is one part."""
    t = _norm(text)
    table = TABLE.get(file, {})
    if t in table or t in GENERIC or not t:
        return [t] if t else []
    if file == "spectre_v2":
        parts = []
        if t.endswith(" - vulnerable module loaded"):
            t = t[: -len(" - vulnerable module loaded")]
            parts.append("vulnerable module loaded")
        sep = "; " if "; " in t else ", "
        return [p.strip() for p in t.split(sep) if p.strip()] + parts
    if file == "l1tf":
        out = []
        for p in t.split("; "):
            out.extend(x.strip() for x in p.split(", SMT ", 1)) if ", SMT " in p else out.append(p)
        return [("SMT " + p if p in ("vulnerable", "disabled") and i > 1 else p)
                for i, p in enumerate(out)]
    if file == "spec_rstack_overflow" and t.endswith(", no microcode"):
        return [t[: -len(", no microcode")], "no microcode"]
    return [p.strip() for p in t.split("; ") if p.strip()]


def classify(file, text):
    """[{part, effects, state, note, attempted}] for each part of one file's string.  state:
    "mitigation" (effects is not empty), "never" (no work), "unclassified" (no row knows it)."""
    out = []
    for p in split(file, text):
        row = TABLE.get(file, {}).get(p) or GENERIC.get(p)
        if row is None:
            never = p.startswith(NEVER_PREFIXES)
            out.append({"part": p, "effects": [], "attempted": [],
                        "state": "never" if never else "unclassified",
                        "note": "not in the table, but it says so: no work counted" if never
                        else "not in the table"})
            continue
        effects, note, attempted = row
        if effects and p.startswith(NEVER_PREFIXES):
            raise AssertionError(f"{file}: {p!r} says it is no mitigation but has effects")
        out.append({"part": p, "effects": list(effects), "attempted": list(attempted),
                    "state": "mitigation" if effects else "never", "note": note})
    return out


_ORDER = {k: i for i, k in enumerate(WHERE)}


def _entry(eid, files, strings, prices):
    e = E[eid]
    price = (prices or {}).get(e.instruction) if e.instruction else None
    return {"id": eid, "where": list(e.where),
            "where_text": " and ".join(WHERE[w] for w in e.where),
            "instruction": e.instruction, "source": e.source, "what": e.what,
            "files": files, "strings": strings,
            "on_path": any(w in ON_PATH for w in e.where),
            "price_ns": price}


def _collect(vulns, key):
    got = {}
    for f in sorted(vulns or {}):
        s = (vulns or {}).get(f)
        if not isinstance(s, str):
            continue
        for c in classify(f, s):
            for eid in c[key]:
                got.setdefault(eid, {}).setdefault(f, c["part"])
    return got


def in_force(vulns, prices=None):
    """The effects in force, each once with every file that asks for it, in WHERE's order
    (then by id).  vulns: {file: string} (a fingerprint's "mitigations").  prices:
    {instruction: {value, ci_low, ci_high, ...}} from a measurement of that instruction in
    user space; without one, price_ns is None ("not priced apart")."""
    got = _collect(vulns, "effects")
    shared = got.pop("verw_exit_shared", None)
    if shared:
        # mmio's VERW runs on exit to user only when mds, taa or rfds also clear buffers
        if "verw_exit" in got:
            got["verw_exit"].update(shared)
        else:
            got.setdefault("verw_vm", {}).update(shared)
    out = [_entry(eid, sorted(fs), fs, prices) for eid, fs in got.items()]
    return sorted(out, key=lambda x: (min(_ORDER[w] for w in x["where"]), x["id"]))


def attempted(vulns):
    """Work the kernel does although the file says Vulnerable (VERW without its microcode, the
    safe-RET thunk without the microcode, ...): same shape as in_force, no price."""
    live = {x["id"] for x in in_force(vulns)}
    got = _collect(vulns, "attempted")
    out = [_entry(eid, sorted(fs), fs, None) for eid, fs in got.items() if eid not in live]
    return sorted(out, key=lambda x: (min(_ORDER[w] for w in x["where"]), x["id"]))


def unclassified(vulns):
    """[(file, part)] the table does not know."""
    return [(f, c["part"]) for f in sorted(vulns or {}) if isinstance(vulns[f], str)
            for c in classify(f, vulns[f]) if c["state"] == "unclassified"]


# --- the facts that decide mitigations, compared -------------------------------------------
def _get(fp, *path):
    x = fp
    for k in path:
        if not isinstance(x, dict) or k not in x:
            return _MISSING
        x = x[k]
    return x


_MISSING = object()


def _scalar_diffs(a, b, fact, kind, work):
    """One row per key whose value differs, for two flat dicts (both recorded)."""
    out = []
    if not isinstance(a, dict) or not isinstance(b, dict):
        return out
    for k in sorted(set(a) | set(b)):
        va, vb = a.get(k), b.get(k)
        if va != vb:
            out.append({"fact": f"{fact}{k}", "kind": kind, "a": va, "b": vb, "where": [],
                        "where_text": None, "work": work, "added": [], "removed": []})
    return out


def facts_changed(fp_a, fp_b):
    """The mitigation facts that differ between fingerprints A and B (module docstring)."""
    out = []
    va, vb = _get(fp_a, "mitigations"), _get(fp_b, "mitigations")
    if isinstance(va, dict) and isinstance(vb, dict):
        ea = {x["id"]: x for x in in_force(va)}
        eb = {x["id"]: x for x in in_force(vb)}
        rows = []
        for f in sorted(set(va) | set(vb)):
            sa, sb = va.get(f), vb.get(f)
            if _norm(sa or "") == _norm(sb or ""):
                continue
            # the effects this file asks for on each side, and which of them are new or gone
            # for the machine as a whole (a VERW another file already asked for is no new work)
            fa = {e for e, x in ea.items() if f in x["files"]}
            fb = {e for e, x in eb.items() if f in x["files"]}
            added = sorted(e for e in fb - fa if e not in ea)
            removed = sorted(e for e in fa - fb if e not in eb)
            moved = sorted(fa ^ fb)
            where = sorted({w for e in moved for w in E[e].where}, key=_ORDER.get)
            work = "; ".join(
                [f"+ {E[e].what}" for e in added] + [f"- {E[e].what}" for e in removed]
                + [f"{E[e].what}: already asked for by "
                   + ", ".join(x for x in (eb.get(e) or ea.get(e))["files"] if x != f)
                   for e in moved if e not in added and e not in removed]) or "no work changes"
            rows.append({"fact": f"vulnerabilities/{f}", "kind": "vulnerability", "a": sa,
                         "b": sb, "where": where,
                         "where_text": " and ".join(WHERE[w] for w in where) or None,
                         "work": work, "added": added, "removed": removed})
        rows.sort(key=lambda r: (not (r["added"] or r["removed"]), r["fact"]))
        out.extend(rows)
    decides = "decides which mitigations the kernel selects (the vulnerabilities above)"
    for path, fact, kind in ((("kernel_state", "mitigation_params"), "cmdline:", "boot parameter"),
                             (("kernel_config", "options"), "config:", "kernel config")):
        a, b = _get(fp_a, *path), _get(fp_b, *path)
        if a is not _MISSING and b is not _MISSING:
            out.extend(_scalar_diffs(a, b, fact, kind, decides))
    for path, fact, kind, work in (
            (("cpu", "bugs"), "cpu bugs", "cpu", "the bugs the kernel finds in this CPU: "
                                                 "which mitigations it considers"),
            (("cpuid", "leaves"), "cpuid", "cpu", "the CPU's own statement of what it is "
                                                 "immune to or can do (the kernel reads it)"),
            (("cpu", "microcode"), "microcode", "cpu", "the microcode revision: which "
                                                      "mitigations the CPU supports"),
            (("kernel", "compiler"), "compiler", "kernel", "the compiler that built the kernel "
                                                          "(thunks, retpolines)")):
        a, b = _get(fp_a, *path), _get(fp_b, *path)
        if a is _MISSING or b is _MISSING or a == b or a is None or b is None:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            out.extend(_scalar_diffs(a, b, fact + ":", kind, work))
        else:
            out.append({"fact": fact, "kind": kind, "a": a, "b": b, "where": [],
                        "where_text": None, "work": work, "added": [], "removed": []})
    return out

