"""A mitigation's own instruction timed from user space prices it as a lower bound, beside the
leg where the kernel runs it; the others say why they cannot be priced (issue 71).

Why it can break: legs.json's instruction records not read (no price, the report back to "not
priced apart"), a price shown as the mitigation's whole cost instead of "at least", a VERW put
beside the way in, an instruction user space cannot run (WRMSR, IBPB, a CR3 write) shown as
priced, or an instruction timed on a kernel that runs no such mitigation said to sit in a leg.
The records are constructed as syscost prints them; the live stage runs in test_legs_live.py.
"""
from twtools.analyse import legs
from twtools.machine import mitigations
from twtools.present import causes as pcauses

TSA = {"tsa": "Mitigation: Clear CPU buffers: user/kernel boundary",
       "spectre_v1": "Mitigation: usercopy/swapgs barriers and __user pointer sanitization"}


def records(values):
    return [{"block": i, "samples_ns": [v, v + 0.1, v + 0.2, v + 0.1], "disturbed": [],
             "chain_ns": []} for i, v in enumerate(values)]


def test_instructions_are_summarised_from_their_processes():
    raw = {"instructions": {"verw": records([22.0, 22.1, 22.3, 22.0, 22.2]),
                            "lfence": records([4.4, 4.5])},
           "instructions_why": {}}
    got = legs.instructions(raw)
    assert 21.9 < got["verw"]["value"] < 22.5 and got["verw"]["ci_low"] <= got["verw"]["ci_high"]
    assert got["lfence"]["value"] is None and "an interval needs 3" in got["lfence"]["why"]


def test_the_price_is_at_least_and_beside_its_leg():
    prices = {"verw": {"value": 22.0, "ci_low": 21.8, "ci_high": 22.3}}
    live = mitigations.in_force(TSA, prices)
    verw = next(x for x in live if x["instruction"] == "verw")
    assert "at least 22" in pcauses.price_text(verw)
    c = {"mechanisms": {"64-syscall": {"role": "syscall64", "parts": [
        {"part": "mitigations on the path",
         "in_force": [dict(x, vulnerability=", ".join(x["files"])) for x in live]}]}}}
    lines = pcauses.instructions_lines(c, {"instructions": {"verw": prices["verw"]}})
    assert len(lines) == 1 and "on the way out" in lines[0] and "a lower bound" in lines[0]


def test_a_kernel_without_the_mitigation_holds_no_verw_in_a_leg():
    c = {"mechanisms": {"64-syscall": {"role": "syscall64", "parts": [
        {"part": "mitigations on the path", "in_force": []}]}}}
    lines = pcauses.instructions_lines(c, {"instructions": {"verw": {"value": 8.7, "ci_low": 8.6,
                                                                     "ci_high": 8.8}}})
    assert "none of the legs holds it" in lines[0]


def test_what_user_space_cannot_run_says_so():
    assert "privileged" in pcauses.price_text({"instruction": "wrmsr", "price_ns": None})
    assert "spread over the kernel's code" in pcauses.price_text({"instruction": None,
                                                                  "price_ns": None})
    assert "no VERW timed" in pcauses.price_text({"instruction": "verw", "price_ns": None})


def test_tw_legs_table_carries_each_instruction_or_why():
    """tw legs prints the instructions beside the legs: a price, or the reason none."""
    import csv
    import io
    from twtools.present import export, tables
    lg = {"variants": {}, "instructions": legs.instructions(
        {"instructions": {"verw": records([8.4, 8.5, 8.6, 8.4]), "lfence": []},
         "instructions_why": {"lfence": "syscost: --op lfence: not built"}})}
    rows = {r["figure"]: r for r in csv.DictReader(io.StringIO(
        export.CsvExporter().render(tables.legs(lg)))) if r["variant"] == "user space"}
    assert 8.3 < float(rows["verw (one instruction)"]["value_ns"]) < 8.8
    assert rows["lfence (one instruction)"]["value_ns"] == ""
    assert "not built" in rows["lfence (one instruction)"]["why"]
