"""`make bench-walls`: tw ab --wall against an independent program, and a name-only profile
against the one-instruction filter.

1. build/seccomp_ab (walls/seccomp_ab.c: the rules of walls/profiles/args.json written with
   libseccomp's own C API, bare and filtered processes alternating, each the fastest of 40
   batches of 100 000 getppid calls) gives what the filter adds to getppid through the 64-bit
   syscall and through int 0x80 from 64-bit code;
2. `tw ab --wall seccomp:args --shapes inline,ret` gives the same from its own rounds, with a
   95% interval: the inline shape is seccomp_ab's own (the instruction in the timed loop), and
   is the one compared; the ret shape (a called stub, as libc's wrappers are called) is shown
   beside it, since a wall adds more to it (the kernel's longer way in leaves the return's
   prediction worse: +71 ns against +59 ns on the project's AMD guest);
3. `tw ab --wall seccomp:allow` and `--wall seccomp:container` give what a one-instruction
   filter and the container profile (its rules name calls only, so the kernel's cache allows
   getppid without running it) add to the same calls.

It prints each figure and whether the two measurements of the same filter agree within 25%,
and whether the container profile's interval meets the allow-all filter's.  A benchmark, not a
test: the figures are the host's of the moment, and nothing here asserts on them.
"""
import json
import subprocess
import sys
from pathlib import Path

from ..core import paths

WAYS = ("64-syscall", "64-int80")
AGREE = 0.25


def _tw_ab(wall, out, rounds=None, shapes=("ret",)):
    cmd = [sys.executable, str(paths.ROOT / "scripts" / "tw"), "ab", "--wall", wall,
           "--variants", ",".join(WAYS), "--ops", "getppid", "--shapes", ",".join(shapes),
           "--format", "json", "--out", str(out)] + (["--rounds", str(rounds)] if rounds else [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise SystemExit(f"bench-walls: {' '.join(cmd[2:])} failed: "
                         f"{(p.stderr.strip().splitlines() or ['?'])[-1]}")
    return {(r["variant"], r["shape"]): r for r in json.loads(p.stdout)}


def run(out, pairs=5, rounds=None):
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
        got[wall] = _tw_ab(wall, out / wall.replace(":", "-"), rounds,
                           ("inline", "ret") if wall == "seccomp:args" else ("ret",))
    lines = []
    for way in WAYS:
        i = ind[way]
        diffs = sorted(f - b for b, f in zip(i["bare_ns"], i["filtered_ns"]))
        r, ret = got["seccomp:args"][(way, "inline")], got["seccomp:args"][(way, "ret")]
        med, lo, hi = r["added_ns"], r["added_ci_low"], r["added_ci_high"]
        rel = abs(med - i["added_ns_median"]) / i["added_ns_median"] \
            if i["added_ns_median"] > 0 else None
        lines.append(
            f"{way} getppid behind the args profile: seccomp_ab adds "
            f"{i['added_ns_median']:.1f} ns (pairs {diffs[0]:.1f} to {diffs[-1]:.1f}; bare "
            f"{min(i['bare_ns']):.1f} ns), tw ab inline adds {med:.1f} ns [{lo:.1f}, {hi:.1f}] "
            f"(bare {r['a_ns']:.1f} ns): "
            + ("unknown" if rel is None else
               f"{rel:.0%} apart, {'within' if rel <= AGREE else 'NOT within'} 25%")
            + f"; tw ab ret adds {ret['added_ns']:.1f} ns [{ret['added_ci_low']:.1f}, "
              f"{ret['added_ci_high']:.1f}] (bare {ret['a_ns']:.1f} ns)")
    for way in WAYS:
        a, c = got["seccomp:allow"][(way, "ret")], got["seccomp:container"][(way, "ret")]
        meet = a["added_ci_low"] <= c["added_ci_high"] and c["added_ci_low"] <= a["added_ci_high"]
        lines.append(
            f"{way} getppid: the one-instruction filter adds {a['added_ns']:.1f} ns "
            f"[{a['added_ci_low']:.1f}, {a['added_ci_high']:.1f}], the container profile "
            f"(cached: {'cache bitmap' in (c.get('why') or '')}) {c['added_ns']:.1f} ns "
            f"[{c['added_ci_low']:.1f}, {c['added_ci_high']:.1f}]: "
            + ("within noise of each other" if meet else "apart beyond their intervals"))
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return lines
