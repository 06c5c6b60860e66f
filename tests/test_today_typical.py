"""When the host gives too few quiet moments for an undisturbed figure of a cell the first screen
rests on (the exit's price, int 0x80's null call, the fast path), the first screen still gives
the finding from the typical figures, said as typical, with the exits per call and how long
`tw bench --target 1%` would take (issue 62: never silence).

Why it can break: on an AMD EPYC Zen 3 guest whose host was fast in 14% of a quick run's
probes, the cpuid cell had no undisturbed interval, and the report's "Here, today" vanished:
the one finding that explains int 0x80's cost on a VM was not on the first screen.  A fallback
that mixed undisturbed and typical figures, or dropped the word "typical", would pass a
noisy moment's figure off as the hardware's.

The matrix is test_causes.matrix (one exit a call, the host slow in three batches of four) with
the host's probes of a quiet-first run added, fast around two rounds only.
"""
import sys

from conftest import ROOT
from test_causes import facts, matrix

sys.path.insert(0, str(ROOT / "scripts"))
from twtools.analyse import causes, percall  # noqa: E402
from twtools.present import causes as present_causes  # noqa: E402
from twtools.present.document import plain  # noqa: E402

ROUNDS = 32
FAST_AROUND = {5, 17}       # the rounds whose processes met the host's fast state


def noisy(fast_around=FAST_AROUND):
    """matrix(1) as a quiet-first run records it: a probe before and after each round's
    processes, fast only around the given rounds."""
    doc = matrix(1, rounds=ROUNDS)
    probes = []
    for r in range(ROUNDS):
        for t in (r - 0.1, r + 0.4):
            fast = r in fast_around
            probes.append({"t_s": t, "round": r, "floor_ns": 70.0 if fast else 95.0,
                           "fast": fast, "in_cell": False})
    for c in doc["cells"]:
        for rd in c["rounds"]:
            rd["t_s"] = rd["round"] + 0.1
    doc.update(host_state={"probes": probes, "quiet_first": True, "waited_s": 0.0,
                           "budget_s": 30.0, "target": None, "stopped": None},
               wall_s=float(ROUNDS), params={"batches": 4, "rounds": ROUNDS})
    return doc


def test_no_undisturbed_price_still_gives_the_finding_marked_typical():
    a = percall.analyse(noisy())
    fp = facts("kvm-6.18")
    doc = causes.compute_from(a, fp)
    assert doc["exit_price_ns"]["value"] is None      # too few quiet moments for it
    # the undisturbed figures alone (the findings' view) give no finding with a price
    plain_view = causes.today(doc, a)
    assert plain_view is None or plain_view["exit_price"] is None
    t = causes.today(doc, a, fp, typical=True)
    assert t["figure"] == "typical" and t["kind"] == "exit", t
    e, p = t["exits_per_call"], t["exit_price"]
    assert e["ci_low"] < 1 < e["ci_high"] and e["ci_high"] - e["ci_low"] < 0.5, e
    cpuid = percall.exit_cell(a)
    assert p["value"] == cpuid["median"]          # the typical figure, not the undisturbed
    assert "64-syscall cpuid" in t["typical_why"]
    assert t["target_s"] and t["target_s"]["seconds"] > 0
    s = plain(present_causes.today_sentence(t))
    assert s.startswith("**Here, today** (typical figures: too few processes of "), s
    assert "one VM exit per call" in s and f"one exit costs {p['value']:.0f} ns" in s, s
    assert "`tw bench --target 1%` would take this host" in s, s


def test_an_undisturbed_price_is_given_as_before():
    everywhere = set(range(ROUNDS))
    a = percall.analyse(noisy(everywhere))
    fp = facts("kvm-6.18")
    doc = causes.compute_from(a, fp)
    t = causes.today(doc, a, fp, typical=True)
    assert t["figure"] == "undisturbed" and t["kind"] == "exit", t
    assert plain(present_causes.today_sentence(t)).startswith("**Here, today:** int 0x80")
