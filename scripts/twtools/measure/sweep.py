"""tw sweep: the seed and TLPI buffer-size sweeps, writev vs write, stdio vs raw.

Four measurements, each a function the orchestrator (tw run) calls with the
results directory and a mode ('quick', 'default', 'long'); each returns its
dict and writes <stem>.json (raw samples and how they were taken) through export():

  seed_sweep   -> sweep_seed.json   seed 1: every supported timewrite variant,
                                    async and O_SYNC, BUFFSIZE 256..131072, ONE
                                    input size for every variant
  tlpi_sweep   -> sweep_tlpi.json   seed 2 (TLPI Table 13-2) scaled down: 1..65536 B
  writev_bench -> writev.json       seed 3: N write() of S bytes vs writev of N
  stdio_bench  -> stdio.json        seed 4: 1-byte write() vs fwrite/fputc/putc_unlocked

Sizes per mode (see docs/sweeps.md for why): MODES below.  An unsupported
variant is a run with supported:false and the program's own reason, never zeros.

Batches and rounds, as syscost's: the seed and TLPI sweeps call each binary in
rounds; every round runs every (variant, mode) once, in an order rotated by
one per round, and each run times every size in `--reps B` passes, the
batches (one pass writes the whole input at one buffer size).  The async
cells get many batches per run over several runs, so that analyse.sweeps can
give each the undisturbed figure (the mean of its fastest batches, with a
jackknife interval over the rounds): the variance lives between runs and in
the host's interruptions of single passes, and both are then sampled.  An
O_SYNC pass waits for the disk: its rows keep two passes per run, and lead
with the typical figure.  Slow drift (page-cache and journal state, a
neighbour on the host) lands on every variant alike instead of on whichever
ran last.  Every run passes --reps > 1, which buys timewrite's untimed
warm-up pass: with --reps 1 the first size (256 B, or 1 B for TLPI: the very
rows the hypothesis is about) would always be the cold first pass of a new
process.  Inside one run the program interleaves its passes over the sizes.
The TLPI sweep's sizes from TLPI_CHEAP_FROM, whose passes are a few calls each, get a second
timewrite run per round with more passes (`parts` in the file), as cheap as they are noisy.
Process start-up (~1 ms) is outside the timed passes, which time themselves.
Between the runs the sweeps probe the host as the matrix does (HostProbes: the reference cell
judged by rounds.HostProbe), and each pass keeps its run's start (t_s), so that the analysis
can give each row the figure of the runs that met the host's fast state beside its own
(docs/sweeps.md, "The host's state").

The stage files hold raw samples only; twtools.analyse.sweeps summarises them
and twtools.analyse.fits fits T(size) = a + b*size per variant and finds the
buffer size above which the mechanisms differ by less than 1% of a call.
"""
import contextlib
import json
import math
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import NamedTuple


from ..core import files, paths, proc, ui
from ..machine import probe
from . import bench, rounds
from .syscost import Sampling, SyscostError, calibrate, measure

SEED_SIZES = [256 << i for i in range(10)]          # 256 .. 131072, the seed's own
TLPI_SIZES = [1 << i for i in range(17)]            # 1 .. 65536
TLPI_BYTES = 100_000_000                            # TLPI wrote 100 million bytes
STDIO_METHODS = ["write", "fwrite", "fputc", "putc_unlocked"]

# Per mode: seed input bytes, async rounds x batches per run and sync passes; TLPI input
# bytes, rounds x batches and variants; writev grid and reps, stdio bytes and reps.  Budgets
# on a 2-core VM where an O_SYNC write costs ~180 us: quick <= ~15 s for all four, default
# <= ~90 s.  An async run of the seed's program at 256 KiB takes 0.07-0.17 s for 12 passes
# over the ten sizes, so its batches are cheap; TLPI's 1-byte pass alone is 64 Ki calls.
MODES = {
    "quick": {
        "seed_bytes": 64 << 10, "seed_rounds": 3, "seed_batches": 6, "seed_sync_reps": 4,
        "tlpi_bytes": 16 << 10, "tlpi_rounds": 3, "tlpi_batches": 2, "tlpi_cheap_batches": 6,
        "tlpi_variants": ["64-libc", "32-int80"],
        "wv_n": [1, 16, 256, "IOV_MAX", "2*IOV_MAX"], "wv_s": [64, 2048], "wv_reps": 3,
        "wv_rounds": 2,
        "stdio_bytes": 102_400, "stdio_reps": 3,
    },
    "default": {
        # More runs of fewer passes, for the same work: a run's passes share its process
        # and its moment, so the interval (a jackknife over runs) narrows with runs.
        # O_SYNC: 2 runs of 2 passes, which lead with their median; a third run cost 10-12 s
        # of the report's 180 (each O_SYNC pass waits for the device 2046 times), beside the
        # neighbour on an AMD EPYC guest, and the sessions' least rounds run it before any
        # deadline can stop them (issue 62)
        "seed_bytes": 256 << 10, "seed_rounds": 36, "seed_batches": 4, "seed_sync_reps": 4,
        "tlpi_bytes": 64 << 10, "tlpi_rounds": 12, "tlpi_batches": 2, "tlpi_cheap_batches": 16,
        "tlpi_variants": ["64-libc", "64-syscall", "64-int80", "32-libc", "32-int80"],
        "wv_n": [1, 4, 16, 64, 256, 1024, "IOV_MAX", "2*IOV_MAX"], "wv_s": [64, 512, 2048, 8192],
        # runs x paired repetitions per run: the undisturbed figure's jackknife is over runs
        "wv_reps": 4, "wv_rounds": 8,
        "stdio_bytes": 1_024_000, "stdio_reps": 5,
    },
    "long": {
        # 1,310,720 B = 5120 x 256 B: the input of the seed's WSL/VMware runs.
        "seed_bytes": 1_310_720, "seed_rounds": 48, "seed_batches": 6, "seed_sync_reps": 10,
        "tlpi_bytes": 256 << 10, "tlpi_rounds": 16, "tlpi_batches": 3, "tlpi_cheap_batches": 24,
        "tlpi_variants": None,  # every supported
        "wv_n": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, "IOV_MAX", "2*IOV_MAX", 4096],
        "wv_s": [64, 256, 512, 1024, 2048, 4096, 8192], "wv_reps": 4, "wv_rounds": 16,
        "stdio_bytes": 1_024_000, "stdio_reps": 15,
    },
}


REPS_PER_CALL = 2   # timewrite --reps: >1 buys its untimed warm-up pass

# The TLPI sweep's cheap sizes: from 1 KiB a pass over the default 64 KiB input is 64 calls or
# fewer, tens of microseconds, and one pass's luck decides its fastest few; they get their own
# timewrite run per round with tlpi_cheap_batches passes, for a few milliseconds more.  On the
# Zen 5 guest 16 passes instead of 2 took those cells' jackknife half-width from a median of
# 1.3-4.7% to 0.9-2.3% (two trials each, 64-libc and 64-syscall, 12 runs).
TLPI_CHEAP_FROM = 1024


def _params(mode):
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
    return MODES[mode]


# --- file system and scratch files ------------------------------------------

def fstype(path):
    """(stat -f -c %T name, mount table name): ext4 reads 'ext2/ext3' to stat -f."""
    st = proc.run(["stat", "-f", "-c", "%T", "--", path], timeout=30)
    a = st.stdout.strip() if st.returncode == 0 else None
    b = None
    if proc.which("findmnt"):
        fm = proc.run(["findmnt", "-n", "-o", "FSTYPE", "-T", path], timeout=30)
        b = fm.stdout.strip().splitlines()[0] if fm.returncode == 0 and fm.stdout.strip() else None
    return a, b


SCRATCH = ".sweep-scratch"
# Together's, apart: its sessions outlive the stages between them, whose own scratch
# directory (SCRATCH) goes when each ends.
SESSIONS_SCRATCH = ".sweeps-sessions-scratch"
# A session before the last runs each sweep this many rounds at least, past its deadline if
# need be: the analysis gives a session's figure from 2 rounds (analyse.sweeps, the same).
SESSION_MIN_ROUNDS = 2


@contextlib.contextmanager
def _scratch(out_dir):
    """Scratch directory inside the results directory (same file system as the results),
    removed when the measurement ends however it ends: an interrupt, a full disk or a failed
    program must not leave megabytes of scratch input beside the results."""
    d = Path(out_dir) / SCRATCH
    d.mkdir(parents=True, exist_ok=True)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _system_failure(e):
    """Whether a failed run failed because the system refused (a full disk, ...): then the
    stage must fail naming it, not record one variant as broken and go on."""
    return isinstance(e, OSError) and e.errno in proc.SYSTEM_ERRNOS


def _input_file(scratch, nbytes):
    """A regular file of nbytes random bytes, used as stdin (a file, not a pipe)."""
    p = scratch / f"input-{nbytes}.bin"
    if not p.exists() or p.stat().st_size != nbytes:
        p.write_bytes(os.urandom(nbytes))
    return p


# --- export -------------------------------------------------------------------

def export(out_dir, stem, obj):
    """Write <stem>.json (raw samples and how they were taken) into out_dir."""
    files.write_json(Path(out_dir) / f"{stem}.json", obj)
    return obj


# --- running timewrite ----------------------------------------------------------

def _run_timewrite(variant, infile, outfile, sync, sizes=None, reps=REPS_PER_CALL, timeout=600):
    """One timewrite run: (json dict, None) or (None, reason)."""
    cmd = [probe.binary("timewrite", variant), "--format", "json", "--reps", reps]
    if sizes:
        cmd += ["--sizes", sizes]
    cmd.append(outfile)
    if sync:
        cmd.append("sync")
    with open(infile, "rb") as stdin:
        p = proc.run(cmd, timeout=timeout, stdin=stdin)
    if p.returncode == probe.EXIT_UNSUPPORTED:
        why = p.stderr.strip().splitlines()
        return None, (why[-1].split("unsupported: ", 1)[-1] if why else "exit 77")
    if p.returncode != 0:
        e = proc.system_errno(p.stderr)
        if e is not None:
            said = p.stderr.strip().splitlines()[-1].removeprefix(f"{Path(cmd[0]).name}: ")
            raise OSError(e, f"{os.strerror(e)} ({Path(cmd[0]).name}: {said})", str(outfile))
        raise RuntimeError(f"{' '.join(map(str, cmd))}: exit {p.returncode}: {p.stderr.strip()}")
    return json.loads(p.stdout), None


def _samples(row, key):
    s = row.get("samples") or {}
    if key in s and s[key] is not None:
        return list(s[key])
    return [row[key]]


def _plan(modes, rounds, batches, sync_reps):
    """{mode: (runs, passes per run)}: async rounds x batches; sync (each O_SYNC pass waits
    for the disk) REPS_PER_CALL passes per run, in the first rounds only."""
    out = {}
    for m in modes:
        if m == "sync":
            out[m] = (-(-sync_reps // REPS_PER_CALL), REPS_PER_CALL)
        else:
            out[m] = (rounds, max(REPS_PER_CALL, batches))
    return out


def interrupted(obj, e):
    """A sweep dict of the rounds a signal cut it at, marked so (tw report says so)."""
    obj["interrupted"] = {"signal": e.name, "rounds": obj.get("rounds_done")}
    obj["stopped"] = "interrupted"
    return obj


# The host's state over the sweeps, as the matrix labels it (measure/bench.py, quiet first):
# the reference cell (64-syscall null ret) run as a probe before every PROBE_EVERY-th timewrite
# run, and once after the last, each judged fast or slow by the matrix's live rule
# (rounds.HostProbe).  A probe is about 8 ms (4 batches of 0.5 ms, 2 ms of warm-up, the process
# started), a seed sweep's async run 70-170 ms and a TLPI one longer: every second run costs
# the default report's sweeps about 1.5 s.  The analysis labels each run by the probes before
# and after it (analyse/sweeps.py, host), as the matrix labels its processes.
PROBE_EVERY = 2
PROBE_BATCHES, PROBE_BATCH_MS, PROBE_WARMUP_MS = 4, 0.5, 2


class HostProbes:
    """The sweeps' probes of the host (one object for both sweeps when they take turns): t0 is
    the clock their runs' t_s and the probes' t_s count from.

    before_run()  probe first when PROBE_EVERY runs have gone by since the last probe
    close()       probe once after the last run, so that it has a probe on each side
    state()       {probes: [{t_s, floor_ns, fast, chain_ns}], every, tol, reference, why}: the
                  sweep file's host_state, in the matrix's form (analyse.percall.host_probes
                  reads both)"""

    def __init__(self, t0=None):
        self.t0 = time.monotonic() if t0 is None else t0
        self.rule = rounds.HostProbe()
        self.probes, self.since, self.why = [], None, None
        self.ref = bench.reference()
        self.cal = None

    def t(self):
        return round(time.monotonic() - self.t0, 3)

    def _probe(self):
        if self.why is not None:
            return
        variant, op, shape = self.ref
        try:
            if self.cal is None:
                if not variant:
                    raise SyscostError("no 64-bit syscall variant in the registry")
                ok, why = probe.check("syscost", variant)
                if not ok:
                    raise SyscostError(f"{variant} cannot run here: {why}")
                self.cal = calibrate(variant, op, shape=shape)
                if self.cal[0] is None:
                    raise SyscostError(f"{variant} {op} gave no TSC rate")
            tsc_hz, _, cpu = self.cal
            t = self.t()
            res = measure(variant, op, shape=shape, sampling=Sampling(
                batches=PROBE_BATCHES, batch_ms=PROBE_BATCH_MS, warmup_ms=PROBE_WARMUP_MS,
                tsc_hz=tsc_hz, cpu=cpu, realtime=True))
        except (SyscostError, OSError, subprocess.TimeoutExpired) as e:
            # the sweeps go on unlabelled, and say why (the analysis then uses every run)
            self.why = f"the host's probe ({variant} {op} {shape}) failed: {e}"
            ui.warn(f"sweeps: {self.why}", "their runs are not labelled by the host's state")
            return
        if not res.get("supported"):
            self.why = f"the host's probe ({variant} {op}) is unsupported: {res.get('reason')}"
            return
        rd = {name: res[k] for k, name in bench.BATCH_KEYS.items() if res.get(k) is not None}
        judged = self.rule.judge(rd)
        self.since = 0
        if judged is None:
            return
        f, step, fast = judged
        rec = {"t_s": t, "floor_ns": f, "fast": fast}
        if step is not None:
            rec["chain_ns"] = step
        self.probes.append(rec)

    def before_run(self):
        if self.since is None or self.since >= PROBE_EVERY:
            self._probe()
        if self.since is not None:
            self.since += 1

    def close(self):
        if self.since:
            self._probe()

    def state(self):
        v, op, shape = self.ref
        return {"probes": list(self.probes), "every": PROBE_EVERY, "tol": rounds.HOST_TOL,
                "level_rank": rounds.LEVEL_RANK,
                "reference": {"variant": v, "op": op, "shape": shape},
                "fast_share": (sum(p["fast"] for p in self.probes) / len(self.probes)
                               if self.probes else None),
                "why": self.why}


class _What(NamedTuple):
    """What one sweep measures (_seed_setup, _tlpi_setup): its file's stem, the variants
    (probe rows), the plan ({mode: (rounds, batches)}), the parts ([(sizes, batches)], one
    timewrite run each per (variant, mode) and round), the input's size and its label."""
    stem: str
    variants: list
    plan: dict
    parts: list
    input_bytes: int
    label: str


def _sweep(out_dir, what, target=None, budget_s=None, judge=None, keep=None, focus=None):
    """Rounds of runs over (variant, mode), as what.plan says; returns the sweep dict.


    target (tw sweep --target, a relative half-width): past the plan's rounds, more rounds of
    the async runs, at the sizes the judge names, until judge(the sweep dict so far) says
    (met, words for the progress line, sizes) that the sweep is within it (cli.stages.
    sweep_judge: its vs_ref rows, or without vs_ref its absolute figures by Stein's rule; this
    layer does not analyse), or that more rounds narrow nothing, or budget_s seconds end
    (_Target).  The O_SYNC runs keep the plan's rounds: they lead with their typical figure.

    keep(the sweep dict): called with the rounds so far, marked interrupted, when a signal
    cuts the sweep (the signal then goes on up), so that they are not lost.  focus (without
    target): the plan's rounds past the first go where the rows are widest (Focus)."""
    with _scratch(out_dir) as scratch:
        sw = _Rounds(out_dir, what, scratch)
        sw.target, sw.budget_s = target, budget_s
        try:
            return _sweep_rounds(sw, what.label, judge, budget_s,
                                 Focus(focus) if focus and target is None else None)
        except ui.Interrupted as e:
            if keep is not None and sw.done:
                keep(interrupted(sw.result(), e))
            raise


def _sweep_rounds(sw, label, judge, budget_s, focus=None):
    """_sweep's rounds: the plan's (past the first, where the rows are widest, with a focus),
    then with a judge more until it says met or the budget ends (_Target); the sweep dict."""
    for r in range(sw.rounds):
        sw.round(r, focus=focus.sizes_for(sw) if focus else None)
    if judge is not None:
        t = _Target(sw, judge, budget_s, sw.t0)
        while t.step():
            sw.round(sw.done, t.sizes)
    sw.host.close()
    return sw.result()


def _sizes_of(spec):
    """The sizes of a timewrite --sizes list (a comma list of sizes and MIN-MAX ranges that
    double from MIN), None for timewrite's own list (256-131072, the seed's)."""
    out = []
    for item in (spec or f"{SEED_SIZES[0]}-{SEED_SIZES[-1]}").split(","):
        lo, _, hi = item.partition("-")
        s, hi = int(lo), int(hi or lo)
        while s <= hi:
            out.append(s)
            s *= 2
    return out


def parts_at(parts, sizes):
    """parts [(timewrite --sizes list or None, batches)] cut to `sizes`: each part's list of
    those of its sizes that are among them, a part with none of them left out."""
    out = []
    for spec, batches in parts:
        keep = [str(x) for x in _sizes_of(spec) if x in sizes]
        if keep:
            out.append((",".join(keep), batches))
    return out


class _Target:
    """--target's rounds past the plan's, for one sweep (_Rounds): the judge (cli.stages.
    sweep_judge; this layer does not analyse) reads the sweep so far and says (met, words for
    the progress line, the sizes more rounds should measure: None every size, [] none, when
    more rounds narrow nothing); rounds go on, of the async runs at those sizes alone, until it
    says met, or no sizes, or budget_s seconds from `start` (a time.monotonic()) end.

    The judge reads the whole sweep each time, which grows with the rounds (0.3-0.5 s for a
    default sweep): it is asked again once the rounds since its last answer took as long as
    that answer did, so that judging takes at most half of the time, and at once when the
    budget has ended.

    step()  judge if due; False when the sweep is done (`stopped` set: target, reach, budget),
            else True: run round sw.done at `sizes`"""

    def __init__(self, sw, judge, budget_s, start):
        self.sw, self.judge, self.budget_s, self.start = sw, judge, budget_s, start
        self.sizes, self.judge_s, self.t_judged = None, 0.0, None

    def _over(self):
        return self.budget_s is not None and time.monotonic() - self.start >= self.budget_s

    def step(self):
        now = time.monotonic()
        if self.t_judged is not None and now - self.t_judged < self.judge_s and not self._over():
            return True
        sw = self.sw
        met, words, sizes = self.judge(sw.snapshot())
        self.t_judged = time.monotonic()
        self.judge_s = self.t_judged - now
        over = self._over()
        if met or sizes == [] or over:
            sw.stopped = "target" if met else "reach" if sizes == [] else "budget"
            ui.progress(f"{sw.label}: after {sw.done} rounds{words}"
                        + (f"; the budget of {self.budget_s:.0f} s ended"
                           if sw.stopped == "budget" else ""))
            return False
        ui.progress(f"{sw.label}: round {sw.done}{words}")
        sw.open_async, self.sizes = True, sizes
        return True


class _Rounds:
    """One sweep's runs, a round at a time: round(r) runs timewrite for each (variant, mode)
    that round r includes, result() gives the sweep dict.  Apart from _sweep so that two
    sweeps can take turns round by round (interleaved).  parts: [(sizes, batches)], one
    timewrite run each per (variant, mode) and round; sizes None is timewrite's own list,
    batches None the plan's."""

    def __init__(self, out_dir, what, scratch, host=None):
        stem, variants, plan, parts, input_bytes, label = what
        self.stem, self.plan, self.parts, self.label = stem, plan, parts, label
        # the host's probes (HostProbes), shared when two sweeps take turns
        self.host = host or HostProbes()
        self.input_bytes, self.scratch = input_bytes, scratch
        self.infile = _input_file(scratch, input_bytes)
        self.fs = fstype(str(out_dir))
        self.out_dir = out_dir
        self.rounds = max(r for r, _ in plan.values())
        self.runs, self.cells, self.clock = {}, [], {}
        self.done, self.stopped = 0, None     # rounds run; why fewer than planned
        self.open_async = False               # --target: async rounds past the plan's
        self.target = self.budget_s = None
        self.sessions, self.sessions_planned = [], 1   # Together's sessions; none alone
        self.focus_log = []                   # Focus: the async sizes its rounds measured
        for v in variants:
            for m in plan:
                key = (v["name"], m)
                self.runs[key] = {"variant": v["name"], "bits": v["bits"],
                                  "mechanism": v["mechanism"], "mode": m,
                                  "supported": v["supported"], "reason": v["reason"],
                                  "reps": plan[m][0] * plan[m][1], "rounds": plan[m][0],
                                  "batches": plan[m][1], "raw": {}}
                if v["supported"]:
                    self.cells.append(key)
        self.t0 = time.monotonic()

    def round(self, r, sizes=None, focus=None):
        """Round r: each (variant, mode) it includes, every part; with sizes (a --target round
        past the plan's, _Target), each part at those of its sizes alone, a part with none of
        them not at all.  focus (a round inside the plan, Focus): the async runs at those sizes
        alone ([]: none), the O_SYNC runs at every size, as planned."""
        k = r % len(self.cells) if self.cells else 0
        parts = self.parts if sizes is None else parts_at(self.parts, sizes)
        focused = parts if focus is None else parts_at(self.parts, focus)
        for key in self.cells[k:] + self.cells[:k]:
            run = self.runs[key]
            if not run["supported"] or (r >= self.plan[key[1]][0]
                                        and not (self.open_async and key[1] == "async")):
                continue
            for spec, batches in (focused if key[1] == "async" else parts):
                if not self._part(run, key, r, spec, batches or self.plan[key[1]][1]):
                    break
        self._clock(r)
        self.done = r + 1
        if not self.open_async:
            ui.progress(f"{self.label}: round {r + 1}/{self.rounds} done "
                        f"({time.monotonic() - self.t0:.1f} s)")

    def _part(self, run, key, r, sizes, batches):
        """One timewrite run of (variant, mode) key over `sizes`, its passes added to the run's
        rows; False when the variant turned out unsupported or failed (recorded in run)."""
        out = self.scratch / f"{self.stem}-{key[0]}-{key[1]}.out"
        self.host.before_run()
        t_s = self.host.t()
        try:
            res, why = _run_timewrite(key[0], self.infile, out, key[1] == "sync", sizes,
                                      reps=batches)
        except (RuntimeError, ValueError, OSError, subprocess.TimeoutExpired) as e:
            if _system_failure(e):
                raise
            # One broken variant must not cost the others' measurements.
            res, why = None, f"run failed: {e}"
            run["error"] = str(e)
            ui.warn(f"{self.label}: {key[0]} {key[1]}: {e}", "its run is recorded as failed")
        if res is None:
            run["supported"], run["reason"] = False, why
            run["raw"] = {}        # partial rounds would mislead
            if "error" not in run:
                ui.progress(f"{self.label}: {key[0]} {key[1]}: unsupported: {why}")
            return False
        run.setdefault("program_mode", res.get("mode"))
        if res.get("input_bytes") not in (None, self.input_bytes):
            raise RuntimeError(f"{key[0]} read {res.get('input_bytes')} B, not "
                               f"{self.input_bytes}")
        for row in res["rows"]:
            raw = run["raw"].setdefault(row["buffsize"], {
                "calls": row["calls"], "user_s": [], "sys_s": [], "real_s": [], "round": [],
                "t_s": []})
            for f in ("user_s", "sys_s", "real_s"):
                raw[f] += _samples(row, f)
            # which run each pass came from: the undisturbed figure's jackknife leaves
            # whole runs out; and when the run started (t_s, on the probes' clock), which
            # the probes on each side label
            raw["t_s"] += [t_s] * (len(raw["real_s"]) - len(raw["round"]))
            raw["round"] += [r] * (len(raw["real_s"]) - len(raw["round"]))
        return True

    def _clock(self, r):
        """hostclock once at the end of round r: the host's speed for user code at that
        moment, beside which the cells' move between runs is read (analyse.sweeps.host_clock).
        A missing or failing hostclock is recorded with its reason; the sweep goes on."""
        c = self.clock
        if c.get("supported") is False:
            return
        res, why = _hostclock()
        if res is None:
            self.clock = {"supported": False, "reason": why}
            ui.warn(f"{self.label}: hostclock: {why}",
                    "the sweep goes on without the host's own speed beside it")
            return
        c.setdefault("iterations", res["iterations"])
        c.setdefault("batch_ns", []).extend(res["batch_ns"])
        c.setdefault("round", []).extend([r] * len(res["batch_ns"]))

    def snapshot(self, interleaved_with=None):
        """The sweep dict of the rounds so far, for a judge to read at once while the sweep
        goes on (result() takes the runs' raw samples: it is given copies of the runs)."""
        keep = self.runs
        self.runs = {k: dict(r) for k, r in keep.items()}
        try:
            return self.result(interleaved_with)
        finally:
            self.runs = keep

    def result(self, interleaved_with=None):
        out_runs = []
        for key in self.runs:
            run = self.runs[key]
            raw = run.pop("raw")
            run["rows"] = [{"buffsize": bs, "calls": raw[bs]["calls"],
                            "calls_expected": math.ceil(self.input_bytes / bs),
                            "samples": {f: raw[bs][f] for f in ("user_s", "sys_s", "real_s",
                                                                 "round", "t_s")}}
                           for bs in sorted(raw)]
            if run["supported"]:
                run["reason"] = None
            out_runs.append(run)
        plan = self.plan
        interleave = ("rounds of one timewrite run per (variant, mode), order rotated per "
                      "round; each run times every size in --reps passes (the batches); a "
                      "mode with fewer runs joins the first rounds only")
        if interleaved_with:
            interleave += (f"; its rounds took turns with those of {interleaved_with}, spread "
                           "evenly over both sweeps' time, so that each sees the host over "
                           "the whole of it")
        return {"schema": "timewrite-sweep/2", "input_bytes": self.input_bytes,
                "reps": max(a * b for a, b in plan.values()),
                "reps_by_mode": {m: a * b for m, (a, b) in plan.items()},
                "rounds_by_mode": {m: a for m, (a, b) in plan.items()},
                "batches_by_mode": {m: b for m, (a, b) in plan.items()},
                "rounds": self.rounds, "interleave": interleave,
                "target": self.target, "budget_s": self.budget_s,
                "rounds_done": self.done, "stopped": self.stopped,
                "parts": [{"sizes": sz or "timewrite's own", "batches": b or "batches_by_mode"}
                          for sz, b in self.parts],
                "outfile_dir": str(Path(self.out_dir).resolve()), "fstype": self.fs[0],
                "fstype_mount": self.fs[1],
                "seconds": round(sum(x["seconds"] for x in self.sessions), 2) if self.sessions
                else round(time.monotonic() - self.t0, 2),
                "sessions": self.sessions, "sessions_planned": self.sessions_planned,
                "host_clock": dict(self.clock, supported=self.clock.get("supported", True),
                                   batches=CLOCK_BATCHES, program="hostclock"),
                "host_state": self.host.state(),
                "focus": list(self.focus_log),
                "runs": out_runs}


# hostclock per round: 20 batches of 100,000 multiply-adds, about 2 ms on a 4 GHz core.
CLOCK_BATCHES = 20


def _exit_said(path, p):
    """'<program> exit N: <its last line on stderr>', for a build/ program that failed."""
    why = p.stderr.strip().splitlines()
    return f"{path.name} exit {p.returncode}: {why[-1] if why else 'no message'}"


def _hostclock(timeout=60):
    """(json, None) of one build/hostclock run, or (None, reason)."""
    path = paths.BUILD / "hostclock"
    if not path.exists():
        return None, f"{path.name} is not built (run make)"
    try:
        p = proc.run([path, "--batches", CLOCK_BATCHES], timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"cannot run {path.name}: {e}"
    if p.returncode != 0:
        return None, _exit_said(path, p)
    try:
        obj = json.loads(p.stdout)
        ok = (isinstance(obj.get("batch_ns"), list) and isinstance(obj.get("iterations"), int)
              and all(isinstance(x, (int, float)) and x > 0 for x in obj["batch_ns"]))
    except (ValueError, AttributeError):
        ok = False
    if not ok:
        return None, f"{path.name} printed something other than its JSON"
    return obj, None


# A deadline (tw run's share of its time) never cuts a sweep below this many rounds: the
# sync passes run in the first three, and the jackknife over rounds needs a few.
MIN_ROUNDS = 4


def _order(a, b):
    """Both sweeps' rounds in the order they take turns: round r of R at (r + 0.5) / R of its
    own sweep, as [(place, which, r)] with which 0 for a and 1 for b."""
    return sorted([((r + 0.5) / a.rounds, 0, r) for r in range(a.rounds)]
                  + [((r + 0.5) / b.rounds, 1, r) for r in range(b.rounds)])


class Focus:
    """A default run's sweeps spend their rounds where their rows are widest (issue 73): past
    the first FOCUS_FROM rounds of a sweep, its async runs measure only the sizes whose vs_ref
    rows are still wider than the report's ±2% (the judge: cli.stages.sweep_judge at
    analyse.sweeps.REPORT_TARGET; this layer does not analyse), none once every row is within
    it, while its O_SYNC runs keep every size as planned.  A row already within it has its
    figure; the time goes to the rows that have not, and the rounds left over end the sweep
    sooner.  The judge reads the whole sweep (0.3-0.5 s for a default sweep), so it is asked
    at most every FOCUS_EVERY rounds of a sweep."""
    FOCUS_FROM = 4
    FOCUS_EVERY = 2

    def __init__(self, judge):
        self.judge, self.sizes, self.at = judge, {}, {}

    def sizes_for(self, sw):
        """The async sizes round sw.done of sweep sw should measure (None: every size)."""
        if sw.done < self.FOCUS_FROM:
            return None
        key = id(sw)
        if self.sizes.get(key) == []:
            return []           # every row within it: rows not measured do not widen
        if key not in self.at or sw.done - self.at[key] >= self.FOCUS_EVERY:
            met, words, sizes = self.judge(sw.snapshot())
            self.sizes[key], self.at[key] = ([] if met else list(sizes or [])), sw.done
            sw.focus_log.append({"round": sw.done, "sizes": self.sizes[key]})
        return self.sizes[key]


class _Turns:
    """Two _Rounds taking turns (_order), run in one session or several: a session runs the
    order on from where the last one stopped.  The seed sweep's short rounds then spread over
    the TLPI sweep's long ones instead of all running in its first 20 s: the host's fast state
    moves over minutes, and a figure taken in 20 s sees one moment of it (docs/sweeps.md, "How
    the sweeps reproduce").

    A deadline (a time.monotonic(), tw run's share of its time) stops a session once each
    sweep has MIN_ROUNDS: no round starts that its sweep's mean round so far says would end
    past it (Together says so in each result's `stopped`, the rounds done in `rounds_done`)."""

    def __init__(self, a, b, focus=None):
        self.a, self.b, self.focus = a, b, focus
        self.order, self.pos, self.took = _order(a, b), 0, ([], [])

    def session(self, deadline=None, share=1.0, each=0):
        """Run turns until `share` of the order is done, or no round fits before deadline (once
        each sweep has MIN_ROUNDS, or, in sessions, `each` rounds in this one); 'deadline'
        when the deadline stopped it, else None."""
        end = len(self.order) if share >= 1 else max(self.pos, math.ceil(len(self.order) * share))
        first = (self.a.done, self.b.done) if each else None
        while self.pos < end:
            _, which, r = self.order[self.pos]
            # In one session, the other sweep's minimum too: its turns come between this
            # one's, and a slow host once stopped the TLPI sweep at 3 rounds when the seed
            # sweep's next turn came past the deadline first.  In sessions, `each` of both
            # in every one (two sessions of SESSION_MIN_ROUNDS make the minimum).
            other = (self.a, self.b)[1 - which]
            if proc.next_round_past(deadline, self.took[which], r, MIN_ROUNDS) and (
                    all(x.done - f >= each for x, f in zip((self.a, self.b), first)) if each
                    else other.done >= min(MIN_ROUNDS, other.rounds)):
                return "deadline"
            t = time.monotonic()
            sw = (self.a, self.b)[which]
            sw.round(r, focus=self.focus.sizes_for(sw) if self.focus else None)
            self.took[which].append(time.monotonic() - t)
            self.pos += 1
        return None


def _pick_variants(names=None, program="timewrite"):
    allv = probe.check_all(program)
    if names is None:
        return allv
    by = {v["name"]: v for v in allv}
    missing = [n for n in names if n not in by]
    if missing:
        raise ValueError(f"unknown variant(s) {', '.join(missing)}; see variants/registry")
    return [by[n] for n in names]


def _seed_setup(mode, variants=None, rounds=None, batches=None, input_bytes=None):
    p = _params(mode)
    input_bytes = input_bytes or p["seed_bytes"]
    plan = _plan(["async", "sync"], rounds or p["seed_rounds"], batches or p["seed_batches"],
                 p["seed_sync_reps"])
    vs = _pick_variants(variants)
    ui.progress(f"seed sweep: {sum(v['supported'] for v in vs)} variants x sync/async, "
                f"{input_bytes} B input, runs x passes per cell: "
                + ", ".join(f"{m} {a}x{b}" for m, (a, b) in plan.items()))
    return _What("seed", vs, plan, [(None, None)], input_bytes, "seed sweep")


def _seed_export(out_dir, mode, obj):
    obj.update(mode=mode, sizes=SEED_SIZES, page_size=os.sysconf("SC_PAGE_SIZE"))
    return export(out_dir, "sweep_seed", obj)


def _tlpi_setup(mode, variants=None, rounds=None, batches=None, input_bytes=None):
    p = _params(mode)
    input_bytes = input_bytes or p["tlpi_bytes"]
    plan = _plan(["async"], rounds or p["tlpi_rounds"], batches or p["tlpi_batches"], 0)
    vs = _pick_variants(variants or p["tlpi_variants"])
    cheap = p["tlpi_cheap_batches"]
    ui.progress(f"TLPI sweep: {len(vs)} variants, {input_bytes} B input "
                f"(TLPI: {TLPI_BYTES} B), {plan['async'][0]} runs x {plan['async'][1]} passes "
                f"per cell ({cheap} from {TLPI_CHEAP_FROM} B)")
    parts = [(f"{TLPI_SIZES[0]}-{TLPI_CHEAP_FROM // 2}", None),
             (f"{TLPI_CHEAP_FROM}-{TLPI_SIZES[-1]}", cheap)]
    return _What("tlpi", vs, plan, parts, input_bytes, "TLPI sweep")


def _tlpi_export(out_dir, mode, obj):
    obj.update(mode=mode, sizes=TLPI_SIZES, tlpi_bytes=TLPI_BYTES,
               page_size=os.sysconf("SC_PAGE_SIZE"), scale_factor=TLPI_BYTES / obj["input_bytes"])
    return export(out_dir, "sweep_tlpi", obj)


def seed_sweep(out_dir, mode="default", variants=None, rounds=None, batches=None,
               input_bytes=None, **when):
    """Seed 1: every (or the named) variant, async and sync, BUFFSIZE 256..131072.  when:
    _sweep's target, budget_s, judge and focus, as tw run and tw sweep pass them."""
    what = _seed_setup(mode, variants, rounds, batches, input_bytes)
    return _seed_export(out_dir, mode, _sweep(
        out_dir, what, keep=lambda obj: _seed_export(out_dir, mode, obj), **when))


def tlpi_sweep(out_dir, mode="default", variants=None, rounds=None, batches=None,
               input_bytes=None, **when):
    """Seed 2 (TLPI Table 13-2) scaled down: async only, sizes 1..65536.  when: _sweep's
    target, budget_s, judge and focus, as tw run and tw sweep pass them."""
    what = _tlpi_setup(mode, variants, rounds, batches, input_bytes)
    return _tlpi_export(out_dir, mode, _sweep(
        out_dir, what, keep=lambda obj: _tlpi_export(out_dir, mode, obj), **when))


class Together:
    """The seed and TLPI sweeps measured at once, their rounds taking turns, in sessions at
    different moments of a run: `tw run` measures the first half of their rounds after the
    matrix and the rest later, before the legs.

    Why two moments: a copy-bound row (a write of 8 KiB or more, whose time is the copy into
    the page cache) moves with the host's memory, in states that last tens of seconds.  On
    the AMD EPYC guest (family 25, model 17) one default run's seed sweep met a state in which
    every row of 8 KiB or more cost 3-19% more (the int 0x80 rows, whose VM exit dilutes it,
    least), in each of its 11 rounds, and the rows of 4 KiB or less at most 1.3% more; the
    next run, three minutes later, met the fast state, and 29 of 70 async rows missed their
    rerun on intervals of +-1-3%.  The writev stage of the first run, 40 s after its sweep,
    wrote 8 KiB at its rerun's cost already (within 2%).  A sweep measured at one moment
    cannot see a state that holds the whole moment; measured at two, a minute apart, its rows
    carry both (analyse/sweeps.py, "sessions").

    session(deadline, share)  run turns until share of them (the last session: all), or
                              the deadline; write both files (the rounds so far), return both
    close()                   remove the scratch directory

    target, budget_s, judge (tw run --target): the last session, its turns done, adds rounds
    past the plan's to each sweep the judge does not yet call met, at the sizes it names,
    taking turns (_Target, as _sweep's); the budget counts both sweeps' time, every session's,
    and is theirs together."""

    def __init__(self, out_dir, mode="default", sessions=2, target=None, budget_s=None,
                 judge=None, focus=None):
        self.out_dir, self.mode = out_dir, mode
        self.scratch = Path(out_dir) / SESSIONS_SCRATCH
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.host = HostProbes()
        try:
            self.a = _Rounds(out_dir, _seed_setup(mode), self.scratch, host=self.host)
            self.b = _Rounds(out_dir, _tlpi_setup(mode), self.scratch, host=self.host)
        except BaseException:
            self.close()
            raise
        for x in (self.a, self.b):
            x.sessions_planned = sessions
            x.target, x.budget_s = target, budget_s
        self.judge = judge if target is not None else None
        # without --target, the plan's rounds go where the rows are widest (Focus)
        self.turns = _Turns(self.a, self.b, Focus(focus) if focus and target is None else None)
        self.t0 = time.monotonic()

    def session(self, deadline=None, share=0.5):
        """One session: the turns on from the last session's, until `share` of all of them are
        done (the last session: until every one is) or the deadline.  Both files are written
        with every round so far, so that a run cut later still has this session's."""
        last = len(self.a.sessions) + 1 >= self.a.sessions_planned
        start, first = time.monotonic(), (self.a.done, self.b.done)
        # each of two sessions gives each sweep rounds enough for a figure of its own, past
        # its deadline if need be (beside a noisy neighbour the stages between them ran 10 s
        # late and left the second none)
        try:
            stopped = self.turns.session(deadline, 1.0 if last else share,
                                         SESSION_MIN_ROUNDS if self.a.sessions_planned > 1
                                         else 0)
            if last and not stopped and self.judge is not None:
                self._past_plan(start)
            self.host.close()       # the session's last runs get a probe after them
        except ui.Interrupted as e:
            # the rounds of both sweeps so far, this session's too, kept and marked
            took = time.monotonic() - start
            for x, r0 in zip((self.a, self.b), first):
                x.sessions.append({"rounds": [r0, x.done], "start_s": round(start - self.t0, 2),
                                   "seconds": round(took, 2)})
            for x, export_, other in ((self.a, _seed_export, "the TLPI sweep"),
                                      (self.b, _tlpi_export, "the seed sweep")):
                if x.done:
                    export_(self.out_dir, self.mode,
                            interrupted(x.snapshot(interleaved_with=other), e))
            raise
        took = time.monotonic() - start
        for x, r0 in zip((self.a, self.b), first):
            x.sessions.append({"rounds": [r0, x.done], "start_s": round(start - self.t0, 2),
                               "seconds": round(took, 2)})
        if stopped and last:
            self.a.stopped = self.b.stopped = "deadline"
            ui.progress(f"sweeps: stopped at the report's time for them: the seed sweep after "
                        f"{self.a.done} of {self.a.rounds} rounds, the TLPI sweep after "
                        f"{self.b.done} of {self.b.rounds}")
        elif not last:
            ui.progress(f"sweeps: first session done in {took:.1f} s (the seed sweep's rounds "
                        f"1-{self.a.done}, the TLPI sweep's 1-{self.b.done}); the rest later "
                        "in the run, at another moment of the host's memory")
        ra = self.a.snapshot(interleaved_with="the TLPI sweep")
        rb = self.b.snapshot(interleaved_with="the seed sweep")
        return _seed_export(self.out_dir, self.mode, ra), _tlpi_export(self.out_dir, self.mode, rb)

    def _past_plan(self, start):
        """--target: rounds past the plan's while a sweep's _Target goes on, the next round
        always the sweep's that has had the less time past the plan so far: beside the noisy
        neighbour on the AMD EPYC guest a seed round at its wide copy-bound sizes took about a
        tenth of a second, a TLPI round at its small sizes about 3 s, and taking turn by turn
        would give the seed sweep a TLPI sweep's few.
        The budget counts from the sessions' time so far (this one's from `start`)."""
        began = start - sum(x["seconds"] for x in self.a.sessions)
        goes = {i: _Target(x, self.judge, self.a.budget_s, began)
                for i, x in enumerate((self.a, self.b))}
        spent = {i: 0.0 for i in goes}
        while goes:
            i = min(goes, key=spent.get)
            t0 = time.monotonic()
            t = goes[i]
            if t.step():
                t.sw.round(t.sw.done, t.sizes)
            else:
                del goes[i]
            spent[i] += time.monotonic() - t0

    @property
    def seconds(self):
        """The last session's seconds."""
        return self.a.sessions[-1]["seconds"] if self.a.sessions else 0.0

    def close(self):
        shutil.rmtree(self.scratch, ignore_errors=True)


# --- wvbench ----------------------------------------------------------------------

class BenchFailed(RuntimeError):
    """wvbench ran and failed: not an unsupported bitness, a failure the stage must report."""


def _wvbench(bits, args, timeout=600):
    """(json, None) for one build/wvbench-<bits> run, or (None, reason) when this bitness
    cannot run here (not built, not executable: no IA32 emulation).  A run that starts and
    fails is no fact about the machine: OSError when the system refused its writes (ENOSPC,
    ...), else BenchFailed, both naming the program and its message."""
    path = paths.BUILD / f"wvbench-{bits}"
    if not path.exists():
        return None, f"{path.name} is not built (run make)"
    try:
        p = proc.run([path] + list(args), timeout=timeout)
    except OSError as e:
        return None, f"cannot execute {path.name}: {e.strerror} (32-bit programs need IA32 emulation)"
    if p.returncode != 0:
        msg = _exit_said(path, p)
        e = proc.system_errno(p.stderr)
        if e is not None:
            raise OSError(e, f"{os.strerror(e)} ({msg})",
                          str(next((a for a in args if isinstance(a, Path)), path)))
        raise BenchFailed(msg)
    return json.loads(p.stdout), None


def _grid_n(spec, iov_max):
    out = []
    for n in spec:
        if n == "IOV_MAX":
            n = iov_max
        elif n == "2*IOV_MAX":
            n = 2 * iov_max
        if n not in out:
            out.append(n)
    return sorted(out)


def writev_bench(out_dir, mode="default", bits=(64, 32), n_buffers=None, sizes=None, reps=None,
                 rounds=None):
    """Seed 3: N write() calls of S bytes against writev() of N buffers (split at IOV_MAX).

    In rounds: each round runs wvbench once per (bits, N, S), in an order rotated by one per
    round, each run timing `reps` paired repetitions (the batches); samples.round says which
    run each came from, as in the seed sweep, so that the undisturbed figure's jackknife
    leaves whole runs out.

    A bitness that cannot run here is a row with supported:false and the reason.  One whose
    wvbench fails is a row with failed:true and the program's message, and the stage raises
    BenchFailed after writing what it measured: a failure is never labelled "unsupported"."""
    p = _params(mode)
    iov_max = os.sysconf("SC_IOV_MAX")
    ns = n_buffers or _grid_n(p["wv_n"], iov_max)
    ss = sizes or p["wv_s"]
    reps = reps or p["wv_reps"]
    rounds = rounds or p["wv_rounds"]
    fs_stat, fs_mount = fstype(str(out_dir))
    got, unsupported, failed = {}, {}, {}
    t0 = time.monotonic()
    ui.progress(f"writev: N in {ns} x S in {ss}, {rounds} runs x {reps} reps, bits {list(bits)}")
    cells = [(b, n, s) for b in bits for n in ns for s in ss]
    with _scratch(out_dir) as scratch:
        for r in range(rounds):
            k = r % len(cells) if cells else 0
            for b, n, s in cells[k:] + cells[:k]:
                if b in unsupported or b in failed:
                    continue
                try:
                    res, why = _wvbench(b, ["writev", "--buffers", n, "--size", s, "--reps",
                                            reps, "--file", scratch / f"writev-{b}.out"])
                except BenchFailed as e:
                    failed[b] = str(e)
                    ui.warn(f"writev: {b}-bit: {e}", "the stage is recorded as failed")
                    continue
                if res is None:
                    unsupported[b] = why
                    ui.progress(f"writev: {b}-bit: unsupported: {why}")
                    continue
                row = got.setdefault((b, n, s), {
                    "bits": b, "supported": True, "reason": None, "n_buffers": n, "size": s,
                    "bytes": n * s, "iov_max": res["iov_max"], "inner": res["inner"],
                    "write_calls": res["write_calls_per_op"],
                    "writev_calls": res["writev_calls_per_op"],
                    # paired: the same rep ran both, interleaved
                    "samples": {"write_ns": [], "writev_ns": [], "round": []}})
                sm = row["samples"]
                sm["write_ns"] += res["samples"]["write_ns"]
                sm["writev_ns"] += res["samples"]["writev_ns"]
                sm["round"] += [r] * (len(sm["write_ns"]) - len(sm["round"]))
            if rounds > 1:
                ui.progress(f"writev: round {r + 1}/{rounds} done ({time.monotonic() - t0:.1f} s)")
    rows = [got[c] for c in cells if c in got]
    for b, why in unsupported.items():
        rows = [r for r in rows if r["bits"] != b]
        rows.append({"bits": b, "supported": False, "reason": why})
    for b, why in failed.items():
        rows = [r for r in rows if r["bits"] != b]
        rows.append({"bits": b, "supported": False, "failed": True, "reason": f"failed: {why}"})
    obj = {"schema": "timewrite-writev/2", "mode": mode, "reps": reps * rounds,
           "rounds": rounds, "reps_per_round": reps, "iov_max": iov_max,
           "n_buffers": ns, "sizes": ss,
           "unit": "write_ns/writev_ns: ns to write one set of n_buffers buffers of size bytes",
           "outfile_dir": str(Path(out_dir).resolve()), "fstype": fs_stat,
           "fstype_mount": fs_mount, "seconds": round(time.monotonic() - t0, 2), "rows": rows}
    export(out_dir, "writev", obj)
    if failed:
        raise BenchFailed("; ".join(failed.values()))
    return obj


def stdio_bench(out_dir, mode="default", bits=(64, 32), nbytes=None, reps=None):
    """Seed 4: the same bytes by 1-byte write() calls and by fwrite/fputc/putc_unlocked.
    Failures as in writev_bench."""
    p = _params(mode)
    nbytes = nbytes or p["stdio_bytes"]
    reps = reps or p["stdio_reps"]
    fs_stat, fs_mount = fstype(str(out_dir))
    rows, failed = [], []
    t0 = time.monotonic()
    with _scratch(out_dir) as scratch:
        for b in bits:
            ui.progress(f"stdio: {b}-bit, {nbytes} B x {len(STDIO_METHODS)} methods, {reps} reps")
            try:
                res, why = _wvbench(b, ["stdio", "--bytes", nbytes, "--reps", reps,
                                        "--file", scratch / f"stdio-{b}.out"])
            except BenchFailed as e:
                failed.append(str(e))
                rows.append({"bits": b, "supported": False, "failed": True, "reason": f"failed: {e}"})
                ui.warn(f"stdio: {b}-bit: {e}", "the stage is recorded as failed")
                continue
            if res is None:
                rows.append({"bits": b, "supported": False, "reason": why})
                ui.progress(f"stdio: {b}-bit: unsupported: {why}")
                continue
            for m in res["methods"]:
                calls = m["calls"]
                rows.append({"bits": b, "supported": True, "reason": None, "method": m["method"],
                             "calls": calls if calls is not None else
                             ui.blind(res.get("calls_source", "no write counter")),
                             "calls_expected": (nbytes if m["method"] == "write"
                                                else math.ceil(nbytes / res["st_blksize"])),
                             "st_blksize": res["st_blksize"],
                             "samples": {k: list(v) for k, v in m["samples"].items()}})
    obj = {"schema": "timewrite-stdio/2", "mode": mode, "bytes": nbytes, "reps": reps,
           "calls_source": "syscw in /proc/self/io",
           "outfile_dir": str(Path(out_dir).resolve()), "fstype": fs_stat,
           "fstype_mount": fs_mount, "seconds": round(time.monotonic() - t0, 2), "rows": rows}
    export(out_dir, "stdio", obj)
    if failed:
        raise BenchFailed("; ".join(failed))
    return obj
