"""The default report ends within its time on a noisy host (issue 42, item 6).

Why it can break: the matrix's rounds and the sweeps' rounds are fixed numbers, and beside a
noisy neighbour each takes longer, so two default reports took 203 s and 299 s against their
180 s.  tw run now gives those two stages a deadline that keeps time for the stages after
them (cli/run.py, RUN_BUDGET_S and RESERVE_S); past it they start no more rounds, once they
have the few their figures need, and say so.  If the deadline stops being passed down, or a
stage ignores it, the report is late again; if a stage stops below its minimum, its figures
rest on too few rounds.  The figures themselves are the host's and are not checked here.
"""
import sys
import time

from conftest import ROOT, need_supported

sys.path.insert(0, str(ROOT / "scripts"))
from twtools.cli import run as run_cmd  # noqa: E402
from twtools.measure import bench, sweep  # noqa: E402
from twtools.present import document, report  # noqa: E402


def test_a_matrix_past_its_deadline_stops_after_its_minimum_rounds_and_says_so(build, tmp_path):
    need_supported("syscost", "64-syscall")
    # through a stage as tw run makes and calls them (run_cmd._call), on two cells
    stage = run_cmd._call("bench", "run_matrix", variants=["64-syscall"],
                          ops=["null", "getppid"], shapes=["ret"])
    doc = stage(tmp_path / "b", "default", deadline=time.monotonic())
    hs = doc["host_state"]
    assert hs["stopped"] == "deadline"
    assert doc["params"]["rounds"] == bench.MIN_ROUNDS < doc["params"]["rounds_mode"]
    assert hs["deadline_s"] is not None and hs["deadline_s"] <= 0
    cell = next(c for c in doc["cells"] if c["op"] == "getppid")
    assert len(cell["rounds"]) == bench.MIN_ROUNDS
    # the report says it stopped, and why
    from twtools.analyse import percall
    a = percall.analyse(doc)
    d = document.Doc()
    report.sec_host(d, {"percall": a}, tmp_path)
    text = repr(d.blocks)
    assert f"stopped after {bench.MIN_ROUNDS} of its 32 rounds" in text


def test_a_matrix_without_a_deadline_runs_its_rounds(build, tmp_path):
    need_supported("syscost", "64-syscall")
    doc = bench.run_matrix(None, mode="quick", variants=["64-syscall"], ops=["null"],
                           shapes=["ret"], deadline=None)
    assert doc["host_state"]["stopped"] is None
    assert doc["params"]["rounds"] == doc["params"]["rounds_mode"]


class _Sweep:
    """The part of measure.sweep._Rounds that _Turns drives: its rounds, run in turn.
    A round sleeps `each` seconds (the scheduling is what is under test here; the sweeps'
    own runs are tested in test_sweep.py)."""

    def __init__(self, rounds, each, log, name):
        self.rounds, self.each, self.log, self.name = rounds, each, log, name
        self.done, self.stopped = 0, None

    def round(self, r, focus=None):
        time.sleep(self.each)
        self.log.append((self.name, r))
        self.done = r + 1


def test_interleaved_sweeps_stop_at_the_deadline_each_after_its_minimum():
    log = []
    a, b = _Sweep(36, 0.01, log, "seed"), _Sweep(12, 0.03, log, "tlpi")
    assert sweep._Turns(a, b).session(deadline=time.monotonic() + 0.25) == "deadline"
    assert sweep.MIN_ROUNDS <= a.done < 36 and sweep.MIN_ROUNDS <= b.done < 12
    # each ran its rounds in order, with no gap
    assert [r for n, r in log if n == "seed"] == list(range(a.done))
    assert [r for n, r in log if n == "tlpi"] == list(range(b.done))


def test_a_deadline_already_past_still_gives_each_sweep_its_minimum():
    """The seed sweep's short rounds come between the TLPI sweep's long ones: when the seed
    sweep's turn after its minimum comes past the deadline, the TLPI sweep must still get its
    own (a loaded host once left it at 3 rounds, below MIN_ROUNDS).  The deadline here is
    already past, so nothing depends on the machine's speed."""
    log = []
    a, b = _Sweep(36, 0.0, log, "seed"), _Sweep(12, 0.0, log, "tlpi")
    assert sweep._Turns(a, b).session(deadline=time.monotonic() - 1) == "deadline"
    assert a.done >= sweep.MIN_ROUNDS and b.done == sweep.MIN_ROUNDS, (a.done, b.done)
    assert [r for n, r in log if n == "seed"] == list(range(a.done))
    assert [r for n, r in log if n == "tlpi"] == list(range(b.done))
    # a sweep planned with fewer rounds than the minimum has its minimum once all are done,
    # and the session still stops at the deadline then, not at the end of the order
    log = []
    a, b = _Sweep(36, 0.0, log, "seed"), _Sweep(2, 0.0, log, "tlpi")
    assert sweep._Turns(a, b).session(deadline=time.monotonic() - 1) == "deadline"
    assert b.done == 2 and sweep.MIN_ROUNDS <= a.done < 36, (a.done, b.done)


def test_interleaved_sweeps_without_a_deadline_run_every_round():
    log = []
    a, b = _Sweep(6, 0.0, log, "seed"), _Sweep(3, 0.0, log, "tlpi")
    assert sweep._Turns(a, b).session() is None
    assert a.done == 6 and b.done == 3




def test_a_sweep_that_stopped_at_its_deadline_says_so_in_the_report():
    d = document.Doc()
    report._stopped_early(d, {"stopped": "deadline", "rounds_done": 5, "rounds": 36})
    assert "stopped after 5 of its 36 rounds" in repr(d.blocks)
    d = document.Doc()
    report._stopped_early(d, {"stopped": None, "rounds_done": 36, "rounds": 36})
    assert d.blocks == []
