"""The three things a machine showed that a reader should remember, each with its number
and interval: what the report opens with, after the verdict.

  entry      what int 0x80 costs over the fast 32-bit path (the vDSO) here, per call, on the
             undisturbed figure (the typical one beside), and as a ratio of the two cells'
             undisturbed figures with the same rounds left out of both
  return     the largest post-return penalty measured (ret minus jmp), or that none was
             detected and how small a one could have been
  waiting    what an O_SYNC write costs and how much of it is waiting for the device (the
             seed's slow row), or, without it, what the vsyscall page costs over the vDSO
Each finding is {key, title, sentence, figure, cause}; cause is the measured cause the cost
model (analyse/causes.py) gives for it, one clause, or None where the model has none, and
cause_why the machine's fact behind it where there is one (text from the fingerprint).  A
finding that could not be measured says so.
"""
from ..core.fmt import fmt
from ..machine import registry
from . import causes, percall, stats


def _entry(data):
    raw, pc = (data.get("raw") or {}).get("percall"), data.get("percall")
    for slow, fasts in ((registry.find(32, "int80"), registry.fast32()),
                        (registry.find(64, "int80"), [registry.find(64, "syscall")])):
        for fast in fasts:
            a, b = percall.find(pc, slow, "null"), percall.find(pc, fast, "null")
            if not (a and b and a.get("median") is not None and b.get("median") is not None):
                continue
            fa, fb = percall.figure(a, "undisturbed"), percall.figure(b, "undisturbed")
            if fa and fb:
                # Paired within quiet moments where enough rounds had both processes in the
                # host's fast state: the difference then carries no host state.
                dp = percall.pair_undisturbed(raw, slow, fast, how="diff")
                d = dp or stats.diff_summary(fa, fb)
                r = percall.pair_undisturbed(raw, slow, fast) or stats.ratio_summary(fa, fb)
                how = (f"undisturbed, paired in {dp['n_pairs']} quiet rounds of {dp['of_rounds']}"
                       if dp else "undisturbed")
            else:
                d = percall.pair(raw, slow, fast, "diff") or stats.diff_summary(a, b)
                r = percall.pair(raw, slow, fast, "ratio") or stats.ratio_summary(a, b)
                how = "typical (no undisturbed figure for both cells)"
            typ = percall.pair(raw, slow, fast, "diff") or stats.diff_summary(a, b)
            beside = (f"; at the typical cost (medians, paired by round) {fmt(typ)} more"
                      if how.startswith("undisturbed") and typ else "")
            return {"key": "entry", "title": "int 0x80 against the fast path",
                    "figure": d, "figure_kind": how, "cause": _entry_cause(data),
                    "cause_why": _entry_why(data),
                    "sentence": f"int 0x80 ({slow}) costs {fmt(d)} more per empty call than "
                                f"{fast} here, {how}: {r['median']:.1f}x [{r['ci_low']:.1f}, "
                                f"{r['ci_high']:.1f}]{beside}."}
    return {"key": "entry", "title": "int 0x80 against the fast path", "figure": None,
            "sentence": "not measured: no int 0x80 cell and fast-path cell were both measured here"}


def _n(x):
    return f"{x['value']:.0f} ns [{x['ci_low']:.0f}, {x['ci_high']:.0f}]"


def _entry_cause(data):
    """The cost model's cause of int 0x80's extra cost here, one clause, or None."""
    t = causes.today(data.get("causes"), data.get("percall"))
    if not t:
        return None
    e, p, r = t.get("exits_per_call"), t.get("exit_price"), t.get("residual_ns")
    if t["kind"] == "exit":
        n = t["predicted"]
        return (f"{'one VM exit' if n == 1 else f'{n} VM exits'} per call ({e['value']:.2f} "
                f"[{e['ci_low']:.2f}, {e['ci_high']:.2f}] fitted, {n} predicted) at {_n(p)} each "
                "(`cpuid`)" + (f", and {r['value']:+.0f} ns [{r['ci_low']:+.0f}, "
                               f"{r['ci_high']:+.0f}] of int 0x80's own path" if r else ""))
    if t["kind"] == "misfit":
        return (f"not priced: {t['predicted']} VM exit predicted, {e['value']:.2f} "
                f"[{e['ci_low']:.2f}, {e['ci_high']:.2f}] fitted at {_n(p)} an exit: the cost "
                "model fails here")
    if t["kind"] == "no-exit":
        return ("int 0x80's own path, its IDT delivery and `iret` against `sysret` or "
                "`sysexit`, and no VM exit")
    if t["kind"] == "price-unknown":
        return (f"{t['predicted']} VM exit per call predicted, at a price unknown here "
                "(no cpuid cell: re-run `tw bench`)")
    return None


def _entry_why(data):
    """Why no exit is due here, where none is (machine text: the kernel's release may be in
    it), or None."""
    t = causes.today(data.get("causes"), data.get("percall"))
    return t["why"] if t and t["kind"] == "no-exit" else None


def _return(data):
    pens = [p for p in (data.get("percall") or {}).get("penalties", [])
            if p.get("penalty_ns") and p["penalty_ns"].get("median") is not None and p["op"] == "null"]
    if not pens:
        return {"key": "return", "title": "the return after the call", "figure": None,
                "sentence": "not measured: no mechanism here was timed in both the ret and the "
                            "jmp shape (tw bench --shapes ret,jmp)"}
    # A penalty counts where its interval excludes zero.  With one interval per mechanism,
    # one may exclude zero by chance at a 95% level, so the sentence says how many did.
    seen = [p for p in pens if p["penalty_ns"]["ci_low"] > 0]
    chance = 1 - stats.CONFIDENCE ** len(pens)
    if len(seen) == 1 and len(pens) > 1:
        p = seen[0]
        s = p["penalty_ns"]
        text = (f"no clear post-return penalty: ret minus jmp excludes zero only for "
                f"{p['variant']} ({fmt(s)} on a {p['ret_ns']:.1f} ns call), and with "
                f"{len(pens)} intervals one such is what chance alone gives {chance:.0%} of the "
                "time; the others include zero.")
    elif seen:
        p = max(seen, key=lambda p: p["penalty_ns"]["median"])
        s = p["penalty_ns"]
        text = (f"leaving a stub by `ret` right after the kernel returns costs {fmt(s)} more per "
                f"call than leaving it by an indirect jump ({p['variant']}, null: {p['ret_ns']:.1f} "
                f"vs {p['jmp_ns']:.1f} ns; {len(seen)} of {len(pens)} mechanisms showed one): a "
                "mispredicted return after the kernel comes back, which every libc wrapper pays.")
    else:
        p = max(pens, key=lambda p: max(abs(p["penalty_ns"]["ci_low"]), abs(p["penalty_ns"]["ci_high"])))
        s = p["penalty_ns"]
        bound = max(abs(s["ci_low"]), abs(s["ci_high"]))
        text = (f"no post-return penalty detected: for each of {len(pens)} mechanisms, ret minus "
                f"jmp has an interval that includes zero (the widest: {p['variant']}, null, "
                f"{fmt(s)}); a penalty above about {bound:.1f} ns would have shown.")
    return {"key": "return", "title": "the return after the call", "figure": s, "sentence": text}


def _waiting(data):
    pc = data.get("percall")
    libc = registry.find(64, "libc")
    c = percall.find(pc, libc, "write-sync")
    if c and c.get("median") is not None:
        w = c.get("offcpu_ns") or {}
        share = (f", {100 * w['median'] / c['median']:.0f}% of it off-CPU, waiting for the device"
                 if w.get("median") is not None and c["median"] else "")
        f = percall.find(pc, libc, "write-file", c.get("size"))
        than = (f" ({c['median'] / f['median']:.0f}x the same write without O_SYNC)"
                if f and f.get("median") else "")
        return {"key": "waiting", "title": "waiting for the device", "figure": c,
                "sentence": f"an O_SYNC {c.get('size')}-byte write costs {fmt(c, 'ns')}{than}{share}: "
                            "the seed's slow sync row measured the disk, not the kernel entry."}
    vs, vd = registry.find(64, "vsyscall-call"), registry.find(64, "vdso-call")
    a, b = percall.find(pc, vs, "gettimeofday"), percall.find(pc, vd, "gettimeofday")
    if a and b and a.get("median") is not None and b.get("median") is not None:
        m = ((data.get("causes") or {}).get("mechanisms") or {}).get(vs) or {}
        why = (m.get("predicted_exits") or {}).get("why")
        return {"key": "waiting", "title": "the vsyscall page", "figure": a,
                "cause": "no VM exit" if why and (m.get("predicted_exits") or {}).get(
                    "value") == 0 else None, "cause_why": why,
                "sentence": f"a gettimeofday through the legacy vsyscall page costs {fmt(a)} "
                            f"against {fmt(b)} through the vDSO: the page faults and the kernel "
                            "emulates the call."}
    return {"key": "waiting", "title": "waiting for the device", "figure": None,
            "sentence": "not measured: no O_SYNC write cell here"}


def findings(data):
    if not data.get("percall"):
        return []
    return [_entry(data), _return(data), _waiting(data)]
