"""`tw compare DIR1 DIR2 ... [--out DIR] [--seed-reference]`: one page across results sets.

Reads only the results directories (and, with --seed-reference, the seed's published table,
shown as theirs), analysed with this checkout's methods (twtools.analyse.results).  The first
directory is the base A; every other set B is compared with it, cell by cell, with a decision
(twtools.analyse.compare) on the undisturbed figure (the cost when the host leaves the CPU
alone), with the typical one (the median) beside it: "B is slower by X% [CI]" only when the
interval, which holds both runs' drift, excludes zero and the call survives the
Benjamini-Hochberg correction over every decision of the comparison; otherwise the smallest
difference that could have been detected.  Each cell is compared twice: as measured, and
relative to each run's own 64-bit syscall (what survives a machine-wide change of speed).  What differs between the machines' kernels (the
fingerprint's kernel state) is listed first, since any of it can explain a difference.
Output: OUT/compare.md, OUT/compare.html, OUT/plots/*, or with --json every decision with the
figure it used on stdout.  Deterministic.

Every DIR must be a results directory (twtools.analyse.results validates each file as it
reads it; a damaged one is one line naming the file, exit 3).  A set whose run did not finish,
or whose per-call stage failed or was cut, is shown with its state, and no decision or verdict
is drawn from it.  OUT is made new, or is an earlier comparison (its compare.md/html are
replaced), or an empty directory; anything else is refused before any work.  Every write
stays inside OUT (core.files.confined): a symbolic link there is refused, not followed.
The rebuild line is quoted for a POSIX shell, so it can be pasted whatever the names.
"""
from pathlib import Path

from ..analyse import basemodel, causes, compare as decide, percall, results, seedref, \
    verdict as verdict_mod
from ..core import escape, files, ui
from ..machine import mitigations
from ..core.fmt import fmt
from . import document
from .document import Doc, export
from .report import fmt_cell, fmt_s, plots_module

# What an earlier comparison leaves in OUT: such a directory may be written again.
OUTPUTS = ("compare.md", "compare.html", "plots")


class ResultSet:
    """One column of the comparison: a results directory or the seed's reference."""

    def __init__(self, label, data, seed=False, path=None):
        self.label, self.data, self.seed, self.path = label, data, seed, path
        self.state, self.unusable = None, None

    @classmethod
    def from_dir(cls, d):
        d = Path(d)
        data = results.load(d)
        meta = data.get("meta") or {}
        fp = data.get("fingerprint") or {}
        label = f"{d.name}"
        host = meta.get("host") or fp.get("host")
        if host and host not in label:
            label += f" ({host})"
        # The label is the directory's name and its host's: outside text wherever it goes
        # (document.outside; plots take it plain).
        s = cls(document.outside(label), data, path=d)
        s.state = results.run_state(data)
        # Why no per-call decision may rest on this set (None when one may).
        # A run that did not finish may still hold its whole matrix, or the rounds a signal
        # cut it at (kept, marked interrupted): decisions rest on those, and the run's
        # headline above the tables says what it is.
        matrix = results.STAGE_OF["percall"]
        whole = matrix in s.state["completed"] or matrix in s.state["kept"]
        s.unusable = results.stage_problem(data, "percall") or \
            (s.state["headline"] if not s.state["finished"] and not whole else None)
        return s

    @classmethod
    def from_seed(cls):
        ref = seedref.read(seedref.SEED_RUNS)
        return cls("seed report (theirs)", {"seed_rows": ref}, seed=True) if ref else None

    def cells(self, op, shape="ret"):
        pc = self.data.get("percall") or {}
        return {(c["variant"], c.get("size")): c for c in pc.get("cells", [])
                if c.get("op") == op and c.get("shape", "ret") == shape}


def _plot_label(label):
    """A set's label as matplotlib may draw it: control characters shown (core.escape), and
    '$' escaped, which would otherwise open mathtext (an unbalanced one is an error)."""
    return escape.terminal(document.plain(label)).replace("$", r"\$")


def _flat(d, prefix=""):
    out = {}
    for k, v in (d or {}).items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        elif isinstance(v, list):
            out[f"{prefix}{k}"] = "; ".join(map(str, v)) if v else "none"
        else:
            out[f"{prefix}{k}"] = v
    return out


def machine_facts(s):
    """The facts of a set that change what a call costs, flattened for a difference table."""
    fp = s.data.get("fingerprint") or {}
    cpu = fp.get("cpu") or {}
    facts = {"cpu": f"{cpu.get('vendor')} family {cpu.get('family')} model {cpu.get('model')}",
             "kernel": (fp.get("kernel") or {}).get("release"),
             "virtualization": fp.get("virtualization"),
             "speculation setting": ((s.data.get("meta") or {}).get("setting") or {}).get("speculation")
             or "kernel default"}
    ks = dict(fp.get("kernel_state") or {})
    ks.pop("vdso32_bytes", None)
    facts.update(_flat(ks))
    return facts


def differences(sets):
    """[(fact, [value per set])] for every fact that is not the same in all sets."""
    facts = [machine_facts(s) for s in sets]
    keys = sorted({k for f in facts for k in f})
    out = []
    for k in keys:
        vals = [f.get(k, "not recorded") for f in facts]
        if len({str(v) for v in vals}) > 1:
            out.append((k, vals))
    return out


# Each run's reference cell (analyse.percall's): a machine-wide change of speed shows in it.
REF_KEY = ("64-syscall", None)


def _host(s):
    return (s.data.get("meta") or {}).get("host") or (s.data.get("fingerprint") or {}).get("host")


# What names a machine: its CPU as the fingerprint records it.  The host name is only a
# label: two guests named "vm" on an AMD EPYC and an Intel Xeon are two machines.
MACHINE_FACTS = ("vendor", "family", "model", "stepping")


def machine_of(s):
    """(vendor, family, model, stepping) of a set's CPU, or None when its fingerprint does not
    record all four (its machine is then not told equal to any other)."""
    cpu = (s.data.get("fingerprint") or {}).get("cpu") or {}
    key = tuple(cpu.get(k) for k in MACHINE_FACTS)
    return None if any(v is None for v in key) else key


def same_machine(a, b):
    """Whether two sets were measured on one machine, by its facts (machine_of)."""
    ma = machine_of(a)
    return ma is not None and ma == machine_of(b)


def _all_cells(s):
    return (s.data.get("percall") or {}).get("cells") or []


def base_change(base, s):
    """basemodel.change of B (s) against A (base): one machine's exits at each run's price
    (the kernel's prediction, B's fit agreeing), the facts that changed first."""
    same = same_machine(base, s)
    out = basemodel.change(_all_cells(base), _all_cells(s), _exit_cell(base), _exit_cell(s),
                           _exits_of(base, s), facts_changed=facts_changed(base, s))
    out["same_machine"] = same
    return out


def _exits_of(a, b):
    """variant -> (exits a call pays in A, in B): each run's own (analyse.causes.exits_paid),
    taken out at its own run's price of one exit by the base model."""
    return lambda v: (causes.exits_paid(a.data.get("causes"), v),
                      causes.exits_paid(b.data.get("causes"), v))


def facts_changed(a, b):
    """[{fact, a, b, where, work}] for every recorded fact that differs between two sets: the
    mitigations first (machine.mitigations.facts_changed: each verdict that changed, where its
    work runs and what work it adds or removes, then the boot parameters, kernel config, CPU
    bugs, CPUID leaves, microcode and compiler that decide them), then the other facts of the
    machine and its kernel (differences)."""
    fa, fb = (s.data.get("fingerprint") or {} for s in (a, b))
    out = []
    for f in mitigations.facts_changed(fa, fb):
        out.append({"fact": f["fact"], "a": f["a"], "b": f["b"],
                    "where": "; ".join(x for x in (f.get("where_text"), f.get("work")) if x) or None})
    seen = {f["fact"].split("/", 1)[-1] for f in out}
    for k, (va, vb) in differences([a, b]):
        if k.startswith("mitigations.") and k.split(".", 1)[1] in seen:
            continue
        out.append({"fact": k, "a": va, "b": vb, "where": None})
    return out


def _decision_text(d):
    if not d:
        return "—"
    return d["sentence"]


OPS = ("null", "getppid", "write-devnull", "write-file", "write-sync", "gettimeofday",
       "clock_gettime")


def _keys(real, op):
    return sorted({k for s in real for k in s.cells(op)}, key=lambda k: (-int(k[0][:2]), k[0], k[1] or 0))


def fmt_two(c):
    """A cell's two figures: undisturbed [CI] first, then the typical one; a cell whose primary
    figure is the typical one shows that first, marked."""
    if c is None or not c.get("supported") or c.get("median") is None:
        return fmt_cell(c)
    u = percall.figure(c, "undisturbed")
    t = fmt_cell(c)
    if c.get("primary") == "typical" or u is None:
        return f"typical {t}" + (f" · undisturbed {fmt(u)}" if u else "")
    return f"{fmt(u)} · typical {t}"


def _why_no_decision(a, b, base, s):
    why = None if (a and b and a.get("supported") and b.get("supported")) else \
        "not measured in both sets" if not (a and b) else \
        f"unsupported in {base.label if not a.get('supported') else s.label}"
    for x in (base, s):
        if x.unusable and not why:
            why = f"{x.label}: {document.outside(x.unusable)}"
    return why or decide.span_differs(a, b)


def _reference(op, key, which="undisturbed"):
    """(op, key) of the cell whose move between two runs of one host measures the host's own
    move for this cell (analyse/compare.reference_of)."""
    v, rop, size = decide.reference_of(op, key[1], which)
    return rop, (v, size)


def _exit_cell(s):
    """The cell that prices one VM exit in a set (64-syscall cpuid, analyse/causes.py)."""
    return s.cells("cpuid").get(REF_KEY)


def all_decisions(real):
    """Every decision of the comparison: {rows: [...], families: {B label: adjust() summary}}.
    Each row is one cell of one B set against A; its decisions are made first, then corrected
    together (Benjamini-Hochberg over every absolute and relative decision against the same
    A), and only then turned into text."""
    rows, families, bases = [], {}, {}
    if len(real) < 2:
        return {"rows": rows, "families": families, "bases": bases}
    base = real[0]
    for s in real[1:]:
        fam = []
        same = same_machine(base, s)
        bm = bases[s.label] = base_change(base, s)
        # the base moved by an added constant: no ratio to a run's own base is read anywhere
        moved = bm.get("kind") in ("added", "both")
        for op in OPS:
            for k in _keys(real, op):
                a, b = base.cells(op).get(k), s.cells(op).get(k)
                why = _why_no_decision(a, b, base, s)
                which = decide.figure_of(a, b)
                rop, rkey = _reference(op, k, which)
                exits = causes.exits_paid(s.data.get("causes"), k[0])
                cmp = None if why else decide.between_runs(
                    a, b, base.cells(rop).get(rkey), s.cells(rop).get(rkey),
                    same_host=same, a_exit=_exit_cell(base), b_exit=_exit_cell(s),
                    exits=exits, speed=bm["scale"] if bm.get("added_ns") is not None else None,
                    speed_for_typical=moved)
                if cmp and (which == "undisturbed" or moved):
                    # Each way's premium over the base, decided apart (basemodel): a ratio to a
                    # base that moved by an added constant would call every slow way faster.
                    # A typical figure keeps its ratio to the same call on the 64-bit syscall
                    # (which met the same noise) while the base held.
                    cmp["relative"] = None
                    # A's premium at B's speed on one machine whose speed moved; between two
                    # machines there is no one speed (the line's slope mixes every difference
                    # of the two CPUs), and the premiums are compared as measured.
                    cmp["premium"] = basemodel.premium_change(
                        _all_cells(base), _all_cells(s), (k[0], op, k[1], "ret"),
                        bm["scale"] if same else None,
                        _exit_cell(base), _exit_cell(s), _exits_of(base, s),
                        figure="typical" if which == "typical" else "ns")
                if cmp:
                    fam += [d for d in (cmp["absolute"], cmp["relative"], cmp.get("premium")) if d]
                rows.append({"op": op, "variant": k[0], "size": k[1], "B": s.label, "A": base.label,
                             "why": why, "cmp": cmp})
        families[s.label] = decide.adjust(fam)
        bm["premiums_null"] = premiums_null({"rows": rows}, s.label)
        for r in rows:
            p = (r["cmp"] or {}).get("premium")
            if r["B"] == s.label and p and p.get("decision_uncorrected"):
                basemodel.demoted(p)
    for r in rows:
        cmp, why = r["cmp"], r["why"]
        r["figure_text"] = "—" if not cmp else cmp["figure"] + (
            " in cycles" if cmp.get("unit") == "cycles" else "") + (
            f" ({cmp['why_figure']})" if cmp.get("why_figure") else "")
        r["absolute_text"] = f"no decision: {why}" if why else _decision_text(cmp["absolute"])
        r["relative_text"] = "—" if why else _decision_text(cmp["relative"] or cmp.get("premium")) \
            if (cmp["relative"] or cmp.get("premium")) else \
            ("the base itself (above)" if (r["variant"], r["op"]) == (basemodel.BASE_VARIANT, "null")
             else "no kernel entry: its change is the CPU's own")
        r["typical_text"] = "—" if why or not cmp.get("typical") else cmp["typical"]["sentence"]
        r["drift_text"] = "—" if why else (f"±{cmp['drift_pct']:.1f}%" if cmp["drift_pct"] is not None
                                          else "none estimated" if cmp["figure"] == "undisturbed"
                                          else "unknown")
    return {"rows": rows, "families": families, "bases": bases}


def _machine_text(m):
    # The vendor is the results' free text: escaped like every other string a run brings.
    return ("unknown CPU" if not m else
            document.outside(f"{m[0]} family {m[1]} model {m[2]} stepping {m[3]}"))


def _fact_value(v):
    return "—" if v is None else document.outside(v)


def premiums_null(decisions, label):
    """[(variant, premium decision)] of each way's null call in one B set, int 0x80 first."""
    rows = [(r["variant"], r["cmp"]["premium"]) for r in decisions["rows"]
            if r["B"] == label and r["op"] == "null" and r["cmp"] and r["cmp"].get("premium")
            and r["cmp"]["premium"].get("a_ns") is not None]
    return sorted(rows, key=lambda x: ("int80" not in x[0], x[0]))


def summary(bm, prem):
    """The comparison of one B against A in one line: the base's added ns (or change of
    speed), int 0x80's premium, the VM exit, and the first fact that changed with its work."""
    if bm.get("added_ns") is None:
        return None
    a, sc = bm["added"], bm["scale"]
    k = bm.get("kind")
    parts = [f"{a['value']:+.0f} ns [{a['ci_low']:+.0f}, {a['ci_high']:+.0f}] on every way into "
             "the kernel" + {"added": ", the speed held", "held": ", the speed held",
                             "speed": f", a change of speed ×{sc['value']:.3f}",
                             "both": f" and a change of speed ×{sc['value']:.3f}"}[k]]
    for v, p in prem:
        if "int80" in v and p.get("diff"):
            word = {decide.SAME: "held", decide.SLOWER: "grew", decide.FASTER: "shrank"}.get(
                p["decision"], p["decision"])
            parts.append(f"{v}'s premium {word} ({p['a_ns']:.0f} → {p['b_ns']:.0f} ns)")
    ex = bm.get("exit")
    if ex and ex["ratio"].get("median"):
        parts.append(f"the VM exit {100 * (ex['ratio']['median'] - 1):+.1f}%")
    facts = [f for f in bm.get("facts_changed") or [] if f.get("where")]
    if facts:
        parts.append("what changed: " + "; ".join(f"{f['fact']} → {f['where']}" for f in facts[:3]))
    return "; ".join(parts)


def what_changed(doc, real, decisions):
    """The page's opening: per B against A, the facts that changed (the mitigations with where
    their work runs), the base's change (an added constant, a change of speed, or neither),
    what each way adds over the base, the VM exit, and the CPU's own speed."""
    if len(real) < 2:
        return
    base = real[0]
    doc.h(2, "What changed")
    for s in real[1:]:
        bm = decisions["bases"].get(s.label) or {}
        one = bm.get("same_machine")
        doc.h(3, f"{s.label} against {base.label}")
        line = summary(bm, premiums_null(decisions, s.label))
        if line:
            doc.p("**In one line:** " + document.outside(line) + ".")
        doc.p(("One machine, by its facts (" + _machine_text(machine_of(s)) + "): what moved is the "
               "kernel's, the host's or the moment's." if one else
               "Two machines (" + _machine_text(machine_of(base)) + " and " +
               _machine_text(machine_of(s)) + "): the host name is only a label; no exit is "
               "repriced and no move is read as drift."))
        facts = bm.get("facts_changed") or []
        if facts:
            doc.table(["fact that changed", base.label, s.label, "where its work runs"],
                      [[document.outside(f["fact"]), _fact_value(f["a"]), _fact_value(f["b"]),
                        document.outside(f.get("where") or "—")] for f in facts])
        else:
            doc.p("No recorded fact of the machine or its kernel differs.")
        doc.p("The base (the entry and exit work every kernel-entering call pays), fitted over "
              f"{bm.get('n') or 0} kernel-entering cells as B = speed × A + added: "
              + document.outside(bm.get("sentence") or "unknown") + ".")
        prem = premiums_null(decisions, s.label)
        if prem:
            doc.table(["way in (null call)", "what it adds over the base, A → B (VM exits taken out where both runs priced them)",
                       "decision"],
                      [[v, f"{p['a_ns']:.0f} → {p['b_ns']:.0f} ns", document.outside(p["sentence"])]
                       for v, p in prem])
        us = bm.get("user_space")
        if us:
            doc.p(f"The cells that never enter the kernel ({us['cells']}: the 64-bit vDSO, "
                  f"glibc's clock calls) moved ×{us['median']:.3f} (from ×{us['min']:.3f} to "
                  f"×{us['max']:.3f}): the CPU's own speed, apart from the kernel's.")


def family_sentence(b_label, a_label, fam):
    """What the comparison of one B set called, against what chance alone would give."""
    if not fam["tests"]:
        return f"{b_label} against {a_label}: no decision could be made."
    return (f"{b_label} against {a_label}: {fam['tests']} decisions (each cell as measured, and "
            f"by its way's premium over the base). {fam['called_uncorrected']} of their 95% "
            f"intervals exclude no difference; chance alone would give about "
            f"{fam['expected_by_chance']:g} such if nothing differed. After the Benjamini-Hochberg "
            f"correction (false discovery rate {fam['fdr']:.0%}), {fam['called']} "
            f"{'call remains' if fam['called'] == 1 else 'calls remain'}"
            + (": read them as real differences between the two moments measured, and rerun "
               "to see whether they are the machine's or the moment's." if fam["called"] else "."))


def decisions_json(real):
    """The comparison's decisions as plain data (tw compare --json): each with the figure it
    used, B/A and its interval, p and q, what could have been detected."""
    d = all_decisions(real)

    def one(x):
        if not x:
            return None
        r = x.get("ratio") or {}
        return {"decision": x.get("decision"), "figure": x.get("figure"), "pct": x.get("pct"),
                "pct_ci": x.get("pct_ci"), "detectable_pct": x.get("detectable_pct"),
                "p": x.get("p"), "q": x.get("q"), "b_over_a": r.get("median"),
                "ci_low": r.get("ci_low"), "ci_high": r.get("ci_high"),
                "decision_uncorrected": x.get("decision_uncorrected", x.get("decision")),
                "at_a_exit_price": bool(x.get("at_a_exit_price")),
                "as_measured": x.get("as_measured"),
                "sentence": x.get("sentence")}

    out = []
    for r in d["rows"]:
        cmp = r["cmp"] or {}
        out.append({"A": document.plain(r["A"]), "B": document.plain(r["B"]),
                    "variant": r["variant"], "op": r["op"],
                    "size": r["size"], "shape": "ret", "no_decision": r["why"],
                    "figure": cmp.get("figure"), "figure_why": cmp.get("why_figure"),
                    "unit": cmp.get("unit"),
                    "absolute": one(cmp.get("absolute")), "relative": one(cmp.get("relative")),
                    "premium": premium_json(cmp.get("premium")),
                    "typical": one(cmp.get("typical")), "drift_pct": cmp.get("drift_pct"),
                    "machine_shift_pct": cmp.get("machine_shift_pct"),
                    "exit_shift_pct": cmp.get("exit_shift_pct"),
                    "exits_per_call": cmp.get("exits_per_call")})
    return {"schema": "timewrite-compare/2", "sets": [document.plain(s.label) for s in real],
            "families": {document.plain(k): v for k, v in d["families"].items()},
            "base": {document.plain(k): base_json(v) for k, v in d["bases"].items()},
            "decisions": out}


def premium_json(p):
    """One premium (or body) decision as plain data."""
    if not p:
        return None
    return {k: p.get(k) for k in ("what", "over", "decision", "a_ns", "b_ns", "diff", "scaled_by",
                                  "exits_in", "p", "q", "decision_uncorrected", "sentence")}


def base_json(b):
    """basemodel.change's base object as tw compare --json carries it per B against A."""
    keep = ("added_ns", "added_ci_low", "added_ci_high", "scale", "kind", "model", "n", "fits",
            "birge", "chi2_dof", "why", "cycles", "exit", "user_space", "same_machine",
            "facts_changed", "sentence")
    out = {k: b.get(k) for k in keep}
    out["summary"] = summary(b, b.get("premiums_null") or [])
    sc = b.get("scale") or {}
    out.update(scale_ci_low=sc.get("ci_low"), scale_ci_high=sc.get("ci_high"),
               scale=sc.get("value"), unit="ns",
               residuals=[{k: r[k] for k in ("variant", "op", "size", "ns", "sigma")}
                          for r in b.get("residuals") or []])
    return out


def rebuild_command(dirs, out, seed_reference=False):
    """The command that rebuilds this comparison, quoted so that pasting it runs exactly it
    (a directory named `$(rm -rf ~)` stays a name; one starting with '-' gets ./)."""
    return ui.command_line(["scripts/tw", "compare", *map(ui.path_word, dirs),
                            "--out", ui.path_word(out)]
                           + (["--seed-reference"] if seed_reference else []))


def _verdict_text(s):
    blockers = results.verdict_blockers(s.data)
    if blockers:
        return f"no verdict: {document.outside(blockers[0])}"
    return verdict_mod.decide(s.data, seedref.read())["verdict"]


def build_compare(dirs, out, seed_reference=False, formats=("md", "html")):
    """Write the comparison into out (made if absent), every file inside it; returns the
    first file's path."""
    out = Path(out)
    # Every directory is read (and validated) before anything is made or written.
    sets = [ResultSet.from_dir(d) for d in dirs]
    out.mkdir(parents=True, exist_ok=True)
    files.refuse_links(out, OUTPUTS)
    with files.confined(out):
        return _build(sets, dirs, out, seed_reference, formats)


def _build(sets, dirs, out, seed_reference, formats):
    if seed_reference:
        s = ResultSet.from_seed()
        if s:
            sets.append(s)
    real = [s for s in sets if not s.seed]
    doc = Doc()
    doc.h(1, "timewrite comparison")
    doc.p("Reads only the results directories below, analysed with this checkout's methods "
          f"(analysis version {results.ANALYSIS_VERSION}); rebuild with:")
    doc.code(rebuild_command(dirs, out, seed_reference))
    rows = []
    for s in sets:
        if s.seed:
            rows.append([s.label, "seed report, 2022 (published figures, one run per row, 10 ms ticks)",
                         "—", "—", "—", "—", "—", "—", "—"])
            continue
        fp = s.data.get("fingerprint") or {}
        meta = s.data.get("meta") or {}
        cpu = fp.get("cpu") or {}
        spec = (meta.get("setting") or {}).get("speculation") or "kernel default"
        ext = document.outside
        rows.append([s.label, ext(meta.get("created_utc") or "unknown date"), ext(s.state["state"]),
                     ext(spec), ext(cpu.get("model_name") or cpu.get("model") or "unknown"),
                     ext(fp.get("virtualization") or "unknown"),
                     ext((fp.get("kernel") or {}).get("release") or "unknown"),
                     ext(((fp.get("libc") or {}).get("32") or {}).get("entry") or "unknown"),
                     ext((fp.get("vdso32") or {}).get("instruction") or "unknown"), _verdict_text(s)])
    decisions = all_decisions(real)
    what_changed(doc, real, decisions)
    doc.h(2, "Results sets")
    doc.table(["set", "measured", "run", "speculation", "CPU", "virtualisation", "kernel",
               "32-bit libc entry", "vDSO32 insn", "verdict"], rows)
    for s in real:
        if s.state["headline"]:
            doc.warn(f"[{s.label}] {document.outside(s.state['headline'])}", inline=True)

    doc.h(2, "What differs between the machines")
    if len(real) < 2:
        doc.p("One measured set: nothing to compare.")
    else:
        diff = differences(real)
        if diff:
            doc.p("Facts of the machines and kernels that are not the same in every set (from "
                  "each fingerprint): any of them can change what a system call costs.")
            doc.table(["fact"] + [s.label for s in real],
                      [[document.outside(k)] + ["—" if v is None else document.outside(v)
                                                for v in vals] for k, vals in diff])
        else:
            doc.p("Every recorded fact of the machines and kernels is the same in every set.")

    machines = [machine_of(s) for s in real]
    same = sorted({_machine_text(m) for m in machines if m and machines.count(m) > 1})
    if same:
        # Seen on the build machine: one setting measured 146, 121 and 95 ns per null call
        # in three runs 20 minutes apart, as the host's other load came and went.
        doc.warn(f"Several sets come from the same machine ({document.outside('; '.join(same))}, "
                 "told by its CPU's vendor, family, model and stepping), measured at different "
                 "times. Each interval holds its own run's drift, but a machine can drift further "
                 "between runs. To compare two settings on one machine, let them alternate in one "
                 "session: `scripts/tw ab`.", inline=True)

    doc.h(2, "Per-call cost by mechanism")
    if len(real) < 2:
        doc.p("Only one measured results set: decisions need two (the seed's report has no "
              "per-call figures, so no decision against it is possible).")
    base = real[0] if real else None
    for s_ in real[1:]:
        fam = decisions["families"].get(s_.label)
        if fam:
            doc.p(family_sentence(s_.label, base.label, fam))
    if len(real) >= 2:
        doc.p(f"Each set B against {base.label} (A), on each cell's primary figure (the "
              "undisturbed cost, or the typical one where the floor cannot be trusted: the "
              "figure column says which and why): B/A, 95% interval by quadrature of the two "
              "cells' intervals (each holds its run's drift), of the undisturbed cost in the "
              "core's cycles when both runs timed the core's clock (the host moves the clock "
              "in steps, and a figure in ns with it; the figure column says \"in cycles\"), "
              "else in ns; relative: the same for each cell "
              "divided by its own run's 64-bit syscall null, which a machine-wide change of "
              "speed does not move (for the figures of the typical column's kind); for every "
              "kernel-entering cell decided on its undisturbed figure, its way's premium over "
              "the base instead: the cell less the 64-bit syscall's cell of the same operation "
              "(for the 64-bit syscall's own cells, less its null call: the body), each run's VM "
              "exits taken out at its own price, A's at B's speed where the speed changed, B "
              "less A in ns. A ratio to a base that moved by an added constant would call every "
              "slow way faster (the section above fits the two apart). A call is made only when "
              "the interval excludes 0 and the "
              "call survives the Benjamini-Hochberg correction over every decision against the "
              "same A. The typical figure's B/A is shown beside, for what a program met at "
              "those moments.")
    for op in OPS:
        keys = _keys(real, op)
        if not keys:
            continue
        doc.h(3, f"op `{op}`")
        doc.table(["variant", "size"] + [s.label for s in real],
                  [[k[0], k[1] or "—"] + [fmt_two(s.cells(op).get(k)) for s in real] for k in keys])
        drows = [[r["variant"], r["size"] or "—", r["B"], r["figure_text"], r["absolute_text"],
                  r["relative_text"], r["typical_text"], r["drift_text"]]
                 for r in decisions["rows"] if r["op"] == op]
        if not drows:
            continue
        doc.table(["variant", "size", "B", "figure", "as measured",
                   "its way's premium over the base (relative to each run's 64-bit syscall for "
                   "a typical figure)", "typical (median), as measured",
                   "drift alone could explain"], drows)
    pdir = out / "plots"
    doc.plot(plots_module().plot_compare_percall([(_plot_label(s.label), s.data.get("percall")) for s in real], pdir, "null"),
             "Per-call cost (null) in each results set: undisturbed figure, 95% intervals")

    doc.h(2, "Seed sweep at 256 B")
    t = []
    for s in sets:
        if s.seed:
            for r in s.data["seed_rows"] or []:
                if r["bufsize"] == min(x["bufsize"] for x in s.data["seed_rows"]):
                    t.append([f"{r['platform']} (seed, theirs)", "—", r["mode"], r["loops"],
                              f"{r['real_s']:.4f} s (one run)", f"{r['sys_s']:.4f} s (one run)",
                              "no decision possible: one published run, no raw samples"])
            continue
        for run in sorted((s.data.get("sweep_seed") or {}).get("runs", []),
                          key=lambda r: (r["variant"], r["mode"])):
            row = next((x for x in run.get("rows", []) if x["buffsize"] == 256), None)
            if not run.get("supported", True):
                t.append([s.label, run["variant"], run["mode"], "—", f"unsupported: {document.outside(run.get('reason'))}", "—", "—"])
            elif row:
                t.append([s.label, run["variant"], run["mode"], row.get("calls"), fmt_s(row.get("real_s")),
                          fmt_s(row.get("sys_s")), "summary with CI"])
    if t:
        doc.table(["set", "variant", "mode", "calls", "real", "sys", "uncertainty"], t)
    else:
        doc.p("Not measured in any set.")

    doc.h(2, "Verdicts")
    for s in real:
        blockers = results.verdict_blockers(s.data)
        if blockers:
            doc.p(f"[{s.label}] No verdict: " + document.outside("; ".join(blockers)))
            continue
        v = verdict_mod.decide(s.data, seedref.read())
        doc.blocks.append(("verdict", v["verdict"], f"[{s.label}] {v['sentence']}"))
    if any(s.seed for s in sets):
        doc.p("The seed's report published no per-call costs and no repetitions, so no decision "
              "against it is possible; its rows are shown as theirs for scale only.")

    return export(doc, out, "compare", formats)
