"""hostclock times a chain of multiply-adds that never enters the kernel: the host's speed.

Why it can break: a compiler that folds or vectorises the chain (then the batches time
nothing and the figure is a fraction of a nanosecond); a batch count or iteration count
that the JSON does not keep; usage that drifts from docs/programs.md.  The chain's last value is
in the output, so computing the same chain here proves every step ran, without reading
any time.
"""
import json
import subprocess

import pytest

from conftest import ROOT

MASK = (1 << 64) - 1
K, C = 6364136223846793005, 1442695040888963407


def chain(steps):
    x = 1
    for _ in range(steps):
        x = (x * K + C) & MASK
    return x


def run(*args):
    return subprocess.run([ROOT / "build" / "hostclock", *map(str, args)], capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("batches,iterations", [(1, 1), (3, 1000), (7, 12345)])
def test_every_step_of_the_chain_runs(build, batches, iterations):
    p = run("--batches", batches, "--iterations", iterations)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["schema"] == "timewrite-hostclock/1" and d["iterations"] == iterations
    assert len(d["batch_ns"]) == batches and all(x >= 0 for x in d["batch_ns"])
    # one untimed batch, then the timed ones
    assert d["check"] == chain((batches + 1) * iterations) & 0xffff


@pytest.mark.parametrize("args", [["--batches", "0"], ["--iterations", "x"], ["--nope"],
                                  ["extra"], ["--batches"]])
def test_bad_usage_is_one_line_then_the_usage(build, args):
    p = run(*args)
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.splitlines()
    assert lines[0].startswith("hostclock: ") and lines[1].startswith("usage: hostclock")
