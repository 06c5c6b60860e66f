#!/usr/bin/env python3
"""What a run holds fixed: each factor that is fixed within one `tw bench` invocation and may
change between two, varied on purpose, and its effect on the undisturbed figure.

Usage: scripts/bench_factors.py [--out DIR] [--rounds R] [--reps K] [--analyse-only]
       (make bench-factors)

A process's floor sits on one of a few layout levels (docs/syscost.md, "The estimand"), so
anything a run fixes once for all its processes could decide which levels it draws.  For each
factor this runs a small matrix (the fast null cells and one write) K times with the factor at
setting X and K times at setting Y, alternating X Y X Y ... so that the host's own drift falls
on both alike, and prints, per cell, Y/X of the undisturbed figures with its 95% interval,
beside X/X (the two halves of the X runs): an effect is a Y/X whose interval excludes 1 while
X/X's includes it.  Factors:

  cpu      --cpu 0 against --cpu 1 (the CPU every process of the run is pinned to)
  env      the environment 3000 bytes larger (where the stack starts: Mytkowicz et al. 2009)
  path     a results path 200 characters longer (a write's file path is in syscost's argv)
  aslr     `setarch -R` (no address-space randomisation) against the default
  layout   a build with every function aligned to 64 bytes (-falign-functions=64) against
           this tree's build: the build's own code placement
  tsc      the TSC rate each run calibrates: its spread over every run, in ppm (a rate that
           is wrong by e scales every figure by e)
  time     the first and last X runs of the whole study, minutes apart (the time of day)

Printed, never asserted.  Raw percall.json files stay in --out for `--analyse-only`.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from twtools.analyse import percall, stats  # noqa: E402

TW = [sys.executable, str(ROOT / "scripts" / "tw")]
CELLS = ["--variants", "64-syscall,32-vdso,32-int80,64-libc", "--ops", "null,write-file",
         "--sizes", "256", "--shapes", "ret,jmp"]
FACTORS = ("cpu", "env", "path", "aslr", "layout")
LAYOUT_BUILD = ROOT / "build-layout"


def _run(out, setting, factor, rounds):
    """One tw bench invocation at one setting of one factor; returns its percall.json path."""
    env = dict(os.environ)
    argv = list(TW) + ["bench", "--json", "--rounds", str(rounds)] + CELLS
    pre = []
    cpu = "1"
    target = out
    if factor == "cpu" and setting == "Y":
        cpu = "0"
    if factor == "env" and setting == "Y":
        env["TW_FACTOR_PAD"] = "x" * 3000
    if factor == "path" and setting == "Y":
        target = out.parent / (out.name + "-" + "p" * 200)
    if factor == "aslr" and setting == "Y":
        pre = ["setarch", os.uname().machine, "-R"]
    if factor == "layout" and setting == "Y":
        env["TW_BUILD"] = str(LAYOUT_BUILD)
    argv += ["--cpu", cpu, "--out", str(target)]
    p = subprocess.run(pre + argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    if p.returncode not in (0, 1):
        sys.exit(f"bench_factors: {' '.join(argv)} failed: {p.stderr.strip().splitlines()[-1:]}")
    return target / "percall.json"


def measure(out, rounds, reps, factors=FACTORS):
    if shutil.which("setarch") is None:
        sys.exit("bench_factors: setarch is missing (util-linux)")
    subprocess.run(["make", "-C", str(ROOT), "--no-print-directory", "binaries", "TW_DEPS_CHECKED=1",
                    f"BUILD={LAYOUT_BUILD.name}", "CFLAGS=-O2 -g -falign-functions=64"],
                   check=True, stdout=subprocess.DEVNULL)
    old = out / "index.json"
    index = [e for e in json.loads(old.read_text()) if e["factor"] not in factors] \
        if old.exists() else []
    n = 0
    for factor in factors:
        for k in range(reps):
            for setting in ("X", "Y"):
                n += 1
                d = out / f"{factor}-{setting}{k}"
                t = time.time()
                path = _run(d, setting, factor, rounds)
                index.append({"factor": factor, "setting": setting, "rep": k, "file": str(path),
                              "t": t})
                (out / "index.json").write_text(json.dumps(index, indent=1))
                print(f"bench_factors: {factor} {setting}{k} done ({n}/{len(factors) * reps * 2})",
                      file=sys.stderr)
    (out / "index.json").write_text(json.dumps(index, indent=1))


def _rounds(docs):
    """{cell key: rounds pooled over the documents}"""
    out = {}
    for d in docs:
        for c in d["cells"]:
            if not c.get("supported"):
                continue
            out.setdefault(percall.key(c), []).extend(percall.usable(rd)[0] for rd in c["rounds"])
    return out


def _ratio(a, b):
    ua, ub = stats.undisturbed(a), stats.undisturbed(b)
    sa = {"median": ua["value"], "ci_low": ua["ci_low"], "ci_high": ua["ci_high"]}
    sb = {"median": ub["value"], "ci_low": ub["ci_low"], "ci_high": ub["ci_high"]}
    if None in sa.values() or None in sb.values():
        return None
    return stats.ratio_summary(sb, sa)


def _fmt(r):
    if r is None:
        return "unknown"
    flag = "" if r["ci_low"] <= 1 <= r["ci_high"] else " *"
    return f"{100 * (r['median'] - 1):+.2f}% [{100 * (r['ci_low'] - 1):+.2f}, {100 * (r['ci_high'] - 1):+.2f}]{flag}"


def analyse(out):
    index = json.loads((out / "index.json").read_text())
    docs = {}
    for e in index:
        docs[e["file"]] = json.loads(Path(e["file"]).read_text())
    report = {"factors": {}}
    print("Effect of each factor on the undisturbed figure (Y/X - 1, 95% interval; * excludes 0)")
    print("beside the same setting against itself (X/X: first half of the X runs against the second)")
    for factor in FACTORS:
        es = [e for e in index if e["factor"] == factor]
        xs = [docs[e["file"]] for e in es if e["setting"] == "X"]
        ys = [docs[e["file"]] for e in es if e["setting"] == "Y"]
        rx, ry = _rounds(xs), _rounds(ys)
        h = len(xs) // 2
        rx1, rx2 = _rounds(xs[:h]), _rounds(xs[h:])
        rows = {}
        print(f"\n{factor}:")
        for k in sorted(rx, key=str):
            if k not in ry:
                continue
            yx = _ratio(rx[k], ry[k])
            xx = _ratio(rx1.get(k, []), rx2.get(k, [])) if h else None
            rows[" ".join(str(p) for p in k if p is not None)] = {"y_over_x": yx, "x_over_x": xx}
            print(f"  {' '.join(str(p) for p in k if p is not None):28s} Y/X {_fmt(yx):32s} X/X {_fmt(xx)}")
        effects = [abs(r["y_over_x"]["median"] - 1) for r in rows.values() if r["y_over_x"]]
        sig = sum(1 for r in rows.values() if r["y_over_x"] and
                  not r["y_over_x"]["ci_low"] <= 1 <= r["y_over_x"]["ci_high"])
        sig_xx = sum(1 for r in rows.values() if r["x_over_x"] and
                     not r["x_over_x"]["ci_low"] <= 1 <= r["x_over_x"]["ci_high"])
        med = sorted(effects)[len(effects) // 2] if effects else None
        print(f"  median |effect| {100 * med:.2f}%; {sig} of {len(rows)} Y/X exclude 0 "
              f"(X/X: {sig_xx}; chance gives {0.05 * len(rows):.1f})" if med is not None else "  no cells")
        report["factors"][factor] = {"cells": rows, "median_abs_effect": med,
                                     "excluding_zero": sig, "excluding_zero_aa": sig_xx}
    hz = [d.get("tsc_hz") for d in docs.values() if d.get("tsc_hz")]
    if hz:
        spread = (max(hz) - min(hz)) / (sum(hz) / len(hz)) * 1e6
        print(f"\ntsc: the calibrated TSC rate over {len(hz)} runs spans {spread:.1f} ppm "
              f"({min(hz):.0f} to {max(hz):.0f} Hz): a figure moves by as much")
        report["tsc_ppm"] = spread
    xs = sorted((e for e in index if e["setting"] == "X"), key=lambda e: e["t"])
    if len(xs) >= 4:
        early, late = xs[:2], xs[-2:]
        mins = (late[0]["t"] - early[0]["t"]) / 60
        re, rl = _rounds(docs[e["file"]] for e in early), _rounds(docs[e["file"]] for e in late)
        print(f"\ntime: the first two X runs against the last two, {mins:.0f} min later "
              "(every factor at its X setting)")
        effects = []
        for k in sorted(re, key=str):
            if k in rl:
                r = _ratio(re[k], rl[k])
                if r:
                    effects.append(abs(r["median"] - 1))
                print(f"  {' '.join(str(p) for p in k if p is not None):28s} {_fmt(r)}")
        report["time"] = {"minutes": mins, "median_abs_effect": sorted(effects)[len(effects) // 2]
                          if effects else None}
        if effects:
            print(f"  median |effect| {100 * report['time']['median_abs_effect']:.2f}%")
    (out / "factors.json").write_text(json.dumps(report, indent=1))
    print(f"\nbench_factors: wrote {out / 'factors.json'}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "build" / f"bench-factors-{os.getpid()}")
    ap.add_argument("--rounds", type=int, default=32)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--analyse-only", action="store_true")
    ap.add_argument("--factors", default=",".join(FACTORS),
                    help=f"the factors to measure (default {','.join(FACTORS)}); the others' "
                         "runs already in --out are kept")
    a = ap.parse_args()
    factors = a.factors.split(",")
    if not set(factors) <= set(FACTORS):
        ap.error(f"--factors: each of {', '.join(FACTORS)}")
    if not a.analyse_only:
        a.out.mkdir(parents=True, exist_ok=True)
        measure(a.out, a.rounds, a.reps, factors)
    analyse(a.out)


if __name__ == "__main__":
    main()
