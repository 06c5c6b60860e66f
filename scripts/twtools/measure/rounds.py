"""Measuring in rounds: the loop tw bench's matrix and tw ab's A/B both run, and what they share.

A measurement in rounds runs each of its cells once a round (in tw ab, once under A and once
under B), one syscost process each, and the analysis replicates over the rounds
(analyse/stats).  Its loop, `Rounds.measure`, reads as the method (docs/syscost.md, "tw
bench" and "Quiet first"):

    while another_round()         the rounds planned; a deadline, a target, a budget
        plan_round(r)             the round's processes, in an order drawn from r
        quiet_moment(round)       what stands before the next chunk of processes: tw bench's
                                  probe of the host, waiting for its fast state while the
                                  budget has slack; tw ab's rounds have none
        run_process(round, item)  one process of the chunk, kept with its round and copy
        close_round(round)        what ends the round: tw bench's closing probe and perf
                                  bench; tw ab's wall taken down
        judge_round(round)        whether to stop: the target met, the budget spent
        record_round(round, ...)  the round's progress line

What their rounds share, here once:

- alternation (`order`): round r's processes in an order drawn from r alone, so that the
  host's drift over the round lands on every cell, and on A and B, alike, and a run's order
  can be replayed;
- copies (`Copies`): every program run from k fresh copies of its file, round r from copy
  r % k: where a file's pages landed moves a call by about 1% for as long as the file lives
  (docs/syscost.md, "The binary's file"), and spread over the rounds the placement lands in
  their spread, where the interval sees it;
- the quiet probe (`HostProbe`): the rule by which one reference process (64-bit syscall,
  null, ret) says whether the host is in its fast state, which tw bench's rounds, the
  sweeps' runs (measure/sweep.py) and the legs' blocks (measure/legs.py) are labelled by.
  tw ab's rounds take no probe: A and B alternate within every round, so the host's state
  lands on both sides of a pair alike.
"""
import random
import shutil
import time

from ..core import clocksteps
from .syscost import make_copies

# A probe (reference process) whose floor is more than HOST_TOL above the fast state's level
# says the host is slow (docs/syscost.md, "Quiet first").
HOST_TOL = 0.10
# The fast state's level is the LEVEL_RANK-th fastest probe, not the fastest: one lucky
# process (the lowest layout level, a quiet instant) must not set a bar the host's fast state
# itself seldom reaches (seen: one such probe made the matrix wait 45 s for nothing).
LEVEL_RANK = 3


def order(items, rnd):
    """Round rnd's order of items: shuffled by a generator seeded with rnd alone."""
    out = list(items)
    random.Random(rnd).shuffle(out)
    return out


class Copies:
    """k fresh copies of each program a measurement runs ({key: source path}, made by
    syscost.make_copies), removed when the measurement ends (a `with` block): round r runs
    copy r % k.  `paths` is {key: [copy 0, ..., copy k-1]}."""

    def __init__(self, sources, k):
        self.k = max(1, k)
        self.paths, self.top = make_copies(sources, self.k)

    def index(self, rnd):
        """Which copy round rnd runs."""
        return rnd % self.k

    def of(self, key, rnd):
        """The copy of key's program that round rnd runs."""
        return self.paths[key][rnd % self.k]

    def remove(self):
        """Remove every copy, and the folder holding them."""
        shutil.rmtree(self.top, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class HostProbe:
    """The live rule for the host's state: each probe (a reference process, 64-syscall null
    ret) is fast when its floor is within HOST_TOL of the LEVEL_RANK-th fastest probe so far,
    in chain steps when syscost timed its clock.  The matrix's (measure/bench.py), the
    sweeps' (measure/sweep.py, which run the reference between their timewrite runs) and the
    legs' (measure/legs.py, before each block): one rule, so that they label the host alike."""

    def __init__(self):
        self.lows = []                              # the LEVEL_RANK fastest costs so far
        self.clocks = {"levels": {}, "top": None}   # the probes' chain steps (core/clocksteps)

    def judge(self, rd):
        """(floor ns, chain step ns or None, fast) of one reference process's record (its
        samples_ns, disturbed, chain_ns), or None when it gave no usable value."""
        vals = [v for v, bad in zip(rd.get("samples_ns") or [], rd.get("disturbed") or [])
                if not bad] or (rd.get("samples_ns") or []) if rd else []
        vals = [v for v in vals if isinstance(v, (int, float)) and v == v]
        if not vals:
            return None
        f = min(vals)
        # The core's clock when the probe ran (syscost's chain before each batch): the host
        # moves it in steps of about 4% that last minutes, and a probe at a lower clock is not
        # a disturbed one.  So the live rule compares floors in chain steps (cycles / 4), not
        # in ns, when syscost timed the chain.
        # A chain the host slowed along with the call is no clock (clocksteps.given): such a
        # probe's floor in chain steps reads below the fast state's, and once three had set
        # the level no later probe was fast.  Until its level is one the host gave, a probe
        # is taken at the fastest clock seen.
        chain = [v for v in rd.get("chain_ns") or [] if isinstance(v, (int, float)) and v > 0]
        step = None
        if chain:
            step = min(chain)
            lv, seen = clocksteps.level_of(step), self.clocks["levels"]
            seen[lv] = seen.get(lv, 0) + 1
            top = self.clocks["top"] = min(self.clocks["top"] or step, step)
            given = step <= top or clocksteps.given(step, seen, sum(seen.values()))
            cost = f / (step if given else top)
        else:
            cost = f
        lows = self.lows
        lows.append(cost)
        lows.sort()
        del lows[LEVEL_RANK:]
        level = lows[-1]        # the LEVEL_RANK-th fastest so far (the slowest of the few)
        return f, step, cost <= level * (1 + HOST_TOL)


class Rounds:
    """A measurement in rounds: the loop (measure), the run's clock (t_s) and its round count
    (done).  A subclass gives the steps the loop calls, in the module's order; a round object
    is the subclass's own, and says with `left()` whether processes remain in it."""

    def __init__(self):
        self.t0 = time.monotonic()
        self.done = 0               # rounds measured

    def t_s(self):
        """Seconds since the measurement began, as a record keeps them."""
        return round(time.monotonic() - self.t0, 3)

    def measure(self):
        """Every round, each in the method's steps, until another_round says no or
        judge_round says stop."""
        while self.another_round():
            rd = self.plan_round(self.done)
            while True:                 # at least once: a round of no cells still probes
                for item in self.quiet_moment(rd):
                    self.run_process(rd, item)
                if not rd.left():
                    break
            self.close_round(rd)
            self.done += 1
            stop, notes = self.judge_round(rd)
            self.record_round(rd, notes)
            if stop:
                break

    # The steps, each a subclass's own.
    def another_round(self):
        raise NotImplementedError

    def plan_round(self, rnd):
        raise NotImplementedError

    def quiet_moment(self, rd):
        raise NotImplementedError

    def run_process(self, rd, item):
        raise NotImplementedError

    def close_round(self, rd):
        pass

    def judge_round(self, rd):
        """(stop, words for the round's line)."""
        return False, ""

    def record_round(self, rd, notes):
        pass
