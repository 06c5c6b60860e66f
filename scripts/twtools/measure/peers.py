"""Peers side by side, in one session: this project's figure for a glibc getppid() against
what other tools measure of the same call, taken in alternation so that every tool meets
the same moments of the host (`tw bench --peers`).

Each repetition runs, in a shuffled order:
  timewrite   build/syscost-64-libc --op getppid (a called glibc wrapper, as perf bench
              calls it) in as many fresh processes as a default matrix cell has rounds, of the matrix's batch design; the
              repetition's undisturbed and typical figures come from those processes
              (analyse.peers), exactly as a matrix cell's do
  perf bench  one `perf bench syscall basic`: its ns per getppid
  stress-ng   one `stress-ng --x86syscall 1`, where it runs (it refuses non-Intel CPUs:
              its own reason is recorded): ns per call from bogo ops over real time

peers.json keeps every batch and every tool's figure raw; the spreads are computed at
analysis.  Only measuring happens here.
"""
import random
import re
import subprocess
import time
from pathlib import Path

from ..core import files, proc, ui
from ..machine import registry
from .bench import MODES
from .syscost import Sampling, SyscostError, measure, perf_bench_once

SCHEMA = "timewrite-peers/1"
STRESS_OPS = 200000
_STRESS = re.compile(r"x86syscall\s+(\d+)\s+([0-9.]+)\s")


def stress_ng_once(cpu=None, ops=STRESS_OPS):
    """ns per call from one stress-ng --x86syscall run, or (None, why) quoting stress-ng."""
    exe = proc.which("stress-ng")
    if exe is None:
        return None, "stress-ng is not installed (apt-get install stress-ng)"
    cmd = [exe, "--x86syscall", "1", "--x86syscall-ops", str(ops), "--metrics-brief",
           "--timeout", "60"] + (["--taskset", str(cpu)] if cpu is not None else [])
    try:
        p = proc.run(cmd, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"stress-ng failed to run: {e}"
    text = p.stdout + p.stderr
    m = _STRESS.search(text)
    if m and int(m.group(1)) > 0 and float(m.group(2)) > 0:
        return float(m.group(2)) * 1e9 / int(m.group(1)), None
    why = next((ln.split(":", 2)[-1].strip() for ln in text.splitlines()
                if "skipped" in ln or "error" in ln), None)
    return None, f"stress-ng measured nothing ({why or f'exit {p.returncode}'})"


def run_peers(out_dir, reps=10, procs=None, cpu=None, realtime=True):
    """Alternate the tools for `reps` repetitions; write peers.json; return the document."""
    variant = registry.find(64, "libc")
    mode = MODES["default"]
    # As many processes per repetition as a default matrix cell has rounds: the undisturbed
    # figure needs enough of them to meet the host's fast state.
    procs = procs or mode["rounds"]
    data = {"timewrite": [], "perf bench": [], "stress-ng": []}
    why = {}
    t0 = time.monotonic()
    for rep in range(reps):
        order = list(data)
        random.Random(rep).shuffle(order)
        for tool in order:
            if why.get(tool):
                continue
            t = round(time.monotonic() - t0, 3)
            if tool == "timewrite":
                rounds = []
                for k in range(procs):
                    try:
                        r = measure(variant, "getppid", shape="ret", sampling=Sampling(
                            batches=mode["batches"], batch_ms=mode["batch_ms"],
                            warmup_ms=mode["warmup_ms"], cpu=cpu, realtime=realtime))
                    except SyscostError as e:
                        why[tool] = str(e)
                        break
                    if not r.get("supported"):
                        why[tool] = r.get("reason") or "unsupported"
                        break
                    rounds.append({"round": k, "samples_ns": r["samples_ns"],
                                   "disturbed": r.get("disturbed")})
                if rounds and not why.get(tool):
                    data[tool].append({"rep": rep, "t_s": t, "rounds": rounds})
            elif tool == "perf bench":
                ns, w = perf_bench_once(mode["perf_loops"], cpu=cpu, realtime=realtime)
                if ns is None:
                    why[tool] = w
                else:
                    data[tool].append({"rep": rep, "t_s": t, "ns": ns})
            else:
                ns, w = stress_ng_once(cpu=cpu)
                if ns is None:
                    why[tool] = w
                else:
                    data[tool].append({"rep": rep, "t_s": t, "ns": ns})
        ui.progress(f"bench --peers: repetition {rep + 1}/{reps} ({time.monotonic() - t0:.1f} s)")
    doc = {"schema": SCHEMA, "variant": variant, "op": "getppid", "shape": "ret",
           "reps": reps, "procs": procs, "batches": mode["batches"], "batch_ms": mode["batch_ms"],
           "cpu": cpu, "wall_s": round(time.monotonic() - t0, 2),
           "tools": {k: {"reps": v, "why": why.get(k)} for k, v in data.items()}}
    if out_dir is not None:
        files.write_json(Path(out_dir) / "peers.json", doc)
    return doc
