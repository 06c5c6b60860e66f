"""tw run's exit-price stage: the price of one VM exit again, at the run's end.

The host sets the price of a VM exit, and moves it over minutes.  On an AMD EPYC guest
(family 25, model 17) one cpuid cost 3600 ns in one default run and 3556 ns in the next, three
minutes later, while within each run's matrix it held still (every fast process of the matrix's
cpuid cell within 1% of 3600, then of 3550).  Every int 0x80 cell, which pays one exit a call on
a KVM guest since Linux 6.7, moved with it, by -0.9% to -1.2%, and its interval (about +-0.4%)
missed the rerun's.  The matrix prices the exit (its cpuid cell) in the same moments as those
cells; this stage prices it again once every other stage is done, so that the analysis
(analyse/exitdrift.py) can hold the exit's move over the run's span in the intervals of the
cells that pay it.

It is the matrix (measure/bench.py) cut to its reference, which probes the host, and the 64-bit
cpuid cell: a probe and a cpuid process in turn, never waiting, until `judge` (the analysis'
rule: enough cpuid processes met the host's fast state) says the price is known or the budget
ends.  exitprice.json is a timewrite-percall/2 document of those cells.

    stage(out, mode, judge, budget_s, deadline)   measure; write exitprice.json
"""
import tempfile
import time
from pathlib import Path

from ..core import files, ui
from ..machine import probe
from . import bench

STEM = "exitprice"
# The stage's time on a host that never lets it stop sooner: the judge asks 64 fast cpuid
# processes (analyse/exitdrift.STAGE_PROCESSES), 2-7 s on an AMD EPYC guest, quiet or beside
# the repository's neighbour (tw neighbour, 80% noisy in bursts of 3 s), where a slow burst
# can last the budget; the analysis prices the exit from 24 when the budget stops it.
BUDGET_S = 8.0
# What a deadline leaves it at least: a run late for its report still prices the exit.
# Beside the repository's neighbour the fixed stages ran late (attribution 37 s, not 18), the
# legs got their least and this stage 2 s, which gave no price (fast in too few of its 60
# rounds); the next run's had it in 1.6 s.  The report took 14 s of its 30 s there.
MIN_S = 4.0
TARGET = "the price of a VM exit at the run's end"


def stage(out, mode="default", judge=None, budget_s=BUDGET_S, deadline=None):
    """Measure the reference and the cpuid cell until judge(doc) -> (done, why) says the price
    is known, or budget_s (shortened by tw run's deadline, to no less than MIN_S) is spent;
    write exitprice.json into out and return the document."""
    if deadline is not None:
        budget_s = max(MIN_S, min(budget_s, deadline - time.monotonic()))
    ref = bench.reference()
    # Only the reference's variant is probed: the other variants' support is the matrix's
    # to say, once.
    judged = [r for r in probe.check_all("syscost") if r["name"] == ref[0]]
    with tempfile.TemporaryDirectory(prefix="tw-exit-price-") as scratch:
        doc = bench.run(None, bench.Settings(
            mode=mode, variants=[ref[0]], ops=["cpuid"], shapes=["ret"], file_dir=scratch,
            target=TARGET, budget_s=budget_s, should_stop=judge, quiet_first=False,
            judged=judged, label="exit-price", round_lines=False))
    files.write_json(Path(out) / f"{STEM}.json", doc)
    hs = doc.get("host_state") or {}
    pr = hs.get("probes") or []
    fast = sum(1 for x in pr if x.get("fast"))
    ui.progress(f"exit-price: {hs.get('rounds')} rounds in {doc.get('wall_s') or 0:.1f} s "
                f"(host fast in {fast} of {len(pr)} probes), "
                + ("the price known" if hs.get("stopped") == "target" else
                   f"stopped by its budget of {budget_s:.0f} s"))
    return doc
