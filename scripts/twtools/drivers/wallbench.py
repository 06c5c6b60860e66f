"""`make bench-walls`: tw ab --wall against an independent program making the same call the
same way, and a name-only profile against the one-instruction filter.

1. build/seccomp_ab (walls/seccomp_ab.c: the rules of walls/profiles/args.json written with
   libseccomp's own C API, bare and filtered processes alternating, each the fastest of 40
   batches of 100 000 getppid calls; what the filter adds is the fastest filtered process
   less the fastest bare one, its floors, as tw ab's undisturbed figure is a floor: on a
   noisy host the median of the pairs' differences moved by 20 ns from run to run while
   tw ab's stayed within 0.1) gives what the filter adds to getppid made three ways:
   through glibc's wrapper (a call into libc that makes the call and returns with `ret`: how
   real programs make it), by the 64-bit syscall instruction inline, and by int 0x80 inline;
2. `tw ab --wall seccomp:args --runtime libseccomp` gives the same from its own rounds, with a
   95% interval, for each shape: 64-libc (glibc's wrapper, tw ab's leading row), 64-syscall
   and 64-int80 inline, and 64-syscall ret (a called stub) beside them.  --runtime libseccomp
   lays the filter out as seccomp_ab's libseccomp does (runc's binary tree and flags would be
   another filter);
3. `tw ab --wall seccomp:allow` and `--wall seccomp:container` give what a one-instruction
   filter and the container profile (its rules name calls only, so the kernel's cache allows
   getppid without running it) add to the same calls.

Each pair made the same way is compared: within AGREE (15%) of each other or not.  What a
wall adds depends on how the call is made (docs/walls.md, "The shape of the call"): a figure
is compared only with one of its own shape.  A benchmark, not a test: the figures are the
host's of the moment, and nothing here asserts on them.
"""
import json
import subprocess
import sys
from pathlib import Path

from ..core import paths

AGREE = 0.15
# (tw ab's variant and shape, seccomp_ab's way): the same call made the same way.
PAIRS = ((("64-libc", "ret"), "64-libc"), (("64-syscall", "inline"), "64-syscall"),
         (("64-int80", "inline"), "64-int80"))
WAYS = ("64-libc", "64-syscall", "64-int80")


def _tw_ab(wall, out, rounds=None, shapes=("ret",), variants=WAYS, runtime=None):
    cmd = [sys.executable, str(paths.ROOT / "scripts" / "tw"), "ab", "--wall", wall,
           "--variants", ",".join(variants), "--ops", "getppid", "--shapes", ",".join(shapes),
           "--format", "json", "--out", str(out)] + (["--rounds", str(rounds)] if rounds else [])
    if runtime:
        cmd += ["--runtime", runtime]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise SystemExit(f"bench-walls: {' '.join(cmd[2:])} failed: "
                         f"{(p.stderr.strip().splitlines() or ['?'])[-1]}")
    return {(r["variant"], r["shape"]): r for r in json.loads(p.stdout)}


def agreement(ind_ns, tw_ns):
    """|tw - independent| / independent, or None where the independent figure is not above
    zero."""
    return abs(tw_ns - ind_ns) / ind_ns if ind_ns > 0 else None


def run(out, pairs=9, rounds=None):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"bench-walls: build/seccomp_ab, {pairs} pairs of bare and filtered processes",
          file=sys.stderr, flush=True)
    p = subprocess.run([str(paths.BUILD / "seccomp_ab"), str(pairs)], capture_output=True,
                       text=True, timeout=3600)
    if p.returncode != 0:
        raise SystemExit(f"bench-walls: build/seccomp_ab failed: {p.stderr.strip()}")
    ind = json.loads(p.stdout)
    (out / "seccomp_ab.json").write_text(p.stdout)
    got = {}
    for wall in ("seccomp:args", "seccomp:allow", "seccomp:container"):
        print(f"bench-walls: tw ab --wall {wall}", file=sys.stderr, flush=True)
        args = (("inline", "ret"), WAYS, "libseccomp") if wall == "seccomp:args" else \
            (("ret",), ("64-libc", "64-syscall"), None)
        got[wall] = _tw_ab(wall, out / wall.replace(":", "-"), rounds, *args)
    lines, summary = [], {"agree_within": AGREE, "pairs": []}
    for (variant, shape), way in PAIRS:
        i, r = ind[way], got["seccomp:args"][(variant, shape)]
        diffs = sorted(f - b for b, f in zip(i["bare_ns"], i["filtered_ns"]))
        rel = agreement(i["added_ns_floor"], r["added_ns"])
        summary["pairs"].append({"tw": [variant, shape], "independent": way,
                                 "independent_added_ns": i["added_ns_floor"],
                                 "independent_median_of_pairs": i["added_ns_median"],
                                 "tw_added_ns": r["added_ns"],
                                 "tw_ci": [r["added_ci_low"], r["added_ci_high"]],
                                 "apart": rel, "agree": rel is not None and rel <= AGREE})
        lines.append(
            f"{way} getppid behind the args profile, made {'through glibc' if shape == 'ret' else 'inline'}: "
            f"seccomp_ab adds {i['added_ns_floor']:.1f} ns (floor to floor; its pairs "
            f"{diffs[0]:.1f} to {diffs[-1]:.1f}, median {i['added_ns_median']:.1f}; bare "
            f"{min(i['bare_ns']):.1f} ns), tw ab {variant} {shape} adds "
            f"{r['added_ns']:.1f} ns [{r['added_ci_low']:.1f}, {r['added_ci_high']:.1f}] "
            f"(bare {r['a_ns']:.1f} ns): "
            + ("unknown" if rel is None else
               f"{rel:.0%} apart, {'within' if rel <= AGREE else 'NOT within'} "
               f"{AGREE:.0%}"))
    ret = got["seccomp:args"].get(("64-syscall", "ret"))
    inl = got["seccomp:args"][("64-syscall", "inline")]
    if ret:
        lines.append(f"64-syscall getppid, the shape of the call: a called stub (ret) adds "
                     f"{ret['added_ns']:.1f} ns [{ret['added_ci_low']:.1f}, "
                     f"{ret['added_ci_high']:.1f}], the instruction inline "
                     f"{inl['added_ns']:.1f} ns [{inl['added_ci_low']:.1f}, "
                     f"{inl['added_ci_high']:.1f}]")
        summary["shape"] = {"ret": ret["added_ns"], "inline": inl["added_ns"]}
    for way in ("64-libc", "64-syscall"):
        a, c = got["seccomp:allow"][(way, "ret")], got["seccomp:container"][(way, "ret")]
        meet = a["added_ci_low"] <= c["added_ci_high"] and c["added_ci_low"] <= a["added_ci_high"]
        lines.append(
            f"{way} getppid: the one-instruction filter adds {a['added_ns']:.1f} ns "
            f"[{a['added_ci_low']:.1f}, {a['added_ci_high']:.1f}], the container profile "
            f"(cached: {'cache bitmap' in (c.get('why') or '')}) {c['added_ns']:.1f} ns "
            f"[{c['added_ci_low']:.1f}, {c['added_ci_high']:.1f}]: "
            + ("within noise of each other" if meet else "apart beyond their intervals"))
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print("\n".join(lines))
    return lines
