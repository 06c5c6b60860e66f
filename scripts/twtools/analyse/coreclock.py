"""The core's clock over a bench run, from syscost's multiply-add chain (issue 42).

A KVM host moves a guest core's clock in steps that last a minute or more.  On the Intel Xeon
guest of 2026-11-27 (family 6, model 207) the reference cell's fastest floor sat at 89.5,
99.0, 102.7 and 106.6 ns in turn within one run, 3.7% a step, and syscost's chain, timed
before every batch, sat at 4 / 3.1, 2.8, 2.7 and 2.6 GHz at the same moments: the reference
in chain steps stayed at 69.3 throughout.  So a figure in ns carries the clock the host gave
the core while it ran, a fast state at a lower clock looks like a slow state, and two runs
minutes apart differ by whole steps, which no interval of one run can see.

syscost times chain.h's chain of dependent multiply-adds (CHAIN_CYCLES cycles a step) just
before every batch; bench keeps it per batch as `chain_ns`.  Here:

  step_of(rd)   a process's clock: the fastest of its batches' chain steps, in ns;
  top(doc)      the run's top clock: the step the fastest TOP_SHARE (1%) of its processes
                reached, over every cell and probe (a clock a few processes met for a moment
                must not set it), or None when any measured process lacks the chain (a run
                from before it, or a mix);
  clock(doc)    (top, the clocks the host gave), read once for the processes of a run;
  factor(doc, rd)  top / step_of(rd): what brings a process's figures to the run's fastest
                clock (1.0 when the run has none, or when its step is slower than the top
                and no clock the host gave: core/clocksteps.given);
  summary(doc)  the clock in GHz (CHAIN_CYCLES / step), the clocks the processes ran at, and
                the cycles per ns that turn a figure at the top clock into cycles.

The undisturbed figures (analyse/percall.py) are computed from batch values brought to the
top clock, so they say what a call costs when the host leaves the core alone and runs it at
the top clock of the run (the one its fastest 1% of processes reached), and the fast/slow label of the host's probes compares
chain steps: a lower clock is not a disturbance.  The typical figures are left as measured,
at whatever clock the host gave: that is what a program met.  Figures in cycles (ns at the
top clock times its GHz) are what two runs compare: they do not move with the clock."""
import math

from ..core.clocksteps import CHAIN_CYCLES, LEVEL_RANK, LEVEL_SHOWN, ghz, given, given_levels

# The run's top clock is the one the fastest TOP_SHARE of its processes reached: beside the
# neighbour the host gave 3.0 GHz to 3 of 4576 processes for a tenth of a second, 2.8 GHz to
# 2% and 2.6 GHz to 97%; figures taken at a clock three processes saw would move with whether
# a rerun draws such a moment.
TOP_SHARE = 0.01

_CACHE = {}


def step_of(rd):
    """A process's chain step (ns per step of the multiply-add chain): its fastest batch's."""
    vals = [v for v in (rd or {}).get("chain_ns") or []
            if isinstance(v, (int, float)) and math.isfinite(v) and v > 0]
    return min(vals) if vals else None


def _steps(doc):
    """Every measured process's step, or None when any measured process has none."""
    out = []
    for c in (doc or {}).get("cells") or []:
        if not c.get("supported"):
            continue
        for rd in c.get("rounds") or []:
            if not rd.get("samples_ns"):
                continue
            s = step_of(rd)
            if s is None:
                return None
            out.append(s)
    for pr in ((doc or {}).get("host_state") or {}).get("probes") or []:
        s = pr.get("chain_ns")
        if isinstance(s, (int, float)) and s > 0:
            out.append(float(s))
    return out or None


def _sig(doc):
    return (sum(len(c.get("rounds") or []) for c in (doc or {}).get("cells") or []),
            len(((doc or {}).get("host_state") or {}).get("probes") or []))


def _read(doc):
    """(every process's step or None, the top step or None), read once per document and kept
    while the document holds the same rounds and probes (tw bench analyses a growing one)."""
    return _cached(doc)[:2]


def _cached(doc):
    """(steps, top step, the clocks the host gave: given_levels(steps)), cached as _read."""
    hit = _CACHE.get(id(doc))
    sig = _sig(doc)
    if hit is not None and hit[0] is doc and hit[1] == sig:
        return hit[2]
    steps = _steps(doc)
    val = (steps, top_of(steps), given_levels(steps))
    if len(_CACHE) > 8:
        _CACHE.clear()
    _CACHE[id(doc)] = (doc, sig, val)
    return val


def clock(doc):
    """(the run's top step, the clocks the host gave its processes: given_levels()), or (None,
    None) when the run has no clock: read once, for the many processes a caller brings to the
    top clock (factor, scale)."""
    if not doc:
        return None, None
    _, t, at = _cached(doc)
    return t, at


def scale(step, clk):
    """top / step: what brings a value taken at a chain step to the run's top clock (clk:
    clock()'s pair), or 1.0 when the run has no clock, or the step is slower than the top and
    no clock the host gave (core/clocksteps.given): such a value is left as measured, as slow
    as it was."""
    t, at = clk
    if not t or not step:
        return 1.0
    if at and step > t and not given(step, *at):
        return 1.0
    return t / step


def top_of(steps):
    """The top clock of a run's processes' steps (the one its fastest TOP_SHARE reached, never
    the fastest LEVEL_RANK - 1), or None when there are none: the matrix's and the legs'."""
    if not steps:
        return None
    rank = max(LEVEL_RANK, math.ceil(TOP_SHARE * len(steps)))
    return sorted(steps)[min(rank, len(steps)) - 1]


def top(doc):
    """The run's top clock as ns per chain step, or None (see the module's text)."""
    return _read(doc)[1] if doc else None


def factor(doc, rd, clk=None):
    """What brings a process's batch values to the run's top clock: scale() of its step, at
    clk (clock()'s pair; the document's when None)."""
    return scale(step_of(rd), clk or clock(doc))


def levels(steps):
    """[(GHz, share of processes)] of the clocks the processes ran at, to LEVEL_GHZ, fastest
    first, those with at least LEVEL_SHOWN of them; the rest as one (None, share)."""
    if not steps:
        return []
    count, n = given_levels(steps)
    shown = [(g, k / n) for g, k in sorted(count.items(), reverse=True) if k / n >= LEVEL_SHOWN]
    rest = 1 - sum(sh for _, sh in shown)
    return shown + ([(None, rest)] if rest > 1e-9 else [])


def summary(doc):
    """{ghz, step_ns, cycles_per_ns, cycles_per_step, levels: [{ghz, share}], processes} of
    the run's core clock, or {why} when the run has none."""
    steps, t = _read(doc) if doc else (None, None)
    if not steps or t is None:
        return {"ghz": None, "why": "syscost did not time the core's clock in this run (a "
                                    "run from before it): its figures in ns are at whatever "
                                    "clock the host gave, and no figure in cycles is given"}
    return {"ghz": round(ghz(t), 4), "step_ns": t, "cycles_per_ns": ghz(t),
            "cycles_per_step": CHAIN_CYCLES, "processes": len(steps),
            "levels": [{"ghz": g, "share": round(sh, 4)} for g, sh in levels(steps)]}
