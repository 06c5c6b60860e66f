"""A synthetic noisy host, for the sequential rule's coverage (tests/test_sequential_coverage.py).

The host's state is a two-state Markov chain in continuous time: fast stretches last an
exponential time of mean `burst_s`, slow ones of mean burst_s * (1 - share) / share, so the host
is fast a share `share` of the time, in bursts (the noisy AMD guest of issue 42 was quiet in
4-8% of the reference's batches, in bursts of a few seconds).

One cell is measured once per round, a round apart (`round_s`, about 134 cells of ~10 ms each on
that guest); its process lasts `proc_s`.  The process met the fast state when the host was fast
when it started and stayed fast for its length.  Its floor is then drawn from the fast state's
distribution: a few discrete layout levels (LEVELS, offsets of the base cost, with their
probabilities) plus a little noise; otherwise from the slow state, 10-60% higher.  The fast
state's true figure, the estimand, is the mean of that distribution: `mu`.

The calibrator labels each process, wrongly with probability `mislabel` in either direction.

A cell's fast state may itself have a lower state that a share `lower_p` of its processes meet,
`lower_drop` below the rest (on an AMD EPYC guest, 64-bit getppid in an inline loop ran at
156 ns a call in most batches and at 119 ns in a few): the estimand is then the lower state's
mean, the figure the screen of stats.undisturbed takes.

Everything is drawn at once for `runs` independent runs of `rounds` rounds (numpy, one
generator), so a simulation of hundreds of runs takes milliseconds."""
import numpy as np

# The fast state's levels: offsets from the base cost and their probabilities (0.8-1.4% apart,
# as the layout levels the hosts of docs/syscost.md show), and the noise within a level.
LEVELS = np.array([0.0, 0.008, 0.016, 0.030])
LEVEL_P = np.array([0.35, 0.30, 0.20, 0.15])
NOISE = 0.0015
SLOW = (0.10, 0.60)


class Host:
    def __init__(self, share, burst_s=3.0, base=1000.0, mislabel=0.02, round_s=1.34,
                 proc_s=0.010, lower_p=0.0, lower_drop=0.0):
        if not 0 < share <= 1:
            raise ValueError("share must be in (0, 1]")
        self.share, self.burst_s, self.base = share, burst_s, base
        self.lower_p, self.lower_drop = lower_p, lower_drop
        self.mislabel, self.round_s, self.proc_s = mislabel, round_s, proc_s
        self.slow_s = burst_s * (1 - share) / share if share < 1 else np.inf

    @property
    def mu(self):
        """The fast state's true mean floor."""
        low = 1 - self.lower_drop if self.lower_p else 1.0
        return self.base * low * (1 + float(LEVELS @ LEVEL_P))

    def states(self, rng, runs, rounds):
        """(runs x rounds) bool: fast at each process's start, the chain sampled a round apart
        (the first from its stationary law)."""
        lam = 1 / self.burst_s + (1 / self.slow_s if np.isfinite(self.slow_s) else 0.0)
        keep = np.exp(-lam * self.round_s)
        p_ff = self.share + (1 - self.share) * keep       # fast then, fast a round later
        p_sf = self.share * (1 - keep)                    # slow then, fast a round later
        out = np.empty((runs, rounds), dtype=bool)
        out[:, 0] = rng.random(runs) < self.share
        u = rng.random((runs, rounds))
        for k in range(1, rounds):
            out[:, k] = u[:, k] < np.where(out[:, k - 1], p_ff, p_sf)
        return out

    def draw(self, rng, runs, rounds):
        """(floors, labels, fast): each (runs x rounds); labels are the calibrator's."""
        start_fast = self.states(rng, runs, rounds)
        stays = rng.random((runs, rounds)) < np.exp(-self.proc_s / self.burst_s)
        fast = start_fast & stays
        lv = LEVELS[rng.choice(LEVELS.size, size=(runs, rounds), p=LEVEL_P)]
        fast_floor = self.base * (1 + lv) + rng.normal(0, NOISE * self.base, (runs, rounds))
        if self.lower_p:
            lower = rng.random((runs, rounds)) < self.lower_p
            fast_floor = np.where(lower, fast_floor * (1 - self.lower_drop), fast_floor)
        slow_floor = fast_floor * (1 + rng.uniform(*SLOW, (runs, rounds)))
        floors = np.where(fast, fast_floor, slow_floor)
        labels = fast ^ (rng.random((runs, rounds)) < self.mislabel)
        return floors, labels, fast


def percall_doc(probes, ref_rounds, cell_rounds, wall_s, n_rounds, target=None, plan="drift"):
    """A quiet-first percall.json document of two 64-bit syscall cells, the reference (null)
    and getppid, from their rounds and the host's probes, as tw bench writes it (plan: the
    --target rule's host_state.target_plan; None as a run before the drift-aware rule)."""
    base = {"variant": "64-syscall", "bits": 64, "abi": "x86_64", "mechanism": "syscall",
            "size": None, "shape": "ret", "supported": True, "status": "works",
            "reason": None, "calls_per_batch": 10000}
    return {"schema": "timewrite-percall/2", "clock": "tsc", "tsc_hz": 2e9, "cpu": 1,
            "params": {"batches": 2, "rounds": n_rounds},
            "reference": {"variant": "64-syscall", "op": "null", "shape": "ret"},
            "wall_s": wall_s, "host_state": {"probes": probes, "quiet_first": True,
                                             "waited_s": 0.0, "budget_s": 10.0,
                                             "target": target, "stopped": None,
                                             "target_plan": plan if target else None},
            "cells": [dict(base, op="null", rounds=ref_rounds),
                      dict(base, op="getppid", rounds=cell_rounds)]}
