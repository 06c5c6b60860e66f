"""The report's first screen says what holds today and why: int 0x80's cost against the fast
path, with its measured cause (analyse.causes.today, present.causes.today_sentence), and
"Three things this machine showed" names that cause (analyse.findings).

Why it can break: the sentence quotes a fit the cost model rejected as if it held; it speaks
of a VM exit on bare metal, where the kernel's source says there is none and `cpuid` is only
an instruction; it drops the exit price or its interval; a results directory measured before
the cpuid cell existed gets a price it never measured.

The sentence, its kind and the finding are built here in-process; test_today_report.py builds
whole reports with `tw report` and checks where the sentence lands on the first screen.

The bare-metal case is built from recorded facts: the virtualisation facts as tw doctor
records bare metal (tests/fixtures/causes/bare-metal-6.18.json: systemd-detect-virt none, no
hypervisor flag), and a per-call matrix from a known host (test_causes.matrix) in which int
0x80 costs the fast path plus its own path and no exit.
"""
import sys

from conftest import ROOT
from test_causes import facts, matrix

sys.path.insert(0, str(ROOT / "scripts"))
from twtools.analyse import causes, findings, percall  # noqa: E402
from twtools.present import causes as present_causes  # noqa: E402
from twtools.present.document import plain  # noqa: E402

OWN_PATH = 150.0  # ns: what int 0x80's own path adds over the fast path in the synthetic host


def today_of(exits, fp, extra=0.0):
    a = percall.analyse(matrix(exits, extra=extra))
    doc = causes.compute_from(a, fp)
    return causes.today(doc, a), {"percall": a, "causes": doc}


def test_one_exit_in_a_guest_is_named_with_its_price_and_count():
    t, data = today_of(1, facts("kvm-6.18"))
    assert t["kind"] == "exit" and t["predicted"] == 1, t
    s = plain(present_causes.today_sentence(t))
    p = t["exit_price"]
    assert s.startswith("**Here, today:** int 0x80 costs "), s
    assert "the 64-bit `syscall`" in s and "one VM exit per call" in s, s
    # The price and the fitted count, each with its interval, as the sentence prints them.
    assert f"one exit costs {p['value']:.0f} ns [{p['ci_low']:.0f}, {p['ci_high']:.0f}]" in s, s
    e = t["exits_per_call"]
    assert f"{e['value']:.2f} [{e['ci_low']:.2f}, {e['ci_high']:.2f}] fitted" in s, s
    assert present_causes.SECTION in s
    f = findings.findings(data)[0]
    assert f["key"] == "entry" and f["cause"].startswith("one VM exit per call"), f
    assert f"{p['value']:.0f} ns" in f["cause"], f


def test_a_rejected_fit_is_not_quoted_as_the_cause():
    # Two exits' worth of cost where the kernel's source predicts one: the model fails.
    t, data = today_of(2, facts("kvm-6.18"))
    assert t["kind"] == "misfit", t
    s = plain(present_causes.today_sentence(t))
    assert "the cost model fails here" in s and "it pays" not in s, s
    assert "fails here" in findings.findings(data)[0]["cause"]


def test_bare_metal_says_no_exit_and_names_the_path_instead():
    t, data = today_of(0, facts("bare-metal-6.18"), extra=OWN_PATH)
    assert t["kind"] == "no-exit" and t["predicted"] == 0, t
    s = plain(present_causes.today_sentence(t))
    assert "none of it is a VM exit" in s and "bare metal" in s, s
    assert "own path" in s and "`iret`" in s, s
    # No price of an exit, and no exit count, where no exit is paid.
    assert "one exit costs" not in s and "fitted" not in s and "pays" not in s, s
    f = findings.findings(data)[0]
    assert "no VM exit" in f["cause"] and "bare metal" in f["cause_why"], f


def test_no_cpuid_cell_leaves_the_price_unknown():
    m = matrix(1)
    m["cells"] = [c for c in m["cells"] if c["op"] != "cpuid"]
    a = percall.analyse(m)
    t = causes.today(causes.compute_from(a, facts("kvm-6.18")), a)
    assert t["kind"] == "price-unknown" and t["exit_price"] is None, t
    s = plain(present_causes.today_sentence(t))
    assert "its price is unknown" in s and "cpuid" in s and "one exit costs" not in s, s
