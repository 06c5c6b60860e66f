"""What a run holds fixed: each factor that is fixed within one `tw bench` invocation and may
change between two, varied on purpose, and its effect on the undisturbed figure.

Usage: scripts/bench_factors.py [--out DIR] [--rounds R] [--reps K] [--analyse-only]
       (make bench-factors); that entry parses the arguments and calls run() here.

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
  file     the binary's file: K byte-identical fresh copies of each program, each a new file
           whose pages the kernel places anew, against the same file K times, alternated
           within every round (--copies K); each copy's figure over the same file's, the
           spread between copies beyond their own sampling error (the placement term) beside
           the same file against itself, and what each copy's pages were: their physical
           frames (/proc/self/pagemap, as root), a huge page (FilePmdMapped) and the inode
  tsc      the TSC rate each run calibrates: its spread over every run, in ppm (a rate that
           is wrong by e scales every figure by e)
  time     the first and last X runs of the whole study, minutes apart (the time of day)

Printed, never asserted.  Raw percall.json files stay in --out for `--analyse-only`.
"""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ..analyse import percall, stats
from ..core.paths import ROOT
from ..machine import elf, probe
from ..measure import syscost

TW = [sys.executable, str(ROOT / "scripts" / "tw")]
CELLS = ["--variants", "64-syscall,32-vdso,32-int80,64-libc", "--ops", "null,write-file",
         "--sizes", "256", "--shapes", "ret,jmp"]
FACTORS = ("cpu", "env", "path", "aslr", "layout")
# The binary's file is measured apart (measure_file), in one session of alternated processes:
# its copies must share every round's moment with the same file they are compared with.
ALL_FACTORS = FACTORS + ("file",)
FILE_VARIANTS = ("64-syscall", "32-vdso", "64-libc")
PAGE = 4096
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


def _pages(path):
    """What the kernel did with a file's pages: [PFN or None] per 4 KiB page of its page cache
    (mapped here and touched; the same pages every process running the file maps), whether a
    mapping of it got a huge page (FilePmdMapped, kB), and its inode.  PFNs read as 0 unless
    root (/proc/self/pagemap hides them), then None."""
    import mmap
    st = os.stat(path)
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    try:
        n = (st.st_size + PAGE - 1) // PAGE
        for i in range(n):
            m[i * PAGE]             # fault it in: present in the page cache and mapped here
        base = _mapping_start(path)
        pfns = []
        with open("/proc/self/pagemap", "rb") as pm:
            for i in range(n):
                pm.seek(((base + i * PAGE) // PAGE) * 8)
                e = int.from_bytes(pm.read(8), "little")
                pfn = e & ((1 << 55) - 1)
                pfns.append(pfn if (e >> 63) & 1 and pfn else None)
        pmd = 0
        cur = None
        for line in Path("/proc/self/smaps").read_text().splitlines():
            if "-" in line.split(" ", 1)[0] and line.rstrip().endswith(str(path)):
                cur = True
            elif "-" in line.split(" ", 1)[0]:
                cur = None
            elif cur and line.startswith("FilePmdMapped:"):
                pmd += int(line.split()[1])
        return {"pfns": pfns, "file_pmd_kb": pmd, "inode": st.st_ino}
    finally:
        m.close()


def _mapping_start(path):
    """The start of this process's newest read-only mapping of path (/proc/self/maps)."""
    start = None
    for line in Path("/proc/self/maps").read_text().splitlines():
        if line.rstrip().endswith(" " + str(path)):
            start = int(line.split("-", 1)[0], 16)
    if start is None:
        raise RuntimeError(f"{path} is not mapped here")
    return start


def _loop_page(path):
    """The file page that holds the stub's entry (tw_syscall3): the code every timed call runs."""
    e = elf.load(path)
    for sym in e.symbols:
        if sym.name == "tw_syscall3":
            return e.vaddr_to_offset(sym.value) // PAGE
    return None


def measure_file(out, rounds, copies, variants=FILE_VARIANTS):
    """The binary's file: per variant, `copies` fresh copies and the same file `copies` times,
    each measured once a round in a shuffled order (null, ret); raw rounds and each copy's
    pages into out/file.json."""
    import random
    variants = [v for v in variants if probe.check("syscost", v)[0]]
    tsc_hz, _, cpu = syscost.calibrate(variants[0], "null")
    src = {v: probe.binary("syscost", v) for v in variants}
    copied, top = syscost.make_copies(src, copies)
    doc = {"rounds": rounds, "copies": copies, "cpu": cpu, "variants": {}}
    try:
        for v in variants:
            doc["variants"][v] = {
                "loop_page": _loop_page(src[v]),
                "same": {"pages": _pages(src[v]), "groups": [[] for _ in range(copies)]},
                "fresh": {"pages": [_pages(c) for c in copied[v]],
                          "groups": [[] for _ in range(copies)]}}
        t0 = time.monotonic()
        for r in range(rounds):
            order = [(v, kind, g) for v in variants for kind in ("same", "fresh")
                     for g in range(copies)]
            random.Random(r).shuffle(order)
            for v, kind, g in order:
                binary = src[v] if kind == "same" else copied[v][g]
                res = syscost.measure(v, "null", sampling=syscost.Sampling(
                    batches=4, batch_ms=0.5, warmup_ms=2, cpu=cpu, tsc_hz=tsc_hz, realtime=True),
                    launch=syscost.Launch(binary=binary))
                doc["variants"][v][kind]["groups"][g].append(
                    {"round": r, "t_s": round(time.monotonic() - t0, 3),
                     "samples_ns": res.get("samples_ns") or []})
            print(f"bench_factors: file round {r + 1}/{rounds}", file=sys.stderr)
    finally:
        import shutil as _sh
        _sh.rmtree(top, ignore_errors=True)
    (out / "file.json").write_text(json.dumps(doc))
    return doc


def _spread(groups_a, groups_b):
    """(ratio per group with its interval, between-group relative SD beyond sampling) of
    groups_b over groups_a, group g of each paired round by round."""
    per = []
    for ga, gb in zip(groups_a, groups_b):
        r = stats.undisturbed_ratio([x["samples_ns"] for x in gb], [x["samples_ns"] for x in ga])
        per.append(r)
    g = stats.grouped_ratio([[x["samples_ns"] for x in gb] for gb in groups_b],
                            [[x["samples_ns"] for x in ga] for ga in groups_a])
    return per, g


def analyse_file(out):
    """Print what the binary's file moves, from out/file.json."""
    path = out / "file.json"
    if not path.exists():
        return None
    doc = json.loads(path.read_text())
    k = doc["copies"]
    report = {}
    print(f"\nfile: {k} fresh copies of each program against the same file, {doc['rounds']} "
          "rounds alternated; each copy over the same file (Y/X), and the same file's K runs "
          "over each other (X/X)")
    for v, d in doc["variants"].items():
        same, fresh = d["same"]["groups"], d["fresh"]["groups"]
        # the same file against itself: its groups in a rotated order, so group g is compared
        # with another run of the same file in the same rounds
        per_y, gy = _spread(same, fresh)
        per_x, gx = _spread(same, same[1:] + same[:1])
        lp = d.get("loop_page")
        rows = []
        for g, r in enumerate(per_y):
            pg = d["fresh"]["pages"][g]
            pfn = pg["pfns"][lp] if lp is not None and lp < len(pg["pfns"]) else None
            rows.append({"copy": g, "ratio": r, "inode": pg["inode"], "loop_pfn": pfn,
                         "file_pmd_kb": pg["file_pmd_kb"]})
            print(f"  {v:11s} copy {g:2d} inode {pg['inode']:<9d} loop page PFN "
                  f"{'unknown' if pfn is None else hex(pfn):>10s} (colour "
                  f"{'?' if pfn is None else pfn % 32:>2}) Y/X {_fmt(r)}")
        calls_y = sum(1 for r in per_y if r and not r["ci_low"] <= 1 <= r["ci_high"])
        calls_x = sum(1 for r in per_x if r and not r["ci_low"] <= 1 <= r["ci_high"])
        ys = [r["median"] for r in per_y if r]
        sd_y = gy.get("placement_rel") if gy else None
        sd_x = gx.get("placement_rel") if gx else None
        rng = (max(ys) - min(ys)) if ys else None
        print(f"  {v}: copies span {100 * rng:.2f}% (Y/X {min(ys):.4f} to {max(ys):.4f}); "
              f"{calls_y} of {len(per_y)} exclude the same file (X/X: {calls_x}; chance alone "
              f"gives {0.05 * len(per_y):.1f}); between-copy "
              f"SD beyond sampling {100 * (sd_y or 0):.2f}% (X/X {100 * (sd_x or 0):.2f}%)"
              if ys else f"  {v}: no figures")
        # what predicts it: the loop page's cache colour and the PFN itself, by rank correlation
        pred = {}
        for name, fn in (("loop_pfn_colour", lambda r: r["loop_pfn"] % 32),
                         ("loop_pfn", lambda r: r["loop_pfn"]), ("inode", lambda r: r["inode"])):
            pts = [(fn(r), r["ratio"]["median"]) for r in rows
                   if r["ratio"] and (r["loop_pfn"] is not None or name == "inode")]
            if len(pts) >= 4:
                from scipy.stats import spearmanr
                rho, pv = spearmanr([p[0] for p in pts], [p[1] for p in pts])
                pred[name] = {"rho": float(rho), "p": float(pv)}
                print(f"    {name}: Spearman rho {rho:+.2f} (p {pv:.2f}) over {len(pts)} copies")
        pmd = sorted({r["file_pmd_kb"] for r in rows})
        print(f"    FilePmdMapped of the copies: {pmd} kB")
        report[v] = {"copies": rows, "placement_rel": sd_y, "placement_rel_aa": sd_x,
                     "span": rng, "calls": calls_y, "calls_aa": calls_x, "predictors": pred,
                     "grouped": gy, "grouped_aa": gx}
    return report


def analyse(out):
    index = json.loads((out / "index.json").read_text()) if (out / "index.json").exists() else []
    docs = {}
    for e in index:
        docs[e["file"]] = json.loads(Path(e["file"]).read_text())
    report = {"factors": {}}
    print("Effect of each factor on the undisturbed figure (Y/X - 1, 95% interval; * excludes 0)")
    print("beside the same setting against itself (X/X: first half of the X runs against the second)")
    for factor in FACTORS:
        es = [e for e in index if e["factor"] == factor]
        if not es:
            continue
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
    fr = analyse_file(out)
    if fr is not None:
        report["file"] = fr
    (out / "factors.json").write_text(json.dumps(report, indent=1))
    print(f"\nbench_factors: wrote {out / 'factors.json'}", file=sys.stderr)


def run(out, rounds=32, reps=2, copies=12, factors=ALL_FACTORS, analyse_only=False):
    """Measure the factors named (unless analyse_only) into out, then analyse every run there."""
    if not analyse_only:
        out.mkdir(parents=True, exist_ok=True)
        if set(factors) - {"file"}:
            measure(out, rounds, reps, [f for f in factors if f != "file"])
        if "file" in factors:
            measure_file(out, rounds, copies)
    analyse(out)
