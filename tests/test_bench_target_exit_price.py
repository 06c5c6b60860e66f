"""tw bench prices the VM exit again at its end, as tw run does, with or without --target.

Why it can break: a --target run takes minutes and narrows its intervals to +-1%, while the
host moves the price of a VM exit over minutes.  Two `tw bench --target 1%` runs beside the
neighbour on an AMD EPYC guest (family 25, model 17) each had 48 of 48 fast cells within
+-1%, and three int 0x80 cells (one exit a call) moved -1.3% to -1.6% from one to the next,
outside both intervals: 44 of 48 overlapped.  The run now prices the exit once more after its
matrix (measure/exitprice.py) and records it beside percall.json, so that its own table,
`tw report` and `tw compare` hold or take out the exit's move (analyse/exitdrift.py).  If the
stage does not run, or what the run prints differs from what the directory's analysis gives,
a rerun's int 0x80 cells fall outside again.  A default run is narrow enough to meet the same
move: beside the neighbour on an Intel guest (family 6, model 207) one exit cost 1.9% less in
the second of two back-to-back default runs and two int 0x80 cells missed.  Live: the figures
are the host's; only that the price was taken, recorded and used as said is checked.
"""
import pytest
import json
import re
import sys

from conftest import ROOT, need_supported, run

sys.path.insert(0, str(ROOT / "scripts"))
from twtools.analyse import results  # noqa: E402

TW = ROOT / "scripts" / "tw"


@pytest.mark.parametrize("target", [["--target", "50%", "--budget", "5s"], []],
                         ids=["target", "default"])
def test_a_run_prices_the_exit_at_its_end(build, tmp_path, target):
    need_supported("syscost", "64-syscall")
    out = tmp_path / "b"
    p = run([sys.executable, TW, "bench", "--variants", "64-syscall,64-int80",
             "--ops", "null,cpuid", "--shapes", "ret", "--rounds", "4", *target,
             "--out", out], text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    if not (out / "exitprice.json").exists():
        # this run's fit did not agree with the kernel's facts (4 rounds of a noisy host), or
        # the kernel's facts say int 0x80 pays no exit here (bare metal, APICv)
        assert "no measured call pays a VM exit here" in p.stderr, p.stderr[-1500:]
        assert "exit-price" not in json.loads((out / "meta.json").read_text())["stages"]
        return
    assert "the price of a VM exit again, at the run's end" in p.stderr
    meta = json.loads((out / "meta.json").read_text())
    assert list(meta["stages"]) == ["doctor", "bench", "exit-price"]
    raw = json.loads((out / "exitprice.json").read_text())
    assert raw["host_state"]["rounds"] > 0
    assert {c["op"] for c in raw["cells"]} == {"null", "cpuid"}
    data = results.load(out)
    ep = data["exitprice"]
    assert ep is not None and ep["rounds"] == raw["host_state"]["rounds"]
    m = re.search(r"the (\d+) cells that pay exits have intervals that hold both prices",
                  p.stderr)
    if not ep["paying"]:
        # this run's fit did not agree with the kernel's facts (4 rounds of a noisy host)
        assert "no measured variant pays VM exits here" in p.stderr and m is None
    elif ep.get("move") is None:
        # the stage never met the matrix's fast state: said, and nothing widened
        assert "the exit's price at the end is unknown" in p.stderr and m is None
    else:
        # what the run printed is what the directory's analysis does
        assert m and int(m.group(1)) == ep["widened"] > 0, p.stderr[-1500:]
        assert f"one exit cost {ep['move_pct']:+.2f}%" in p.stderr


def test_a_run_where_no_call_pays_an_exit_has_no_exit_stage(build, tmp_path):
    need_supported("syscost", "64-syscall")
    out = tmp_path / "b"
    p = run([sys.executable, TW, "bench", "--variants", "64-syscall", "--ops", "null,cpuid",
             "--shapes", "ret", "--rounds", "2", "--out", out], text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "no measured call pays a VM exit here" in p.stderr
    assert not (out / "exitprice.json").exists()
    assert "exit-price" not in json.loads((out / "meta.json").read_text())["stages"]
