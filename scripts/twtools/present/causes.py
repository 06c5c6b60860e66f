"""The report's section "Why each way costs what it does here", from analyse/causes.py's document.

For each mechanism: what it was held against, the exits per call the kernel's source predicts
here and the number fitted from the measurements, the predicted and measured cost and the
residual, each with its interval, and the kernel function and commit behind each part; the
exception path's premium (the vsyscall page's witness) and each call's legs (way in, body,
way out on one clock), with the tracer's own cost stated.
"""
from ..machine import registry
from .document import fmt, outside

SECTION = "Why each way costs what it does here"


def ns(x):
    """A {value, ci_low, ci_high} in ns as text, or its why."""
    if not x:
        return "—"
    if x.get("value") is None:
        return outside(x.get("why") or "unknown")
    return fmt({"median": x["value"], "ci_low": x.get("ci_low"), "ci_high": x.get("ci_high")})


def mechanisms(c):
    """The document's mechanisms as (name, its entry), in the registry's order; a name it has
    no entry for is left out."""
    ms = c.get("mechanisms") or {}
    return [(n, ms[n]) for n in registry.names() if ms.get(n)]


def exits(x):
    if not x or x.get("value") is None:
        return outside((x or {}).get("why") or "unknown")
    if x.get("ci_low") == x.get("ci_high"):
        return f"{x['value']:g} ({outside(x.get('basis') or '')})"
    return f"{x['value']:.2f} [{x['ci_low']:.2f}, {x['ci_high']:.2f}]"


def price_sentence(p):
    """One sentence on the price of one exit here."""
    if not p or p.get("value") is None:
        return "The price of one VM exit: " + outside((p or {}).get("why") or "unknown") + "."
    if p.get("guest") is False:
        return (f"cpuid costs {ns(p)} here: bare metal, so there is no exit to pay, and no "
                "mechanism's cost contains one.")
    return (f"The price of one VM exit here: {ns(p)}, the undisturbed cost of one `cpuid` "
            "(leaf 0), which a hypervisor must intercept: the exit, its handling and the way back.")


def price_short(p):
    """The exit price as a table value: plain text, read from the machine."""
    if not p or p.get("value") is None:
        return (p or {}).get("why") or "unknown"
    return f"{ns(p)}: {p.get('what')}"


def section(doc, data):
    c = data.get("causes")
    doc.h(2, SECTION)
    if not c:
        doc.p("No per-call matrix in these results: nothing to explain.")
        return
    doc.p(price_sentence(c.get("exit_price_ns")))
    doc.p("Each mechanism's null call is split into the path it shares with its baseline "
          "(measured), the VM exits the kernel's source predicts on this machine (each at the price "
          "above) and a residual: what the model does not price.  Exits per call are also fitted, "
          "(the mechanism − its baseline) ÷ the exit price; exits are whole events, so the model "
          "holds where that interval lies within half an exit of the prediction.  Intervals are "
          "95%, by the delta method over the cells' undisturbed intervals.")
    rows = []
    for name, m in mechanisms(c):
        pe = m.get("predicted_exits") or {}
        v = m.get("verdict") or {}
        against = (f" vs {m['baseline']}" if m.get("baseline") else
                   " (no kernel entry)" if m.get("role") == "vdso" else " (the base)")
        rows.append([name, m["op"] + against,
                     ns(m.get("measured_ns")), ns(m.get("predicted_ns")),
                     ns(m.get("residual_ns")),
                     (str(pe.get("value")) if pe.get("value") is not None else "unknown"),
                     exits(m.get("exits_per_call")),
                     ("**fails**" if v.get("holds") is False else "holds" if v.get("holds") else "—")])
    doc.table(["variant", "call (baseline)", "measured", "predicted", "residual", "exits predicted",
               "exits fitted", "model"], rows)
    failed = [(n, m) for n, m in (c.get("mechanisms") or {}).items()
              if (m.get("verdict") or {}).get("holds") is False]
    for n, m in failed:
        doc.p(f"**The model fails for {n} here**: {outside(m['verdict']['text'])}.")
    for name, m in mechanisms(c):
        if m.get("role") != "int80":
            continue
        pe = m.get("predicted_exits") or {}
        doc.p(f"**{name}**: {outside(pe.get('why'))}"
              + (f" (facts: {outside(', '.join(pe.get('facts') or []))})" if pe.get("facts") else "")
              + ". " + (outside(m["verdict"]["text"]) + "." if m.get("verdict") else ""))
    premium_section(doc, c)
    legs_section(doc, c, data.get("legs"))
    mitigations_section(doc, c)
    doc.h(3, "The parts, and where the kernel does each")
    prow = []
    for name, m in mechanisms(c):
        for p in m.get("parts") or []:
            where = "; ".join(x for x in (p.get("path"), p.get("source"), p.get("commit")) if x)
            if p.get("in_force") is not None:
                val = ("; ".join(f"{i['what']} ({i['vulnerability']})" for i in p["in_force"])
                       or "none in force on this path") + ": " + (p.get("why") or "")
            else:
                val = ns(p.get("ns"))
            prow.append([name, p["part"], outside(val), outside(p.get("basis") or ""), outside(where)])
    doc.table(["variant", "part", "ns", "basis", "kernel"], prow)


def mitigations_section(doc, c):
    """The mitigations in force on the ways in, each once (one VERW however many files ask
    for it), by where their work runs, with the kernel source that does it."""
    doc.h(3, "The mitigations on the path, by where their work runs")
    seen, ways, extra = {}, {}, {"elsewhere": {}, "attempted": {}}
    unknown = set()
    for name, m in mechanisms(c):
        p = next((p for p in m.get("parts") or [] if p.get("part") == "mitigations on the path"),
                 None)
        if not p:
            continue
        for x in p.get("in_force") or []:
            if not isinstance(x, dict) or "where_text" not in x:
                continue  # a causes document from before the table (it said only "what")
            seen.setdefault(x["id"], x)
            ways.setdefault(x["id"], []).append(name)
        for k in extra:
            for x in p.get(k) or []:
                extra[k].setdefault(x["id"], x)
        unknown.update(p.get("unclassified") or [])
    if not seen and not any(extra.values()):
        doc.p("None in force on any way in here, or the fingerprint does not say "
              "(/sys/devices/system/cpu/vulnerabilities).")
        return
    doc.p("Read from /sys/devices/system/cpu/vulnerabilities through the kernel's own strings "
          "(arch/x86/kernel/cpu/bugs.c, Linux 6.1 to 7.2; docs/mitigations.md): each piece of work "
          "once, with every file that asks for it.  All of it is inside the measured entry and "
          "exit path: none can be switched off from user space.  Where user space can run the "
          "mitigation's own instruction (a VERW with a valid selector, an LFENCE), the legs stage "
          "timed it, and its price is shown as **at least** that: the kernel's runs where more "
          "is in flight.  The others cannot be priced from user space: a privileged instruction "
          "(WRMSR, IBPB, a CR3 write) or work spread over the kernel's code (thunks).")
    all_ways = [n for n, m in mechanisms(c) if m.get("role") != "vdso"]
    rows = []
    for eid, x in seen.items():
        w = ways[eid]
        rows.append([outside(x["where_text"]), outside(x["what"]), outside(x["vulnerability"]),
                     "all" if len(w) == len(all_ways) else outside(", ".join(w)),
                     outside(x["source"]),
                     price_text(x)])
    doc.table(["where its work runs", "mitigation", "asked for by", "ways in", "kernel source",
               "price"], rows)
    if extra["elsewhere"]:
        doc.p("Off the system call's path (a context switch, VM exits of this machine's own "
              "guests, firmware calls, per-process requests): "
              + outside("; ".join(f"{x['what']} ({x['where_text']}; {x['vulnerability']})"
                                  for x in extra["elsewhere"].values())) + ".")
    if extra["attempted"]:
        doc.p("Work the kernel still does where its file says Vulnerable: "
              + outside("; ".join(f"{x['what']} ({x['vulnerability']})"
                                  for x in extra["attempted"].values())) + ".")
    if unknown:
        doc.p("Parts no row of the table knows (not counted): " + outside("; ".join(sorted(unknown)))
              + ".")


UNPRICEABLE = {"wrmsr": "a privileged MSR write", "ibpb": "a privileged MSR write (IBPB)",
               "mov cr3": "a privileged CR3 write"}


def price_text(x):
    """A mitigation's price column: at least the user-space instruction's price, or why none."""
    if x.get("price_ns") and x["price_ns"].get("value") is not None:
        return f"at least {ns(x['price_ns'])} ({x['instruction'].upper()} timed from user space)"
    ins = x.get("instruction")
    if ins in UNPRICEABLE:
        return f"not priced: {UNPRICEABLE[ins]}, which user space cannot run"
    if ins:
        return f"not priced: no {ins.upper()} timed in these results (the legs stage times it)"
    return "not priced: its work is spread over the kernel's code"


def instructions_lines(c, legs):
    """Beside the legs: each mitigation instruction timed from user space, and the leg the
    kernel runs it on here (the table's effects that name it), or that no mitigation in force
    runs it here."""
    ins = (legs or {}).get("instructions") or {}
    if not ins:
        return []
    runs = {}
    for _, m in mechanisms(c):
        p = next((p for p in m.get("parts") or [] if p.get("part") == "mitigations on the path"),
                 None)
        for x in (p or {}).get("in_force") or []:
            if isinstance(x, dict) and x.get("instruction"):
                runs.setdefault(x["instruction"], {})[x["id"]] = x
    leg = {"exit": "the way out", "entry": "the way in", "kernel_code": "the body and both ways",
           "vm": "VM exits of this machine's own guests", "context_switch": "context switches"}
    out = []
    for op, f in sorted(ins.items()):
        if f.get("value") is None:
            out.append(f"{op.upper()} from user space: unknown ({f.get('why') or 'not timed'}).")
            continue
        effects = runs.get(op) or {}
        if effects:
            where = "; ".join(f"{x['what']} ({x['vulnerability']}): on "
                              + " and ".join(leg.get(w, w) for w in x["where"])
                              for x in effects.values())
            out.append(f"{op.upper()} timed from user space: {ns(f)}, a lower bound of what it "
                       f"costs the kernel here: {where}.")
        else:
            out.append(f"{op.upper()} timed from user space: {ns(f)}; no mitigation in force here "
                       "runs it on a way in or out, so none of the legs holds it.")
    return out


def premium_section(doc, c):
    """The vsyscall page's exception-path premium, and what it leaves of int 0x80's residual."""
    p = c.get("exception_path_premium_ns") or {}
    if p.get("value") is None:
        doc.p("The exception path's premium: " + outside(p.get("why") or "unknown") + ".")
        return
    doc.p(f"The exception path's premium here: {ns(p)}, the vsyscall page's `gettimeofday` (a #PF "
          "through the IDT, emulated, back by `iret`, with no VM exit) over the 64-bit `syscall` "
          "doing the same work.  int 0x80 also enters through the IDT and leaves by `iret`, so "
          "this premium is priced into its prediction, and its residual is what is left:")
    rows = []
    for name, m in mechanisms(c):
        if m.get("residual_before_premium_ns"):
            rows.append([name, ns(m["residual_before_premium_ns"]), ns(p), ns(m.get("residual_ns"))])
    if rows:
        doc.table(["variant", "residual over the exits", "exception-path premium",
                   "left, still unknown"], rows)


def legs_section(doc, c, legs=None):
    """Each system-call mechanism's legs, and int 0x80's over its baseline's."""
    doc.h(3, "Each call's way in, body and way out, on one clock")
    rows, why_of = [], {}
    for name, m in mechanisms(c):
        lg = m.get("legs")
        if not lg:
            continue
        if not lg.get("in"):
            why_of.setdefault(lg.get("why") or "unknown", []).append(name)
            continue
        rows.append([name, ns(lg["in"]), ns(lg["body"]), ns(lg["out"]), ns(lg.get("total")),
                     ns(lg.get("untraced_total")), ns(lg.get("tracer_ns")), ns(lg.get("bracket_ns"))])
    # one reason, said once, with the mechanisms it holds for
    whys = [f"{', '.join(names)}: {why}" if len(why_of) > 1 or rows else why
            for why, names in why_of.items()]
    if not rows:
        doc.p("Not measured: " + outside("; ".join(whys) or "no legs in these results") + ".")
        return
    doc.p("Each null call is stamped four times on CLOCK_MONOTONIC: in user space just before the "
          "entry and just after the return (the vDSO), and at raw_syscalls:sys_enter and sys_exit "
          "(bpftrace, bpf_ktime_get_ns): way in = sys_enter − before, body = sys_exit − sys_enter, "
          "way out = after − sys_exit.  Every leg holds some of the tracer's own cost (traced total "
          "− the same program's untraced total, shown) and of the two stamps' (the empty bracket: "
          "two stamps around an empty call); differences between mechanisms cancel as much of it "
          "as is equal.  Each leg is the undisturbed figure of its batch means (95% intervals).")
    host = next((m["legs"]["host"] for _, m in mechanisms(c)
                 if (m.get("legs") or {}).get("host")), None)
    if host:
        clk = (f" at the top core clock the host gave, {host['core_ghz']:.2f} GHz"
               if host.get("core_ghz") else "")
        paired = [name for name, m in mechanisms(c) if (m.get("legs") or {}).get("tracer_paired")]
        past = (f" ({host['added_blocks']} of them added while the 64-bit syscall's legs were "
                "still unknown)" if host.get("added_blocks") else "")
        doc.p(f"Measured in {host['blocks']} blocks{past}, each one moment of the host: every "
              "mechanism once untraced, then once traced while bpftrace was attached.  The "
              f"traced side met the host's fast state in {host['fast_blocks']} of them, and the "
              "legs and traced totals rest on those (a block where the mechanisms' traced calls "
              "ran more than 10% above their lowest is left out, and so is a mechanism's leg "
              "more than 10% above its own lowest); the untraced totals on the untraced "
              f"processes within 5% of their lowest{clk}.  int 0x80 less its baseline is taken "
              "within each block, so the host's state at that moment cancels.  The tracer's "
              "cost is the twins' difference block by block where at least 8 blocks met the "
              "fast state on both sides"
              + (f" ({', '.join(paired)})" if paired and len(paired) < len(list(mechanisms(c)))
                 else "" if paired else " (none here)")
              + ", else the two totals' difference.  `tw legs --target 5%` measures until "
                "each figure is that precise.")
    doc.table(["variant", "way in", "body", "way out", "traced total", "untraced total",
               "tracer's cost", "stamps' bracket"], rows)
    for line in instructions_lines(c, legs):
        doc.p(outside(line))
    if whys:
        doc.p("Not measured: " + outside("; ".join(whys)) + ".")
    drows, texts = [], []
    for name, m in mechanisms(c):
        d = m.get("legs_vs_baseline")
        if not d:
            continue
        drows.append([name, d.get("baseline") or "", ns(d.get("in")), ns(d.get("body")),
                      ns(d.get("out")), ns(d.get("tracer"))])
        if m.get("exit_placement"):
            pl = m["exit_placement"]
            texts.append(f"**{name}**: {outside(pl['text'])}; the way in beyond "
                         f"{pl['predicted_exits']} exit(s): {ns(pl.get('in_beyond_exits_ns'))}.")
    if drows:
        doc.p("int 0x80 less its baseline, leg by leg (the tracer's cost difference is shown: "
              "where it is not zero, it sits in the legs too):")
        doc.table(["variant", "baseline", "way in", "body", "way out", "tracer's cost"], drows)
    for t in texts:
        doc.p(t)


def _n0(x, sign=False):
    """A {value, ci_low, ci_high} in ns, whole ns: '1221 ns [1193, 1249]' (µs from 10 µs)."""
    v, lo, hi = x["value"], x.get("ci_low"), x.get("ci_high")
    f = "{:+.0f}" if sign else "{:.0f}"
    if abs(v) >= 10000:
        return (f"{v / 1000:.1f} µs" + (f" [{lo / 1000:.1f}, {hi / 1000:.1f}]"
                                        if lo is not None and hi is not None else ""))
    return (f.format(v) + " ns" + (f" [{f.format(lo)}, {f.format(hi)}]"
                                   if lo is not None and hi is not None else ""))


def _times(r):
    return f"{r['value']:.1f}×" + (f" [{r['ci_low']:.1f}, {r['ci_high']:.1f}]"
                                   if r.get("ci_low") is not None else "")


def today_sentence(t):
    """The report's first-screen sentence for today (analyse.causes.today's figures): what int
    0x80 costs here against the fast path, and its measured cause.  None without figures."""
    if not t:
        return None
    ref = {"64-syscall": "the 64-bit `syscall`"}.get(t.get("reference"), t.get("reference"))
    costs = (f"int 0x80 costs {_times(t['times_reference'])} {ref} ({t['variant']}, an empty call: "
             f"{_n0(t['measured_ns'])})" if t.get("times_reference") and ref else
             f"int 0x80 ({t['variant']}) costs {_n0(t['measured_ns'])} per empty call")
    more = f"{_n0(t['minus_baseline_ns'])} more than the fast path ({t['baseline']})"
    e, p, r = t.get("exits_per_call"), t.get("exit_price"), t.get("residual_ns")
    k = t["kind"]
    if k == "exit":
        n = t["predicted"]
        cause = (f"it pays {'one VM exit' if n == 1 else f'{n} VM exits'} per call "
                 f"({e['value']:.2f} [{e['ci_low']:.2f}, {e['ci_high']:.2f}] fitted, {n} predicted "
                 f"by the kernel's source), and one exit costs {_n0(p)} here (`cpuid`)"
                 + (f"; {_n0(r, sign=True)} is left to int 0x80's own path" if r else ""))
    elif k == "misfit":
        cause = (f"the kernel's source predicts {t['predicted']} VM exit per call here, at "
                 f"{_n0(p)} each (`cpuid`), but {e['value']:.2f} [{e['ci_low']:.2f}, "
                 f"{e['ci_high']:.2f}] fit: the cost model fails here, so part of the cause is "
                 "still unknown")
    elif k == "no-exit":
        cause = (f"none of it is a VM exit ({outside(t['why'])}), so it is int 0x80's own path: "
                 "the IDT delivery, do_int80_emulation() and `iret`, where the fast path "
                 "returns by `sysret` or `sysexit`")
        if e and p and p.get("guest") and not (e["ci_low"] <= 0 <= e["ci_high"] or
                                               abs(e["value"]) < 0.5):
            cause += (f"; yet {e['value']:.2f} [{e['ci_low']:.2f}, {e['ci_high']:.2f}] exits "
                      "fit at the `cpuid` price: the cost model fails here")
    elif k == "price-unknown":
        why = t.get("price_why") or "unknown"
        # The common case, a run measured before the cpuid cell existed, in a few words: the
        # sentence must leave room for the matrix on the first screen.
        why = ("unknown: no `cpuid` cell (re-run `tw bench`)" if "no cpuid cell" in why
               else outside(why))
        n = t["predicted"]
        cause = (f"the kernel's source predicts {'one VM exit' if n == 1 else f'{n} VM exits'} "
                 f"per call here, but its price is {why}")
    else:
        cause = f"whether it pays a VM exit is {outside(t.get('why') or 'unknown')}"
    if t.get("figure") == "typical":
        # issue 62: a host too noisy for an undisturbed figure still gets the finding, from
        # what was measured, said as typical, with the time the undisturbed one would take
        ts = t.get("target_s")
        return (f"**Here, today** (typical figures: too few processes of "
                + (", ".join(t.get("typical_why") or []) or "these cells")
                + " met the host's fast state for an undisturbed one): "
                + f"{costs}, {more}: {cause}."
                + (f" `tw bench --target 1%` would take this host "
                   f"{'at least' if ts.get('lower_bound') else 'about'} {dur(ts['seconds'])} "
                   "for the undisturbed figures." if ts else "")
                + f" Part by part: \"{SECTION}\".")
    return (f"**Here, today:** {costs}, {more}: {cause}. Part by part: \"{SECTION}\".")


def dur(s):
    """Seconds as the report says a duration: s, min or h ("unknown" for None)."""
    if s is None:
        return "unknown"
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"
