"""The per-call matrix's figures, computed from percall.json's raw rounds every time.

For each cell (mechanism, operation, size, loop shape), two figures:

  undisturbed    what the call costs on this hardware and kernel when the host leaves the CPU
                 alone (stats.undisturbed: each round's floor, its fastest batch, then the
                 mean of the fastest 20% of floors; a jackknife interval over rounds with the
                 run's drift and blocks terms, held to the floors' level spacing).  It
                 reproduces to a fraction of a percent on a shared VM, so comparisons of machines, kernels and settings rest on it;
  typical        what a program meets on this host at this moment: stats.clustered over the
                 rounds, one value per process run (the median of its usable batches), a
                 distribution-free CI over runs with the host's drift within the run folded
                 in.  The neighbours' share of it is the interference, typical - undisturbed.

  Cells that measure waiting (write-sync: the device's floor is its luckiest moment, not its
  cost) or whose floor is not trustworthy (no interval, or its fastest batches disagree) keep
  the typical figure as their primary one, and say why (primary, primary_why).
  the ratios     to the reference cell (64-bit syscall, null, ret) of the same round, paired
                 by round: of the undisturbed figures (stats.undisturbed_ratio) and of the
                 typical ones (stats.paired), each cancelling what moves both cells;
  disturbance    how many batches syscost saw disturbed (an involuntary context switch or
                 stolen time inside the timed window) and were left out.

And for each mechanism and operation with both shapes, the post-return penalty: the cell
called and left by `ret` minus the same cell left by an indirect jump, paired by round.  It is
what the CPU's return-stack predictor costs after the kernel returns; entry/exit figures come
from the jump (or inline) shape so that the penalty is not booked as kernel work.

A results directory written before rounds were kept (percall.json without "rounds") still
analyses: its flat sample list is cut into rounds of params.batches, and every figure from it
is labelled as such.
"""
import bisect
import math

import numpy as np

from ..machine import registry
from . import coreclock, sequential, stats

ANALYSIS = "percall/6"   # 6: the undisturbed figures at the run's top core clock (coreclock),
# and a gated figure's interval over the processes the screen kept
# 5: a gated figure is the mean of the fast state's floors (gated_q)
# A cell is unstable when its estimate is (stats.unstable), or when more than this share of
# its batches were disturbed: then the rest may be the lucky ones.
DISTURBED_UNSTABLE = 0.5
# Below this many rounds the interval is the range of the rounds' values (stats.median_ci),
# whose coverage is 1 - 2 * 0.5**n: 75% for 3 rounds.  Such a cell is flagged.
MIN_ROUNDS = 6
# A batch of the reference cell this far above its undisturbed figure was taken while the host
# was in its slow state: the share of such batches is how often the neighbours were there.
SLOW_STATE = 0.10
# A probe of the host (a process of the reference cell) is in the host's fast state when its
# floor is within HOST_TOL of the run's fastest probe; a cell's process takes the label of the
# probes on either side of it in time (both fast: fast).  The undisturbed figure rests on
# the fast-labelled processes when at least GATED_MIN of them ran; below that the host
# allowed too few quiet moments for this cell, and it has no undisturbed figure (it leads with
# its typical one, and says why).
HOST_TOL = 0.10
GATED_MIN = 3
# What a cell whose fast processes sit at two levels says (two_states): each level's figure
# and count, and that its figure is the level more of them drew.
TWO_STATES = "two states in its fast processes"
# A gated figure is the mean of the fast state's floors: the fast-labelled processes' floors
# within sequential.SCREEN of the lowest of them (never fewer than stats.UNDISTURBED_Q of
# them), the estimand of the sequential rule too.  The gate has already left the slow state
# out, so taking a fifth of the fast processes takes out the fast state's own layout levels a
# second time: at the 7-13 fast processes a default run draws on a host quiet a quarter of
# the time, that is one or two floors, and the figure followed which levels those few drew.
# The screen keeps a mislabelled slow process out.  Reanalysed, the two recorded pairs of
# back-to-back default reports on the noisy Intel guest went from a fast-cell median
# half-width of 3.7% to 2.9%, overlapping in 94 of 96 cells (91 before).  Two later pairs,
# whose host's fast level itself moved 5-7% between runs minutes apart, overlap in no more
# than that move allows with either (50 and 55 of 69 fast cells): no interval of one run
# sees such a move, and the ratios to the reference, paired in the same quiet moments,
# overlapped in 96 of 96 there (docs/syscost.md, "Quiet first").  On a synthetic host
# with four levels, quiet a third of the time, two runs agree in 163 of 164 pairs against
# 158 for a fifth (tests/test_quiet_first.py).
# ... the fastest probe's level being the LEVEL_RANK-th fastest probe: one lucky process must
# not set a bar the host's fast state seldom reaches (measure/bench.py, the same rule live).
LEVEL_RANK = 3


def key(c):
    return (c["variant"], c["op"], c.get("size"), c.get("shape") or "ret")


def _legacy_rounds(cell, params):
    """Rounds cut from a v1 cell's flat sample list (params.batches per round, in order)."""
    flat = cell.get("samples") or []
    per = params.get("sync_batches") if cell.get("op") == "write-sync" else params.get("batches")
    per = per or len(flat) or 1
    out = []
    for i in range(0, len(flat), per):
        out.append({"round": i // per, "samples_ns": flat[i:i + per]})
    return out


def rounds_of(doc, cell):
    """The cell's rounds, and whether they were cut from a legacy flat list."""
    if "rounds" in cell:
        return cell["rounds"], False
    return _legacy_rounds(cell, doc.get("params") or {}), True


def usable(rd, key_name="samples_ns"):
    """A round's batch values without the disturbed ones (all of them if every batch was
    disturbed, so that a busy round still counts once; the disturbance is reported)."""
    vals = rd.get(key_name) or []
    dist = rd.get("disturbed")
    if not dist or len(dist) != len(vals) or not any(dist):
        return list(vals), 0        # (none disturbed: every value, as below, in one call)
    keep = [v for v, d in zip(vals, dist) if not d]
    return (keep if keep else list(vals)), sum(1 for d in dist if d)


def _floor_of(rd):
    v = usable(rd)[0]
    return min(v) if v else None


def clocked(doc, rd, clk=None):
    """A process's usable batch values brought to the run's top core clock
    (coreclock.factor: the host moves the core's clock in steps, and the undisturbed figures
    are at one clock), or as measured when the run did not time the clock.  clk:
    coreclock.clock(doc), read once by a caller that brings many processes."""
    f = coreclock.factor(doc, rd, clk)
    v = usable(rd)[0]
    return v if f == 1.0 else [x * f for x in v]


class _Round:
    """One process's batches as an analysis reads them: usable() (`disturbed`, and `n`, how
    many usable values), their finite values as a float array (`values`, what stats takes of
    the list) and the same at the run's top clock (`clocked`, stats' of clocked()), and each
    one's median (stats.round_median), taken when first asked for."""
    __slots__ = ("rd", "n", "disturbed", "values", "clocked", "_median", "_clocked_median")

    def __init__(self, rd, n, disturbed, values, clocked_):
        self.rd, self.n, self.disturbed, self.values, self.clocked = \
            rd, n, disturbed, values, clocked_
        # `self` marks a median not taken yet (None is the median of a round without values)
        self._median = self._clocked_median = self

    @property
    def median(self):
        if self._median is self:
            self._median = stats.round_median(self.values)
        return self._median

    @property
    def clocked_median(self):
        if self._clocked_median is self:
            self._clocked_median = stats.round_median(self.clocked)
        return self._clocked_median


class _Rounds:
    """One analysis's reading of a matrix's raw rounds (_Round), each cell's made once.
    cell_summary, the ratios to the reference and the penalties each read every round again
    (usable(), clocked(), a float array and a median of each), and the reference's rounds
    again for every cell: an analysis of a default matrix spent most of its time there
    (issue 63).  The arrays hold the values the lists held, so every figure is the same to
    the last bit."""

    def __init__(self, doc):
        self.doc = doc
        self.clk = coreclock.clock(doc)
        self._cells = {}

    def of(self, cell):
        """(rounds, legacy, [_Round], {id(round): _Round}) of a raw cell: rounds_of()'s, and
        each round read."""
        hit = self._cells.get(id(cell))
        if hit is None:
            rounds, legacy = rounds_of(self.doc, cell)
            read = self._read(rounds)
            # the cell is held too, so that its id is not another's while this lives
            hit = self._cells[id(cell)] = (cell, rounds, legacy, read,
                                           {id(rd): r for rd, r in zip(rounds, read)})
        return hit[1:]

    def _read(self, rounds):
        """[_Round] of rounds: every round's usable values converted as one array, brought to
        the top clock by one multiplication (x * f, as clocked() takes it, for every value);
        a round whose values are not all finite numbers goes the way of the lists
        (stats._finite of usable() and of clocked()), and so says what is wrong the same."""
        us = [usable(rd) for rd in rounds]
        lens = [len(u) for u, _ in us]
        flat = [x for u, _ in us for x in u]
        a = None
        if set(map(type, flat)) <= stats.NUMBER:
            a = np.asarray(flat, dtype=float)
            fs = [coreclock.factor(self.doc, rd, self.clk) for rd in rounds] \
                if self.clk[0] else None
            c = a * np.repeat(fs, lens) if fs and any(f != 1.0 for f in fs) else a
            if not (np.isfinite(a).all() and np.isfinite(c).all()):
                a = None
            else:
                # shared by every figure of the cell: none may change them
                a.setflags(write=False)
                c.setflags(write=False)
        if a is None:
            return [_Round(rd, len(u), d, stats._finite(u),
                           stats._finite(clocked(self.doc, rd, self.clk)))
                    for rd, (u, d) in zip(rounds, us)]
        out, end = [], 0
        for rd, (u, d), n in zip(rounds, us, lens):
            out.append(_Round(rd, n, d, a[end:end + n], c[end:end + n]))
            end += n
        return out


def host_probes(doc):
    """[(t_s, floor, fast)] of the run's host probes in time order, and the fast state's level
    (the LEVEL_RANK-th fastest floor): the
    probes tw bench recorded (host_state.probes, the reference's processes, the ones it ran
    while waiting for a quiet host included), or, for a run written before them, the reference
    cell's own processes.  ([], None) when there is none with a time."""
    hs = (doc or {}).get("host_state") or {}
    pts = []
    clk = coreclock.clock(doc)
    if isinstance(hs.get("probes"), list) and hs["probes"]:
        for pr in hs["probes"]:
            t, f, st = pr.get("t_s"), pr.get("floor_ns"), pr.get("chain_ns")
            if isinstance(t, (int, float)) and isinstance(f, (int, float)) and f > 0:
                # at the run's top clock, so a probe at a lower clock is not a slow one (a
                # chain the host slowed with the call is no clock: coreclock.given)
                if clk[0] and isinstance(st, (int, float)) and st > 0:
                    f = f * coreclock.scale(st, clk)
                pts.append((float(t), float(f)))
    else:
        ref = (doc or {}).get("reference") or {}
        for c in (doc or {}).get("cells", []):
            if (c.get("variant"), c.get("op"), c.get("shape") or "ret") == \
                    (ref.get("variant"), ref.get("op", "null"), ref.get("shape", "ret")):
                rounds, _ = rounds_of(doc, c)
                for rd in rounds:
                    v = clocked(doc, rd, clk)
                    t, f = rd.get("t_s"), (min(v) if v else None)
                    if isinstance(t, (int, float)) and f:
                        pts.append((float(t), float(f)))
    if not pts:
        return [], None
    floors = sorted(f for _, f in pts)
    best = floors[min(LEVEL_RANK, len(floors)) - 1]
    pts.sort()
    return [(t, f, f <= best * (1 + HOST_TOL)) for t, f in pts], best


def gated_q(fast_floors):
    """The share of the fast-state processes' floors whose mean is a gated cell's figure:
    those within sequential.SCREEN of the lowest, and never below stats.UNDISTURBED_Q."""
    fl = [f for f in fast_floors if f > 0]
    if not fl:
        return stats.UNDISTURBED_Q
    lo = min(fl)
    near = sum(1 for f in fl if f <= lo * (1 + sequential.SCREEN))
    return max(stats.UNDISTURBED_Q, near / len(fl))


def two_states(fast_floors, all_floors=None):
    """A cell whose fast processes sit at two levels further apart than their layout levels,
    or None: {lower_ns, lower_processes, lower_fast, upper_ns, upper_fast, fast_processes,
    processes, cut_ns, upper_top_ns}.

    The lower level is the floors within sequential.SCREEN of the lowest, in two processes
    at least among all the cell's (all_floors; the fast ones alone when not given); the upper
    one the fast floors above it within twice that of their median, two at least; the gap
    between them must be wider than the SCREEN and than twice either level's own spread.  A
    process between the two (its best batch straddled a switch) counts in neither.  On a noisy
    host two upper fast processes can also be slow ones the probes around them did not see:
    the report says both.

    Seen on AMD EPYC guests: on family 25 model 17 each inline cell of the 64-bit syscall ran
    at one cost in most batches and at its jmp shape's in a few (getppid 156 or 119 ns); on
    family 25 model 1 (issue 62) 64-syscall getppid inline ran whole processes at 183 or at
    140 ns, the lower in 4-6 of 32 processes in each of two back-to-back runs, in any of the
    four copies of the program and at any of the rounds' stack pads, and the runs' fast
    processes drew 0 and 3 of 5 of it: 183.5 ns [183.0, 183.9] then 139.8 [135.1, 144.5], two
    intervals that miss each other."""
    fl = sorted(f for f in fast_floors if f > 0)
    al = sorted(f for f in (fast_floors if all_floors is None else all_floors) if f > 0)
    if not fl or not al:
        return None
    cut = al[0] * (1 + sequential.SCREEN)
    low = [f for f in al if f <= cut]
    up_fast = [f for f in fl if f > cut]
    if len(low) < 2 or len(up_fast) < 2:
        return None
    med = up_fast[len(up_fast) // 2]
    upper = [f for f in up_fast if abs(f / med - 1) <= 2 * sequential.SCREEN]
    if len(upper) < 2:
        return None
    gap = upper[0] / low[-1] - 1
    spread = max(upper[-1] / upper[0] - 1, low[-1] / low[0] - 1)
    if gap <= max(sequential.SCREEN, 2 * spread):
        return None
    lower_fast = sum(1 for f in fl if f <= cut)
    return {"lower_ns": sum(low) / len(low), "lower_processes": len(low),
            "lower_fast": lower_fast, "upper_ns": upper[len(upper) // 2],
            "upper_fast": len(upper), "fast_processes": len(fl), "processes": len(al), "cut_ns": cut,
            "upper_top_ns": upper[-1]}


def _levels(doc, cell, states, fast, fast_floors, vals, times):
    """two_states' result with each level's own figure (lower_figure, upper_figure: {value,
    ci_low, ci_high, n_rounds}) over the fast processes at that level, and which level the
    cell's figure (the screen's: the lowest level any fast process drew) is: tw compare
    decides level against level (analyse/compare.same_state)."""
    with_floor = [i for i in fast if len(vals[i])]
    lo_cut = min(fast_floors) * (1 + sequential.SCREEN)
    for side in ("lower", "upper"):
        pick = [i for i, f in zip(with_floor, fast_floors)
                if (f <= min(lo_cut, states["cut_ns"]) if side == "lower" else
                    states["cut_ns"] < f <= states["upper_top_ns"])]
        if pick:
            f = stats.undisturbed([vals[i] for i in pick], q=1.0,
                                  times=[times[i] for i in pick] if None not in times else None,
                                  resolution=resolution(doc, cell))
            states[f"{side}_figure"] = {k: f.get(k) for k in ("value", "ci_low", "ci_high",
                                                               "n_rounds")}
    states["figure"] = "lower" if states["lower_fast"] else "upper"
    return states


def host_label(probes, t):
    """Whether a process that started at t met the host's fast state: the probes just before
    and just after it were both fast (the one there is, at either end of the run); None when
    there are no probes or t is unknown."""
    if not probes or not isinstance(t, (int, float)):
        return None
    i = bisect.bisect_right(probes, t, key=lambda p: p[0])
    near = [probes[j][2] for j in (i - 1, i) if 0 <= j < len(probes)]
    return all(near)


def sampling_target(target, drift):
    """The half-width a --target cell's own sampling may take so that, with the host's drift
    folded in (hold_host_drift: in quadrature), the interval the run reports is within target:
    (relative target for the sequential plan, the drift's own relative half-width or None, held):
    held when the drift alone takes 90% of the target or more, which no more rounds narrow
    (a `tw bench --target 1%` beside the neighbour on an Intel guest stopped with 48 of 48 fast
    cells met by the rule and 11 of them reported at 1.01-1.10% once the drift was folded in)."""
    rel = (drift or {}).get("rel")
    if not rel:
        return target, None, False
    d = stats.Z * rel
    if d >= 0.9 * target:
        return target, d, True
    return math.sqrt(target * target - d * d), d, False


def undisturbed_of(doc, cell, rounds, vals, times, probes=None, drift=None):
    """A cell's undisturbed figure ({value, ci_low, ci_high, ..., host}) from its rounds'
    usable batch values at the run's top clock (vals, one list a round) and their times:
    with the run's host probes (host_probes(doc)[0], tw bench's quiet-first matrix) the
    figure rests on the processes that met the host's fast state, or is None with why when
    too few did; without, stats.undisturbed over every process.  cell_summary's figure, and
    the fleet's digest's (analyse/fleet.py), so that the two never disagree."""
    n_batches = sum(len(rd.get("samples_ns") or []) for rd in rounds)
    gated = None
    target = ((doc or {}).get("host_state") or {}).get("target")
    if probes:
        labels = [host_label(probes, rd.get("t_s")) for rd in rounds]
        fast = [i for i, x in enumerate(labels) if x]
        gated = {"fast_processes": len(fast), "processes": len(rounds), "min": GATED_MIN}
        fast_floors = [float(min(vals[i])) for i in fast if len(vals[i])]
        gated["fast_floors"] = [round(f, 3) for f in fast_floors]
        # the plan the run stopped by, read as stored: since the drift-aware rule a run
        # says so (host_state.target_plan); an older one planned for the whole target
        if ((doc or {}).get("host_state") or {}).get("target_plan") == "drift":
            drift = drift if drift is not None else host_drift(probes)
        else:
            drift = None
        aimed, drift_rel, held = sampling_target(target, drift) \
            if isinstance(target, (int, float)) and 0 < target < 1 else (None, None, False)
        seq = sequential.progress(fast_floors, aimed, resolution=resolution(doc, cell)) \
            if aimed else None
        if seq and seq["interval"]["value"] is not None:
            # tw bench --target: the figure of the rule that decided when to stop (Stein's
            # two-stage procedure, analyse/sequential.py): the mean of the fast state's
            # floors, with the interval whose coverage does not suffer from the stopping.
            iv = seq["interval"]
            u = {"value": iv["value"], "ci_low": iv["ci_low"], "ci_high": iv["ci_high"],
                 "n_rounds": iv["n"], "n": iv["n"], "q": None, "method": (
                     "sequential (tw bench --target): the mean of the floors of the processes "
                     "that met the host's fast state, Stein's two-stage interval"),
                 "terms": ["sequential"], "sequential": {
                     "need_n": iv["need_n"], "met": iv["met"], "screened": iv["screened"],
                     "target": target, "target_sampling": aimed, "drift_rel": drift_rel,
                     "held_by_drift": held}}
            gated["used"] = True
        elif len(fast) >= GATED_MIN:
            q = gated_q(fast_floors)
            # fast_floors are the floors of these processes, in this order
            with_floor = [i for i in fast if len(vals[i])]
            lo = min(fast_floors, default=0.0)
            near = [i for i, f in zip(with_floor, fast_floors) if f <= lo * (1 + sequential.SCREEN)]
            if q > stats.UNDISTURBED_Q and len(near) >= GATED_MIN:
                # The screen first, then the mean of what it kept with the interval over those
                # processes (q=1): the jackknife's half-samples of all the fast-labelled
                # processes re-took "the fastest q" each time, and a half that dropped fast ones
                # took a mislabelled slow one in, so the interval measured the mislabels, not
                # the fast state (a default report beside the neighbour: 15 fast processes,
                # 10 of them within 0.7% of each other, and a half-width of 2.5%).
                u = stats.undisturbed([vals[i] for i in near], q=1.0,
                                      times=[times[i] for i in near] if None not in times
                                      else None, resolution=resolution(doc, cell))
                u["method"] = stats.method(
                    f"the {len(near)} of the {len(fast_floors)} processes that met the host's "
                    f"fast state within {100 * sequential.SCREEN:.0f}% of their lowest floor")
                gated["screened"] = len(fast_floors) - len(near)
            else:
                u = stats.undisturbed([vals[i] for i in fast], q=q,
                                      times=[times[i] for i in fast] if None not in times
                                      else None, resolution=resolution(doc, cell))
                if q != stats.UNDISTURBED_Q:
                    u["method"] = stats.method(
                        f"the {round(q * len(fast_floors))} of the {len(fast_floors)} "
                        f"processes that met the host's fast state within "
                        f"{100 * sequential.SCREEN:.0f}% of their lowest floor")
            gated["used"], gated["q"] = True, q
            states = two_states(fast_floors, [float(min(v)) for v in vals if len(v)])
            if states:
                u["states"] = _levels(doc, cell, states, fast, fast_floors, vals, times)
        else:
            # Too few quiet moments for this cell: the fastest processes of every state would
            # be a slow state passed off as undisturbed, and one that moves with how many fast
            # processes a run happened to draw (an A/A compare called 11 cells where chance
            # gave 5).  So no undisturbed figure, the lowest floor seen said, and the cell
            # leads with its typical figure.
            floors_all = [float(min(v)) for v in vals if len(v)]
            low = min(floors_all) if floors_all else None
            gated["used"] = False
            gated["why"] = (f"only {len(fast)} of its {len(rounds)} processes ran while the host "
                            f"was in its fast state (at least {GATED_MIN} are needed)"
                            + (f"; the lowest floor seen was {low:.1f} ns" if low else ""))
            u = {"value": None, "ci_low": None, "ci_high": None, "why": gated["why"],
                 "n_rounds": len(rounds), "n": n_batches, "q": stats.UNDISTURBED_Q,
                 "lowest_ns": low, "method": stats.METHOD}
        u = dict(u, host=gated)
    else:
        u = stats.undisturbed(vals, times=times if None not in times else None,
                              resolution=resolution(doc, cell))
    return u


def cell_summary(doc, cell, probes=None, read=None, drift=None):
    """The analysed cell: the raw cell's identity plus every figure (no raw samples).
    probes: host_probes(doc)[0], when the run has host probes (tw bench's quiet-first
    matrix): the undisturbed figure then rests on the processes that met the host's fast
    state.  read: the analysis's _Rounds(doc), when it has one."""
    ident = {k: cell.get(k) for k in ("variant", "bits", "abi", "mechanism", "op", "size",
                                       "supported", "status", "reason", "errors")}
    ident["shape"] = cell.get("shape") or "ret"
    if ident["status"] is None:
        ident["status"] = "works" if cell.get("supported") else "unsupported"
    if not cell.get("supported"):
        return dict(ident, median=None, ci_low=None, ci_high=None, n=0, unstable=False,
                    flags=[ident["status"]])
    read = read or _Rounds(doc)
    rounds, legacy, rds, _ = read.of(cell)
    vals = [r.values for r in rds]
    loops, offs, times = [], [], []
    n_batches = n_disturbed = 0
    for rd, r in zip(rounds, rds):
        n_batches += len(rd.get("samples_ns") or [])
        n_disturbed += r.disturbed
        times.append(rd.get("t_s", rd.get("round")))
        loops.extend(rd.get("loop_ns") or [])
        offs.extend(usable(rd, "offcpu_ns")[0] if rd.get("offcpu_ns") else [])
    s = stats.clustered(vals, times if None not in times else None)
    out = dict(ident, **s)
    # The undisturbed figures at the run's top core clock; the typical one as measured.
    if read.clk[0]:
        vals = [r.clocked for r in rds]
        # the k-best floor too, which decides whether the floor can be trusted: five fastest
        # batches of processes at 2.5 and 2.8 GHz disagree by 12% as measured, and six fast
        # cells of a report beside the neighbour lost their undisturbed figure to that
        s = dict(s, floor=stats.floor(np.concatenate(vals) if vals else []))
        out["floor"] = s["floor"]
    u = undisturbed_of(doc, cell, rounds, vals, times, probes, drift)
    gated = u.get("host")
    out["undisturbed"] = u
    # The old method's figure (before percall/4), to read an old result beside the new.
    out["undisturbed_pooled"] = stats.undisturbed_pooled(
        vals, times=times if None not in times else None)
    out["undisturbed_ns"], out["undisturbed_ci_low"], out["undisturbed_ci_high"] = \
        u.get("value"), u.get("ci_low"), u.get("ci_high")
    out["n_batches"] = n_batches
    out["disturbed"] = {"batches": n_disturbed, "of": n_batches,
                        "counted": any("disturbed" in rd for rd in rounds)}
    if legacy:
        out["legacy"] = "rounds cut from a flat sample list (results written before rounds were kept)"
        loops = cell.get("loop_samples") or []
        if not loops and isinstance(cell.get("loop_ns"), dict):
            out["loop_ns"] = dict(cell["loop_ns"], from_stored_summary=True)
        if isinstance(cell.get("offcpu_ns"), dict) and cell["offcpu_ns"].get("samples"):
            offs = cell["offcpu_ns"]["samples"]
    if loops:
        out["loop_ns"] = stats.summarize(loops)
    out["offcpu_ns"] = stats.summarize(offs) if offs else \
        out.get("offcpu_ns") or {"value": None, "why": "syscost reported no off-CPU time"}
    out["calls_per_batch"] = cell.get("calls_per_batch") or \
        next((rd.get("calls_per_batch") for rd in rounds if rd.get("calls_per_batch")), None)
    flags, why, typ_why = [], [], []
    primary, primary_why = _primary(ident["op"], u, s)
    out["primary"], out["primary_why"] = primary, primary_why
    if s["n_rounds"] < MIN_ROUNDS:
        typ_why.append(f"only {s['n_rounds']} round(s): the interval is their range, "
                       f"{100 * (1 - 2 * 0.5 ** s['n_rounds']):.0f}% coverage")
    if s["unstable"] and s.get("median") is not None:
        typ_why.append(f"interval ±{100 * (stats.half_width_rel(s) or 0):.0f}% of the median")
    if n_batches and n_disturbed / n_batches > DISTURBED_UNSTABLE:
        typ_why.append(f"{n_disturbed} of {n_batches} batches disturbed")
    out["typical_unstable"] = bool(typ_why) or s.get("median") is None
    out["typical_unstable_why"] = "; ".join(typ_why) or None
    if primary == "typical":
        why = typ_why
    else:
        if u.get("few_rounds"):
            why.append(f"only {u['n_rounds']} "
                       + ("processes that met the host's fast state" if gated and gated.get("used")
                          else "rounds") + ": the jackknife's own spread is uncertain")
        hu = stats.half_width_rel(u, "value")
        if hu is not None and hu > stats.UNSTABLE_REL:
            why.append(f"undisturbed interval ±{100 * hu:.0f}%")
    st = u.get("states")
    if st:
        # said in the cell whatever its width: each state's figure, how many of the cell's
        # processes drew it (and of its fast ones), and which the figure is (no "; " inside:
        # the report splits reasons on it)
        out["states_why"] = (
            f"{TWO_STATES}, {st['lower_ns']:.0f} ns in {st['lower_fast']} of its "
            f"{st['fast_processes']} fast processes ({st['lower_processes']} of all "
            f"{st['processes']}) and {st['upper_ns']:.0f} ns in {st['upper_fast']}: the figure "
            f"is the {st['figure']} level's, each level's is beside it, and tw compare decides "
            "level against level (the upper may also be slow processes the probes did not see)")

    out["interference"] = _interference(s, u)
    fl = s.get("floor") or {}
    out["unstable"] = bool(why) or s.get("median") is None
    out["unstable_why"] = "; ".join(why) or None
    if out["unstable"]:
        flags.append("unstable")
    if cell.get("errors"):
        flags.append("error")
    if s.get("median") is None:
        flags.append("no samples")
    out["flags"] = flags
    out["floor_ns"] = fl.get("value")
    return out


def resolution(doc, cell):
    """The clock's resolution per call, in ns: one tick over the calls in a batch (a TSC tick
    at the run's measured rate; a nanosecond for CLOCK_MONOTONIC), or None when unknown."""
    calls = cell.get("calls_per_batch")
    if not isinstance(calls, (int, float)) or calls <= 0:
        return None
    hz = doc.get("tsc_hz")
    tick = 1e9 / hz if doc.get("clock") == "tsc" and isinstance(hz, (int, float)) and hz > 0 \
        else 1.0 if doc.get("clock") == "monotonic" else None
    return tick / calls if tick else None


# Operations that measure waiting: their fastest batches are the device's luckiest moments.
WAITING_OPS = ("write-sync",)


def _primary(op, u, s):
    """('undisturbed' or 'typical', why the typical one) for a cell."""
    if op in WAITING_OPS:
        return "typical", "it measures waiting for the device, whose fastest moments are luck, not cost"
    if u.get("value") is None or u.get("ci_low") is None:
        return "typical", u.get("why") or "no undisturbed figure"
    fl = s.get("floor") or {}
    if fl.get("agree") is False:
        return "typical", (f"its {fl.get('k')} fastest batches disagree by more than "
                           f"{100 * stats.FLOOR_SPREAD:.0f}%: no stable floor")
    g = u.get("host") or {}
    n = u.get("n_rounds") or 0
    if op not in FAST_OPS and g.get("used") and not u.get("sequential") \
            and n < stats.UNDISTURBED_MIN_ROUNDS:
        # The quiet-first matrix measures these cells in the host's slow moments first
        # (measure/bench.py, next_chunk), so their undisturbed figure rests on the few
        # processes that happened to meet a quiet one: an A/A compare of two default reports
        # called the write-file cells 3-10% apart on such figures, beyond their intervals.
        return "typical", (f"its undisturbed figure rests on only {n} processes that met the "
                           "host's fast state (the matrix measures this cell in the host's "
                           "slow moments first)")
    return "undisturbed", None


def _interference(s, u):
    """typical - undisturbed, in ns and as a share of the typical figure (what the host's other
    tenants added on average at this moment), or None."""
    med, und = s.get("median"), u.get("value")
    if med is None or und is None or med <= 0:
        return None
    return {"ns": med - und, "share": (med - und) / med}


def figure(c, which=None):
    """The summary-like {median, ci_low, ci_high} of a cell's figure: `which` is 'undisturbed',
    'cycles' (the undisturbed figure in the core's cycles, when the run timed the clock),
    'typical', or None for the cell's primary one.  None when it has no value."""
    which = which or (c or {}).get("primary") or "typical"
    if not c or not c.get("supported"):
        return None
    if which == "cycles":
        cy = c.get("undisturbed_cycles")
        if not cy or cy.get("ci_low") is None:
            return None
        return {"median": cy["value"], "ci_low": cy["ci_low"], "ci_high": cy["ci_high"],
                "n": (c.get("undisturbed") or {}).get("n_rounds"),
                "unstable": c.get("unstable"), "figure": "undisturbed"}
    if which == "undisturbed":
        if c.get("undisturbed_ns") is None or c.get("undisturbed_ci_low") is None:
            return None
        return {"median": c["undisturbed_ns"], "ci_low": c["undisturbed_ci_low"],
                "ci_high": c["undisturbed_ci_high"], "n": (c.get("undisturbed") or {}).get("n_rounds"),
                "unstable": c.get("unstable"), "figure": "undisturbed"}
    if c.get("median") is None:
        return None
    return {"median": c["median"], "ci_low": c["ci_low"], "ci_high": c["ci_high"], "n": c.get("n_rounds"),
            "unstable": c.get("typical_unstable"), "figure": "typical", "drift": c.get("drift")}


def ratio_of(c, which=None):
    """The cell's ratio to the reference for one figure (primary when None)."""
    which = which or (c or {}).get("primary") or "typical"
    return (c or {}).get("undisturbed_ratio" if which == "undisturbed" else "ratio")


def analyse(doc):
    """{analysis, reference, cells: [analysed cell], penalties: [...], disturbance, source}
    from a percall.json document (either schema).  Never raises on a cell that has no
    samples: it says so."""
    if not doc:
        return None
    probes, _ = host_probes(doc) if (doc.get("host_state") or {}).get("probes") else ([], None)
    read = _Rounds(doc)
    # the host's drift first: a --target plan leaves it its share of the target
    drift = host_drift(probes)
    cells = [cell_summary(doc, c, probes, read, drift) for c in doc.get("cells", [])]
    by_key = {key(c): (c, raw) for c, raw in zip(cells, doc.get("cells", []))}
    ref = doc.get("reference") or {}
    ref_name = ref.get("variant") or registry.find(64, "syscall")
    rkey = (ref_name, ref.get("op", "null"), None, ref.get("shape", "ret"))
    ref_pair = by_key.get(rkey)
    legacy = any("rounds" not in c for c in doc.get("cells", []) if c.get("supported"))
    ref_rounds = _ref_by_round(read, ref_pair[1]) if ref_pair else None
    for c in cells:
        raw = by_key[key(c)][1]
        if not c.get("supported") or ref_pair is None or not ref_pair[0].get("supported"):
            c["ratio"] = c["undisturbed_ratio"] = None
            continue
        pairs = _nearest_reference(read, raw, ref_rounds)
        c["ratio"] = _to_reference(pairs)
        c["undisturbed_ratio"] = _undisturbed_to_reference(pairs, probes)
    penalties = []
    for c in cells:
        if c["shape"] != "ret" or not c.get("supported"):
            continue
        jk = (c["variant"], c["op"], c.get("size"), "jmp")
        if jk in by_key and by_key[jk][0].get("supported"):
            d = _paired(doc, by_key[key(c)][1], by_key[jk][1], "diff", read)
            if d and c.get("median"):
                # A difference near zero has no relative width to judge: it is unstable when
                # its interval is wide against the call it is part of.
                d["unstable"] = bool((d["ci_high"] - d["ci_low"]) / 2 > stats.UNSTABLE_REL * c["median"])
            penalties.append({"variant": c["variant"], "op": c["op"], "size": c.get("size"),
                              "penalty_ns": d, "ret_ns": c.get("median"),
                              "jmp_ns": by_key[jk][0].get("median")})
    nb = sum((c.get("disturbed") or {}).get("of", 0) for c in cells)
    nd = sum((c.get("disturbed") or {}).get("batches", 0) for c in cells)
    counted = any((c.get("disturbed") or {}).get("counted") for c in cells)
    for c in cells:
        hold_host_drift(c, drift)
    clock = coreclock.summary(doc)
    for c in cells:
        c["undisturbed_cycles"] = _cycles(c, clock)
    return {"analysis": ANALYSIS, "core_clock": clock, "reference": {"variant": rkey[0], "op": rkey[1], "shape": rkey[3]},
            "cells": cells, "penalties": penalties,
            "disturbance": {"batches": nb, "disturbed": nd if counted else None,
                            "policy": "disturbed batches are left out of each round's value "
                                      "(a round whose every batch was disturbed counts whole)",
                            "why": None if counted else
                            "syscost recorded no disturbance counters in these results"},
            "unstable": sum(1 for c in cells if c.get("supported") and c.get("unstable")),
            "typical_unstable": sum(1 for c in cells if c.get("supported") and c.get("typical_unstable")),
            "host": host_state(doc, ref_pair[1] if ref_pair else None,
                               ref_pair[0] if ref_pair else None, cells),
            "measured": sum(1 for c in cells if c.get("supported") and c.get("median") is not None),
            "host_drift": drift,
            "source": "legacy flat samples" if legacy else "raw rounds",
            # a matrix a signal cut: its rounds so far, kept (measure/bench.py)
            "interrupted": doc.get("interrupted")}


# The host's drift over the run, from its probes (the reference cell's processes tw bench runs
# between the cells, host_probes): the fast state's level block by block.
DRIFT_BLOCKS = 4
DRIFT_MIN_PER_BLOCK = 2


def host_drift(probes, blocks=DRIFT_BLOCKS):
    """How far the host's fast state moved over the run: the run's fast probes (the reference
    cell's processes that met it, at the run's top clock) cut into `blocks` stretches of time,
    the relative standard deviation of the stretches' medians.  {rel, blocks, probes, why}:
    rel None with why when too few fast probes fell in the stretches.

    Every cell's processes met the same host: a move of the fast state between the run's
    stretches is a move a rerun minutes later meets too, and no spread among one cell's own
    processes need show it (on an AMD EPYC Zen 3 guest fast in 7-16% of its reference's
    batches, intervals of ±0.1-0.4% moved 0.3-2% between runs minutes apart: 73 of 82 and
    114 of 122 cells overlapped, issue 73)."""
    fast = [(t, f) for t, f, ok in probes or [] if ok]
    if not fast:
        return {"rel": None, "blocks": 0, "probes": 0,
                "why": "no host probes that met the fast state (a run without them, or none fast)"}
    t0, t1 = probes[0][0], probes[-1][0]
    span = (t1 - t0) or 1.0
    by = [[] for _ in range(blocks)]
    for t, f in fast:
        by[min(blocks - 1, int((t - t0) / span * blocks))].append(f)
    meds = [float(np.median(b)) for b in by if len(b) >= DRIFT_MIN_PER_BLOCK]
    if len(meds) < 2:
        return {"rel": None, "blocks": len(meds), "probes": len(fast),
                "why": f"fewer than two stretches of the run with {DRIFT_MIN_PER_BLOCK} fast probes"}
    return {"rel": float(np.std(meds, ddof=1) / np.mean(meds)), "blocks": len(meds),
            "probes": len(fast), "why": None}


def drift_widened(v, lo, hi, drift):
    """(low, high, width) of an interval [lo, hi] about v widened to hold the host's drift over
    the run (host_drift: Z times its relative deviation, in quadrature with the run's own
    half-width); width {run_ns, drift_ns, drift_why} says which part is which.  The interval
    is returned as it was where the drift is unknown or none.  The report's cells
    (hold_host_drift) and the fleet's digest (fleet.undisturbed) both widen by this."""
    run = max(v - lo, hi - v)
    rel = (drift or {}).get("rel")
    host = stats.Z * rel * abs(v) if rel else 0.0
    width = {"run_ns": run, "drift_ns": host,
             "drift_why": None if rel else (drift or {}).get("why")}
    if host <= 0:
        return lo, hi, width
    h = math.hypot(run, host)
    return v - h, v + h, width


def hold_host_drift(c, drift):
    """A cell's undisturbed interval widened, in place, to hold the host's drift over the run
    (drift_widened), the two parts kept: undisturbed.width {run_ns, drift_ns}, so that each
    cell says which part of its width is the run's and which the host's."""
    u = c.get("undisturbed") or {}
    v, lo, hi = c.get("undisturbed_ns"), c.get("undisturbed_ci_low"), c.get("undisturbed_ci_high")
    if v is None or lo is None or hi is None:
        return
    lo2, hi2, u["width"] = drift_widened(v, lo, hi, drift)
    if u["width"]["drift_ns"] <= 0:
        return
    c["undisturbed_ci_low"], c["undisturbed_ci_high"] = lo2, hi2
    u["ci_low"], u["ci_high"] = lo2, hi2
    u["terms"] = list(u.get("terms") or []) + ["host drift"]


def _cycles(c, clock):
    """A cell's undisturbed figure in the core's cycles ({value, ci_low, ci_high}), from its
    figure at the run's top clock; None when the run has no clock or the cell no figure."""
    k = clock.get("cycles_per_ns")
    if not k or c.get("undisturbed_ns") is None or c.get("undisturbed_ci_low") is None:
        return None
    return {"value": c["undisturbed_ns"] * k, "ci_low": c["undisturbed_ci_low"] * k,
            "ci_high": c["undisturbed_ci_high"] * k}


def _ref_by_round(read, ref):
    """{round: [(t_s, _Round)]} of the reference cell's processes with usable batches: what
    each cell is paired with, read once per analysis (read: its _Rounds)."""
    rr, _, rds, _ = read.of(ref)
    by_round = {}
    for rd, r in zip(rr, rds):
        if r.n:
            by_round.setdefault(rd.get("round"), []).append((rd.get("t_s"), r))
    return by_round


def _nearest_reference(read, cell, by_round):
    """[(the cell's _Round, the reference's _Round, t_s)]: each of the cell's processes with
    usable batches against the reference's process of the same round nearest to it in time
    (the reference runs several times a round: the host's speed moves within a round), or
    the round's first when a time is missing (results without time stamps pair by round
    alone).  Both ratios to the reference take these pairs."""
    rc, _, rds, _ = read.of(cell)
    out = []
    for rd, r in zip(rc, rds):
        refs = by_round.get(rd.get("round"))
        if not refs or not r.n:
            continue
        t = rd.get("t_s")
        ts = [x[0] for x in refs]
        if t is None or None in ts:
            near = refs[0]
        else:
            # the first of the nearest, as min(refs, key=distance) takes it
            d = [abs(x - t) for x in ts]
            near = refs[d.index(min(d))]
        out.append((r, near[1], t))
    return out


def _to_reference(pairs):
    """cell / reference per round, over _nearest_reference's pairs (each side's usable
    batches at the run's top clock, the median of each)."""
    s = stats.paired_medians([r.clocked_median for r, _, _ in pairs],
                             [o.clocked_median for _, o, _ in pairs], "ratio")
    return s if s.get("median") is not None and math.isfinite(s["median"]) else None


def _undisturbed_to_reference(pairs, probes=None):
    """cell / reference of the undisturbed figures over _nearest_reference's pairs: the
    figure is over processes' floors, so each side of a pair is one process, and the
    reference's process a fraction of a second from the cell's.  With the host's probes,
    only the pairs whose cell process met the fast state (so did its reference, a probe
    beside it), when there are GATED_MIN of them: both sides of each pair from one quiet
    moment."""
    pa = [r.clocked for r, _, _ in pairs]
    pb = [o.clocked for _, o, _ in pairs]
    quiet = [bool(probes) and host_label(probes, t) is True for _, _, t in pairs]
    if sum(quiet) >= GATED_MIN:
        pa = [x for x, q in zip(pa, quiet) if q]
        pb = [x for x, q in zip(pb, quiet) if q]
    return stats.undisturbed_ratio(pa, pb)


def _counted(xs):
    """The sum of a round's counters (steal ticks, switches), what is not a number left out."""
    if not xs:
        return 0
    if set(map(type, xs)) <= {int}:
        return sum(xs)      # the counters syscost writes: nothing to leave out, one call
    return sum(x for x in xs if isinstance(x, (int, float)))


def host_state(doc, ref_raw, ref_cell, cells):
    """This host during the run: the reference cell's batches over time, how often they were in
    the slow state, the steal time and involuntary switches syscost counted, and the
    interference over the whole matrix.  Figures it cannot give are None with a why."""
    out = {"series": [], "slow_share": None, "slow_margin": SLOW_STATE, "steal_ticks": None,
           "nivcsw": None, "batches": 0, "interference_share_median": None,
           "interference_share_reference": None}
    shares = [c["interference"]["share"] for c in cells
              if c.get("supported") and c.get("interference") and c.get("op") not in WAITING_OPS]
    if shares:
        shares.sort()
        out["interference_share_median"] = shares[len(shares) // 2]
    steal = nivcsw = counted = 0
    for c in (doc or {}).get("cells", []):
        for rd in c.get("rounds") or []:
            if "steal_ticks" in rd or "nivcsw" in rd:
                counted += 1
                steal += _counted(rd.get("steal_ticks"))
                nivcsw += _counted(rd.get("nivcsw"))
    if counted:
        out["steal_ticks"], out["nivcsw"] = steal, nivcsw
    else:
        out["why_counters"] = "syscost recorded no steal or context-switch counters in these results"
    out.update(quiet(doc, cells))
    if ref_raw is None or ref_cell is None or ref_cell.get("undisturbed_ns") is None:
        out["why"] = ("the reference cell was not measured" if ref_cell is None or
                      ref_cell.get("median") is None else
                      "the reference cell has no undisturbed figure: "
                      + ((ref_cell.get("undisturbed") or {}).get("why") or "unknown"))
        return out
    ref_cell_i = ref_cell.get("interference")
    out["interference_share_reference"] = ref_cell_i["share"] if ref_cell_i else None
    floor_ = ref_cell["undisturbed_ns"]
    rounds, _ = rounds_of(doc, ref_raw)
    slow = total = 0
    # at the run's top core clock, as the undisturbed figure: a batch at a lower clock is not
    # one the other tenants slowed (the clock over the run is clock_series)
    clk = coreclock.clock(doc)
    for r in rounds:
        t = r.get("t_s")
        for v in clocked(doc, r, clk):
            if v is None:
                continue
            out["series"].append([t, v])
            total += 1
            slow += v > floor_ * (1 + SLOW_STATE)
    out["batches"] = total
    out["slow_share"] = slow / total if total else None
    out["reference_ns"] = floor_
    return out


# A cell still wider than this after the run gets a projection of the time this host would
# need for it (at the fast share it showed).
PROJECT_TARGET = 0.01


def quiet(doc, cells):
    """What the host allowed: the share of the probes (the reference's processes) in its fast
    state, the waiting the quiet-first matrix did, how many fast-state processes each
    undisturbed figure rests on, and for a fast cell still wider than PROJECT_TARGET how long
    this host would need for it.  {} for a run without probes."""
    probes, best = host_probes(doc)
    if not probes or not (doc.get("host_state") or {}).get("probes"):
        return {}
    hs = (doc or {}).get("host_state") or {}
    n_fast = sum(1 for p in probes if p[2])
    out = {"probes": len(probes), "fast_probes": n_fast, "fast_share": n_fast / len(probes),
           "fast_tol": HOST_TOL, "fast_level_ns": best, "level_rank": LEVEL_RANK,
           "probe_series": [[round(t, 3), round(f, 2), bool(k)] for t, f, k in probes],
           # the core's clock at each probe, in GHz (analyse/coreclock.py), when it was timed
           "clock_series": [[round(float(p["t_s"]), 3), round(coreclock.ghz(p["chain_ns"]), 3)]
                            for p in hs.get("probes") or []
                            if isinstance(p.get("t_s"), (int, float))
                            and isinstance(p.get("chain_ns"), (int, float)) and p["chain_ns"] > 0],
           "quiet_first": bool(hs.get("quiet_first")), "waited_s": hs.get("waited_s"),
           "budget_s": hs.get("budget_s"), "target": hs.get("target"),
           "stopped": hs.get("stopped"), "gated": bool(hs.get("probes")),
           "deadline_s": hs.get("deadline_s"),
           "rounds": (doc.get("params") or {}).get("rounds"),
           "rounds_mode": (doc.get("params") or {}).get("rounds_mode")}
    # bursts: runs of consecutive fast probes, their start, end and length
    bursts, start = [], None
    for i, (t, _, k) in enumerate(probes):
        if k and start is None:
            start = t
        if start is not None and (not k or i == len(probes) - 1):
            end = t if k else probes[i - 1][0]
            bursts.append([round(start, 3), round(end, 3)])
            start = None
    out["bursts"] = len(bursts)
    out["longest_burst_s"] = max((b - a for a, b in bursts), default=0.0)
    # Never quiet: no two probes in a row were fast, so no process between two probes met the
    # fast state; the fast level is then isolated instants, not a state of the host.
    run_ = longest = 0
    for _, _, k in probes:
        run_ = run_ + 1 if k else 0
        longest = max(longest, run_)
    out["longest_fast_run"] = longest
    out["never_quiet"] = longest < 2
    if out["never_quiet"]:
        out["never_quiet_why"] = (f"no two of its {len(probes)} probes in a row came within "
                                  f"{100 * HOST_TOL:.0f}% of the fast level ({best:.1f} ns): the "
                                  "host was never quiet for long; the lowest state seen is "
                                  f"{probes and min(f for _, f, _ in probes):.1f} ns "
                                  "for the reference, isolated instants, not a known "
                                  "undisturbed state")
    wall = (doc or {}).get("wall_s")
    rounds = ((doc or {}).get("params") or {}).get("rounds")
    round_s = wall / rounds if isinstance(wall, (int, float)) and rounds else None
    out["round_s"] = round_s
    per, per_fast, wide, bound = [], [], [], 0
    for c in cells:
        u = c.get("undisturbed") or {}
        g = u.get("host")
        if not c.get("supported") or not g:
            continue
        per.append(g["fast_processes"])
        if c.get("op") in FAST_OPS:
            per_fast.append(g["fast_processes"])
        hu = stats.half_width_rel(u, "value")
        if c.get("op") in FAST_OPS and c.get("primary") == "undisturbed" and hu is not None \
                and hu > PROJECT_TARGET and round_s and out["fast_share"] > 0:
            # analyse/sequential.py's projection: the fast processes ±1% needs by the rule
            # tw bench --target stops on, at one process of this cell a round
            pj = sequential.projection(g.get("fast_floors") or [], out["fast_share"], round_s,
                                       PROJECT_TARGET)
            # The whole of a `tw bench --target 1%` run's time, the command the report gives,
            # not what is left beyond this run's processes: a run whose processes already
            # number the plan's, but whose own interval (not Stein's) is wider, was told "0 s
            # more" beside "still wider than ±1%" (an AMD EPYC guest, five cells).
            if pj.get("seconds") is not None:
                wide.append(pj["seconds"])
                bound += bool(pj.get("why"))
                u["projection"] = dict(pj, target=PROJECT_TARGET)
    if per:
        per.sort()
        out["fast_processes_median"] = per[len(per) // 2]
        out["fast_processes_min"] = per[0]
    if per_fast:
        # the fast cells alone: the matrix gives them the host's fast moments and the other
        # cells its slow ones (measure/bench.py, next_chunk), so the two medians differ
        per_fast.sort()
        out["fast_processes_median_fast_cells"] = per_fast[len(per_fast) // 2]
        out["fast_processes_min_fast_cells"] = per_fast[0]
    if wide:
        wide.sort()
        out["projection_s_median"] = wide[len(wide) // 2]
        out["projection_s_max"] = wide[-1]
        out["projected_cells"] = len(wide)
        # cells whose plan is not made yet (fewer fast processes than the rule's first stage):
        # their time is a lower bound, the first stage's alone
        out["projection_lower_bounds"] = bound
    return out


def _round_pairs(doc, a, b, read=None):
    """[(round of a, round of b)]: the raw processes of cells a and b, matched by round
    number, for the rounds both have, in a's order; or, where both cells
    are the headline's (measure/bench.py), by the quiet burst that measured both (`burst`):
    a round may then hold several blocks, each one moment of the host for both sides.
    read: the analysis's _Rounds, whose rounds these are then."""
    ra, _ = rounds_of(doc, a) if read is None else read.of(a)[:2]
    rb, _ = rounds_of(doc, b) if read is None else read.of(b)[:2]
    by_burst_b = {r["burst"]: r for r in rb if isinstance(r.get("burst"), int)}
    if by_burst_b and any(isinstance(r.get("burst"), int) for r in ra):
        return [(r, by_burst_b[r["burst"]]) for r in ra if r.get("burst") in by_burst_b]
    by_round_b = {r.get("round"): r for r in rb}
    return [(r, by_round_b[r.get("round")]) for r in ra if r.get("round") in by_round_b]


def _by_round(doc, a, b):
    """The usable batches of cells a and b, round by round, for the rounds both have."""
    pairs = _round_pairs(doc, a, b)
    return [usable(r)[0] for r, _ in pairs], [usable(o)[0] for _, o in pairs]


def _paired(doc, a, b, how, read=None):
    """stats.paired of cells a and b over the rounds both have (_by_round); read: the
    analysis's _Rounds, whose rounds' medians it then takes."""
    if read is None:
        pa, pb = _by_round(doc, a, b)
        s = stats.paired(pa, pb, how)
    else:
        ia, ib = read.of(a)[3], read.of(b)[3]
        pairs = _round_pairs(doc, a, b, read)
        s = stats.paired_medians([ia[id(r)].median for r, _ in pairs],
                                 [ib[id(o)].median for _, o in pairs], how)
    return s if s.get("median") is not None and math.isfinite(s["median"]) else None


def exit_cell(analysed):
    """The cell that prices one VM exit (cpuid ret: one exit and back on a guest, the
    instruction itself on bare metal; only the 64-bit syscall variant has it, variants/
    registry) of an analysed or raw matrix, or of its cells list; None without one."""
    cells = analysed.get("cells") if isinstance(analysed, dict) else analysed
    return next((c for c in cells or [] if c.get("op") == "cpuid"
                 and (c.get("shape") or "ret") == "ret"), None)


def find(analysed, variant, op, size=None, shape="ret"):
    """The analysed cell, or None."""
    for c in (analysed or {}).get("cells", []):
        if c["variant"] == variant and c["op"] == op and c.get("shape", "ret") == shape and \
                (size is None or c.get("size") == size):
            return c
    return None


# -- the benchmark's own figures (tw bench --accuracy, --selfcheck) ---------------------------

# Targets the accuracy figures are printed against (never asserted: these machines are noisy).
TARGET_PERF_RATIO = 0.05     # 64-bit getppid within 5% of perf bench
TARGET_LOOP_NS = 1.0         # empty loop cost per call
TARGET_CI_HALF = 0.02        # CI half-width of the fast cells, ratio form at least
TARGET_WALL_S = 60.0         # the full matrix, default mode
FAST_OPS = ("null", "getppid", "write-devnull")


def accuracy(doc, analysed):
    """The figures `tw bench --accuracy` prints: perf bench beside our twin cells (shape
    matched: perf bench calls glibc's getppid(), a called function that returns with ret),
    the empty loop, the fast cells' CI half-widths, the wall time."""
    pb = (doc or {}).get("perf_bench") or {}
    acc = {}
    if pb.get("samples"):
        acc["perf_bench_ns"] = stats.summarize(pb["samples"])
    else:
        acc["perf_bench_ns"] = {"value": None, "why": pb.get("why") or "perf bench was not run"}
    libc64, sys64 = registry.find(64, "libc"), registry.find(64, "syscall")
    for label, name in (("libc", libc64), ("syscall", sys64)):
        c = find(analysed, name, "getppid")
        acc[f"getppid_{label}_ns"] = c if c and c.get("median") is not None else \
            {"value": None, "why": f"{name} getppid was not measured"}
    twin = acc["getppid_libc_ns"]
    if acc["perf_bench_ns"].get("median") and twin.get("median"):
        r = stats.ratio_summary(acc["perf_bench_ns"], twin)
        acc["perf_over_twin"] = r
        acc["within_5pct"] = bool(abs(r["median"] - 1) <= TARGET_PERF_RATIO)
    else:
        acc["perf_over_twin"], acc["within_5pct"] = None, None
    loops = [c["loop_ns"]["median"] for c in analysed["cells"]
             if isinstance(c.get("loop_ns"), dict) and c["loop_ns"].get("median") is not None]
    acc["loop_ns"] = stats.summarize(loops) if loops else {"value": None, "why": "no cell measured"}
    acc["loop_ns_max_cell"] = max(loops) if loops else None
    halfs = []
    for c in analysed["cells"]:
        if c["op"] in FAST_OPS and c.get("supported") and c.get("median") is not None:
            h = stats.half_width_rel(c)
            hr = stats.half_width_rel(c.get("ratio")) if c.get("ratio") else None
            halfs.append({"variant": c["variant"], "op": c["op"], "shape": c["shape"],
                          "median": c["median"], "ci_half_rel": h, "ratio_ci_half_rel": hr})
    acc["fast_cells"] = halfs
    acc["wall_s"] = doc.get("wall_s")
    acc["full_matrix"] = doc.get("full_matrix")
    return acc


def _quiet_by_round(doc, a, b):
    """The rounds of cells a and b whose two processes both met the host's fast state (each
    labelled by the probes around it, host_label), as _by_round gives them, and how many:
    (pa, pb, quiet pairs, pairs).  A run without probes (written before quiet first) gives
    every round, as before; a run with probes gives its quiet pairs only, however few."""
    probes, _ = host_probes(doc)
    has_probes = bool(((doc or {}).get("host_state") or {}).get("probes"))
    pairs = _round_pairs(doc, a, b)
    quiet = [(r, o) for r, o in pairs if not has_probes or (
        host_label(probes, r.get("t_s")) is True and host_label(probes, o.get("t_s")) is True)]
    clk = coreclock.clock(doc)
    return ([clocked(doc, r, clk) for r, _ in quiet], [clocked(doc, o, clk) for _, o in quiet],
            len(quiet), len(pairs))


def pair_undisturbed(doc, a, b, op="null", shape="ret", how="ratio"):
    """a / b (or with how="diff", a - b) of two variants' undisturbed figures, over the rounds
    in which both cells' processes met the host's fast state, so that the comparison carries
    no host state: the same rounds left out of both by the jackknife (stats.undisturbed_ratio),
    with n_pairs, the quiet pairs behind it.  None when either cell has no rounds, or when
    fewer than GATED_MIN rounds had both sides quiet (then compare each side's own gated
    figure, unpaired)."""
    cells = {(c["variant"], c["op"], c.get("shape") or "ret"): c for c in (doc or {}).get("cells", [])
             if c.get("supported")}
    ca, cb = cells.get((a, op, shape)), cells.get((b, op, shape))
    if ca is None or cb is None:
        return None
    pa, pb, quiet, n = _quiet_by_round(doc, ca, cb)
    if quiet < GATED_MIN:
        return None
    s = stats.undisturbed_ratio(pa, pb, how=how)
    return None if s is None else dict(s, n_pairs=quiet, of_rounds=n)


def pair(doc, a, b, how="diff", op="null", shape="ret"):
    """a - b (or a / b) of two variants' cells of one operation and shape, paired by round
    from the raw percall.json document; None when either cell has no rounds."""
    cells = {(c["variant"], c["op"], c.get("shape") or "ret"): c for c in (doc or {}).get("cells", [])
             if c.get("supported")}
    ca, cb = cells.get((a, op, shape)), cells.get((b, op, shape))
    if ca is None or cb is None:
        return None
    return _paired(doc, ca, cb, how)


def reported_status(analysed, target):
    """The fast cells (FAST_OPS) against a --target by the figure the run reports, after every
    widening (the exit's move held, analyse/exitdrift.widen): {target, cells, within, share,
    wide: [{cell, half_width, why}]}.  Why a cell is wider: its interval holds the VM exit's
    move between the matrix and the run's end (which no more rounds narrow), its sequential
    plan was not met before the budget ended (the fast processes it still needed), or its
    interval's other terms (drift over the run, blocks, the levels' spacing) hold it there, or
    the host's drift alone is as wide as the target (sampling_target)."""
    cells = [c for c in (analysed or {}).get("cells", []) if c.get("supported")
             and c.get("op") in FAST_OPS]
    within, wide = 0, []
    for c in cells:
        u = c.get("undisturbed") or {}
        name = " ".join(str(x) for x in key(c) if x is not None)
        v, lo, hi = c.get("undisturbed_ns"), c.get("undisturbed_ci_low"), c.get("undisturbed_ci_high")
        if v is None or lo is None or hi is None or v <= 0:
            wide.append({"cell": name, "half_width": None,
                         "why": u.get("why") or "no undisturbed figure"})
            continue
        h = (hi - lo) / 2 / v
        if h <= target * (1 + 1e-9):
            within += 1
            continue
        sq = u.get("sequential") or {}
        ed = c.get("exit_drift")
        if ed:
            m = ed.get("moment") or {}
            h0 = ((m.get("undisturbed_ci_high") or hi) - (m.get("undisturbed_ci_low") or lo)) / 2 / v
            why = (f"its interval holds the VM exit's move between the matrix and the run's end "
                   f"({ed['exits']} exit(s) a call, {ed['shift_ns']:+.1f} ns): ±{100 * h0:.2f}% as "
                   "the matrix measured it; more rounds do not narrow the host's move")
        elif sq.get("held_by_drift"):
            why = (f"the host's drift over the run (±{100 * sq['drift_rel']:.2f}%, from the "
                   "reference's probes) alone takes the target; more rounds do not narrow it")
        elif sq and not sq.get("met"):
            why = (f"its plan needs {max(0, (sq.get('need_n') or 0) - (u.get('n') or 0))} more "
                   "processes in the host's fast state: the budget ended first")
        else:
            terms = [t for t in u.get("terms") or [] if t not in ("sampling", "sequential")]
            why = ("its interval's " + ", ".join(terms) + " term(s) hold it there" if terms
                   else "its sampling interval is still wider")
        wide.append({"cell": name, "half_width": h, "why": why})
    return {"target": target, "cells": len(cells), "within": within,
            "share": within / len(cells) if cells else None,
            "wide": sorted(wide, key=lambda w: -(w["half_width"] or 1e9))}


def target_status(analysed, target):
    """How many of the fast cells (FAST_OPS, leading with the undisturbed figure) have an
    undisturbed half-width within `target` (relative) that rests on the host's fast state:
    {cells, met, met_keys: the cells' keys (variant, op, size, shape)}."""
    cells = [c for c in (analysed or {}).get("cells", []) if c.get("supported")
             and c.get("op") in FAST_OPS]
    met, more = [], []
    for c in cells:
        u = c.get("undisturbed") or {}
        sq = u.get("sequential")
        # met by the sequential rule: as many fast values as its plan asked for (the stopping
        # depends on the first stage alone, never on the interval looking narrow)
        if sq is not None and sq.get("met") and sq.get("target") == target:
            # a cell whose drift alone takes the target (sampling_target: held) is planned for
            # the whole target, and done once that is met: reported_status names it with why
            met.append(key(c))
        elif sq is not None:
            more.append(max(0, sq["need_n"] - (u.get("n") or 0)))
        else:
            g = u.get("host") or {}
            more.append(max(1, sequential.N0_MIN - g.get("fast_processes", 0)))
    return {"cells": len(cells), "met": len(met), "met_keys": set(met),
            "more_fast_processes": max(more) if more else 0}
