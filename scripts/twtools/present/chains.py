"""Each way into the kernel as a causal chain, with this machine's numbers: what `tw explain`
and docs/mechanisms.md teach.

A chain is the list of steps a call takes, from the instruction in user code to the return,
each naming the kernel function (and the source file, and the commit where a change made it)
that does that step.  Which steps there are depends on the machine's facts, read from its
fingerprint and never assumed: a FRED kernel delivers int 0x80 by fred_int80_emulation(), a
kernel older than 6.7 by entry_INT80_compat, a guest pays a VM exit for the local APIC read
that 55617fb991df put on every int 0x80 since 6.7, bare metal does not, and Xen PV skips it.

The numbers come from the cost model (analyse.causes, the timewrite-causes/1 document): the
measured undisturbed cost of the call, the entry and exit path it is held against, the price
of one exit (the cpuid cell) times the exits the facts predict, the fitted exits per call,
the system call's body (getppid - null) and the residual.  A step the model does not price
carries no number; a figure that is not measured says "unknown" and why.

    chain(variant, fp, doc)   {variant, steps: [{step, kernel, ns, note}], figures: [text]}
    text_lines(ch)            the chain as indented lines (tw explain)
    markdown(ch, md)          the chain as a Markdown list (docs/mechanisms.md); md escapes
                              what came from outside
"""
import re

from ..analyse import causes
from ..core.fmt import fmt
from ..machine import registry

APIC = causes.KERNEL["apic_isr"]["commit"]


def _iv(d):
    """A {value, ci_low, ci_high} interval as a figure for fmt, or None."""
    if not d or d.get("value") is None:
        return None
    return {"median": d["value"], "ci_low": d.get("ci_low"), "ci_high": d.get("ci_high")}


def _ns(d):
    return fmt(_iv(d), "ns") if _iv(d) else "unknown"


def _part(m, name):
    return next((p for p in (m or {}).get("parts", []) if p.get("part", "").startswith(name)), None)


def _release(fp):
    return ((fp or {}).get("kernel") or {}).get("release")


def _at_least(fp, major, minor):
    m = re.match(r"(\d+)\.(\d+)", _release(fp) or "")
    return None if not m else (int(m.group(1)), int(m.group(2))) >= (major, minor)


def _bhi(fp):
    s = ((fp or {}).get("mitigations") or {}).get("spectre_v2") or ""
    return "BHI: SW loop" in s


def _int80_steps(fp, m, price):
    """int 0x80's chain on this kernel, with the exit priced where the facts predict one."""
    g, new, fred, xen = causes.guest(fp), _at_least(fp, 6, 7), (fp or {}).get("fred"), causes.xen_pv(fp)
    steps = [{"step": "`int $0x80` (cd 80): a software interrupt, the oldest way in",
              "kernel": "the CPU", "ns": None, "note": None}]
    if fred:
        return steps + [
            {"step": "FRED delivers the event to one entry point, no IDT",
             "kernel": "fred_entry_from_user -> fred_intx (arch/x86/entry/entry_fred.c)", "ns": None,
             "note": None},
            {"step": "fred_int80_emulation: no int80_is_external() check, so no APIC read and no exit",
             "kernel": "arch/x86/entry/syscall_32.c", "ns": None, "note": None},
            {"step": "the i386 table", "kernel": "ia32_sys_call", "ns": None, "note": None},
            {"step": "ERETU back to user", "kernel": "the CPU (FRED)", "ns": None, "note": None}]
    if new is False:
        return steps + [
            {"step": "IDT vector 0x80 -> entry_INT80_compat (assembly)",
             "kernel": "arch/x86/entry/entry_64_compat.S", "ns": None,
             "note": f"Linux {_release(fp)} is older than 6.7: no int80_is_external(), no APIC read"},
            {"step": "do_int80_syscall_32 -> the i386 table", "kernel": "arch/x86/entry/common.c",
             "ns": None, "note": None},
            {"step": "iret back to user", "kernel": "swapgs_restore_regs_and_return_to_usermode",
             "ns": None, "note": None}]
    steps += [
        {"step": "IDT vector 0x80 (IA32_SYSCALL_VECTOR) -> asm_int80_emulation"
                 + (", which clears the branch history (CLEAR_BRANCH_HISTORY, BHI in force here)"
                    if _bhi(fp) else ""),
         "kernel": "arch/x86/entry/entry_64_compat.S (int80_emulation)", "ns": None,
         "note": None if new else "the kernel's version is unknown: this is the path since 6.7"},
        {"step": "do_int80_emulation", "kernel": "arch/x86/entry/syscall_32.c, since "
         + causes.KERNEL["int80"]["since"], "ns": None, "note": None},
        {"step": "int80_is_external(): was vector 0x80 an external interrupt?",
         "kernel": APIC, "ns": None, "note": None}]
    exits = _part(m, "VM exits")
    if xen:
        steps.append({"step": "Xen PV: int80_is_external() returns early (the local APIC is fake)",
                      "kernel": "cpu_feature_enabled(X86_FEATURE_XENPV)", "ns": None, "note": None})
    elif g is False:
        steps.append({"step": "apic_read(APIC_ISR + 0x40): a local APIC read, no exit on bare metal",
                      "kernel": "arch/x86/include/asm/apic.h", "ns": None, "note": None})
    else:
        where = ("" if g else " (if this is a guest: the fingerprint cannot say)")
        steps.append({"step": "apic_read(APIC_ISR + 0x40): the local APIC's in-service register",
                      "kernel": "arch/x86/include/asm/apic.h", "ns": None, "note": None})
        steps.append({"step": "a VM exit to the hypervisor, which emulates the read" + where
                              + ", unless the host virtualises APIC reads (APICv/AVIC, invisible "
                                "from inside)",
                      "kernel": "the hypervisor", "ns": (exits or {}).get("ns") or _iv_none(price),
                      "note": "one exit at the measured price of a cpuid exit"
                              + ("" if price.get("value") is not None else f": {price.get('why')}")})
    steps += [{"step": "the i386 table", "kernel": "do_syscall_32_irqs_on -> ia32_sys_call",
               "ns": None, "note": None},
              {"step": "iret back to user", "kernel": "swapgs_restore_regs_and_return_to_usermode",
               "ns": None, "note": None}]
    _place_measured(steps, m)
    return steps


def _place_measured(steps, m):
    """int 0x80's measured parts on their steps: the exception path's premium on the IDT
    delivery (the vsyscall page's witness: a #PF through the IDT and iret, over syscall and
    sysret), where the legs put the exit, and the way out over the baseline's on iret."""
    if not m:
        return
    idt = next((s for s in steps if s["step"].startswith("IDT vector 0x80")), None)
    prem = _part(m, "exception-path premium")
    if idt and prem:
        idt["ns"] = prem.get("ns")
        idt["note"] = ("with the iret below: what the exception path costs over syscall and "
                       "sysret, witnessed by the vsyscall page's #PF and iret (no exit there)")
    d = m.get("legs_vs_baseline") or {}
    pl = m.get("exit_placement")
    ex = next((s for s in steps if s["step"].startswith("a VM exit")), None)
    if ex and pl:
        ex["note"] = (ex.get("note") or "") + f"; the legs place it: {pl['text']}"
    ret = next((s for s in steps if s["step"].startswith("iret back to user")), None)
    if ret and d.get("out"):
        ret["ns"] = d["out"]
        ret["note"] = (f"the way out over {d.get('baseline')}'s (sys_exit to user space, legs): "
                       "iret against sysret, the tracer's cost cancelled")


def _iv_none(price):
    return price if price and price.get("value") is not None else None


def _fast32_steps(fp, entry):
    if entry == "sysenter":
        return [{"step": "`sysenter` (0f 34): jumps to MSR_IA32_SYSENTER_EIP", "kernel": "the CPU",
                 "ns": None, "note": None},
                {"step": "entry_SYSENTER_compat -> do_SYSENTER_32 -> do_fast_syscall_32",
                 "kernel": "arch/x86/entry/entry_64_compat.S, arch/x86/entry/syscall_32.c",
                 "ns": None, "note": None}]
    return [{"step": "`syscall` (0f 05) from 32-bit code: jumps to MSR_CSTAR", "kernel": "the CPU",
             "ns": None, "note": "AMD takes it in compatibility mode; Intel raises #UD"},
            {"step": "entry_SYSCALL_compat -> do_fast_syscall_32",
             "kernel": "arch/x86/entry/entry_64_compat.S, arch/x86/entry/syscall_32.c",
             "ns": None, "note": None}]


def _fast32_tail():
    return [{"step": "the i386 table", "kernel": "ia32_sys_call", "ns": None, "note": None},
            {"step": "sysretl to the vDSO's landing pad (iret when the registers do not allow it)",
             "kernel": "sysret32_from_system_call", "ns": None,
             "note": "no emulated register on this path: no exit predicted"}]


def _syscall64_steps():
    return [{"step": "`syscall` (0f 05): jumps to MSR_LSTAR", "kernel": "the CPU", "ns": None, "note": None},
            {"step": "entry_SYSCALL_64: swapgs, the kernel stack, the entry mitigations in force",
             "kernel": "arch/x86/entry/entry_64.S", "ns": None, "note": None},
            {"step": "do_syscall_64 -> the x86_64 table", "kernel": "x64_sys_call "
             "(arch/x86/entry/syscall_64.c)", "ns": None, "note": None},
            {"step": "sysretq back to user (iret when the registers do not allow it)",
             "kernel": "entry_SYSCALL_64", "ns": None,
             "note": "no emulated register on this path: no exit predicted"}]


def _vdso32_entry(fp):
    """The instruction the live 32-bit vDSO uses here, as an entry name, or None."""
    ins = str(((fp or {}).get("vdso32") or {}).get("instruction") or "")
    for e in ("sysenter", "syscall", "int80"):
        if e in ins.replace("int $0x80", "int80").replace("int 0x80", "int80"):
            return e
    return None


def _libc_entry(fp, bits):
    return (((fp or {}).get("libc") or {}).get(str(bits)) or {}).get("entry")


def _vdso32_steps(fp, m, price):
    e = _vdso32_entry(fp)
    head = [{"step": "`call *%gs:0x10` -> __kernel_vsyscall (AT_SYSINFO)", "kernel": "the 32-bit vDSO",
             "ns": None, "note": f"which runs {e or 'an instruction the fingerprint does not name'} here"}]
    if e == "int80":
        return head + _int80_steps(fp, m, price)[1:]
    return head + (_fast32_steps(fp, e) + _fast32_tail() if e else [])


def _steps(fp, variant, m, price):
    mech = registry.get(variant)
    if mech.entry == "int80":
        return _int80_steps(fp, m, price)
    if mech.entry == "vdso-call":
        return [{"step": "a call into the vDSO (clock_gettime, gettimeofday, time)",
                 "kernel": "lib/vdso/gettimeofday.c", "ns": None, "note": None},
                {"step": "read the clock data page under its sequence count, then the TSC "
                         "(or the hypervisor's pvclock page)",
                 "kernel": "arch/x86/include/asm/vdso/gettimeofday.h", "ns": None,
                 "note": "no kernel entry; a clocksource the vDSO cannot read falls back to a syscall"},
                {"step": "ret", "kernel": "user space", "ns": None, "note": None}]
    if mech.entry == "vsyscall-call":
        return [{"step": "a call to the legacy page at 0xffffffffff600000", "kernel": "the CPU",
                 "ns": None, "note": None},
                {"step": "the fetch faults: #PF", "kernel": "asm_exc_page_fault -> exc_page_fault "
                 "-> do_user_addr_fault", "ns": None, "note": None},
                {"step": "emulate_vsyscall: does gettimeofday or time, sets the return address",
                 "kernel": causes.KERNEL["vsyscall"]["source"], "ns": None,
                 "note": "an exception, not a system call: the guest handles its own fault, no exit"},
                {"step": "iret back to the caller", "kernel": "the CPU", "ns": None, "note": None}]
    if mech.entry == "vdso32-call":
        return _vdso32_steps(fp, m, price)
    if mech.entry == "libc":
        e = _libc_entry(fp, mech.bits)
        head = [{"step": f"the C library's wrapper ({mech.bits}-bit)", "kernel": "libc", "ns": None,
                 "note": f"which enters by {e or 'a way the fingerprint does not name'} here"}]
        if mech.bits == 64:
            return head + (_syscall64_steps() if e in (None, "syscall") else [])
        if e == "vdso":
            return head + _vdso32_steps(fp, m, price)
        if e == "int80":
            return head + _int80_steps(fp, m, price)
        return head + (_fast32_steps(fp, e) + _fast32_tail() if e in ("sysenter", "syscall") else [])
    if mech.bits == 32:
        return _fast32_steps(fp, mech.entry) + _fast32_tail()
    return _syscall64_steps()


def _figures(m, price):
    """The model's numbers for one mechanism, as sentences, each with its interval."""
    if not m:
        return ["not measured: no cost for this mechanism in these results"]
    out = [f"measured ({m['op']}, undisturbed): {_ns(m.get('measured_ns'))}"]
    base = _part(m, "entry and exit path")
    if base and m.get("baseline"):
        out.append(f"its entry and exit path, held against {m['baseline']}: {_ns(base.get('ns'))}")
    e = m.get("exits_per_call") or {}
    pred = (m.get("predicted_exits") or {}).get("value")
    if "baseline" in m:
        if e.get("value") is not None:
            out.append(f"exits per call: {e['value']:.2f} [{e['ci_low']:.2f}, {e['ci_high']:.2f}] fitted "
                       f"from ({_ns(m.get('minus_baseline_ns'))}) / the exit price, {pred} predicted")
            if pred is not None and pred > 0 and not e["ci_low"] <= pred <= e["ci_high"]:
                # Near the count is not the count: say which way the rest goes, in plain words.
                more = e["ci_low"] > pred
                out.append(f"the fitted interval excludes exactly {pred}: this way in costs "
                           f"{'more' if more else 'less'} than {pred} cpuid exit(s) over its "
                           f"baseline, so either its exit is {'dearer' if more else 'cheaper'} "
                           "than cpuid's or its own path differs from the baseline's by the "
                           "residual below")
        else:
            out.append(f"exits per call: unknown ({e.get('why') or 'no fit'}); {pred} predicted")
    if m.get("predicted_ns"):
        out.append(f"predicted: {_ns(m['predicted_ns'])}; residual (measured - predicted): "
                   f"{_ns(m.get('residual_ns'))}")
    prem = _part(m, "exception-path premium")
    if prem:
        out.append(f"the exception path's premium (vsyscall gettimeofday - 64-bit syscall "
                   f"gettimeofday): {_ns(prem.get('ns'))}, priced into the prediction; residual "
                   f"before it: {_ns(m.get('residual_before_premium_ns'))}")
    lg = m.get("legs") or {}
    if lg.get("in"):
        out.append(f"legs, traced (one clock: vDSO and bpf_ktime_get_ns): way in {_ns(lg['in'])}, "
                   f"body {_ns(lg['body'])}, way out {_ns(lg['out'])}; the tracer adds "
                   f"{_ns(lg.get('tracer_ns'))} per call (traced - untraced total)")
    elif lg.get("why"):
        out.append(f"legs: {lg['why']}")
    d = m.get("legs_vs_baseline") or {}
    if d.get("in"):
        out.append(f"legs over {d['baseline']}'s: way in {_ns(d['in'])}, body {_ns(d.get('body'))}, "
                   f"way out {_ns(d.get('out'))}; tracer cost {_ns(d.get('tracer'))} more")
    if m.get("exit_placement"):
        out.append(m["exit_placement"]["text"])
    body = _part(m, "the system call's body")
    if body:
        out.append(f"the system call's body (getppid - null): {_ns(body.get('ns'))}")
    mit = _part(m, "mitigations")
    if mit and mit.get("in_force"):
        out.append("mitigations in force on the path (inside the measured path): "
                   + "; ".join(x["what"] for x in mit["in_force"]))
    if m.get("verdict"):
        out.append("the model " + m["verdict"]["text"])
    return out


def chain(variant, fp, doc):
    """{variant, steps, figures} for one mechanism: the steps on this machine's kernel and the
    cost model's numbers from doc (a timewrite-causes/1 document, or None: not measured)."""
    price = (doc or {}).get("exit_price_ns") or {"value": None, "why": "not measured"}
    m = ((doc or {}).get("mechanisms") or {}).get(variant)
    return {"variant": variant, "steps": _steps(fp, variant, m, price),
            "figures": _figures(m, price) if doc else ["not measured: run make report (or pass --results DIR)"]}


def _step_text(s, md=None):
    # In Markdown the kernel's side is a code span: its text is this module's own, and a code
    # span needs no escaping but of its backticks and line ends.
    k = (f"`{s['kernel'].replace('`', '').replace(chr(10), ' ')}`" if md else f"[{s['kernel']}]")
    md = md or str
    t = f"{md(s['step'])}  {k}"
    if s.get("ns"):
        t += f": {_ns(s['ns'])} here"
    if s.get("note"):
        t += f" ({md(s['note'])})"
    return t


def text_lines(ch):
    """The chain as lines for the terminal: arrows between steps, then the figures."""
    out = []
    for i, s in enumerate(ch["steps"]):
        out.append(("   " if i == 0 else " -> ") + _step_text(s))
    return out + [f"    {f}" for f in ch["figures"]]


def markdown(ch, md):
    """The chain as a numbered Markdown list, then the figures as a bullet list."""
    out = [f"{i}. {_step_text(s, md)}" for i, s in enumerate(ch["steps"], 1)]
    return out + [""] + [f"- {md(f)}" for f in ch["figures"]]
