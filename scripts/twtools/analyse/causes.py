"""Why each way into the kernel costs what it does here: a cost model per mechanism.

Every mechanism's undisturbed null-call cost is split into parts, each measured or derived from
a stated fact of the machine (its fingerprint):

  the entry and exit path   the same ABI's fast path, measured: what the mechanism's call costs
                            before anything peculiar to it (for the fast paths themselves, the
                            64-bit syscall, the model's base);
  VM exits                  how many per call the kernel's source predicts on this machine, each
                            at the measured price of one exit (the cpuid cell: cpuid always
                            exits to the hypervisor in a guest);
  the system call's body    getppid - null of the same mechanism (shown; the null call has none);
  the mitigations           those in force on that path, read from
                            /sys/devices/system/cpu/vulnerabilities through the kernel's own
                            strings (machine/mitigations.py): each once, by where its work runs
                            (every entry, every exit, kernel code); part of the measured path,
                            not priced apart, because none can be turned off from user space.

The prediction for int 0x80: since Linux 6.7 (commit 55617fb991df, "x86/entry: Do not allow
external 0x80 interrupts", CVE-2024-25744) do_int80_emulation() calls int80_is_external() on
every call, which reads the local APIC's in-service register (apic_read(APIC_ISR + 0x40)).  In
a guest whose host does not virtualise that read (no APICv/AVIC for it, as in a nested guest)
the read is one VM exit.  It is skipped on Xen PV, and a FRED kernel enters by
fred_int80_emulation(), which has no such check.  On bare metal the read is a cheap MMIO or MSR
access, and there is no exit.

Then the fit: exits per call = (the mechanism - its baseline) / the exit price, with an interval
(the delta method over the three undisturbed intervals).  If the predicted count lies outside
that interval the model is wrong here, and the document says so: that is a finding.

    exit_price(cells)            the price of one exit: {value, ci_low, ci_high, ...} or
                                 {value: None, why}
    predict(fp, variant)         exits per call the facts predict: {value, why, facts}
    compute_from(analysed, fp, legs)  the timewrite-causes/1 document from an analysed percall
                                 (analyse.percall.analyse), a fingerprint (may be None) and
                                 the analysed legs stage (analyse.legs.analyse; may be None)
    exception_premium(cells)     the vsyscall page's exception path over the 64-bit syscall
                                 doing the same gettimeofday: {value, ci_low, ci_high} or why

Two measured parts join the model where they were measured:
  the legs        each system-call mechanism's way in, body and way out, timed on one clock
                  (analyse.legs, tw run's legs stage); for int 0x80, each leg less its
                  baseline's, which places the exit (the way in, if the APIC read exits) and
                  the iret premium (the way out);
  the exception-path premium   the vsyscall page enters by a #PF through the IDT and leaves
                  by iret, with no exit: what that path costs over syscall/sysret doing the
                  same work is a witness for int 0x80's own IDT delivery and iret.  It is
                  priced into int 0x80's prediction, and the residual is what is left.
    compute(res)                 the same from analyse.results.load's result
"""
import math
import re

from ..machine import mitigations, registry
from . import legs as a_legs, percall

SCHEMA = "timewrite-causes/1"
MODEL = "causes/1"

# The kernel's side of each part: function, source file and, where a change made it, the commit.
KERNEL = {
    "syscall64": {"path": "entry_SYSCALL_64 -> do_syscall_64 -> sys_call_table -> sysretq",
                  "source": "arch/x86/entry/entry_64.S, arch/x86/entry/syscall_64.c"},
    "fast32": {"path": "entry_SYSENTER_compat / entry_SYSCALL_compat -> do_fast_syscall_32 -> "
                       "ia32_sys_call -> sysretl / sysexit (or iret)",
               "source": "arch/x86/entry/entry_64_compat.S, arch/x86/entry/syscall_32.c"},
    "int80": {"path": "IDT vector 0x80 -> asm_int80_emulation -> do_int80_emulation -> "
                      "int80_is_external -> ia32_sys_call -> iret",
              "source": "arch/x86/entry/entry_64_compat.S, arch/x86/entry/syscall_32.c",
              "since": "6.7 (55617fb991df; before it, entry_INT80_compat -> do_int80_syscall_32)"},
    "apic_isr": {"path": "int80_is_external -> apic_read(APIC_ISR + 0x40)",
                 "source": "arch/x86/entry/syscall_32.c (int80_is_external)",
                 "commit": "55617fb991df x86/entry: Do not allow external 0x80 interrupts "
                           "(Linux 6.7, CVE-2024-25744)"},
    "fred_int80": {"path": "fred_entry_from_user -> fred_int80_emulation (no APIC read)",
                   "source": "arch/x86/entry/entry_fred.c, arch/x86/entry/syscall_32.c"},
    "vsyscall": {"path": "#PF on the vsyscall page -> exc_page_fault -> emulate_vsyscall -> iret",
                 "source": "arch/x86/entry/vsyscall/vsyscall_64.c"},
    "vdso": {"path": "no kernel entry: the vDSO reads the clock in user space",
             "source": "lib/vdso/gettimeofday.c, arch/x86/include/asm/vdso/gettimeofday.h"},
}
# Effects of the mitigation table (machine/mitigations.py) that only some ways in pay: the
# swapgs fence sits in the IDT's entries (error_entry, paranoid_entry), which int 0x80 and the
# vsyscall page's #PF take and entry_SYSCALL_64 and the compat fast entries do not; the
# BHB-clearing loop is in the system-call entries (entry_SYSCALL_64, the compat entries,
# int80_emulation) and not in the exception path.
ROLE_ONLY = {"swapgs_fence": ("int80", "vsyscall"), "bhi_loop": ("syscall64", "fast32", "int80")}


def _kernel_version(fp):
    m = re.match(r"(\d+)\.(\d+)", str(((fp or {}).get("kernel") or {}).get("release") or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def guest(fp):
    """True in a virtual machine, False on bare metal, None when the fingerprint cannot say."""
    if not fp:
        return None
    virt = fp.get("virtualization")
    flag = (fp.get("virtualization_detail") or {}).get("hypervisor_flag")
    if virt and virt != "none":
        return True
    if flag is True:
        return True
    if virt == "none" and flag is False:
        return False
    return None


def xen_pv(fp):
    d = (fp or {}).get("virtualization_detail") or {}
    if d.get("xen_guest_type") is not None:
        return str(d["xen_guest_type"]).upper() == "PV"
    return "xenpv" in ((fp or {}).get("cpu") or {}).get("flags", []) or None


def _role(variant):
    m = registry.get(variant)
    if m.entry == "int80":
        return "int80"
    if m.entry == "vsyscall-call":
        return "vsyscall"
    if m.entry == "vdso-call":
        return "vdso"
    if m.bits == 32:
        return "fast32"
    return "syscall64"


def predict(fp, variant):
    """Exits per call the machine's facts predict for a variant: {value, why, facts}.  value is
    None when a fact it needs is unknown (the why says which)."""
    role = _role(variant)
    g = guest(fp)
    if role != "int80":
        why = {"syscall64": "syscall and sysret touch no register a hypervisor emulates",
               "fast32": "the compat fast entries read no emulated register",
               "vsyscall": "the page fault and its emulation stay inside the guest "
                           "(two-level paging: no exit for a guest's own fault)",
               "vdso": "no kernel entry at all"}[role]
        return {"value": 0, "why": why, "facts": []}
    facts = []
    if g is None:
        return {"value": None, "why": "unknown: the fingerprint does not say whether this is a "
                                      "virtual machine", "facts": facts}
    if g is False:
        return {"value": 0, "why": "bare metal: the APIC read is a local access, no exit",
                "facts": ["no hypervisor (fingerprint)"]}
    facts.append(f"a {fp.get('virtualization') or 'virtual machine'} guest")
    ver = _kernel_version(fp)
    if ver is None:
        return {"value": None, "why": "unknown: the kernel's version is not recorded", "facts": facts}
    rel = (fp.get("kernel") or {}).get("release")
    if ver < (6, 7):
        return {"value": 0, "why": f"Linux {rel} is older than 6.7: int 0x80 reads no APIC register "
                                   "(entry_INT80_compat, before 55617fb991df)",
                "facts": facts + [f"kernel {rel} < 6.7"]}
    facts.append(f"kernel {rel} >= 6.7")
    if fp.get("fred"):
        return {"value": 0, "why": "FRED is on: fred_int80_emulation() has no int80_is_external() check",
                "facts": facts + ["FRED enabled"]}
    facts.append("FRED off")
    if xen_pv(fp):
        return {"value": 0, "why": "Xen PV: int80_is_external() returns early (the local APIC is fake)",
                "facts": facts + ["Xen PV guest"]}
    facts.append("not Xen PV")
    return {"value": 1, "why": "one exit: do_int80_emulation() reads the APIC in-service register "
                               "(int80_is_external, 55617fb991df), which exits unless the host "
                               "virtualises APIC reads (APICv/AVIC, invisible from inside)",
            "facts": facts}


def _fig(c, keys=("undisturbed_ns", "undisturbed_ci_low", "undisturbed_ci_high")):
    """(value, half-width) of a cell's undisturbed figure (or of the figure under keys), or
    None."""
    if not c or not c.get("supported") or c.get(keys[0]) is None:
        return None
    v, lo, hi = c[keys[0]], c.get(keys[1]), c.get(keys[2])
    if lo is None or hi is None or not all(map(math.isfinite, (v, lo, hi))):
        return None
    return v, max(v - lo, hi - v)


def _interval(v, h, **extra):
    return dict({"value": v, "ci_low": v - h, "ci_high": v + h}, **extra)


def _find(cells, variant, op, shape="ret"):
    for c in cells or []:
        if c.get("variant") == variant and c.get("op") == op and (c.get("shape") or "ret") == shape:
            return c
    return None


def exit_price(cells, fp=None):
    """The price of one VM exit here: the cpuid cell's undisturbed figure with its interval,
    or {value: None, why}.  On bare metal the same figure is the instruction itself."""
    c = percall.exit_cell(cells)
    if c is None:
        return {"value": None, "ci_low": None, "ci_high": None,
                "why": "unknown: these results have no cpuid cell (measured before the cpuid "
                       "operation existed); re-run `tw bench` to price an exit"}
    f = _fig(c)
    if f is None:
        return {"value": None, "ci_low": None, "ci_high": None,
                "why": "unknown: the cpuid cell has no undisturbed interval "
                       f"({c.get('reason') or c.get('status') or 'no samples'})"}
    g = guest(fp)
    what = ("no exit to pay: bare metal, so cpuid is the instruction itself" if g is False else
            "one cpuid, which exits to the hypervisor: the price of one VM exit and back"
            if g else "one cpuid: an exit's price if this is a guest (the fingerprint cannot say)")
    return _interval(f[0], f[1], cell=f"{c['variant']} cpuid ret", what=what, guest=g)


def _diff(a, b):
    return (a[0] - b[0], math.hypot(a[1], b[1]))


def _fit(d, p):
    """d / p with the delta method's half-width."""
    e = d[0] / p[0]
    return e, math.hypot(d[1] / p[0], d[0] * p[1] / p[0] ** 2)


def _baseline(cells, variant, op):
    """The cell a mechanism is held against: the same ABI's fast path for int 0x80 from 32-bit
    code, the 64-bit syscall (same op) for everything else; None for the base itself."""
    m = registry.get(variant)
    base64 = registry.find(64, "syscall")
    if variant == base64:
        return None
    if m.entry == "int80" and m.bits == 32:
        for v in registry.fast32() + [registry.find(32, "libc")]:
            c = _find(cells, v, op)
            if _fig(c):
                return c
        return None
    return _find(cells, base64, op)


def _mitigations(fp, role, prices=None):
    """The mitigations on a way in's path and elsewhere, from the fingerprint's vulnerability
    files through the kernel's own strings (machine/mitigations.py): each effect once (one
    VERW however many files ask for it), with the files that ask for it, where its work runs
    and the source that does it.  prices: {instruction: interval} measured in user space (a
    VERW, an lfence) to price an effect with; None until such a measurement exists."""
    vul = (fp or {}).get("mitigations") or {}

    def keep(x):
        return role in ROLE_ONLY.get(x["id"], (role,))

    def row(x):
        return {"id": x["id"], "vulnerability": ", ".join(x["files"]),
                "in_force": {f: str(v)[:200] for f, v in x["strings"].items()},
                "what": x["what"], "where": x["where"], "where_text": x["where_text"],
                "instruction": x["instruction"], "source": x["source"],
                "price_ns": x["price_ns"]}
    live = [x for x in mitigations.in_force(vul, prices) if keep(x)]
    return {"on_path": [row(x) for x in live if x["on_path"]],
            "elsewhere": [row(x) for x in live if not x["on_path"]
                          and x["where"] != ["static"]],
            "attempted": [row(x) for x in mitigations.attempted(vul) if keep(x) and x["on_path"]],
            "unclassified": [f"{f}: {p}" for f, p in mitigations.unclassified(vul)]}


def _cost_op(cells, variant):
    for op in ("null", "time", "clock_gettime", "gettimeofday"):
        if _fig(_find(cells, variant, op)):
            return op
    return None


def exception_premium(cells):
    """The vsyscall page's exception path over the 64-bit syscall, both doing gettimeofday:
    {value, ci_low, ci_high, basis, cells} in ns, or {value: None, why} (the page is off here,
    or a cell was not measured)."""
    vs, base = registry.find(64, "vsyscall-call"), registry.find(64, "syscall")
    c, b = _find(cells, vs, "gettimeofday"), _find(cells, base, "gettimeofday")
    none = {"value": None, "ci_low": None, "ci_high": None}
    if c is None or b is None:
        return dict(none, why=f"unknown: no {vs if c is None else base} gettimeofday cell in "
                              "these results")
    if not c.get("supported"):
        return dict(none, why=f"the vsyscall page is off here, so it cannot witness the "
                              f"exception path: {c.get('reason') or 'unsupported'}")
    fc, fb = _fig(c), _fig(b)
    if fc is None or fb is None:
        return dict(none, why="unknown: a gettimeofday cell has no undisturbed interval")
    return _interval(*_diff(fc, fb), cells=f"{vs} gettimeofday - {base} gettimeofday",
                     basis="measured: a #PF through the IDT, emulate_vsyscall and iret, against "
                           "syscall and sysret doing the same gettimeofday; no VM exit on either",
                     **KERNEL["vsyscall"])


def _premium_part(out, premium):
    """int 0x80: the exception path's premium joins the prediction, where it was measured."""
    if premium.get("value") is None or out.get("predicted_ns") is None:
        out["residual_after_premium_ns"] = None
        return
    p = (premium["value"], a_legs.half(premium))
    out["parts"].append({"part": "exception-path premium (IDT delivery and iret, over "
                                 "syscall/sysret)", "ns": _interval(*p),
                         "basis": premium["basis"] + " (the vsyscall page's witness)",
                         **KERNEL["vsyscall"]})
    pred, res = out["predicted_ns"], out["residual_ns"]
    hp, hr = a_legs.half(pred), a_legs.half(res)
    out["predicted_before_premium_ns"] = pred
    out["residual_before_premium_ns"] = res
    out["predicted_ns"] = _interval(pred["value"] + p[0], math.hypot(hp, p[1]))
    out["residual_ns"] = out["residual_after_premium_ns"] = _interval(res["value"] - p[0],
                                                                       math.hypot(hr, p[1]))


def _minus_baseline(raw, variant, base, op, meas, bfig):
    """variant's figure less its baseline's, in ns: paired within the host's quiet moments
    (percall.pair_undisturbed: the rounds in which both cells' processes met the fast state,
    measured within one burst where the headline's block ran them) when the raw matrix is at
    hand and enough rounds had both sides quiet; else the difference of the two figures, whose
    interval carries each side's own host state.  ((value, half-width), how)."""
    if raw is not None:
        d = percall.pair_undisturbed(raw, variant, base, op=op, how="diff")
        if d is not None and d.get("median") is not None:
            return ((d["median"], max(d["median"] - d["ci_low"], d["ci_high"] - d["median"])),
                    {"paired": True, "n_pairs": d["n_pairs"], "of_rounds": d["of_rounds"]})
    return _diff(meas, bfig), {"paired": False}


def mechanism(cells, fp, variant, price, premium=None, legs=None, raw=None, prices=None):
    """One mechanism's entry in the document, or None when it has no measured cost here.
    raw: the run's percall.json document, to pair the baseline's difference within the
    host's quiet moments (None: the two figures' difference).  prices: {instruction:
    interval} of a mitigation's own instruction measured in user space (machine/
    mitigations.py's `instruction`: "verw", "lfence"), None until one is measured."""
    op = _cost_op(cells, variant)
    if op is None:
        return None
    cell = _find(cells, variant, op)
    meas = _fig(cell)
    role = _role(variant)
    pred = predict(fp, variant)
    base = _baseline(cells, variant, op)
    bfig = _fig(base)
    out = {"op": op, "role": role, "kernel": KERNEL[role], "measured_ns": _interval(*meas),
           "predicted_exits": pred, "parts": []}
    if role == "vdso":
        # No kernel entry: the cost is the vDSO's own clock read, and no part of the entry
        # model applies; the fit still says how many exits the figure could hide.
        out["parts"].append({"part": "user-space clock read", "ns": _interval(*meas),
                             "basis": "measured: the whole cost, no kernel entry", **KERNEL["vdso"]})
        pv = price.get("value")
        out["exits_per_call"] = (_interval(*_fit(meas, (pv, max(pv - price["ci_low"],
                                                               price["ci_high"] - pv))),
                                           basis=f"{variant} / exit price")
                                 if pv else {"value": None, "ci_low": None, "ci_high": None,
                                             "why": price.get("why")})
        out["predicted_ns"] = None
        out["residual_ns"] = None
        out["model_why"] = "no kernel entry: the entry model predicts no cost, only no exit"
        out["verdict"] = None
        return out
    if base is None and variant == registry.find(64, "syscall"):
        out["parts"].append({"part": "entry and exit path", "ns": _interval(*meas),
                             "basis": "measured: the model's base, the 64-bit syscall's own null call",
                             **KERNEL["syscall64"]})
        out["exits_per_call"] = {"value": 0, "ci_low": 0, "ci_high": 0,
                                 "basis": "premise: " + pred["why"]}
        out["predicted_ns"] = out["measured_ns"]
        out["residual_ns"] = _interval(0.0, 0.0)
    else:
        if bfig is None:
            out.update(exits_per_call={"value": None, "why": "unknown: no baseline cell measured"},
                       predicted_ns=None, residual_ns=None)
            return out
        brole = _role(base["variant"])
        out["baseline"] = f"{base['variant']} {op} ret"
        out["parts"].append({"part": "entry and exit path", "ns": _interval(*bfig),
                             "basis": f"measured: {base['variant']} {op}, the path before anything "
                                      f"peculiar to {variant}", **KERNEL[brole]})
        d, how = _minus_baseline(raw, variant, base["variant"], op, meas, bfig)
        out["minus_baseline_ns"] = _interval(*d, **how)
        pv = price.get("value")
        if pv is not None and pv > 0:
            p = (pv, max(pv - price["ci_low"], price["ci_high"] - pv))
            e = _fit(d, p)
            out["exits_per_call"] = _interval(*e, basis=f"({variant} - {base['variant']}) / exit price")
        else:
            out["exits_per_call"] = {"value": None, "ci_low": None, "ci_high": None,
                                     "why": price.get("why") or "unknown: no exit price"}
        n = pred.get("value")
        if n is None or (n and pv is None):
            out["predicted_ns"] = out["residual_ns"] = None
            out["model_why"] = pred["why"] if n is None else price.get("why")
        else:
            hp = max(pv - price["ci_low"], price["ci_high"] - pv) if n else 0.0
            exits = (n * (pv or 0.0), n * hp)
            out["parts"].append({"part": "VM exits", "exits": n, "ns": _interval(*exits),
                                 "basis": pred["why"], "facts": pred["facts"],
                                 **(KERNEL["apic_isr"] if role == "int80" else {})})
            predicted = (bfig[0] + exits[0], math.hypot(bfig[1], exits[1]))
            out["predicted_ns"] = _interval(*predicted)
            # what the exits leave of the difference over the baseline (the paired one where
            # there is one): measured - predicted, whose baseline part cancels
            out["residual_ns"] = _interval(*_diff(d, exits))
            if role == "int80":
                _premium_part(out, premium or {"value": None})
    body = _fig(_find(cells, variant, "getppid"))
    null = _fig(_find(cells, variant, "null"))
    if body and null:
        out["parts"].append({"part": "the system call's body (getppid)", "ns": _interval(*_diff(body, null)),
                             "basis": f"measured: {variant} getppid - null; not in the null call"})
    mit = _mitigations(fp, role, prices) if role != "vdso" else {"on_path": [], "elsewhere": [],
                                                          "attempted": [], "unclassified": []}
    out["parts"].append({"part": "mitigations on the path", "ns": None,
                         "in_force": mit["on_path"], "elsewhere": mit["elsewhere"],
                         "attempted": mit["attempted"], "unclassified": mit["unclassified"],
                         "why": "included in the measured entry and exit path, not priced apart: "
                                "none can be switched off from user space" if role != "vdso" else
                                "no kernel entry: no entry mitigation applies"})
    out["verdict"] = _verdict(variant, out, pred)
    if registry.get(variant).seen_as == "syscall":
        a_legs.place(out, variant, legs, price, pred)
    return out


# Exits are whole events: the model holds when the fitted count's interval lies within this
# much of the predicted count.  What is left over is the residual in ns, always reported: the
# part of the path the model does not price (int 0x80's IDT delivery and iret against sysret,
# the compat entry's extra work).
WHOLE_EXIT = 0.5


def _verdict(variant, m, pred):
    """One sentence: does the model hold for this mechanism here?"""
    e, n = m.get("exits_per_call") or {}, pred.get("value")
    if e.get("value") is None or n is None or "baseline" not in m:
        return None
    lo, hi = e["ci_low"], e["ci_high"]
    fit = f"{e['value']:.2f} [{lo:.2f}, {hi:.2f}] exits per call fitted, {n} predicted"
    r = m.get("residual_ns")
    rest = (f"; {r['value']:+.0f} ns [{r['ci_low']:+.0f}, {r['ci_high']:+.0f}] is left to the path's "
            f"own work" if r else "")
    if r and m.get("residual_before_premium_ns"):
        rest = (f"; {r['value']:+.0f} ns [{r['ci_low']:+.0f}, {r['ci_high']:+.0f}] is left after the "
                "exception path's premium, still unknown")
    if n - WHOLE_EXIT < lo and hi < n + WHOLE_EXIT:
        return {"holds": True, "text": f"holds: {fit}{rest}"}
    return {"holds": False,
            "text": f"fails here: {fit}, outside {n} \u00b1 {WHOLE_EXIT} whole exits{rest}: an exit of "
                    "this kind costs more (or less) here than a cpuid exit, or the path does other "
                    "work the model does not know"}


def exits_paid(doc, variant):
    """The VM exits a call of `variant` pays here, for taking an exit's price out of a
    comparison (analyse/compare.between_runs): the number the kernel's facts predict, when
    it is not zero and this run's own fit agrees with it (the verdict holds); else None.  A
    host that virtualises the APIC read (APICv, AVIC) fits 0 where 1 is predicted, and then
    no exit's price is taken out."""
    m = ((doc or {}).get("mechanisms") or {}).get(variant) or {}
    n = (m.get("predicted_exits") or {}).get("value")
    if not n or not (m.get("verdict") or {}).get("holds"):
        return None
    return n


def compute_from(analysed, fp, legs=None, raw=None, prices=None):
    """The timewrite-causes/1 document from an analysed percall (analyse.percall.analyse's
    result, or its cells list), a fingerprint (None when there is none), the analysed legs
    stage (analyse.legs.analyse's result; None when the run has none) and the raw
    percall.json document (None: the differences over each baseline are unpaired).
    prices: the hook for a mitigation's instruction measured in user space, {"verw":
    {value, ci_low, ci_high}, "lfence": ...}: each effect of that instruction on the path
    carries it as price_ns (None, "not priced apart", until such a measurement exists)."""
    cells = analysed.get("cells", []) if isinstance(analysed, dict) else (analysed or [])
    price = exit_price(cells, fp)
    premium = exception_premium(cells)
    mechs = {}
    for m in registry.mechanisms():
        r = mechanism(cells, fp, m.name, price, premium, legs, raw, prices)
        if r is not None:
            mechs[m.name] = r
    return {"schema": SCHEMA, "model": MODEL, "guest": guest(fp),
            "kernel": ((fp or {}).get("kernel") or {}).get("release"),
            "fred": (fp or {}).get("fred"), "exit_price_ns": price,
            "exception_path_premium_ns": premium, "mechanisms": mechs,
            "method": "undisturbed figures (analyse.percall); a difference over a baseline is "
                      "paired within the host's quiet rounds where enough had both sides quiet "
                      "(minus_baseline_ns.paired); other differences and quotients carry the "
                      "delta method's interval over the cells' 95% intervals"}


def from_digest_cells(cells, fp):
    """The document from a fleet digest's cells ({name: {variant, op, shape, value, ci_low,
    ci_high}}, analyse.fleet.digest_doc) and the machine's fingerprint."""
    rows = [{"variant": c.get("variant"), "op": c.get("op"), "shape": c.get("shape") or "ret",
             "supported": True, "undisturbed_ns": c.get("value"),
             "undisturbed_ci_low": c.get("ci_low"), "undisturbed_ci_high": c.get("ci_high")}
            for c in (cells or {}).values() if isinstance(c, dict)]
    return compute_from(rows, fp)


def brief(doc):
    """What a fleet digest keeps of a causes document: the exit price and, for the first int
    0x80 variant with a fit, its exits per call, prediction and residual (JSON-small); the
    same for every int 0x80 variant with a fit under int80_all."""
    price, m = int80_summary(doc)
    keep = ("value", "ci_low", "ci_high")

    def one(m):
        return {"variant": m["variant"], "baseline": m.get("baseline"),
                "exits_per_call": {k: m["exits_per_call"].get(k) for k in keep},
                "predicted_exits": (m.get("predicted_exits") or {}).get("value"),
                "minus_baseline_ns": {k: (m.get("minus_baseline_ns") or {}).get(k) for k in keep},
                "residual_ns": {k: (m.get("residual_ns") or {}).get(k) for k in keep}
                if m.get("residual_ns") else None,
                "holds": (m.get("verdict") or {}).get("holds")}
    out = {"exit_price": {k: (price or {}).get(k) for k in keep + ("why",)}, "int80": None,
           "int80_all": {}}
    if m:
        out["int80"] = one(m)
    # Every int 0x80 variant with a fit, so that the fleet weighs the exit price for each
    # int 0x80 column it ranks, not only the first.
    for v in (registry.find(32, "int80"), registry.find(64, "int80")):
        mv = ((doc or {}).get("mechanisms") or {}).get(v)
        if mv and (mv.get("exits_per_call") or {}).get("value") is not None:
            out["int80_all"][v] = one(dict(mv, variant=v))
    return out


def compute(res):
    """The document from analyse.results.load's result; None when it has no per-call matrix."""
    pc = (res or {}).get("percall")
    if not pc:
        return None
    return compute_from(pc, (res or {}).get("fingerprint"), (res or {}).get("legs"))


def int80_summary(doc):
    """The figures the fleet, the atlas and the lesson show: (exit price, the int 0x80 entry
    that has a fit) from a causes document."""
    if not doc:
        return None, None
    for v in (registry.find(32, "int80"), registry.find(64, "int80")):
        m = (doc.get("mechanisms") or {}).get(v)
        if m and (m.get("exits_per_call") or {}).get("value") is not None:
            return doc.get("exit_price_ns"), dict(m, variant=v)
    return doc.get("exit_price_ns"), None


def today(doc, analysed=None, fp=None, typical=False):
    """What int 0x80 costs here against the fast path, and its measured cause: the figures of
    the report's first-screen sentence (present.causes.today_sentence) and of the first
    finding.  None when no int 0x80 cell has a cost here.

      variant, baseline        the int 0x80 variant and the cell it is held against
      measured_ns, minus_baseline_ns, times_reference
                               its null call, what it costs over the baseline, and × the
                               matrix's reference call (analyse.percall's undisturbed ratio,
                               None without one)
      kind                     'exit': the exits the kernel's source predicts, fitted and
                               priced; 'misfit': an exit predicted, but the fit disagrees;
                               'no-exit': none predicted here (bare metal, FRED, Xen PV, a
                               kernel before 6.7), so the cost is the path's own work;
                               'price-unknown': an exit predicted but no cpuid cell priced it;
                               'unknown': the facts do not say whether an exit is due
      predicted, why, facts    the prediction and the facts behind it
      exits_per_call, exit_price   as in the mechanism's entry
      residual_ns              what the exits leave to int 0x80's own path (before the
                               exception path's premium); residual_after_premium_ns after it
      figure                   'undisturbed', or with typical=True (the report's first
                               screen) 'typical' when a cell it needs has no undisturbed
                               figure: today_typical's, from the typical figures (fp: the
                               fingerprint, for the prediction)
    """
    price, m = int80_summary(doc)
    if m is None:
        for v in (registry.find(32, "int80"), registry.find(64, "int80")):
            got = (doc or {}).get("mechanisms", {}).get(v) if doc else None
            if got and got.get("measured_ns"):
                m = dict(got, variant=v)
                break
    if typical and analysed and (m is None or "baseline" not in m
                                 or (price or {}).get("value") is None) \
            and _typ(percall.exit_cell(analysed)) is not None:
        # The host gave too few quiet moments for an undisturbed figure of a cell the
        # sentence needs: the finding from the typical figures, said as such (issue 62:
        # never silence)
        typ = today_typical(analysed, fp)
        if typ is not None:
            return typ
    if m is None or "baseline" not in m:
        return None
    pred = m.get("predicted_exits") or {}
    n = pred.get("value")
    e = m.get("exits_per_call") or {}
    holds = (m.get("verdict") or {}).get("holds")
    if n is None:
        kind = "unknown"
    elif n == 0:
        kind = "no-exit"
    elif (price or {}).get("value") is None:
        kind = "price-unknown"
    else:
        kind = "exit" if holds else "misfit"
    ratio = None
    ref = (analysed or {}).get("reference") or {}
    for c in (analysed or {}).get("cells", []):
        if (c.get("variant"), c.get("op"), c.get("shape") or "ret") == (m["variant"], m["op"], "ret"):
            r = c.get("undisturbed_ratio")
            if r and r.get("median") is not None:
                ratio = {"value": r["median"], "ci_low": r.get("ci_low"), "ci_high": r.get("ci_high")}
    return {"variant": m["variant"], "op": m["op"], "baseline": m["baseline"].split(" ")[0],
            "reference": ref.get("variant"), "measured_ns": m.get("measured_ns"),
            "minus_baseline_ns": m.get("minus_baseline_ns"), "times_reference": ratio,
            "kind": kind, "predicted": n, "why": pred.get("why"), "facts": pred.get("facts") or [],
            "exits_per_call": e if e.get("value") is not None else None,
            "exit_price": price if (price or {}).get("value") is not None else None,
            "price_why": (price or {}).get("why"),
            # what the exits leave to int 0x80's own path; the exception path's premium, where
            # measured, is a part of that path (residual_after_premium_ns what it leaves)
            "residual_ns": m.get("residual_before_premium_ns") or m.get("residual_ns"),
            "residual_after_premium_ns": m.get("residual_after_premium_ns"),
            "holds": holds, "figure": "undisturbed"}


def _typ(c):
    """(value, half-width) of a cell's typical figure (the median over its processes, with
    the run's drift in its interval), or None."""
    return _fig(c, ("median", "ci_low", "ci_high"))


def _target_time(analysed, cells):
    """How long `tw bench --target 1%` would take this host for the undisturbed figures of
    these cells, at the fast share the run showed (analyse/sequential.projection, the rule it
    stops on): {seconds, lower_bound} of the slowest, or None when the host was never fast."""
    from . import sequential
    h = (analysed or {}).get("host") or {}
    share, per = h.get("fast_share"), h.get("round_s")
    if not share or not per:
        return None
    worst = None
    for c in cells:
        g = ((c or {}).get("undisturbed") or {}).get("host") or {}
        pj = sequential.projection(g.get("fast_floors") or [], share, per, percall.PROJECT_TARGET)
        if pj.get("seconds") is not None and (worst is None or pj["seconds"] > worst["seconds"]):
            worst = {"seconds": pj["seconds"], "lower_bound": bool(pj.get("why"))}
    return worst


def today_typical(analysed, fp=None):
    """today()'s figures from the cells' typical figures, for a run whose host allowed no
    undisturbed figure of a cell the sentence rests on (the exit's price, int 0x80's null call
    or the fast path it is held against): int 0x80 against the fast path and the reference,
    the exits per call fitted at the typical cpuid's price, each marked typical, with how
    long `tw bench --target 1%` would take for the undisturbed figures (target_s).  The
    typical figures carry the host's noise at its moment, every side alike; the fit says
    whether the exits per call still come out whole.  None when a cell has no figure."""
    cells = (analysed or {}).get("cells") or []
    cpu = percall.exit_cell(cells)
    for v in (registry.find(32, "int80"), registry.find(64, "int80")):
        c = _find(cells, v, "null")
        meas = _typ(c)
        if meas is None:
            continue
        if registry.get(v).bits == 32:
            base = next((b for b in (_find(cells, x, "null") for x in
                                     registry.fast32() + [registry.find(32, "libc")])
                         if _typ(b)), None)
        else:
            base = _find(cells, registry.find(64, "syscall"), "null")
        bfig = _typ(base)
        if bfig is None:
            continue
        pred = predict(fp, v)
        n = pred.get("value")
        p = _typ(cpu)
        d = _diff(meas, bfig)
        e = _interval(*_fit(d, p)) if p and p[0] > 0 else None
        holds = None
        if e is not None and n is not None:
            holds = n - WHOLE_EXIT < e["ci_low"] and e["ci_high"] < n + WHOLE_EXIT
        kind = ("unknown" if n is None else "no-exit" if n == 0 else
                "price-unknown" if p is None else "exit" if holds else "misfit")
        r = c.get("ratio") or {}
        residual = _interval(*_diff(meas, (n * p[0], n * p[1]))) if p and n else None
        price = _interval(*p, cell=f"{cpu['variant']} cpuid ret", guest=guest(fp)) if p else None
        return {"variant": v, "op": "null", "baseline": base["variant"],
                "reference": ((analysed or {}).get("reference") or {}).get("variant"),
                "measured_ns": _interval(*meas), "minus_baseline_ns": _interval(*d),
                "times_reference": ({"value": r["median"], "ci_low": r.get("ci_low"),
                                     "ci_high": r.get("ci_high")}
                                    if r.get("median") is not None else None),
                "kind": kind, "predicted": n, "why": pred.get("why"),
                "facts": pred.get("facts") or [], "exits_per_call": e, "exit_price": price,
                "price_why": None if p else "unknown: the cpuid cell has no figure",
                "residual_ns": residual, "residual_after_premium_ns": None, "holds": holds,
                "figure": "typical",
                "typical_why": [f"{x['variant']} {x['op']}" for x in (c, base, cpu)
                                if x and x.get("undisturbed_ns") is None],
                "target_s": _target_time(analysed, [c, base, cpu])}
    return None
