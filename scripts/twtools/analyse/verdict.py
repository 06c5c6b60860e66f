"""The verdict on the seed's hypothesis, from a results directory only.

Hypothesis (docs/seed-report.md, section 1): on the Linux 2.6 server, a 32-bit glibc entering the kernel
by the old `int 0x80` made small writes (BUFFSIZE 256) slow.

The verdict is one of "supported", "refuted", "inconclusive" ON THIS MACHINE, decided by the
explicit rules in `decide()` (documented in docs/report.md):

Needed cells (any missing, unsupported or blind -> "inconclusive", with the reason; unstable
cells are handled by the worst-case rule below):
  * fingerprint.libc["32"].entry  -- how this machine's 32-bit glibc enters the kernel;
  * percall 32-int80 "null" and 32-libc "null" -- the per-call cost of int 0x80 and of the
    path glibc takes; delta = int80 - libc (CI by quadrature, stats.diff_summary);
  * the seed's slow row (reference CSV: the Linux 2.6 platform, sync, smallest BUFFSIZE).

Rules:
  * refuted   -- glibc here does not enter by int 0x80, AND calls x delta (this machine's
                 int 0x80 penalty, upper CI bound) explains less than REFUTE_FRACTION of the
                 seed slow row's real time, AND the row's own CPU time (user+sys, padded by
                 one 10 ms tick each) bounds any entry cost to less than REFUTE_FRACTION.
  * supported -- glibc here enters by int 0x80 (inline), its per-call excess over the fast path
                 (32-libc - 32-vdso, else 32-sysenter) is positive beyond its CI, and calls x excess
                 explains at least SUPPORT_FRACTION of this machine's own 32-libc 256 B sync
                 row (sweep_seed) -- the same kind of row the seed found slow.
  * inconclusive -- anything else: the data does not carry a confident sentence.

Unstable cells (CV >= 10% or min/max over 50% from the median): an unstable cell can only
make the verdict inconclusive where its instability could change the answer.  So with an
unstable 32-int80 or 32-libc cell, "refuted" must also hold for the worst case the samples
allow, delta_worst = max(32-int80 samples) - min(32-libc samples), not just the CI bound;
"supported" is never given on unstable cells.  The sentence then says the cells were unstable
and that the answer holds at the extremes.

The server's glibc is unknown, so what is said about the server's row is only what entry cost
COULD explain there, bounded by the row's system time.

What holds now (`today`, issue 24): the answer for the seed's 2.6 server stays as it is, and the
reasoning adds what this machine says of a program that still enters by int 0x80 today (Go's
386 runtime, static i386 binaries): since Linux 6.7 every such call reads the local APIC
(int80_is_external, 55617fb991df), which on a VM is one exit per call unless FRED, Xen PV or
the host's APIC virtualisation spare it.  The cost model (analyse.causes) gives the exit's
price here (the cpuid cell), the exits the facts predict and the exits per call fitted from
int 0x80 - the fast path, each with its interval; the text says plainly when the fit does not
agree with the prediction, and "unknown" with why when a figure is missing.
"""
from ..machine import registry
from . import causes, percall, results, seedref, stats
from ..core import files

REFUTE_FRACTION = 0.05   # below this share of the slow row, entry cost cannot be its cause
SUPPORT_FRACTION = 0.50  # at least this share of the slow row: entry cost is a main cause
TICK_S = 0.01            # times() resolution in the seed report
# The roles the hypothesis is about, by entry rather than by variant name.
INT80_32 = registry.find(32, "int80")
LIBC32 = registry.find(32, "libc")
LIBC64 = registry.find(64, "libc")
SEED_BITNESS_CLAIM = "the seed report says a 64-bit rebuild ran about 50% faster (docs/seed-report.md; " \
                     "no table of it was published)"
SUMMARY_KEYS = ("median", "ci_low", "ci_high", "min", "max", "cv", "n", "unstable")


# -- reading ----------------------------------------------------------------------------------

def is_blind(s):
    return isinstance(s, dict) and "value" in s and s.get("value") is None and "why" in s


def core(s):
    """The summary fields of a cell (dropping samples), on its primary figure: the undisturbed
    cost for an analysed per-call cell (analyse.percall.figure), the median otherwise.  The
    typical figure rides along as 'typical', for showing beside."""
    if not s or is_blind(s) or s.get("median") is None:
        return None
    out = {k: s.get(k) for k in SUMMARY_KEYS}
    if "primary" in s:
        f = percall.figure(s)
        if f:
            out.update(median=f["median"], ci_low=f["ci_low"], ci_high=f["ci_high"])
            out["figure"] = f["figure"]
            out["typical"] = {k: s.get(k) for k in ("median", "ci_low", "ci_high")}
    return out


def percall_cell(data, variant, op="null", shape="ret"):
    """An analysed per-call cell (twtools.analyse.percall), the ret shape by default: the
    shape of a libc call, which is what the hypothesis compares."""
    pc = data.get("percall") or {}
    for c in pc.get("cells", []):
        if c.get("variant") == variant and c.get("op") == op and c.get("shape", "ret") == shape:
            return c
    return None


def cell_problem(c, label):
    """None when a percall cell is usable; else why not (for reasons)."""
    if c is None:
        return f"{label}: not measured (no such cell in percall.json)"
    if c.get("supported") is False:
        return f"{label}: unsupported here ({c.get('reason') or 'no reason given'})"
    if is_blind(c) or c.get("median") is None:
        return f"{label}: unknown ({c.get('why') or 'no value recorded'})"
    if c.get("unstable"):
        return (f"{label}: unstable ({c.get('unstable_why') or 'wide interval'}; min "
                f"{c.get('min'):.1f} / max {c.get('max'):.1f} ns around median {c['median']:.1f} ns)")
    return None


def sweep_row(data, variant, mode, buffsize, stage="sweep_seed"):
    sw = data.get(stage) or {}
    for run in sw.get("runs", []):
        if run.get("variant") == variant and run.get("mode") == mode:
            if not run.get("supported", True):
                return None, run.get("reason") or "unsupported"
            for row in run.get("rows", []):
                if row.get("buffsize") == buffsize:
                    return row, None
            return None, f"no BUFFSIZE {buffsize} row"
    return None, "not measured"


def seed_slow_row(ref):
    """The row the hypothesis is about: the Linux 2.6 platform, sync, smallest BUFFSIZE.

    Falls back to the row with the largest real time per call at the smallest BUFFSIZE."""
    if not ref:
        return None
    small = min(r["bufsize"] for r in ref)
    cands = [r for r in ref if r["bufsize"] == small and r["mode"] == "sync"]
    named = [r for r in cands if "2.6" in str(r["platform"])]
    if named:
        return named[0]
    cands = [r for r in cands if r.get("loops")]
    return max(cands, key=lambda r: r["real_s"] / r["loops"]) if cands else None


# -- the parts --------------------------------------------------------------------------------

def seed_rows_explained(ref, delta):
    """calls x delta against each seed row at the smallest BUFFSIZE."""
    if not ref:
        return []
    small = min(r["bufsize"] for r in ref)
    out = []
    for r in ref:
        if r["bufsize"] != small:
            continue
        calls = r.get("loops")
        explained = stats.scale(delta, calls / 1e9) if (delta and calls) else None
        real = r.get("real_s")
        cpu_bound = ((r.get("user_s") or 0) + (r.get("sys_s") or 0) + 2 * TICK_S)
        out.append({
            "platform": r["platform"], "mode": r["mode"], "bufsize": r["bufsize"], "calls": calls,
            "real_s": real, "user_s": r.get("user_s"), "sys_s": r.get("sys_s"),
            "explained_s": explained,
            "fraction": (explained["median"] / real) if (explained and real) else None,
            "fraction_high": (explained["ci_high"] / real) if (explained and real) else None,
            "cpu_bound_s": cpu_bound,
            "cpu_bound_fraction": (cpu_bound / real) if real else None,
            "why": None if real else "real time below the seed's 10 ms tick: no fraction",
        })
    return out


def bitness(data):
    """64-libc vs 32-libc at 256 B in this machine's seed sweep, and where the gap comes from."""
    out = {"seed_claim": SEED_BITNESS_CLAIM, "modes": {}, "attribution": {}, "why": None}
    for mode in ("sync", "async"):
        r64, w64 = sweep_row(data, LIBC64, mode, 256)
        r32, w32 = sweep_row(data, LIBC32, mode, 256)
        if not r64 or not r32:
            out["modes"][mode] = {"why": f"64-libc: {w64 or 'ok'}; 32-libc: {w32 or 'ok'}"}
            continue
        a, b = core(r64["real_s"]), core(r32["real_s"])
        d = stats.diff_summary(b, a)  # 32 - 64
        out["modes"][mode] = {"real_64_s": a, "real_32_s": b,
                              "faster_64_pct": stats.scale(stats.ratio_summary(d, b), 100) if d else None,
                              "calls": r32.get("calls")}
    att = (data.get("attribution") or {}).get("rows", [])
    for op in ("write-sync", "write-file"):
        rows = {r["variant"]: r for r in att if r.get("op") == op}
        if LIBC64 in rows and LIBC32 in rows:
            parts = {}
            for k in ("entry_exit_ns", "body_ns", "waiting_ns"):
                a, b = core(rows[LIBC64].get(k)), core(rows[LIBC32].get(k))
                parts[k] = stats.diff_summary(b, a) if (a and b) else None
            out["attribution"][op] = parts
    return out


def fast_path(data):
    """The 32-bit fast-path null cell (vDSO, sysenter, syscall): the first stable one, else
    the first with a value at all (its summary then carries the unstable flag)."""
    measured = []
    for v in registry.fast32():
        c = percall_cell(data, v)
        if c and not cell_problem(c, v):
            return v, c
        if core(c) and c.get("supported") is not False:
            measured.append((v, c))
    return measured[0] if measured else (None, None)


def decide(data, ref):
    """The verdict dict (see module docstring for the rules)."""
    # A run that did not finish, or whose doctor, bench or seed-sweep stage failed or was
    # cut short, gives no verdict: what is missing is not evidence either way.
    reasons, warnings = list(results.verdict_blockers(data)), []
    fp = data.get("fingerprint") or {}
    libc32 = ((fp.get("libc") or {}).get("32") or {})
    entry = libc32.get("entry")
    if not fp:
        reasons.append("fingerprint.json missing: how this machine's 32-bit glibc enters is unknown")
    elif entry in (None, "unknown"):
        reasons.append("this machine's 32-bit glibc entry path is unknown ("
                       + "; ".join(libc32.get("evidence") or ["no evidence recorded"]) + ")")

    c80, clibc = percall_cell(data, INT80_32), percall_cell(data, LIBC32)
    p80, plibc = cell_problem(c80, "32-int80 null"), cell_problem(clibc, "32-libc null")
    shaky = []  # problems that are only instability: see the worst-case rule
    for c, p in ((c80, p80), (clibc, plibc)):
        if p and c and c.get("unstable") and not is_blind(c) and c.get("median") is not None \
                and c.get("supported") is not False:
            shaky.append(p)
        elif p:
            reasons.append(p)
    if data.get("percall") is None:
        reasons.append("percall.json missing: " + stage_error(data, "bench"))
    # Differences are shown whenever both cells have a value, flagged unstable
    # if either is (diff_summary carries the flag); the verdict itself still
    # refuses to rest on an unstable cell because its problem is in reasons.
    def diff(a, b):
        ca, cb = core(a), core(b)
        if not (ca and cb):
            return None
        out = stats.diff_summary(ca, cb)
        if out and ca.get("figure") == cb.get("figure") == "undisturbed":
            out["figure"] = "undisturbed"
            out["typical"] = {"median": ca["typical"]["median"] - cb["typical"]["median"]}
        return out
    delta = diff(c80, clibc)
    fv, fcell = fast_path(data)
    delta_fast = diff(c80, fcell)
    libc_over_fast = diff(clibc, fcell)

    # The largest per-call penalty the samples allow: the verdict must survive it.
    worst = None
    if core(c80) and core(clibc) and c80.get("max") is not None and clibc.get("min") is not None:
        w = c80["max"] - clibc["min"]
        worst = {"median": w, "ci_low": w, "ci_high": w, "min": None, "max": None, "cv": None,
                 "n": min(c80.get("n") or 0, clibc.get("n") or 0), "unstable": False}

    slow = seed_slow_row(ref)
    if ref is None:
        reasons.append(f"the seed's reference table is absent ({seedref.where()})")
    rows = seed_rows_explained(ref, delta)
    slow_expl = next((r for r in rows if slow and r["platform"] == slow["platform"]
                      and r["mode"] == slow["mode"]), None)

    # This machine's own slow row: 32-libc, sync, 256 B.
    own, own_why = sweep_row(data, LIBC32, "sync", 256)
    own_expl = None
    if own and libc_over_fast:
        e = stats.scale(libc_over_fast, (own.get("calls") or 0) / 1e9)
        own_expl = {"calls": own.get("calls"), "real_s": core(own["real_s"]), "explained_s": e,
                    "fraction": e["median"] / own["real_s"]["median"] if own["real_s"]["median"] else None}

    verdict = "inconclusive"
    if not reasons:
        frac_hi = slow_expl["fraction_high"] if slow_expl else None
        bound = slow_expl["cpu_bound_fraction"] if slow_expl else None
        if entry == "int80" and shaky:
            reasons.extend(shaky)
            reasons.append("this glibc enters by int 0x80, and support needs stable cells")
        elif entry == "int80":
            if libc_over_fast and libc_over_fast["ci_low"] > 0 and own_expl and \
                    own_expl["fraction"] is not None and own_expl["fraction"] >= SUPPORT_FRACTION:
                verdict = "supported"
            else:
                reasons.append("this glibc enters by int 0x80, but its excess over the fast path "
                               "explains less than " f"{SUPPORT_FRACTION:.0%} of this machine's "
                               "32-libc 256 B sync row" if own_expl else
                               "this glibc enters by int 0x80, but the fast-path cell or the "
                               f"32-libc sync 256 B row is missing ({own_why or 'no fast path'})")
        elif entry in ("vdso", "sysenter", "syscall"):
            worst_frac = None
            if shaky and worst and slow_expl and slow_expl.get("real_s"):
                worst_frac = slow_expl["calls"] * worst["median"] / 1e9 / slow_expl["real_s"]
            test = worst_frac if shaky else frac_hi
            if test is not None and bound is not None and test < REFUTE_FRACTION \
                    and bound < REFUTE_FRACTION:
                verdict = "refuted"
            elif shaky:
                reasons.extend(shaky)
                reasons.append("with these unstable cells the worst case the samples allow "
                               "could explain too much of the seed's slow row")
            else:
                reasons.append("this glibc does not use int 0x80, but int 0x80's cost here or the "
                               "seed row's CPU time is too large to rule entry cost out"
                               if slow_expl else "the seed's slow row is not available")
        else:
            reasons.append(f"unrecognised 32-bit libc entry '{entry}'")
    if verdict == "inconclusive":
        reasons.extend(p for p in shaky if p not in reasons)
    for c, label in ((c80, "32-int80 null"), (clibc, "32-libc null"), (fcell, f"{fv} null")):
        if c and c.get("unstable") and c.get("median") is not None:
            warnings.append(f"{label} is unstable (the verdict used the extremes of its samples, "
                            "not its CI): for tighter figures raise "
                            "the rounds with `make report REPORT_ARGS=--long`")
    out = {
        "verdict": verdict,
        "sentence": None,
        "reasons": reasons,
        "unstable_cells": shaky,
        "int80_worst_delta_ns": worst,
        "worst_fraction_of_slow_row": ((slow_expl["calls"] * worst["median"] / 1e9 / slow_expl["real_s"])
                                       if (worst and slow_expl and slow_expl.get("real_s")) else None),
        "warnings": warnings,
        "rules": {"refute_fraction": REFUTE_FRACTION, "support_fraction": SUPPORT_FRACTION,
                  "tick_s": TICK_S},
        "libc32_entry": entry,
        "libc32_evidence": libc32.get("evidence") or [],
        "vdso32_instruction": (fp.get("vdso32") or {}).get("instruction"),
        "int80_null_ns": core(c80), "libc32_null_ns": core(clibc),
        "fast_path": fv, "fast_null_ns": core(fcell),
        "int80_delta_ns": delta, "int80_vs_fast_ns": delta_fast,
        "libc_vs_fast_ns": libc_over_fast,
        "int80_ratio": stats.ratio_summary(core(c80), core(clibc)) if delta else None,
        "seed_slow_row": {k: slow[k] for k in ("platform", "mode", "bufsize", "loops", "user_s",
                                               "sys_s", "real_s")} if slow else None,
        "seed_rows": rows,
        "this_machine_slow_row": own_expl,
        "bitness": bitness(data),
        "today": today(data),
    }
    out["sentence"] = sentence(out, slow_expl)
    out["headline"] = headline(out, slow_expl)
    return out


def _iv(d, unit=" ns", digits=0):
    return f"{d['value']:.{digits}f}{unit} [{d['ci_low']:.{digits}f}, {d['ci_high']:.{digits}f}]"


def today(data):
    """What a program that still enters by int 0x80 pays per call on this machine today, in VM
    exits: {exit_price_ns, predicted_exits, why, exits_per_call, int80_minus_fast_ns, baseline,
    holds, text}.  The cost model is computed from the same cells the verdict reads."""
    doc = causes.compute_from(data.get("percall") or {}, data.get("fingerprint")) \
        if data.get("percall") else None
    m = ((doc or {}).get("mechanisms") or {}).get(INT80_32) or {}
    pred = m.get("predicted_exits") or causes.predict(data.get("fingerprint"), INT80_32)
    out = {"exit_price_ns": (doc or {}).get("exit_price_ns"), "predicted_exits": pred.get("value"),
           "why": pred.get("why"), "exits_per_call": m.get("exits_per_call"),
           "int80_minus_fast_ns": m.get("minus_baseline_ns"), "baseline": m.get("baseline"),
           "holds": (m.get("verdict") or {}).get("holds")}
    out["text"] = today_text(out)
    return out


def today_text(t):
    """The paragraph the verdict's reasoning adds for today: every figure from t."""
    who = "a program that still enters by int 0x80 (Go's 386 runtime, static i386 binaries)"
    n, why = t["predicted_exits"], t["why"]
    if n is None:
        return f"What holds now: whether {who} pays a VM exit per call here is {why}."
    p, e, d = t["exit_price_ns"] or {}, t["exits_per_call"] or {}, t["int80_minus_fast_ns"]
    fit = ""
    if d and e.get("value") is not None and p.get("value") is not None:
        fit = (f"; int 0x80 costs {_iv(d)} more than {t['baseline']}, which is "
               f"{_iv(e, '', 2)} exits per call at {_iv(p)} an exit (cpuid, undisturbed)")
    fails = (" That fit is not near the predicted count: the model fails on this machine, and "
             "by that much." if t["holds"] is False else "")
    if n == 0:
        return (f"What holds now: the kernel's source predicts that on this machine {who} pays "
                f"no VM exit per call ({why}){fit}. On a VM whose kernel is 6.7 or later, "
                "without FRED and not Xen PV, it pays one (int80_is_external reads the APIC, "
                "55617fb991df)." + fails)
    head = (f"What holds now: the kernel's source predicts that on this VM {who} pays one VM "
            f"exit per call ({why.removeprefix('one exit: ')}).")
    if p.get("value") is None:
        return head + f" The exit's price here is {p.get('why') or 'unknown'}."
    near = ""
    if fit and not fails and not e["ci_low"] <= n <= e["ci_high"]:
        # Near one exit is not one exit: say which way the rest goes.
        near = (f" Its interval excludes exactly {n}: int 0x80 costs "
                f"{'more' if e['ci_low'] > n else 'less'} here than {n} cpuid exit over the "
                "fast path, so its exit costs a little more (or less) than cpuid's, or its own "
                "path (IDT delivery and iret) differs from the fast path's by the rest.")
    return head + f" One exit costs {_iv(p)} here (cpuid, undisturbed){fit}." + fails + near


def headline(v, slow_expl):
    """The verdict in one sentence: what the report's first screen shows; the paragraph of
    reasoning (sentence) goes below it."""
    if v["verdict"] == "inconclusive":
        first = (v.get("reasons") or ["no reason recorded"])[0]
        return f"{first[0].upper()}{first[1:]}."
    d, entry = v.get("int80_delta_ns"), v.get("libc32_entry")
    how = {"vdso": "the vDSO", "int80": "int 0x80", "sysenter": "sysenter",
           "syscall": "syscall"}.get(entry, entry)
    cost = f"int 0x80 costs {_ns(d)} more per call than 32-bit glibc's way in ({how})" if d else \
        "int 0x80's extra cost is unknown"
    if v["verdict"] == "refuted" and slow_expl:
        e = slow_expl["explained_s"]
        typ = (d or {}).get("typical") or {}
        at_typ = (f" ({100 * typ['median'] * slow_expl['calls'] / 1e9 / slow_expl['real_s']:.3f}% "
                  "at the typical cost)") if typ.get("median") is not None else ""
        return (f"{cost[0].upper()}{cost[1:]} here, which could explain at most "
                f"{100 * e['ci_high'] / slow_expl['real_s']:.3f}%{at_typ} of the seed's slow row.")
    if v["verdict"] == "refuted":
        return f"{cost[0].upper()}{cost[1:]} here, far too little to explain the seed's slow row."
    o = v.get("this_machine_slow_row") or {}
    frac = f"{100 * o['fraction']:.0f}%" if o.get("fraction") is not None else "a large share"
    return f"This 32-bit glibc enters by int 0x80, whose excess explains {frac} of this machine's own slow row."


def stage_error(data, stage):
    st = ((data.get("meta") or {}).get("stages") or {}).get(stage)
    if not st:
        return f"stage {stage} not recorded in meta.json"
    return f"stage {stage} {'failed' if not st.get('ok') else 'ran'}: {st.get('error') or 'no error recorded'}"


def _ns(s):
    out = f"{s['median']:.0f} ns [{s['ci_low']:.0f}, {s['ci_high']:.0f}]"
    t = s.get("typical")
    if s.get("figure") == "undisturbed" and t and t.get("median") is not None:
        out += f" undisturbed (typical {t['median']:.0f} ns)"
    return out


def sentence(v, slow_expl):
    """The verdict paragraph: every number from v, nothing the data does not carry."""
    parts = []
    if v["verdict"] == "inconclusive":
        parts.append("Inconclusive on this machine: " + "; ".join(v["reasons"]) + ".")
        if v.get("today"):
            parts.append(v["today"]["text"])
        return " ".join(parts)
    entry = {"vdso": "through the vDSO (`call *%gs:0x10`)", "int80": "by inline `int $0x80`",
             "sysenter": "by `sysenter`", "syscall": "by `syscall`"}.get(v["libc32_entry"], v["libc32_entry"])
    vi = v.get("vdso32_instruction")
    parts.append(f"On this machine the 32-bit glibc enters the kernel {entry}"
                 + (f", which uses `{vi}` here" if vi and v["libc32_entry"] == "vdso" else "") + ".")
    d = v["int80_delta_ns"]
    parts.append(f"`int 0x80` costs {_ns(v['int80_null_ns'])} per null call against "
                 f"{_ns(v['libc32_null_ns'])} for 32-bit glibc: {_ns(d)} more per call"
                 + (f" (x{v['int80_ratio']['median']:.1f})" if v.get("int80_ratio") else "") + ".")
    if slow_expl:
        e = slow_expl["explained_s"]
        parts.append(
            f"Even if the seed's {slow_expl['platform']} {slow_expl['mode']} row had paid that much on each of its "
            f"{slow_expl['calls']} calls, it would explain {e['median'] * 1e3:.2f} ms "
            f"(at most {e['ci_high'] * 1e3:.2f} ms) of its {slow_expl['real_s']:.2f} s "
            f"real time ({100 * slow_expl['fraction']:.3f}%); the row's own CPU time "
            f"(user {slow_expl['user_s']:.2f} s + sys {slow_expl['sys_s']:.2f} s, plus a 10 ms tick each) bounds any entry "
            f"cost on that server to {100 * slow_expl['cpu_bound_fraction']:.1f}% of it. The rest is waiting "
            "for the disk under O_SYNC. The server's glibc build is unknown, so whether it used "
            "int 0x80 cannot be decided from here; what can be said is that entry cost could not "
            "have made that row slow.")
    if v["verdict"] == "supported":
        o = v["this_machine_slow_row"]
        parts.append(f"This glibc's excess over the fast path explains {100 * o['fraction']:.0f}% of this "
                     f"machine's own 32-libc 256 B sync row: supported here.")
    elif v["verdict"] == "refuted":
        if v.get("unstable_cells"):
            w = v["int80_worst_delta_ns"]
            parts.append(f"The per-call cells were unstable on this machine ({'; '.join(v['unstable_cells'])}), "
                         f"so the answer was checked against the worst case the samples allow: "
                         f"{w['median']:.0f} ns per call (slowest int 0x80 sample minus fastest glibc "
                         f"sample) would still explain only {100 * v['worst_fraction_of_slow_row']:.3f}% "
                         "of the slow row.")
        parts.append("Refuted as the explanation of the slow row.")
    b = v["bitness"]["modes"]
    bits = []
    for mode in ("sync", "async"):
        m = b.get(mode) or {}
        if m.get("faster_64_pct"):
            f = m["faster_64_pct"]
            bits.append(f"{mode} {f['median']:+.0f}% [{f['ci_low']:+.0f}, {f['ci_high']:+.0f}]"
                        + (" (unstable)" if f.get("unstable") else ""))
    if bits:
        parts.append("64-bit glibc vs 32-bit glibc at 256 B here (positive = 64-bit faster): "
                     + ", ".join(bits) + f"; {SEED_BITNESS_CLAIM}.")
    if v.get("today"):
        parts.append(v["today"]["text"])
    return " ".join(parts)


def build_verdict(results_dir, write=True):
    """Decide and (by default) write DIR/verdict.json; returns the dict."""
    from pathlib import Path
    from . import results
    data = results.load(results_dir)
    v = decide(data, seedref.read())
    if write:
        files.write_json(Path(results_dir) / "verdict.json", v)
    return v
