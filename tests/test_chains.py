"""tw explain's causal chains (present.chains): each way into the kernel as the steps a call
takes on this machine's kernel, with the cost model's numbers (analyse.causes).

What it checks: the int 0x80 chain follows the machine's facts, read from a recorded
fingerprint (tests/fixtures/results-fixture, a KVM guest on Linux 6.18) and the cost model's
recorded facts (tests/fixtures/causes: FRED, 6.6, bare metal, Xen PV): a guest on a kernel >= 6.7 without FRED or Xen PV shows the APIC
in-service read and a VM exit priced at the measured cpuid figure; a FRED kernel goes through
fred_int80_emulation with no APIC read; a kernel older than 6.7 through entry_INT80_compat;
bare metal reads the APIC locally; Xen PV returns early; none of those four shows an exit.
The figures carry the fitted exits per call with its interval and the model's verdict; with
no cpuid cell the exit is "unknown" with why, never a number; with no results, "not
measured".  Every mechanism of the registry has a chain, and libc's follows the entry the
fingerprint recorded.  explain's cost leads with the undisturbed figure and still gives the
median.

Why it can break: a renamed part or field of the causes document, a fingerprint field moved,
a registry entry kind the chains do not know."""
import copy
import json

import pytest

from conftest import ROOT
from twtools.analyse import causes
from twtools.machine import registry
from twtools.present import chains, explain

FIX = ROOT / "tests" / "fixtures" / "results-fixture"
INT80, VDSO32, SYS64 = registry.find(32, "int80"), registry.find(32, "vdso32-call"), registry.find(64, "syscall")


@pytest.fixture()
def fp():
    return json.loads((FIX / "fingerprint.json").read_text())


def cell(variant, op, v, h):
    return {"variant": variant, "op": op, "shape": "ret", "supported": True,
            "undisturbed_ns": v, "undisturbed_ci_low": v - h, "undisturbed_ci_high": v + h}


# A synthetic matrix: one exit of 4500 ns on top of a 32-bit fast path of 200 ns.
CELLS = [cell(SYS64, "null", 130.0, 2.0), cell(SYS64, "cpuid", 4500.0, 60.0),
         cell(VDSO32, "null", 200.0, 5.0), cell(INT80, "null", 4750.0, 60.0)]


def int80_chain(fp, cells=CELLS):
    return chains.chain(INT80, fp, causes.compute_from(cells, fp))


def text(ch):
    return "\n".join(chains.text_lines(ch))


def test_guest_on_a_new_kernel_pays_the_exit_priced_here(fp):
    ch = int80_chain(fp)
    t = text(ch)
    for step in ("asm_int80_emulation", "do_int80_emulation", "int80_is_external", "55617fb991df",
                 "apic_read(APIC_ISR + 0x40)", "a VM exit", "the i386 table", "iret"):
        assert step in t, step
    exit_step = next(s for s in ch["steps"] if s["step"].startswith("a VM exit"))
    assert exit_step["ns"]["value"] == 4500.0
    assert "4500.0 ns [4440.0, 4560.0] here" in t
    # (4750 - 200) / 4500 = 1.01: the fit, its interval, the prediction and the verdict.
    assert "exits per call: 1.01 [" in t and "1 predicted" in t and "the model holds" in t
    assert "excludes exactly" not in t


def test_a_fit_near_but_not_at_one_exit_is_said(fp):
    """1.23 exits is near one (the model holds) but its interval excludes 1: the chain says so."""
    cells = [dict(c, undisturbed_ns=5735.0, undisturbed_ci_low=5675.0, undisturbed_ci_high=5795.0)
             if c["variant"] == INT80 else c for c in CELLS]
    t = text(int80_chain(fp, cells))
    assert "the model holds" in t and "the fitted interval excludes exactly 1: this way in costs more" in t


@pytest.mark.parametrize("facts, says, absent", [
    ("fred-6.18", "fred_int80_emulation: no int80_is_external() check", "asm_int80_emulation"),
    ("kvm-6.6", "entry_INT80_compat", "apic_read"),
    ("bare-metal-6.18", "a local APIC read, no exit on bare metal", "a VM exit"),
    ("xen-pv-6.18", "Xen PV: int80_is_external() returns early", "a VM exit"),
])
def test_facts_that_mean_no_exit(facts, says, absent):
    """The recorded facts of tests/fixtures/causes (the cost model's own fixtures)."""
    f = json.loads((ROOT / "tests" / "fixtures" / "causes" / f"{facts}.json").read_text())
    ch = int80_chain(f)
    t = text(ch)
    assert says in t and absent not in t
    assert "0 predicted" in t
    # The matrix holds one exit per call: against a prediction of none, the model says it fails.
    assert "the model fails here" in t
    assert not any(s.get("ns") for s in ch["steps"])


def test_no_cpuid_cell_leaves_the_exit_unknown(fp):
    t = text(int80_chain(fp, [c for c in CELLS if c["op"] != "cpuid"]))
    assert "a VM exit" in t and "no cpuid cell" in t
    assert "exits per call: unknown (" in t and "ns here" not in t


def test_not_measured_without_results(fp):
    ch = chains.chain(INT80, fp, None)
    assert ch["steps"] and ch["figures"] == ["not measured: run make report (or pass --results DIR)"]


def test_every_mechanism_has_a_chain_and_libc_follows_its_entry(fp):
    doc = causes.compute_from(CELLS, fp)
    for m in registry.mechanisms():
        ch = chains.chain(m.name, fp, doc)
        assert len(ch["steps"]) >= 2, m.name
        assert chains.markdown(ch, str)
    lib32 = text(chains.chain(registry.find(32, "libc"), fp, doc))
    assert "enters by vdso here" in lib32 and "__kernel_vsyscall" in lib32 and "sysenter" in lib32
    f = copy.deepcopy(fp)
    f["libc"]["32"]["entry"] = "int80"
    assert "int80_is_external" in text(chains.chain(registry.find(32, "libc"), f, doc))


def test_explain_cost_leads_with_undisturbed():
    data, _ = explain.costs_from(FIX)
    c = explain.cost_cell(data["percall"], registry.get(INT80))
    t = explain.cost_text(c)
    assert t.index(" undisturbed ") < t.index("typical") < t.index("(median")
    assert "the 64-bit syscall, same rounds, undisturbed" in t


def test_explain_json_carries_the_cost_model_and_the_chains():
    import subprocess
    import sys
    p = subprocess.run([sys.executable, ROOT / "scripts" / "tw", "explain", "--results", FIX, "--json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["causes"]["schema"] == causes.SCHEMA
    assert d["causes"]["exit_price_ns"]["value"] is None and "no cpuid cell" in d["causes"]["exit_price_ns"]["why"]
    paths = {e["variant"]: e for e in d["paths"]}
    assert "int80_is_external" in json.dumps(paths[INT80]["chain"]["steps"])
