"""Every setting of a measurement reaches its loop.

tw bench's and tw ab's settings are one value each (measure.bench.Settings,
measure.ab.Settings), built once by the command and passed whole to the rounds.  A refactor
that stops passing one field on loses it silently: the loop then measures at the default, and
nothing else fails.  Here every field is set to a value no default has, the measurement runs
against a fake syscost (no build, no process: the fake records what each process was asked),
and each value is looked for where it must act: in every process's options, in the copies
run, in the rounds' number and order, in the document, in the progress lines, in the
judge's calls.  And every field must be read while the rounds run (bar what __post_init__
resolves), so that a field added later and never passed on fails here too."""
import dataclasses
import time
from pathlib import Path

import pytest

from twtools.machine import probe
from twtools.measure import ab, bench, rounds, syscost
from twtools.measure.walls import base as wall_base

VARIANT = "64-syscall"


class _Syscost:
    """measure() as syscost would answer, recording every call: (variant, op, size, shape,
    sampling, launch)."""

    def __init__(self):
        self.calls = []

    def __call__(self, variant, op, size=None, shape="ret", sampling=syscost.SAMPLING,
                 launch=syscost.LAUNCH):
        self.calls.append((variant, op, size, shape, sampling, launch))
        n = sampling.batches
        return {"supported": True, "reason": None, "samples_ns": [100.0] * n,
                "disturbed": [False] * n, "loop_ns_per_call": [1.0] * n,
                "raw_ns": [101.0] * n, "calls_per_batch": 10, "cpu": sampling.cpu,
                "sched": "fifo" if sampling.realtime else "other", "clock": "tsc",
                "speculation": None, "wall": None}


def _fake_copies(monkeypatch):
    """make_copies without files: copy g of key k is the path 'copy-<g>/<k>'."""
    made = {}

    def make_copies(sources, n, where=None):
        made["n"] = n
        return {k: [Path(f"copy-{g}") / str(k) for g in range(n)] for k in sources}, \
            Path("/nonexistent/tw-test-copies")
    monkeypatch.setattr(rounds, "make_copies", make_copies)
    return made


def _watched(cls):
    """cls with every field read recorded in `reads` (a set on the class), once built."""
    class Watched(cls):
        reads = set()

        def __getattribute__(self, name):
            if not name.startswith("_") and name in type(self).names:
                type(self).reads.add(name)
            return object.__getattribute__(self, name)
    Watched.names = {f.name for f in dataclasses.fields(cls)}
    return Watched


def test_every_bench_setting_reaches_the_matrix(monkeypatch, tmp_path, capsys):
    fake, made = _Syscost(), _fake_copies(monkeypatch)
    monkeypatch.setattr(syscost, "measure", fake)
    cal, perf, asked, stops = [], [], [], []
    monkeypatch.setattr(bench, "calibrate", lambda v, op, cpu=None, clock=None: (
        cal.append((cpu, clock)) or (2.5e9, "tsc", cpu)))
    monkeypatch.setattr(bench, "perf_bench_once", lambda loops, cpu=None, realtime=False: (
        perf.append((loops, cpu, realtime)) or (90.0, None)))

    def refuse(*a, **k):
        raise AssertionError("the judged rows were given: nothing is probed")
    monkeypatch.setattr(probe, "check_all", refuse)

    def should_stop(doc):
        stops.append(doc["params"]["rounds"])
        return doc["params"]["rounds"] >= 7, "enough for the test"

    def skip(key, past):
        asked.append((key[1], past))
        return False

    files = tmp_path / "files"
    deadline = time.monotonic() + 1000
    Settings = _watched(bench.Settings)
    s = Settings(mode="quick", variants=[VARIANT], ops=["null", "write-file", "write-sync"],
                 sizes=[512], shapes=["ret"], rounds=5, batches=7, sync_batches=3,
                 batch_ms=0.25, warmup_ms=9, perf_loops=1234, copies=3, cpu=1,
                 clock="monotonic", realtime=False, accuracy=True, file_dir=files,
                 quiet_first=False, budget_s=500.0, deadline=deadline, target="the test's",
                 should_stop=should_stop, skip=skip,
                 judged=[{"name": VARIANT, "status": "works", "supported": True,
                          "reason": None}],
                 label="reach", round_lines=True)
    Settings.reads.clear()
    doc = bench.run(None, s)
    err = capsys.readouterr().err

    # every field was read by the rounds (mode: the document records it)
    assert Settings.names - Settings.reads == set()
    # what to measure: the cells, the write's size, the shape
    asked_cells = {(v, op, size, shape) for v, op, size, shape, _, _ in fake.calls}
    assert asked_cells == {(VARIANT, "null", None, "ret"), (VARIANT, "write-file", 512, "ret"),
                           (VARIANT, "write-sync", 256, "ret")}
    assert doc["mode"] == "quick" and doc["params"]["sizes"] == [512]
    assert doc["params"]["ops"] == ["null", "write-file", "write-sync"]
    assert doc["params"]["shapes"] == ["ret"] and doc["params"]["variants"] == [VARIANT]
    # each process: batches (write-sync's own), length, warm-up (write-sync's at most 5 ms),
    # the calibrated CPU, the clock, SCHED_FIFO, the write ops' directory
    assert cal == [(1, "monotonic")]
    for _, op, _, _, sampling, launch in fake.calls:
        sync = op == "write-sync"
        assert sampling.batches == (3 if sync else 7)
        assert sampling.warmup_ms == (5 if sync else 9) and sampling.batch_ms == 0.25
        assert (sampling.cpu, sampling.clock, sampling.realtime, sampling.tsc_hz) == (
            1, "monotonic", False, 2.5e9)
        assert launch.file_dir == files
    # the copies: three made, round r runs copy r % 3
    assert made["n"] == 3 and doc["params"]["copies"] == 3
    for c in doc["cells"]:
        assert all(r["copy"] == r["round"] % 3 for r in c["rounds"])
    binaries = {(launch.extra_env["TW_ROUND_PAD"], str(launch.binary))
                for *_, launch in fake.calls}
    assert {b.split("/")[0] for _, b in binaries} == {"copy-0", "copy-1", "copy-2"}
    # perf bench once a round, with its loops, on the CPU, under the same class
    assert perf and set(perf) == {(1234, 1, False)} and len(perf) == doc["params"]["rounds"]
    # the host: no waiting asked, the budget and deadline recorded, the target's judge
    hs = doc["host_state"]
    assert hs["quiet_first"] is False and hs["budget_s"] == 500.0
    assert hs["target"] == "the test's"
    assert 990 < hs["deadline_s"] <= 1000
    # the rounds: past the planned 5 (a target), until the judge said stop, at 7 or later
    # (it judges at most once per tenth of the time so far)
    assert doc["params"]["rounds_mode"] == 5 and doc["params"]["rounds"] == stops[-1] >= 7
    assert hs["stopped"] == "target"
    assert ("write-file", False) in asked and ("write-file", True) in asked
    # who runs it: the label on every round's line
    lines = [x for x in err.splitlines() if "round " in x]
    assert len(lines) == doc["params"]["rounds"]
    assert all(x.startswith("tw: reach: round ") for x in lines)
    assert "enough for the test" in lines[-1]


def test_a_matrix_that_asks_for_no_round_lines_prints_none(monkeypatch, capsys):
    monkeypatch.setattr(syscost, "measure", _Syscost())
    _fake_copies(monkeypatch)
    monkeypatch.setattr(bench, "calibrate", lambda *a, **k: (None, None, None))
    doc = bench.run(None, bench.Settings(
        mode="quick", variants=[VARIANT], ops=["null"], shapes=["ret"], rounds=2,
        judged=[{"name": VARIANT, "status": "works", "supported": True, "reason": None}],
        label="quiet-lines", round_lines=False))
    assert doc["params"]["rounds"] == 2
    assert "round" not in capsys.readouterr().err


def test_the_modes_defaults_come_from_one_table():
    for mode, table in bench.MODES.items():
        s = bench.Settings(mode=mode)
        assert (s.rounds, s.batches, s.batch_ms, s.warmup_ms, s.perf_loops) == (
            table["rounds"], table["batches"], table["batch_ms"], table["warmup_ms"],
            table["perf_loops"])
        assert s.sync_batches == bench.SYNC_BATCHES[mode]
        assert bench.Settings(mode=mode, rounds=3).rounds == 3
        assert ab.Settings(a={}, b={}, variants=[], mode=mode).rounds == ab.ROUNDS[mode]
    with pytest.raises(ValueError):
        bench.Settings(mode="fast")
    with pytest.raises(dataclasses.FrozenInstanceError):
        bench.Settings().rounds = 1


class _Wall(wall_base.Wall):
    """A wall (measure.walls' interface) that records what it was asked: up, down, release,
    and each run it stood in front of (before: syscost's arguments)."""
    grouped = True

    def __init__(self):
        super().__init__({"spec": "fake:wall"})
        self.log = []

    def up(self, out_dir, cells):
        self.log.append("up")
        return {"kind": "fake", "cells": cells}

    def down(self):
        self.log.append("down")
        return {"left": "as found"}

    def release(self):
        self.log.append("release")

    def before(self, variant, op, abi):
        self.log.append(("before", variant, op))
        return wall_base.Run(["--fake-wall"])


def test_every_ab_setting_reaches_the_rounds(monkeypatch, tmp_path, capsys):
    fake, made = _Syscost(), _fake_copies(monkeypatch)
    monkeypatch.setattr(ab, "measure", fake)
    cal = []
    monkeypatch.setattr(ab, "calibrate", lambda v, op, cpu=None, shape="ret", launch=None: (
        cal.append((v, op, cpu, shape)) or (2.5e9, "tsc", cpu)))
    monkeypatch.setattr(ab.hostwalls, "raw_syscalls_tracers", lambda exclude=(): ([], None))
    wall = _Wall()
    a = ab.side("A (test)", build=tmp_path / "build-a")
    b = ab.side("B (test)", speculation="ssbd", build=tmp_path / "build-b")
    Settings = _watched(ab.Settings)
    s = Settings(a=a, b=b, variants=[VARIANT], ops=["getppid"], shapes=["jmp"], mode="quick",
                 rounds=5, copies=2, batches=3, batch_ms=0.75, warmup_ms=2, cpu=1,
                 realtime=False, wall=wall, wall_both=True)
    Settings.reads.clear()
    doc = ab.run_ab(tmp_path, s)

    # every field read by the run but mode, which __post_init__ turns into rounds (given here)
    assert Settings.names - Settings.reads == {"mode"}
    assert ab.Settings(a=a, b=b, variants=[VARIANT], mode="quick").rounds == ab.ROUNDS["quick"]
    # the cells and the sides
    assert {(v, op, shape) for v, op, _, shape, _, _ in fake.calls} == {
        (VARIANT, "getppid", "jmp")}
    assert cal == [(VARIANT, "getppid", 1, "jmp")]
    assert doc["a"] == a and doc["b"] == b and doc["wall_both"] is True
    (cell,) = doc["cells"]
    # the rounds and copies: 5 of each side, round r from copy r % 2 of its own build
    assert doc["rounds"] == doc["rounds_done"] == 5 and made["n"] == 2 and doc["copies"] == 2
    for side in ("a", "b"):
        assert [r["round"] for r in cell[side]["rounds"]] == list(range(5))
        assert [r["copy"] for r in cell[side]["rounds"]] == [r % 2 for r in range(5)]
    bins = {str(launch.binary) for *_, launch in fake.calls}
    assert bins == {f"copy-{g}/('{x}', '{VARIANT}')" for g in (0, 1)
                    for x in ("A (test)", "B (test)")}
    # each process: batches, length, warm-up, CPU, TSC rate, SCHED_FIFO
    for *_, sampling, launch in fake.calls:
        assert (sampling.batches, sampling.batch_ms, sampling.warmup_ms, sampling.cpu,
                sampling.tsc_hz, sampling.realtime) == (3, 0.75, 2, 1, 2.5e9, False)
    assert doc["batches"] == 3 and doc["batch_ms"] == 0.75 and doc["cpu"] == 1
    # B's speculation, and the wall in front of both sides (wall_both), up and down once
    args = [launch.extra_args for *_, launch in fake.calls]
    assert sum("--speculation" in x for x in args) == 5
    assert all("--fake-wall" in x for x in args)
    assert wall.log[0] == "up" and wall.log[-1] == "down" and wall.log.count("up") == 1
    assert doc["wall"]["up"] == {"kind": "fake", "cells": [(VARIANT, "getppid")]}
    assert "evidence" not in doc["wall"]
    assert "ab: round 5/5" in capsys.readouterr().err


def test_an_ab_wall_for_b_alone_groups_the_sides_and_stays_off_a(monkeypatch, tmp_path):
    """wall_both False: B's runs go behind the wall, grouped (a grouped wall), A's not; the
    evidence (bpftrace) is asked for once the rounds are done."""
    fake = _Syscost()
    _fake_copies(monkeypatch)
    monkeypatch.setattr(ab, "measure", fake)
    monkeypatch.setattr(ab, "calibrate", lambda *a, **k: (None, None, None))
    monkeypatch.setattr(ab.hostwalls, "raw_syscalls_tracers", lambda exclude=(): ([], None))
    monkeypatch.setattr(ab, "_evidence", lambda run: {"asked": run.settings.wall.spec})
    wall = _Wall()
    doc = ab.run_ab(tmp_path, ab.Settings(a=ab.side("A"), b=ab.side("B"), variants=[VARIANT],
                                          ops=["null"], rounds=4, wall=wall))
    assert doc["wall"]["evidence"] == {"asked": "fake:wall"}
    befores = [x for x in wall.log if isinstance(x, tuple)]
    assert len(befores) == 4                    # B's runs only
    behind = ["--fake-wall" in launch.extra_args for *_, launch in fake.calls]
    # grouped: each round's B runs together, and the side that goes first alternates
    assert behind == [False, True, True, False, False, True, True, False]
