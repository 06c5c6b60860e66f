"""The core's clock in steps of syscost's multiply-add chain: which steps are clocks the host
gave the core, for the analysis (analyse/coreclock.py) and the matrix's live labels of the
host's probes (measure/bench.py) alike."""

CHAIN_CYCLES = 4        # syscost/chain.h: one imul (3 cycles) and one add (1) a step
LEVEL_RANK = 3          # as percall.LEVEL_RANK and measure/bench.py: never the fastest one
# The clocks the processes ran at are said to a tenth of a GHz, each with its share (those
# under LEVEL_SHOWN are counted together): a reading taken while the clock changed lands
# between two steps, so the steps are not cut from the readings themselves.
LEVEL_GHZ = 0.1
LEVEL_SHOWN = 0.01


def ghz(step):
    return CHAIN_CYCLES / step if step else None


def level_of(step):
    """A chain step's clock to LEVEL_GHZ, in GHz: the level levels() counts it under."""
    return round(round(ghz(step) / LEVEL_GHZ) * LEVEL_GHZ, 3)


def given(step, counts, n):
    """Whether a step is a clock the host gave the core: its level ran at least LEVEL_SHOWN
    of the n processes counted (counts: {level: processes}) and at least LEVEL_RANK of them.

    A chain the host's interference slowed along with the call is not a clock: beside the
    neighbour, in a 10-minute --target run on an AMD EPYC guest whose clock sat at 3.7 GHz for
    98% of its 14 703 probes, 10 probes timed the chain 32-45% slow (2.5-2.9 GHz) and the
    call 24% slow (128 ns, against 104 ns in the fast state).  Brought to the top clock by
    their chains, they read 89-98 ns, below every real probe; the fast state's level (the
    third fastest) became 90.9 ns, and from then on no probe was fast: the run's last four
    minutes saw the host fast in 0% of its probes, and 0 of 48 cells within the target."""
    k = counts.get(level_of(step), 0)
    return k >= LEVEL_RANK and k >= LEVEL_SHOWN * n


def given_levels(steps):
    """({level: processes}, n) of a run's steps, for given()."""
    counts = {}
    for x in steps or []:
        g = level_of(x)
        counts[g] = counts.get(g, 0) + 1
    return counts, len(steps or [])
