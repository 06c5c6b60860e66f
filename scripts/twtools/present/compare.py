"""`tw compare DIR1 DIR2 ... [--out DIR] [--seed-reference]`: one report across results sets.

Reads only the results directories (and, with --seed-reference, the seed's published table as
a pseudo-results set, shown as theirs).  For each mechanism and operation: the per-call cost in
every set, the ratio to the first set with a bootstrap CI on the raw samples, and a two-sided
Mann-Whitney U test on the raw samples.  Sets without raw samples (the seed) get "no test
possible" with the reason.  Output: OUT/compare.md, OUT/compare.html, OUT/plots/*.
Deterministic: fixed bootstrap seed, fixed plot metadata, no generation date.
"""
from pathlib import Path

import numpy as np
from scipy import stats as sstats

from ..analyse import verdict as verdict_mod
from . import plots
from ..core import ui
from .report import Doc, export, fmt_cell, fmt_s

N_BOOT = 2000
SEED = 1
ALPHA = 0.05


def bootstrap_ratio(a, b, n=N_BOOT, seed=SEED):
    """median(b)/median(a) with a 95% percentile CI, resampling both raw sample sets."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.size < 2 or b.size < 2 or np.median(a) == 0:
        return None
    rng = np.random.default_rng(seed)
    ia = rng.integers(0, a.size, size=(n, a.size))
    ib = rng.integers(0, b.size, size=(n, b.size))
    ma = np.median(a[ia], axis=1)
    mb = np.median(b[ib], axis=1)
    ok = ma != 0
    r = mb[ok] / ma[ok]
    return {"median": float(np.median(b) / np.median(a)), "ci_low": float(np.percentile(r, 2.5)),
            "ci_high": float(np.percentile(r, 97.5)), "n": int(min(a.size, b.size))}


def mann_whitney(a, b):
    """Two-sided Mann-Whitney U on raw samples: (U, p) or None with fewer than 2 each."""
    if len(a) < 2 or len(b) < 2:
        return None
    res = sstats.mannwhitneyu(a, b, alternative="two-sided")
    return float(res.statistic), float(res.pvalue)


class ResultSet:
    """One column of the comparison: a results directory or the seed's reference."""

    def __init__(self, label, data, seed=False, path=None):
        self.label, self.data, self.seed, self.path = label, data, seed, path

    @classmethod
    def from_dir(cls, d):
        d = Path(d)
        data = verdict_mod.load(d)
        meta = data.get("meta") or {}
        fp = data.get("fingerprint") or {}
        label = f"{d.name}"
        host = meta.get("host") or fp.get("host")
        if host and host not in label:
            label += f" ({host})"
        return cls(label, data, path=d)

    @classmethod
    def from_seed(cls):
        ref = verdict_mod.read_reference("seed_timewrite_runs.csv")
        return cls("seed report (theirs)", {"seed_rows": ref}, seed=True) if ref else None

    def cells(self, op):
        pc = self.data.get("percall") or {}
        return {c["variant"]: c for c in pc.get("cells", []) if c.get("op") == op}


def _samples(c):
    if not c or c.get("supported") is False:
        return []
    s = c.get("samples")
    return [x for x in s if x is not None] if isinstance(s, list) else []


def percall_comparison(sets, op):
    """Rows: variant x set with value, ratio to the first set (bootstrap CI) and U-test p."""
    real = [s for s in sets if not s.seed]
    variants = sorted({v for s in real for v in s.cells(op)}, key=lambda v: (-int(v[:2]), v))
    rows = []
    base = real[0] if real else None
    for v in variants:
        bc = base.cells(op).get(v) if base else None
        for s in real[1:]:
            c = s.cells(op).get(v)
            a, b = _samples(bc), _samples(c)
            r = bootstrap_ratio(a, b)
            u = mann_whitney(a, b)
            why = None
            if not a or not b:
                which = base.label if not a else s.label
                cell = bc if not a else c
                why = (f"no raw samples in {which}: "
                       + (f"unsupported ({cell.get('reason')})" if cell and cell.get("supported") is False
                          else "not measured" if not cell else "blind or empty"))
            rows.append({"op": op, "variant": v, "base": base.label, "other": s.label,
                         "base_cell": bc, "other_cell": c, "ratio": r,
                         "u": u[0] if u else None, "p": u[1] if u else None, "why": why})
    return variants, rows


def build_compare(dirs, out, seed_reference=False, formats=("md", "html")):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sets = [ResultSet.from_dir(d) for d in dirs]
    if seed_reference:
        s = ResultSet.from_seed()
        if s:
            sets.append(s)
    doc = Doc()
    doc.h(1, "timewrite comparison")
    doc.p("Reads only the results directories below; rebuild with:")
    doc.code("scripts/tw compare " + " ".join(str(d) for d in dirs)
             + f" --out {out}" + (" --seed-reference" if seed_reference else ""))
    rows = []
    for s in sets:
        if s.seed:
            rows.append([s.label, "seed report, 2022 (published figures, one run per row, 10 ms ticks)",
                         "—", "—", "—", "—", "—", "—", "—"])
            continue
        fp = s.data.get("fingerprint") or {}
        meta = s.data.get("meta") or {}
        cpu = fp.get("cpu") or {}
        v = verdict_mod.decide(s.data, verdict_mod.read_reference())
        spec = (meta.get("setting") or {}).get("speculation") or "kernel default"
        rows.append([s.label, meta.get("created_utc") or "unknown date", spec,
                     cpu.get("model_name") or cpu.get("model") or "unknown",
                     fp.get("virtualization") or "unknown", (fp.get("kernel") or {}).get("release") or "unknown",
                     ((fp.get("libc") or {}).get("32") or {}).get("entry") or "unknown",
                     (fp.get("vdso32") or {}).get("instruction") or "unknown", v["verdict"]])
    doc.h(2, "Results sets")
    doc.table(["set", "measured", "speculation", "CPU", "virtualisation", "kernel", "32-bit libc entry",
               "vDSO32 insn", "verdict"], rows)

    real = [s for s in sets if not s.seed]
    hosts = [(s.data.get("meta") or {}).get("host") or (s.data.get("fingerprint") or {}).get("host")
             for s in real]
    same = sorted({h for h in hosts if h and hosts.count(h) > 1})
    if same:
        # Seen on the build machine: one setting measured 146, 121 and 95 ns per null call
        # in three runs 20 minutes apart, as the host's other load came and went.
        doc.warn(f"Several sets come from the same machine ({', '.join(same)}), measured at "
                 "different times. A significant difference between them includes whatever "
                 "the machine itself did in between (other tenants, frequency, cache state), "
                 "not only the setting. Measure each setting two or more times in alternation "
                 "(A B A B) and trust a difference only when its sign holds in every pair.",
                 inline=True)
    doc.h(2, "Per-call cost by mechanism")
    if len(real) < 2:
        doc.p("Only one measured results set: ratios and tests need two (the seed's report has no "
              "per-call figures, so no test against it is possible).")
    for op in ("null", "getppid", "write-devnull", "write-file", "write-sync"):
        variants, cmp_rows = percall_comparison(sets, op)
        if not variants:
            continue
        doc.h(3, f"op `{op}`")
        table = []
        for v in variants:
            line = [v] + [fmt_cell(s.cells(op).get(v)) if s.cells(op).get(v) else "not measured"
                          for s in real]
            table.append(line)
        doc.table(["variant"] + [s.label for s in real], table)
        if cmp_rows:
            doc.p(f"Ratio other/base of medians (95% bootstrap CI on raw samples, {N_BOOT} resamples) "
                  f"and two-sided Mann–Whitney U on the raw samples (difference at p < {ALPHA}).")
            doc.table(["variant", "base", "other", "ratio [95% CI]", "U", "p", "different?"],
                      [[r["variant"], r["base"], r["other"],
                        (f"{r['ratio']['median']:.3f} [{r['ratio']['ci_low']:.3f}, {r['ratio']['ci_high']:.3f}]"
                         if r["ratio"] else f"no test possible: {r['why'] or 'too few samples'}"),
                        f"{r['u']:.1f}" if r["u"] is not None else "—",
                        f"{r['p']:.3g}" if r["p"] is not None else "—",
                        ("yes" if r["p"] < ALPHA else "no") if r["p"] is not None else "unknown"]
                       for r in cmp_rows])
    pdir = out / "plots"
    doc.plot(plots.plot_compare_percall([(s.label, s.data.get("percall")) for s in real], pdir, "null"),
             "Per-call cost (null) in each results set, 95% CI")

    doc.h(2, "Seed sweep at 256 B")
    t = []
    for s in sets:
        if s.seed:
            for r in s.data["seed_rows"] or []:
                if r["bufsize"] == min(x["bufsize"] for x in s.data["seed_rows"]):
                    t.append([f"{r['platform']} (seed, theirs)", "—", r["mode"], r["loops"],
                              f"{r['real_s']:.4f} s (one run)", f"{r['sys_s']:.4f} s (one run)",
                              "no test possible: one published run, no raw samples"])
            continue
        for run in sorted((s.data.get("sweep_seed") or {}).get("runs", []),
                          key=lambda r: (r["variant"], r["mode"])):
            row = next((x for x in run.get("rows", []) if x["buffsize"] == 256), None)
            if not run.get("supported", True):
                t.append([s.label, run["variant"], run["mode"], "—", f"unsupported: {run.get('reason')}", "—", "—"])
            elif row:
                t.append([s.label, run["variant"], run["mode"], row.get("calls"), fmt_s(row.get("real_s")),
                          fmt_s(row.get("sys_s")), "summary with CI"])
    if t:
        doc.table(["set", "variant", "mode", "calls", "real", "sys", "uncertainty"], t)
    else:
        doc.p("Not measured in any set.")

    doc.h(2, "Verdicts")
    for s in real:
        v = verdict_mod.decide(s.data, verdict_mod.read_reference())
        doc.blocks.append(("verdict", v["verdict"], f"[{s.label}] {v['sentence']}"))
    if any(s.seed for s in sets):
        doc.p("The seed's report published no per-call costs and no repetitions, so no statistical "
              "test against it is possible; its rows are shown as theirs for scale only.")

    return export(doc, out, "compare", formats)


def add_arguments(p, name):
    p.add_argument("dirs", nargs="+", metavar="DIR", help="results directories (first = base)")
    p.add_argument("--out", metavar="DIR", help="where to write compare.md/html (default: DIR1/compare)")
    p.add_argument("--seed-reference", action="store_true",
                   help="add the seed report's published table as a results set (theirs)")
    p.add_argument("--format", default="md,html")


def main(args, name):
    for d in args.dirs:
        if not Path(d).is_dir():
            print(f"tw compare: {d} is not a results directory")
            return 2
    out = Path(args.out) if args.out else Path(args.dirs[0]) / "compare"
    formats = [f.strip() for f in args.format.split(",") if f.strip()]
    path = build_compare(args.dirs, out, args.seed_reference, formats)
    ui.progress(f"compare: {path}")
    return 0
