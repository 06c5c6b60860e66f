"""Many machines: one small digest per results directory, then the fleet's groups, the spread
inside each group, the machines far from their group, and the facts that explain the
differences, ranked.

A fleet is hundreds or thousands of results directories fetched from machines the user does
not fully control, so two things rule this module:

  cheap   a digest reads only meta.json, fingerprint.json (both small, fully validated by
          twtools.analyse.schema) and percall.json, and computes only the figure the fleet
          compares: each cell's undisturbed cost.  percall.analyse() computes every figure
          of the matrix (medians with clustered intervals, paired ratios, penalties), about
          2 s per default-mode directory; the digest takes about a tenth of a second, which
          is what makes 1000 directories fit in a minute (`tw fleet --bench`).
  hostile every failure of one directory is one DataError naming the host and what is
          wrong; the caller lists it and compares the rest.  percall.json is read bounded
          (core.files.read_regular), must be strict JSON (no NaN, no Infinity), must carry a
          percall schema this checkout reads, and every field the digest uses is checked
          for type and for a plausible size (a batch value of 1e308 ns is not a
          measurement).  The full schema walk of a 3 MB percall.json costs more than the
          digest itself (about 1 s): the digest checks what it reads instead.

The figure.  Issue 17's undisturbed cost (`undisturbed_ns` with `undisturbed_ci_low/high`),
computed by stats.undisturbed over the same usable batches and round times as
percall.cell_summary uses, is what the fleet compares.  Its interval (a delete-half
jackknife over rounds) is four fifths of a digest's cost, so it is computed for the cells the
view shows (`tw fleet --op`, every cell with `--op all`) and the reference cell; the other
cells carry the same point figure (the pooled lower-tail mean) without one.  A checkout
whose stats has no undisturbed estimate falls back to the k-best floor (`floor_ns`) and
every output says "floor (no interval)".  No interval is ever invented: figures without one
say so, and a ratio of two such figures has none either.  A run with host probes (tw bench's
quiet-first matrix, issue 42) gets percall's own gated figure (percall.undisturbed_of), with
its interval, after its probes and clock chains are checked (probes(), _round_values()).
"""
import itertools
import math
import statistics
from pathlib import Path

import numpy as np
import orjson

from ..core import files
from ..core.ui import DataError
from ..store import fleetdb
from . import causes, coreclock, percall, schema, stats

ANALYSIS = "fleet/4"
# The operations whose cells always get an interval: the cost model's (analyse/causes.py:
# the exit price, the null calls, and gettimeofday for the exception path's premium).
CAUSE_OPS = ("cpuid", "null", "gettimeofday")
# The figure, by the keys issue 17 defines; FALLBACK is used (and named) until they exist.
UNDISTURBED = ("undisturbed_ns", "undisturbed_ci_low", "undisturbed_ci_high")
FALLBACK = "floor_ns"
LABEL_UNDISTURBED = "undisturbed [95% CI]"
LABEL_FALLBACK = "floor (no interval)"
# A batch value (ns per call) at or above this is not a measurement: no system call takes
# ten seconds of CPU, and 1e308 would overflow every sum it enters.
MAX_NS = 1e10
# Cells one host may bring (issue 25, class 5): a full-mode run measures a few hundred; a
# file claiming 100,000 made a 33 MB heat map.  Beyond this, the host costs one line.
MAX_CELLS = 2000
# The facts of a machine the fleet groups by (fingerprint.json; machine/doctor.py): the
# columns the fleet's database keeps for each run.
FACTS = fleetdb.FACTS
FACT_NAMES = {"vendor": "vendor", "cpu": "CPU model", "hypervisor": "hypervisor",
              "kernel": "kernel", "mitigations": "mitigations", "ia32": "IA32 emulation",
              "fred": "FRED", "vdso": "32-bit vDSO instruction",
              # Not a fingerprint fact: the measured cause, each machine's exit-price bucket
              # (exit_buckets), which the view groups by before the facts.
              "exit": "exit price (measured)"}
NOT_PRICED = "not priced (no cpuid cell)"
# Outliers: a machine whose figure is further than this share from its group's median, and
# outside the group's own spread (OUTLIER_MADS robust deviations), with at least
# OUTLIER_MIN machines in the group to have a median worth standing apart from.
OUTLIER_REL = 0.10
OUTLIER_MADS = 3.0
OUTLIER_MIN = 3


def cell_name(variant, op, size=None, shape="ret"):
    """A cell's column name: '64-int80 null', '64-libc write-file 256 B', '... jmp'."""
    s = f"{variant} {op}"
    if size:
        s += f" {size} B"
    if shape and shape != "ret":
        s += f" {shape}"
    return s


# ---- one directory --------------------------------------------------------------------------

def _json(path, raw, every_key=False):
    """Strict JSON (orjson: no NaN, no Infinity, no integer beyond 64 bits), or DataError
    naming the file.  orjson parses a 3 MB stage file about three times faster than the
    standard library, which is most of a digest's cost.  every_key: refuse any key repeated
    in one object (a small file, such as digest.json), not only a second "cells"."""
    try:
        obj = orjson.loads(raw)
        if every_key or raw.count(b'"cells"') > 1:
            _no_duplicate_keys(path, raw)
        return obj
    except orjson.JSONDecodeError as e:
        raise DataError(f"{path.name}: not valid strict JSON ({e.msg} at line {e.lineno} "
                        f"column {e.colno}; stage files never hold NaN or infinity)") from None
    except RecursionError:
        raise DataError(f"{path.name}: nested too deeply to be a stage file") from None


def _no_duplicate_keys(path, raw):
    """DataError when an object of raw repeats a key.  orjson keeps the last of them silently,
    so a file with two "cells" keys says two things and tw would believe one (issue 25,
    class 7); the slower standard parser runs only when "cells" appears more than once."""
    import json

    def pairs(kv):
        keys = [k for k, _ in kv]
        if len(set(keys)) != len(keys):
            dup = next(k for k in keys if keys.count(k) > 1)
            raise DataError(f"{path.name}: the key '{dup[:40]}' appears twice in one object; "
                            "tw never writes that")
        return dict(kv)
    json.loads(raw, object_pairs_hook=pairs)


NUMBER = stats.NUMBER
# ns per step of syscost's clock chain (coreclock): 4 cycles, 0.4-20 ns on a core of 0.2-10
# GHz; a step far beyond moves every figure it scales, so it is no measurement.
MAX_STEP_NS = 1000.0


def _check_chain(steps, where):
    """A round's clock chain (coreclock: ns per step, one a batch), or a DataError.  The step
    that scales the figures is the fastest batch's (coreclock.step_of), so that one must be
    plausible; any other batch's may be far slower: a chain the scheduler preempted midway
    (a loaded machine gave 1000 ns and more for one batch, and a fleet lost the run)."""
    if steps is not None and (not isinstance(steps, list) or not all(
            type(x) in NUMBER and math.isfinite(x) and x > 0 for x in steps)
            or (steps and min(steps) >= MAX_STEP_NS)):
        raise DataError(f"percall.json: {where}.chain_ns: expected the core clock's ns per "
                        f"chain step, each above 0, the fastest below {MAX_STEP_NS:g}")


# A batch's value is its time per call less the empty loop's, so a call that costs about
# nothing (the 64-bit vDSO's time(), ~1 ns) can come out a little below zero: -0.14 ns on an
# AMD EPYC guest, whose digest that made "not a measurement", so a fleet lost the run.  A value
# may go below zero by the loop cost its batch subtracted, never by more than this.  syscost
# subtracts the median of its process's empty-loop costs (every batch's, disturbed or not),
# not the batch's own: one empty loop of 1.5 ns beside four of 9-10 ns (the host slowed the
# core) gave a batch of -5.8 ns, below its own loop's -1.5, and a fleet lost the run again.
# Nor is that median always small: on a guest whose two cores three loads shared, four of a
# process's eight empty loops took 54-114 ns a pass (the core taken away mid-loop), their
# median 28 ns, and the batches of a 64-bit vDSO time() cell came out at -23.4 ns: a fleet
# lost that run too.  The bound is what such a process can subtract; an empty loop slower
# than a microsecond a pass is not one, and no value is taken as far below zero as that.
MAX_LOOP_NS = 1000.0


def _round_values(where, rounds):
    """([usable batch values of each round as a float array], [each round's time]): as
    percall.cell_summary gathers them, every value checked (_checked_round_values).  Sound
    rounds, nearly all of them, are read by _sound_round_values, which checks the values and
    the clock chains of all rounds at once in numpy; anything it does not find sound goes to
    _checked_round_values, which says what is wrong, as before."""
    got = _sound_round_values(rounds)
    return got if got is not None else _checked_round_values(where, rounds)


def _sound_round_values(rounds):
    """_checked_round_values(rounds) when every round is sound (an object whose samples_ns is
    a list of plausible numbers, whose chain_ns, if any, _check_chain takes), else None.  The
    same arrays and times: the disturbed batches are left out the same way, and what is
    judged per value there (its type, finite, its bounds, the fastest chain step) is judged
    here over every round's values at once.  The loop costs a value may lie below zero by
    (_loop_floor's median of a round's empty loops) are taken only when a value is below zero:
    nearly every round has none, and a median a round was a third of this."""
    if type(rounds) is not list:
        return None
    flat, sent, lens, times, chains, clens = [], [], [], [], [], []
    for rd in rounds:
        if type(rd) is not dict:
            return None
        vals = rd.get("samples_ns") or []
        if type(vals) is not list:
            return None
        chain = rd.get("chain_ns")
        if chain is not None:
            if type(chain) is not list:
                return None
            if chain:
                chains.extend(chain)
                clens.append(len(chain))
        sent.extend(vals)
        vals, t = _usable(rd, vals)
        flat.extend(vals)
        lens.append(len(vals))
        times.append(t)
    # a disturbed batch's value is checked as the rest are
    if not set(map(type, sent)) <= NUMBER or not set(map(type, chains)) <= NUMBER:
        return None
    if chains:
        c = np.asarray(chains, dtype=float)
        if not (np.isfinite(c).all() and (c > 0).all()):
            return None
        starts = np.cumsum([0] + clens[:-1])
        if not (np.minimum.reduceat(c, starts) < MAX_STEP_NS).all():
            return None
    a = np.asarray(flat, dtype=float)
    if a.size:
        if not (np.isfinite(a) & (a < MAX_NS)).all():
            return None
        # a value at or above zero is above any loop cost's bound below zero (0..MAX_LOOP_NS)
        if (a < 0).any():
            lows = []
            for rd, n in zip(rounds, lens):
                loops = rd.get("loop_ns")
                lows.extend(itertools.repeat(_loop_floor(
                    loops if type(loops) is list else None, rd.get("samples_ns") or []), n))
            if not (a >= -_loop_floors(lows)).all():
                return None
    ends = itertools.accumulate(lens)
    return [a[e - n:e] for n, e in zip(lens, ends)], times


def _usable(rd, vals):
    """(a round's usable values: without its disturbed batches, or all of them when every
    batch was; the round's time, None when it is not a number)."""
    dist = rd.get("disturbed")
    if isinstance(dist, list) and len(dist) == len(vals) and any(dist) and not all(dist):
        vals = list(itertools.compress(vals, [not d for d in dist]))
    t = rd.get("t_s", rd.get("round"))
    return vals, (t if isinstance(t, (int, float)) and not isinstance(t, bool) else None)


def _loop_floor(loops, vals):
    """The loop cost a round's process subtracted from each of its batch values vals: the
    median of its empty loops' costs, as syscost takes it; 0 without a list of as many
    finite numbers."""
    if loops is not None and len(loops) == len(vals) and loops and \
            set(map(type, loops)) <= NUMBER and all(map(math.isfinite, loops)):
        return statistics.median(loops)
    return 0.0


def _gather(rd, vals, loops, flat, lows, lens, times):
    """One round's usable values (_usable) appended to flat, the loop cost its process
    subtracted from each (_loop_floor) to lows, their count to lens and the round's time to
    times."""
    floor = _loop_floor(loops, vals)
    vals, t = _usable(rd, vals)
    flat.extend(vals)
    lows.extend(itertools.repeat(floor, len(vals)))
    lens.append(len(vals))
    times.append(t)


def _loop_floors(lows):
    """The empty-loop costs subtracted from the batches (_gather) as an array, each clamped
    to 0..MAX_LOOP_NS and 0 where it is not a finite number: how far below zero a batch's
    cost per call may lie."""
    if set(map(type, lows)) <= NUMBER:
        lo = np.asarray(lows, dtype=float)
        with np.errstate(invalid="ignore"):
            return np.where(np.isfinite(lo), np.clip(lo, 0.0, MAX_LOOP_NS), 0.0)
    return np.asarray([min(max(x, 0.0), MAX_LOOP_NS)
                       if type(x) in NUMBER and math.isfinite(x) else 0.0 for x in lows],
                      dtype=float)


def _checked_round_values(where, rounds):
    """([usable batch values of each round as a float array], [each round's time]): as
    percall.cell_summary gathers them (percall.usable(): without the disturbed batches, or
    all of them when every batch of a round was), after checking that every value is a
    plausible number.  The values of all rounds are converted and checked in one array,
    then cut back into rounds: per-round numpy calls were most of the cost.  Their types,
    and the loop costs' (clamped to 0..MAX_LOOP_NS, 0 where not a finite number), are
    checked over all rounds at once too; what is refused, and the round the refusal names
    (the first in order, a round's values before its chain), is as when it went round by
    round (_samples_of)."""
    if not isinstance(rounds, list):
        raise DataError(f"percall.json: {where}.rounds: expected a list")
    flat, lows, lens, times, sent = [], [], [], [], []
    for i, rd in enumerate(rounds):
        if not isinstance(rd, dict):
            _samples_of(where, rounds, i)
            raise DataError(f"percall.json: {where}.rounds[{i}]: expected an object")
        vals = rd.get("samples_ns") or []
        if not isinstance(vals, list):
            _samples_of(where, rounds, i + 1)
        sent.extend(vals)
        chain = rd.get("chain_ns")
        if chain is not None:
            try:
                _check_chain(chain, f"{where}.rounds[{i}]")
            except DataError:
                _samples_of(where, rounds, i + 1)
                raise
        loops = rd.get("loop_ns")
        _gather(rd, vals, loops if isinstance(loops, list) else None, flat, lows, lens, times)
    if not set(map(type, sent)) <= NUMBER:
        _samples_of(where, rounds, len(rounds))
    a = np.asarray(flat, dtype=float)
    if a.size:
        lo = _loop_floors(lows)
        # A cost per call is never negative beyond the loop cost its batch subtracted: a
        # -100 ns machine is not one (issue 25, class 7).
        ok = np.isfinite(a) & (a >= -lo) & (a < MAX_NS)
        if not ok.all():
            raise DataError(f"percall.json: {where}: {a[~ok][0]!r} ns per call is not a "
                            f"measurement (from 0, less the empty loop's cost, to "
                            f"{MAX_NS:g} ns)")
    # Slices of one array, cut by hand: np.split costs 60 us a call, a tenth of a digest.
    ends = itertools.accumulate(lens)
    return [a[e - n:e] for n, e in zip(lens, ends)], times


def _samples_of(where, rounds, upto):
    """The DataError for the first of rounds[:upto] whose samples_ns is not a list of numbers
    (each of them an object), if any."""
    for i, rd in enumerate(rounds[:upto]):
        vals = rd.get("samples_ns") or []
        if not isinstance(vals, list) or not set(map(type, vals)) <= NUMBER:
            raise DataError(f"percall.json: {where}.rounds[{i}].samples_ns: expected a list "
                            "of numbers")


def probes(doc):
    """The host's probes of a quiet-first run (tw bench since issue 42: percall.host_probes),
    each checked as a batch value is, or None for a run without them.  A probe's floor labels
    which processes met the host's fast state, so a hostile one must cost its host one line,
    not move a figure."""
    hs = doc.get("host_state")
    if hs is None:
        return None
    got = hs.get("probes") if isinstance(hs, dict) else None
    if not got:
        return None
    if not isinstance(got, list) or len(got) > MAX_CELLS * 1000:
        raise DataError("percall.json: host_state.probes: expected a list of the run's probes")
    # the run's top clock, which the probes are brought to, is read from every round's chain
    for j, c in enumerate(doc.get("cells") or []):
        for i, rd in enumerate((c.get("rounds") if isinstance(c, dict) else None) or []):
            if isinstance(rd, dict):
                _check_chain(rd.get("chain_ns"), f"cells[{j}].rounds[{i}]")
    for i, pr in enumerate(got):
        if not isinstance(pr, dict):
            raise DataError(f"percall.json: host_state.probes[{i}]: expected an object")
        for k, low, bound in (("t_s", 0.0, MAX_NS), ("floor_ns", None, MAX_NS),
                              ("chain_ns", None, MAX_STEP_NS)):
            v = pr.get(k)
            if v is None and k == "chain_ns":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or not (v >= low if low is not None else v > 0) or not v < bound:
                raise DataError(f"percall.json: host_state.probes[{i}].{k}: "
                                f"'{str(v)[:40]}' is not a measurement")
    return percall.host_probes(doc)[0] or None


def undisturbed(doc, cell, where, interval=True, host=None, drift=None):
    """{value, ci_low, ci_high, estimator} of one raw cell: issue 17's undisturbed cost,
    over the same usable batches and round times as percall.cell_summary, with its interval.
    host: probes(doc), for a run with host probes (tw bench's quiet-first matrix, issue 42):
    the figure is then percall's own (percall.undisturbed_of), from the processes that met
    the host's fast state at the run's top core clock, with its interval whatever `interval`
    says (widened by the host's drift over the run, `drift`: percall.host_drift(host), given
    once per run by the caller or computed here), and None where too few processes met it
    (the cell is then left out, never given the slow state's figure).  A checkout whose stats has no undisturbed estimate falls back
    to the k-best floor (floor_ns), without an interval."""
    rounds, _legacy = percall.rounds_of(doc, cell)
    vals, times = _round_values(where, rounds)
    if host:
        clk = coreclock.clock(doc)
        if clk[0]:
            vals = [v * coreclock.factor(doc, rd, clk) for v, rd in zip(vals, rounds)]
        drift = drift if drift is not None else percall.host_drift(host)
        u = percall.undisturbed_of(doc, cell, rounds, vals, times, host, drift)
        v, lo, hi = u.get("value"), u.get("ci_low"), u.get("ci_high")
        if None not in (v, lo, hi):
            # the host's drift over the run held as the report holds it
            lo, hi, _ = percall.drift_widened(v, lo, hi, drift)
        return {"value": v, "ci_low": lo, "ci_high": hi, "estimator": UNDISTURBED[0]}
    if hasattr(stats, "undisturbed"):
        if not interval:
            # The same figure (the lower-tail mean of the rounds' floors is the estimate
            # itself), without the delete-half jackknife, four fifths of a digest's cost.
            floors = [min(v) for v in vals if len(v)]
            v = stats.tail_mean(floors) if floors else None
            return {"value": v, "ci_low": None, "ci_high": None, "estimator": UNDISTURBED[0]}
        u = stats.undisturbed(vals, times=times if None not in times else None,
                              resolution=percall.resolution(doc, cell))
        return {"value": u.get("value"), "ci_low": u.get("ci_low"), "ci_high": u.get("ci_high"),
                "estimator": UNDISTURBED[0]}
    a = np.concatenate(vals) if vals else np.empty(0)
    if a.size > stats.FLOOR_K:
        # stats.floor looks at the k smallest values only: hand it just those.
        a = np.partition(a, stats.FLOOR_K - 1)[:stats.FLOOR_K]
    fl = stats.floor(a)
    return {"value": fl["value"], "ci_low": None, "ci_high": None, "estimator": FALLBACK}


def from_analysed(cell):
    """{value, ci_low, ci_high, estimator} of an analysed cell (percall.analyse()): the
    undisturbed keys when present, else floor_ns without an interval."""
    if cell.get(UNDISTURBED[0]) is not None:
        return {"value": cell[UNDISTURBED[0]], "ci_low": cell.get(UNDISTURBED[1]),
                "ci_high": cell.get(UNDISTURBED[2]), "estimator": UNDISTURBED[0]}
    return {"value": cell.get(FALLBACK), "ci_low": None, "ci_high": None,
            "estimator": FALLBACK}


def _str(v, limit=200):
    return v[:limit] if isinstance(v, str) else None


def facts(fp, meta=None):
    """The facts a fleet groups by, each a short string ('unknown' when the fingerprint does
    not say), from fingerprint.json."""
    fp = fp or {}
    cpu = fp.get("cpu") or {}
    virt = fp.get("virtualization")
    vd = fp.get("vdso32") or {}
    kern = fp.get("kernel") or {}

    def yn(v):
        return "yes" if v is True else "no" if v is False else "unknown"
    model = (f"family {cpu.get('family')} model {cpu.get('model')}"
             if cpu.get("family") is not None and cpu.get("model") is not None else "unknown")
    return {"vendor": _str(cpu.get("vendor")) or "unknown",
            "cpu": model,
            "cpu_name": _str(cpu.get("model_name")) or "unknown",
            "hypervisor": _str(virt) if isinstance(virt, str) else
            ("none" if virt is False else "unknown"),
            "kernel": _str(kern.get("release")) or "unknown",
            "mitigations": _str(fp.get("mitigations_cmdline")) or "default",
            "ia32": yn(fp.get("ia32_emulation")),
            "fred": yn(fp.get("fred")),
            "vdso": _str(vd.get("instruction")) or ("none" if vd.get("available") is False
                                                     else "unknown")}


def digest_doc(doc, fp, meta, host, where="percall.json", interval_ops=None):
    """The digest of one machine from its parsed percall.json, fingerprint and meta: the
    facts, and per cell {value, ci_low, ci_high, ratio, ratio_low, ratio_high}.  Intervals
    are computed for the cells of interval_ops (every cell when None), and for the reference
    cell, which every ratio needs."""
    if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
        raise DataError("percall.json: has no list of cells")
    try:
        schema.schema_of("percall", doc)
    except schema.Invalid as e:
        raise DataError(f"percall.json: {e.path}: {e.what}", e.hint) from None
    if len(doc["cells"]) > MAX_CELLS:
        raise DataError(f"percall.json: {len(doc['cells'])} cells, more than the {MAX_CELLS} "
                        "any run measures")
    cells = {}
    labelled = probes(doc)
    drift = percall.host_drift(labelled) if labelled else None
    for i, c in enumerate(doc["cells"]):
        if not isinstance(c, dict) or not c.get("supported"):
            continue
        v, op, size, shape = (c.get("variant"), c.get("op"), c.get("size"),
                              c.get("shape") or "ret")
        if not (isinstance(v, str) and schema.VARIANT_RE.match(v) and isinstance(op, str)
                and (size is None or (isinstance(size, int) and not isinstance(size, bool)))
                and isinstance(shape, str)):
            raise DataError(f"percall.json: cells[{i}]: variant, op, size or shape is not "
                            "what tw writes")
        ref0 = doc.get("reference") or {}
        # The cost model's cells (the exit price, the int 0x80 cells and their baselines'
        # null calls) always get their interval: the digest carries its fit.
        want = interval_ops is None or op in interval_ops or op in CAUSE_OPS or (
            v == (ref0.get("variant") or "64-syscall") and op == (ref0.get("op") or "null")
            and shape == (ref0.get("shape") or "ret"))
        fig = undisturbed(doc, c, f"cells[{i}]", interval=want, host=labelled, drift=drift)
        if fig["value"] is None:
            continue
        name = cell_name(v, op, size, shape)
        if name in cells:
            raise DataError(f"percall.json: cells[{i}]: a second cell '{name[:60]}'; tw "
                            "measures each cell once")
        cells[name] = dict(fig, variant=v, op=op, size=size,
                                                    shape=shape)
    if not cells:
        # An empty host would be "compared" and turn the fleet's figure into nothing.
        raise DataError("percall.json: no measured cell (the bench stage measured nothing)")
    ref = doc.get("reference") or {}
    rname = cell_name(ref.get("variant") or "64-syscall", ref.get("op") or "null", None,
                      ref.get("shape") or "ret")
    _ratios(cells, cells.get(rname))
    estimators = sorted({c["estimator"] for c in cells.values()})
    return {"host": host, "facts": facts(fp, meta), "reference": rname,
            "causes": causes.brief(causes.from_digest_cells(cells, fp if isinstance(fp, dict) else None)),
            "estimator": estimators[0] if len(estimators) == 1 else ",".join(estimators),
            "created_utc": _str((meta or {}).get("created_utc")),
            "mode": _str((meta or {}).get("mode")) or _str(doc.get("mode")),
            "state": _str((meta or {}).get("state")), "cells": cells}


def _ratios(cells, ref):
    """Each cell × the machine's own reference cell; the interval only when both have one
    (stats.ratio_summary, by quadrature on the log scale)."""
    for c in cells.values():
        c["ratio"] = c["ratio_low"] = c["ratio_high"] = None
        if ref is None or not ref.get("value") or ref["value"] <= 0:
            continue
        c["ratio"] = c["value"] / ref["value"]
        if c is ref:
            # The reference against itself is 1 exactly, not an interval around it.
            c["ratio_low"] = c["ratio_high"] = 1.0
            continue
        if c.get("ci_low") is not None and ref.get("ci_low") is not None:
            r = stats.ratio_summary(
                {"median": c["value"], "ci_low": c["ci_low"], "ci_high": c["ci_high"]},
                {"median": ref["value"], "ci_low": ref["ci_low"], "ci_high": ref["ci_high"]},
                positive=c["value"] > 0)
            if r:
                c["ratio_low"], c["ratio_high"] = r["ci_low"], r["ci_high"]


def read_percall(d):
    """percall.json of a results directory, parsed (bounded read, strict JSON); where only
    percall.json.xz is there (the atlas's form, data/machines/), that, decompressed no further
    than any stage file may be long."""
    path = Path(d) / "percall.json"
    raw = files.read_regular(path, inside=d)
    if raw is None:
        xz = Path(d) / "percall.json.xz"
        packed = files.read_regular(xz, inside=d)
        if packed is None:
            raise DataError("percall.json is absent: the bench stage did not run there")
        return _json(xz, unxz(xz, packed))
    return _json(path, raw)


def unxz(path, packed):
    """The bytes of an xz file read whole, bounded by core.files.MAX_READ once decompressed
    (core.files.unxz: a truncated one refused as such)."""
    return files.unxz(path, packed)


# ---- the fleet ------------------------------------------------------------------------------

def _median_ci(vals):
    lo, hi = stats.median_ci(vals)
    return float(np.median(vals)), lo, hi


def groups_of(digests, exit_of=None):
    """[(group key as {fact: value}, [digest])]: machines grouped by the facts that differ
    across the fleet, largest group first.  Facts every machine shares group nothing.
    exit_of: {host: its exit-price bucket's label} (exit_buckets); when given, the measured
    cause groups first ('exit'), machines without a price under NOT_PRICED."""
    def fact(d, f):
        return (exit_of or {}).get(d["host"], NOT_PRICED) if f == "exit" else d["facts"][f]
    keys = (("exit",) if exit_of is not None else ()) + FACTS
    differ = [f for f in keys if len({fact(d, f) for d in digests}) > 1]
    by = {}
    for d in digests:
        by.setdefault(tuple(fact(d, f) for f in differ), []).append(d)
    out = [({f: k[i] for i, f in enumerate(differ)}, ms) for k, ms in by.items()]
    out.sort(key=lambda g: (-len(g[1]), [str(v) for v in g[0].values()]))
    return differ, out


def columns(digests, op=None):
    """The cells shown as columns: those measured on at least one machine (optionally one
    operation), in the order of the first machine that has each, the 'ret' shape only."""
    seen = {}
    for d in digests:
        for name, c in d["cells"].items():
            if c["shape"] == "ret" and (op is None or c["op"] == op):
                seen.setdefault(name, None)
    return list(seen)


def group_stats(members, cols, key="ratio"):
    """Per column: {n, median, ci_low, ci_high (of the median, order statistics), min, max,
    spread (max/min - 1)} of the members' figures."""
    out = {}
    for col in cols:
        vals = [m["cells"][col][key] for m in members
                if col in m["cells"] and m["cells"][col].get(key) is not None]
        if not vals:
            out[col] = None
            continue
        med, lo, hi = _median_ci(vals)
        mn, mx = min(vals), max(vals)
        out[col] = {"n": len(vals), "median": med, "ci_low": lo, "ci_high": hi,
                    "min": mn, "max": mx, "spread": (mx / mn - 1) if mn > 0 else None}
    return out


def outliers(groups, cols, key="value"):
    """Machines far from their group's median in a column: |gap| > OUTLIER_REL and beyond
    OUTLIER_MADS robust deviations of the group.  The gap's interval combines the machine's
    own interval (when its figure has one) with the order-statistics interval of the group's
    median; when the machine's figure has none, that is said."""
    out = []
    for gkey, members in groups:
        if len(members) < OUTLIER_MIN:
            continue
        for col in cols:
            pts = [(m, m["cells"][col]) for m in members if col in m["cells"]
                   and m["cells"][col].get(key) is not None]
            if len(pts) < OUTLIER_MIN:
                continue
            vals = np.asarray([c[key] for _, c in pts])
            med = float(np.median(vals))
            if med <= 0:
                continue
            mad = float(np.median(np.abs(vals - med))) * 1.4826
            far = [(m, c) for m, c in pts if abs(c[key] / med - 1) > OUTLIER_REL
                   and abs(c[key] - med) > OUTLIER_MADS * mad]
            if not far:
                continue
            # The group median's interval only where there is an outlier to give a gap to:
            # it is the costly part, and most groups and cells have none.
            glo, ghi = stats.median_ci(vals)
            for m, c in far:
                gap = c[key] / med - 1
                lo_key, hi_key = ("ci_low", "ci_high") if key == "value" else \
                    ("ratio_low", "ratio_high")
                own = c.get(lo_key) is not None
                a = {"median": c[key], "ci_low": c[lo_key] if own else c[key],
                     "ci_high": c[hi_key] if own else c[key]}
                r = stats.ratio_summary(a, {"median": med, "ci_low": glo, "ci_high": ghi})
                out.append({"host": m["host"], "group": gkey, "column": col, "value": c[key],
                            "group_median": med, "gap": gap,
                            "gap_low": (r["ci_low"] - 1) if r else None,
                            "gap_high": (r["ci_high"] - 1) if r else None,
                            "interval": "machine and group median" if own else
                            "group median only: the machine's figure has no interval"})
    out.sort(key=lambda o: -abs(o["gap"]))
    return out


def _codes(digests, f):
    """Each machine's value of fact f as a small integer (codes in order of first appearance)
    and the values by code: the explanation works on arrays, a fleet of 100,000 machines
    being too many for a loop per machine, fact and column."""
    seen = {}
    codes = np.fromiter((seen.setdefault(d["facts"][f], len(seen)) for d in digests),
                        dtype=np.int64, count=len(digests))
    return codes, list(seen)


def explain(digests, cols, differ, top=10):
    """The facts that explain the differences between machines, ranked: for each column's
    ratio (× the machine's own reference call) and each fact that differs, the share of the
    variance of log(ratio) the fact's values explain (eta squared), the extreme values with
    their median ratio, and which other facts are the same or differ between those two sets
    of machines.  Facts that split the fleet identically cannot be told apart: said so."""
    found = []
    coded = {f: _codes(digests, f) for f in FACTS}
    twins_of = {f: [g for g in differ if g != f and _same_partition(coded[f][0], coded[g][0])]
                for f in differ}
    for col in cols:
        idx, ratios = [], []
        for i, d in enumerate(digests):
            c = d["cells"].get(col)
            # a cell at or below zero (about nothing: a vDSO read) has no log ratio
            if c is not None and (c.get("ratio") or 0) > 0:
                idx.append(i)
                ratios.append(c["ratio"])
        if len(idx) < 2:
            continue
        idx = np.asarray(idx)
        y = np.log(ratios)
        tot = float(((y - y.mean()) ** 2).sum())
        if tot <= 0:
            continue
        for f in differ:
            cf = coded[f][0][idx]
            uniq, first = np.unique(cf, return_index=True)
            if uniq.size < 2:
                continue
            order = uniq[np.argsort(first)]          # values in order of first appearance
            masks = {u: cf == u for u in order.tolist()}
            between = sum(int(m.sum()) * (y[m].mean() - y.mean()) ** 2 for m in masks.values())
            eta = float(between / tot)
            meds = {u: float(np.exp(np.median(y[m]))) for u, m in masks.items()}
            lo_u, hi_u = min(meds, key=meds.get), max(meds, key=meds.get)
            effect = meds[hi_u] / meds[lo_u]
            vals = coded[f][1]
            same, diff = [], []
            for g in FACTS:
                if g == f:
                    continue
                cg = coded[g][0][idx]
                a = set(np.unique(cg[masks[lo_u]]).tolist())
                b = set(np.unique(cg[masks[hi_u]]).tolist())
                (same if a == b and len(a) == 1 else diff if not (a & b) else []).append(g)
            twins = twins_of[f]
            diff = [g for g in diff if g not in twins]
            found.append({"column": col, "fact": f, "eta2": eta, "effect": effect,
                          "low": {"value": vals[lo_u], "ratio": meds[lo_u],
                                  "n": int(masks[lo_u].sum())},
                          "high": {"value": vals[hi_u], "ratio": meds[hi_u],
                                   "n": int(masks[hi_u].sum())},
                          "same": same, "differs": diff, "inseparable_from": twins})
    found.sort(key=lambda e: (-e["eta2"], -e["effect"]))
    # One line per column and partition: a fact and its inseparable twins are one finding.
    out, seen = [], set()
    for e in found:
        k = (e["column"], tuple(sorted([e["fact"]] + e["inseparable_from"])))
        if k in seen or e["effect"] < 1 + OUTLIER_REL:
            continue
        seen.add(k)
        out.append(e)
    return out[:top]


def _same_partition(a, b):
    """Whether two facts' codes (_codes) split the machines into the same sets: a bijection
    between their values, so as many distinct pairs as distinct values of each."""
    if a.size == 0:
        return True
    pairs = a * (int(b.max()) + 1) + b
    n = np.unique(pairs).size
    return n == np.unique(a).size == np.unique(b).size


def _machines(k):
    return f"{k} machine" + ("s" if k != 1 else "")


def _measured_rank_sentence(e):
    """The exit price's line in the ranking (rank())."""
    n = _machines
    s = (f"{e['column']} × reference: the exit price (measured, analyse/causes.py) accounts for "
         f"{100 * max(e['eta2'], 0):.0f}% of the spread over the {n(e['n'])} that priced one: "
         f"{e['low']['ratio']:.3g}× where one exit costs {e['low']['value']} "
         f"({n(e['low']['n'])}) vs {e['high']['ratio']:.3g}× where it costs "
         f"{e['high']['value']} ({n(e['high']['n'])})")
    s += ("; what is left agrees between them within the intervals" if e["accounts"] else
          "; what is left still differs between them beyond the intervals")
    if e["machines"] > e["n"]:
        s += f"; {n(e['machines'] - e['n'])} not priced (no cpuid cell, or no such cell)"
    return s


def _tell_apart(e, name):
    """Which machines tell a fact apart from the exit price, or which would."""
    def by(groups, key, what):
        """'10.6× at <k> (3 machines: a, b, c)' per group (_summary)."""
        return " vs ".join(
            f"{g['ratio']:.3g}× {what} {g[key]} ("
            + (f"{_machines(g['n'])}: " if g["n"] > 1 else "")
            + ", ".join(g["hosts"]) + (", …" if g["n"] > len(g["hosts"]) else "") + ")"
            for g in groups)
    parts = []
    for g in e.get("same_exit") or []:
        parts.append(f"at one exit price ({g['exit']}), {name} differs: "
                     + by(g["groups"], "value", "on"))
    for g in e.get("same_fact") or []:
        parts.append(f"on one {name} ({g['value']}), the exit price differs: "
                     + by(g["groups"], "exit", "at"))
    if parts:
        return "; told apart by: " + "; ".join(parts[:2])
    lo, hi = e.get("exit_low") or ["?"], e.get("exit_high") or ["?"]
    return (f"; no machine here tells them apart: one with {name} {e['low']['value']} whose "
            f"exit costs about {hi[0]}, or one with {name} {e['high']['value']} and an exit "
            f"near {lo[0]}, would")


def sentence(e):
    """One line for an entry of the ranking: the exit price measured (rank()), a fact that
    only travels with it, or an explaining fact: 'int 0x80 / fast path: 3.8× on model 143 vs
    60× on model 106; same kernel; hypervisor differs'."""
    if e.get("kind") == "measured":
        return _measured_rank_sentence(e)
    name = FACT_NAMES[e["fact"]]
    n = _machines
    if e.get("confounded_with"):
        s = (f"{e['column']} × reference: {name} {e['low']['value']} ({e['low']['ratio']:.3g}×, "
             f"{n(e['low']['n'])}) vs {e['high']['value']} ({e['high']['ratio']:.3g}×, "
             f"{n(e['high']['n'])}) ")
        s += (f"travels with the exit price ({' and '.join(e['exit_low'])} vs "
              f"{' and '.join(e['exit_high'])}): confounded with it, not an explanation of its own"
              if e.get("travels") else
              "explains nothing the exit price does not: not an explanation of its own")
        if e.get("own_share") is not None:
            s += f"; beyond the exit price it explains {100 * max(e['own_share'], 0):.0f}% of the spread"
        return s + _tell_apart(e, name)
    s = (f"{e['column']} × reference: {e['low']['ratio']:.3g}× where {name} is "
         f"{e['low']['value']} ({n(e['low']['n'])}) vs {e['high']['ratio']:.3g}× where "
         f"it is {e['high']['value']} ({n(e['high']['n'])}); explains {100 * e['eta2']:.0f}% "
         "of the variance")
    if e["inseparable_from"]:
        s += "; inseparable here from " + ", ".join(FACT_NAMES[g] for g in e["inseparable_from"])
    if e["same"]:
        s += "; same " + ", ".join(FACT_NAMES[g] for g in e["same"])
    if e["differs"]:
        s += "; " + ", ".join(FACT_NAMES[g] for g in e["differs"]) + " also differ" \
            if len(e["differs"]) > 1 else f"; {FACT_NAMES[e['differs'][0]]} also differs"
    if e.get("own_share") is not None:
        s += (f"; beyond the measured exit price it explains {100 * max(e['own_share'], 0):.0f}% "
              "of the spread")
    return s


def _int80_brief(d, variant):
    """The digest's cost-model brief for one int 0x80 variant (analyse.causes.brief), or None;
    a digest made before int80_all existed has its first variant's only."""
    cz = d.get("causes") or {}
    got = (cz.get("int80_all") or {}).get(variant)
    if got:
        return got
    br = cz.get("int80")
    return br if br and br.get("variant") == variant else None


def explain_measured(digests, cols):
    """The measured causes beside the facts: for each int 0x80 column, how much of the spread
    of log(ratio) over the machines that priced an exit the cost model's prediction (its
    baseline + the predicted exits at each machine's own exit price) accounts for, and whether
    what is left agrees between them within the intervals.  [] when fewer than two machines
    priced an exit: one machine has no spread to explain."""
    out = []
    for col in cols:
        v = col.split(" ", 1)[0]
        rows = []
        for d in digests:
            c, br = d["cells"].get(col), _int80_brief(d, v)
            ref = d["cells"].get(d["reference"])
            price = ((d.get("causes") or {}).get("exit_price") or {}).get("value")
            if not (c and ref and br and br.get("variant") == v and (c.get("ratio") or 0) > 0
                    and price and br.get("residual_ns") and br["residual_ns"].get("value") is not None):
                continue
            predicted = c["value"] - br["residual_ns"]["value"]
            if predicted <= 0:
                continue
            rows.append((d["host"], c["ratio"], predicted / ref["value"], br["residual_ns"],
                         ref["value"], price))
        priced = sum(1 for d in digests if ((d.get("causes") or {}).get("exit_price") or {}).get("value"))
        if not rows:
            continue
        if len(rows) < 2:
            out.append({"column": col, "fact": "exit price", "kind": "measured", "n": len(rows),
                        "priced": priced, "machines": len(digests), "share": None,
                        "accounts": None,
                        "why": f"{len(rows)} of {len(digests)} machines priced an exit: "
                               "too few to explain a spread"})
            continue
        y = np.log([r[1] for r in rows])
        pred = np.log([r[2] for r in rows])
        tot = float(((y - y.mean()) ** 2).sum())
        left = y - pred
        # Copies of one machine: one ratio up to rounding, nothing to explain.
        share = None if tot <= 1e-12 * len(y) else float(1 - ((left - left.mean()) ** 2).sum() / tot)
        lo = max(r[3]["ci_low"] / r[4] for r in rows)
        hi = min(r[3]["ci_high"] / r[4] for r in rows)
        out.append({"column": col, "fact": "exit price", "kind": "measured", "n": len(rows),
                    "priced": priced, "machines": len(digests), "share": share,
                    "accounts": bool(lo <= hi),
                    "prices": {r[0]: r[5] for r in rows},
                    # log(ratio) and what the cost model leaves of it, per machine: what a
                    # fingerprint fact would have to explain beyond the exit price (rank()).
                    "log_ratio": {r[0]: float(a) for r, a in zip(rows, y)},
                    "left": {r[0]: float(a) for r, a in zip(rows, left)},
                    "why": None if share is not None else
                    f"the {len(rows)} machines that priced an exit have one ratio: no spread "
                    "to explain"})
    out.sort(key=lambda e: -(e["share"] or -1))
    return out


def measured_sentence(e):
    """One line for a measured cause."""
    if e["share"] is None:
        return f"{e['column']}: the exit price explains nothing yet: {e['why']}"
    s = (f"{e['column']} × reference: the cost model with each machine's measured exit price "
         f"accounts for {100 * max(e['share'], 0):.0f}% of the spread over {e['n']} machines")
    s += ("; what is left agrees between them within the intervals" if e["accounts"] else
          "; what is left still differs between them beyond the intervals")
    return s


# The measured cause accounts for a column's spread when the cost model, with each machine's
# own exit price, explains at least this share of the variance of log(ratio) over the
# machines that priced an exit; a fingerprint fact then explains something of its own only
# if, beyond the exit price, it explains at least OWN_SHARE of that variance.
ACCOUNTS = 0.5
OWN_SHARE = 0.10


def _ns(v):
    return f"{v / 1000:.1f} µs" if v >= 10000 else f"{v:.0f} ns"


def exit_buckets(digests):
    """The machines grouped by their measured exit price, cheapest first: [{lo, hi (the
    lowest and highest price in it), ci_low, ci_high (the span of their 95% intervals),
    hosts}].  A price joins the bucket before it when its interval overlaps the bucket's span
    or it lies within OUTLIER_REL of the bucket's highest price (the fleet's threshold for a
    difference); machines that priced no exit are in no bucket."""
    pts = []
    for d in digests:
        p = ((d.get("causes") or {}).get("exit_price") or {})
        v = p.get("value")
        if isinstance(v, (int, float)) and math.isfinite(v) and v > 0:
            lo, hi = p.get("ci_low"), p.get("ci_high")
            pts.append((v, v if lo is None else lo, v if hi is None else hi, d["host"]))
    out = []
    for v, lo, hi, h in sorted(pts):
        b = out[-1] if out else None
        if b and (lo <= b["ci_high"] or v <= b["hi"] * (1 + OUTLIER_REL)):
            b["hosts"].append(h)
            b["hi"], b["ci_high"] = v, max(b["ci_high"], hi)
        else:
            out.append({"lo": v, "hi": v, "ci_low": lo, "ci_high": hi, "hosts": [h]})
    return out


def bucket_label(b):
    """'994 ns [987, 1001]' for one price, '980 ns to 1010 ns' for several."""
    if b["lo"] == b["hi"]:
        if b["ci_low"] == b["ci_high"]:
            return _ns(b["lo"])
        return f"{_ns(b['lo'])} [{b['ci_low']:.0f}, {b['ci_high']:.0f}]" if b["lo"] < 10000 else \
            f"{_ns(b['lo'])} [{b['ci_low'] / 1000:.1f}, {b['ci_high'] / 1000:.1f}]"
    return f"{_ns(b['lo'])} to {_ns(b['hi'])}"


# At most this many groups of machines that tell a fact apart from the exit price are kept
# per entry, each summarised (count, median ratio, the first NAMES names): a fleet of 100,000
# machines would otherwise carry every name into fleet.json once per entry.
TELL_GROUPS, NAMES = 3, 3


def _summary(hosts, key, ratio, limit=None):
    """[{key: value, n, ratio (median), hosts (the first NAMES)}] of hosts grouped by key, the
    first `limit` groups only (each a median) when given."""
    by = {}
    for h, k in hosts:
        by.setdefault(k, []).append(h)
    return [{key: k, "n": len(hs), "ratio": float(np.median([ratio[h] for h in hs])),
             "hosts": hs[:NAMES]} for k, hs in itertools.islice(by.items(), limit)]


def _confounding(e, m, byhost, bucket_of, buckets):
    """How a fact's entry (explain()) stands against the measured exit price of its column
    (explain_measured()'s entry m): whether the fact only travels with the price, what it
    explains beyond it, and which machines tell the two apart (or would).  One pass over the
    machines, with the fact's values coded: a fleet has thousands of kernel strings."""
    col, f = e["column"], e["fact"]
    hosts = [h for h in m.get("left") or {} if h in bucket_of]
    fv = [byhost[h]["facts"][f] for h in hosts]
    bk = [bucket_of[h] for h in hosts]
    ly = np.asarray([m["log_ratio"][h] for h in hosts])
    left = np.asarray([m["left"][h] for h in hosts])
    tot = float(((ly - ly.mean()) ** 2).sum()) if hosts else 0.0
    own = None
    if tot > 0:
        _, code = np.unique(np.asarray(fv, dtype=object).astype(str), return_inverse=True)
        n = np.bincount(code)
        mean = np.bincount(code, weights=left) / n
        own = float((n * (mean - left.mean()) ** 2).sum() / tot)
    lo_b = sorted({b for v, b in zip(fv, bk) if v == e["low"]["value"]})
    hi_b = sorted({b for v, b in zip(fv, bk) if v == e["high"]["value"]})
    travels = bool(lo_b and hi_b and not set(lo_b) & set(hi_b))
    ratio = {h: byhost[h]["cells"][col]["ratio"] for h in hosts}
    by_fact, by_exit = {}, {}
    for h, v, b in zip(hosts, fv, bk):
        by_fact.setdefault(v, []).append((h, b))
        by_exit.setdefault(b, []).append((h, v))
    # Only the groups kept are summarised (a median each): islice stops the generators there.
    same_fact = list(itertools.islice(
        ({"value": v, "groups": _summary([(h, bucket_label(buckets[b])) for h, b in hb],
                                         "exit", ratio)}
         for v, hb in by_fact.items() if len({b for _, b in hb}) > 1), TELL_GROUPS))
    same_exit = list(itertools.islice(
        ({"exit": bucket_label(buckets[b]), "groups": _summary(hv, "value", ratio, TELL_GROUPS)}
         for b, hv in sorted(by_exit.items()) if len({v for _, v in hv}) > 1), TELL_GROUPS))
    # Beyond the exit price the fact explains (next to) nothing: it travels with the price
    # (its extreme values sit in different price buckets), or it does not even do that (the
    # machines that share it differ in price, and their ratios follow the price).
    weak = own is not None and own < OWN_SHARE
    confounded = (travels and (own is None or weak)) or (weak and bool(same_fact))
    return {"confounded_with": "exit price" if confounded else None,
            "travels": travels,
            "exit_low": [bucket_label(buckets[i]) for i in lo_b],
            "exit_high": [bucket_label(buckets[i]) for i in hi_b],
            "own_share": own, "same_fact": same_fact, "same_exit": same_exit}


def rank(found, measured, digests):
    """The ranking a reader sees: measured causes first.  For each column whose spread the
    exit price accounts for (explain_measured, share >= ACCOUNTS), an entry for the exit price
    itself (its buckets' extremes and their median ratios), then the fingerprint facts that
    still explain something of their own, then those that only travel with the exit price
    (kind 'fact', confounded_with 'exit price', with the machines that tell them apart or
    the machine that would).  found: explain()'s entries; measured: explain_measured()'s."""
    byhost = {d["host"]: d for d in digests}
    buckets = exit_buckets(digests)
    bucket_of = {h: i for i, b in enumerate(buckets) for h in b["hosts"]}
    first, acc = [], {}
    for m in measured:
        if m.get("share") is None or m["share"] < ACCOUNTS:
            continue
        col = m["column"]
        per = {}
        for h in m.get("left") or {}:
            if h in bucket_of:
                per.setdefault(bucket_of[h], []).append(byhost[h]["cells"][col]["ratio"])
        if len(per) < 2:
            continue
        meds = {b: float(np.median(v)) for b, v in per.items()}
        lo_b, hi_b = min(meds, key=meds.get), max(meds, key=meds.get)
        first.append({"column": col, "fact": "exit", "kind": "measured", "eta2": m["share"],
                      "accounts": m["accounts"], "n": m["n"], "machines": m["machines"],
                      "buckets": len(per), "effect": meds[hi_b] / meds[lo_b],
                      "low": {"value": bucket_label(buckets[lo_b]), "ratio": meds[lo_b],
                              "n": len(per[lo_b])},
                      "high": {"value": bucket_label(buckets[hi_b]), "ratio": meds[hi_b],
                               "n": len(per[hi_b])}})
        acc[col] = m
    own, travel = [], []
    for e in found:
        e = dict(e, kind="fact")
        if e["column"] in acc:
            e.update(_confounding(e, acc[e["column"]], byhost, bucket_of, buckets))
        (travel if e.get("confounded_with") else own).append(e)
    return first + own + travel


def view(digests, refused, op="null", all_columns=None):
    """The fleet view: machines, groups with their spread, outliers, explaining facts.

    Each machine in the view carries the view's own columns (op's 'ret' cells, or every
    'ret' cell when op is None): its other cells are in the database and fleet.csv.
    all_columns: every 'ret' cell of the fleet, when the digests hold only the view's own
    (fleetdb.load with an op); computed from the digests when None."""
    digests = sorted(digests, key=lambda d: d["host"])
    allcols = columns(digests) if all_columns is None else list(all_columns)
    if op:
        ops = {}
        for d in digests:
            for k, c in d["cells"].items():
                ops.setdefault(k, set()).add(c["op"])
        cols = [c for c in allcols if op in ops.get(c, ())]
    else:
        cols = allcols
    keep = set(cols)
    # the base by kernel from every cell the digests hold, not only the view's columns
    bases = bases_by_kernel(digests)
    digests = [dict(d, cells={k: c for k, c in d["cells"].items() if k in keep})
               for d in digests]
    exit_of = {h: bucket_label(b) for b in exit_buckets(digests) for h in b["hosts"]}
    differ, groups = groups_of(digests, exit_of)
    fdiffer = [f for f in differ if f != "exit"]
    measured = explain_measured(digests, cols)
    est = sorted({d["estimator"] for d in digests})
    label = LABEL_UNDISTURBED if est == [UNDISTURBED[0]] else LABEL_FALLBACK
    return {"analysis": ANALYSIS, "figure": label, "estimators": est, "op": op,
            "columns": cols, "all_columns": allcols, "differ": differ,
            "machines": digests, "refused": refused,
            "groups": [{"facts": g, "hosts": [m["host"] for m in ms], "n": len(ms),
                        "ratio": group_stats(ms, cols, "ratio"),
                        "value": group_stats(ms, cols, "value")} for g, ms in groups],
            # Outliers in the cells the view shows (--op): over every cell of a thousand
            # machines the group medians' intervals alone would take most of a minute.
            "outliers": outliers(groups, cols, "value"),
            "explain": rank(explain(digests, cols, fdiffer), measured, digests),
            "explain_measured": measured,
            "bases": bases}


def bases_by_kernel(digests):
    """On each CPU model the fleet measured under more than one kernel: the base each kernel's
    newest run pays against the newest run of the kernel measured before it (each update, as
    it came; analyse/basemodel.py: an added constant on every kernel entry, a change of speed,
    or neither), so that a kernel that added a mitigation on every entry is named where ratios
    to each machine's own 64-bit syscall hide it.  One fit per kernel a model ran, not per
    machine: [{cpu, a, a_kernel, b, b_kernel, added, scale, kind, sentence, priced}], priced:
    both runs priced a VM exit (their int 0x80 cells are then in the fit)."""
    from . import basemodel
    by = {}
    for d in digests:
        f = d["facts"]
        by.setdefault((f["vendor"], f["cpu"], f["hypervisor"]), {}).setdefault(
            f["kernel"], []).append(d)
    out = []
    for (vendor, cpu, hv), kernels in sorted(by.items()):
        if len(kernels) < 2:
            continue
        newest = {k: max(ds, key=lambda d: (d.get("created_utc") or "", d["host"]))
                  for k, ds in kernels.items()}
        order = sorted(newest, key=lambda k: (min(d.get("created_utc") or "" for d in kernels[k]), k))
        for before, k in zip(order, order[1:]):
            ref = newest[before]
            b, _ = basemodel.between_digests(ref, newest[k])
            priced = all(((d.get("causes") or {}).get("exit_price") or {}).get("value") is not None
                         for d in (ref, newest[k]))
            out.append({"cpu": f"{vendor} {cpu} ({hv})", "a": ref["host"], "a_kernel": before,
                        "b": newest[k]["host"], "b_kernel": k, "added": b.get("added"),
                        "scale": b.get("scale"), "kind": b.get("kind"), "sentence": b["sentence"],
                        "priced": priced})
    return out


def finite_or_none(x):
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None
