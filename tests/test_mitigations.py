"""The mitigation table (machine/mitigations.py): every string the kernel can print, read right.

Why it can break: the table is keyed by the exact strings of arch/x86/kernel/cpu/bugs.c, and
each kernel release adds or rewords some (spectre_v2's parts went from ", " to "; " in 6.8,
"Enhanced IBRS" became "Enhanced / Automatic IBRS" in 6.3, TSA, ITS and VMSCAPE came in 6.15 to
6.17 and their stable backports); a row matched by substring reads "IBRS_FW" or the
"PBRSB-eIBRS" suffix of every spectre_v2 string as IBRS on entry (the Zen 3 TSA guest of issue
71), fires on a "Vulnerable" string, or counts the one VERW that mds, tsx_async_abort,
mmio_stale_data, reg_file_data_sampling and tsa all ask for several times.  The corpus
(tests/fixtures/mitigations/bugs-strings*.tsv, docs/mitigations.md) is every string bugs.c
prints in the versions extracted; the recorded machines are real sysfs output.
"""
import itertools
import json

import pytest

from conftest import ROOT
from twtools.machine import mitigations as M
from twtools.machine.doctor import Doctor

FIX = ROOT / "tests" / "fixtures"
CORPUS = sorted((FIX / "mitigations").glob("bugs-strings*.tsv"))
NEVER = ("Vulnerable", "Not affected", "Unknown", "KVM: Vulnerable", "Processor vulnerable")


def corpus():
    rows = []
    for p in CORPUS:
        for line in p.read_text().splitlines():
            if line.startswith("#") or not line.strip():
                continue
            version, source, f, where, role, s = line.split("\t")
            rows.append({"version": version, "source": source, "file": f, "from": where,
                         "role": role, "string": s.replace("\\n", "\n").replace("\\t", "\t")})
    return rows


ROWS = corpus()
FILES = sorted({r["file"] for r in ROWS if r["file"] != "*"})


def wholes():
    for r in ROWS:
        if r["role"] == "whole":
            for f in (FILES if r["file"] == "*" else [r["file"]]):
                yield r["version"], f, r["string"]


def parts(f, version=None):
    return sorted({r["string"] for r in ROWS if r["file"] == f and r["role"] == "part"
                   and (version is None or r["version"] == version)})


def heads(f, version=None):
    return sorted({r["string"] for r in ROWS if r["file"] == f and r["role"] == "whole"
                   and (version is None or r["version"] == version)})


def test_the_corpus_holds_every_version_and_file():
    versions = {r["version"] for r in ROWS}
    assert {"6.1.0", "6.1.192", "6.6.0", "6.12.117", "7.2.13"} <= versions
    assert len(ROWS) > 400
    assert {"spectre_v2", "tsa", "indirect_target_selection", "spec_rstack_overflow", "vmscape",
            "mds", "mmio_stale_data", "reg_file_data_sampling", "retbleed", "meltdown"} <= set(FILES)


def test_every_string_of_the_corpus_is_classified():
    bad = [(v, f, s, c["part"]) for v, f, s in wholes() for c in M.classify(f, s)
           if c["state"] == "unclassified"]
    assert not bad


def test_no_vulnerable_not_affected_or_unknown_string_is_a_mitigation():
    for v, f, s in wholes():
        if s.startswith(NEVER) or s.startswith("Mitigation: Vulnerable"):
            got = M.classify(f, s)
            assert all(not c["effects"] for c in got), (v, f, s)
            assert M.in_force({f: s}) == [], (v, f, s)


def compose_spectre_v2(version):
    """Every string spectre_v2_show_state() can print in one version: the main mode, then
    ibpb_state(), IBRS_FW, stibp_state(), RSB filling, pbrsb_eibrs_state(),
    spectre_bhi_state() and the module string, each present or empty, in that order."""
    ps = parts("spectre_v2", version)

    def pick(prefix):
        return [""] + [p for p in ps if p.lstrip(";, ").startswith(prefix)]
    slots = [pick("IBPB:"), pick("IBRS_FW"), pick("STIBP:"), pick("RSB filling"),
             [p for p in ps if p.lstrip(";, ").startswith("PBRSB-eIBRS:")] or [""],
             pick("BHI:"), ["", " - vulnerable module loaded"]]
    mains = [h for h in heads("spectre_v2", version) if not h.startswith("Vulnerable: eIBRS")]
    for main in mains:
        for combo in itertools.product(*slots):
            yield main, main + "".join(combo)


@pytest.mark.parametrize("version", ["6.1.0", "6.6.0", "6.1.192", "6.12.117", "7.2.13"])
def test_every_composed_spectre_v2_string_is_read_part_by_part(version):
    n = 0
    for main, s in compose_spectre_v2(version):
        got = M.classify("spectre_v2", s)
        assert all(c["state"] != "unclassified" for c in got), s
        assert got[0]["part"] == main, s
        ids = {e for c in got for e in c["effects"]}
        # IBRS on entry and exit only for the main mode "Mitigation: IBRS"
        assert ("ibrs_entry_exit" in ids) == (main == "Mitigation: IBRS"), s
        if main.startswith("Vulnerable"):
            assert not M.classify("spectre_v2", main)[0]["effects"], s
        n += 1
    assert n > 100


@pytest.mark.parametrize("f", ["mds", "tsx_async_abort", "mmio_stale_data", "retbleed"])
def test_the_smt_forms_are_read(f):
    # mds, tsx_async_abort and mmio_stale_data print "SMT Host state unknown" in a guest;
    # retbleed_show_state() never does
    smt = parts(f) + (["Host state unknown"] if f != "retbleed" else [])
    for h in heads(f):
        for word in smt:
            s = f"{h}; SMT {word}"
            got = M.classify(f, s)
            assert [c["state"] for c in got][1:] == ["never"], s
            assert got[0]["part"] == h


def test_the_l1tf_forms_are_read():
    for state in parts("l1tf"):
        if state in ("vulnerable", "disabled"):
            continue
        for s in (f"Mitigation: PTE Inversion; VMX: {state}",
                  f"Mitigation: PTE Inversion; VMX: {state}, SMT vulnerable",
                  f"Mitigation: PTE Inversion; VMX: {state}, SMT disabled"):
            got = M.classify("l1tf", s)
            assert all(c["state"] != "unclassified" for c in got), s
            assert "pte_inversion" in got[0]["effects"]


def test_the_srso_its_and_tsa_forms_are_read():
    # 6.1.192's srso_show_state() appends ", no microcode" to any of its strings
    for h in heads("spec_rstack_overflow", "6.1.192"):
        got = M.classify("spec_rstack_overflow", h + ", no microcode")
        assert [c["state"] for c in got if c["state"] == "unclassified"] == [], h
    assert M.classify("spec_rstack_overflow", "Mitigation: safe RET, no microcode")[0]["effects"] \
        == ["srso_safe_ret"]
    assert M.classify("indirect_target_selection", "Mitigation: Retpolines, Stuffing RSB")[0][
        "effects"] == ["call_depth"]
    assert M.classify("indirect_target_selection",
                      "Mitigation: Aligned branch/return thunks")[0]["effects"] == ["its_thunks"]
    assert [x["id"] for x in M.in_force({"tsa": "Mitigation: Clear CPU buffers: VM"})] == ["verw_vm"]
    assert [x["id"] for x in M.in_force({"tsa": "Mitigation: Clear CPU buffers"})] == \
        ["verw_exit", "verw_vm"]


def test_every_row_of_the_table_is_a_string_the_kernel_prints():
    """No dead row: each key is reached by a corpus string or a composed form (a reworded
    string must be added from its kernel, not guessed)."""
    reached = set()
    for v, f, s in wholes():
        reached.update((f, c["part"]) for c in M.classify(f, s))
    for f in FILES:
        for p in parts(f):
            reached.update((f, c["part"]) for c in M.classify(f, (heads(f) or ["x"])[0] + (
                p if p.startswith((";", ",", " -")) else f"; SMT {p}")))
    for state in parts("l1tf"):
        reached.update(("l1tf", c["part"]) for c in M.classify(
            "l1tf", f"Mitigation: PTE Inversion; VMX: {state}, SMT vulnerable"))
    reached.update(("l1tf", c["part"]) for c in M.classify(
        "l1tf", "Mitigation: PTE Inversion; VMX: auto, SMT disabled"))
    reached.update((f, "SMT Host state unknown") for f in ("mds", "tsx_async_abort",
                                                          "mmio_stale_data"))
    dead = [(f, p) for f, t in M.TABLE.items() for p in t if (f, p) not in reached]
    assert not dead


def test_one_verw_however_many_files_ask_for_it():
    vulns = {"mds": "Mitigation: Clear CPU buffers; SMT vulnerable",
             "tsx_async_abort": "Mitigation: Clear CPU buffers; SMT vulnerable",
             "mmio_stale_data": "Mitigation: Clear CPU buffers; SMT vulnerable",
             "reg_file_data_sampling": "Mitigation: Clear Register File",
             "tsa": "Mitigation: Clear CPU buffers: user/kernel boundary"}
    got = M.in_force(vulns)
    verw = [x for x in got if x["instruction"] == "verw" and "exit" in x["where"]]
    assert len(verw) == 1
    assert verw[0]["files"] == sorted(vulns)
    assert verw[0]["where"] == ["exit"] and verw[0]["on_path"]
    assert "CLEAR_CPU_BUFFERS" in verw[0]["source"] and "entry_64.S" in verw[0]["source"]
    assert verw[0]["price_ns"] is None  # not priced apart until a VERW is measured
    priced = M.in_force(vulns, prices={"verw": {"value": 22.0}})
    assert [x["price_ns"] for x in priced if x["id"] == "verw_exit"] == [{"value": 22.0}]


def test_mmio_alone_clears_buffers_before_vm_entry_only():
    got = {x["id"]: x for x in M.in_force({"mmio_stale_data": "Mitigation: Clear CPU buffers; "
                                                               "SMT Host state unknown"})}
    assert set(got) == {"verw_vm"} and got["verw_vm"]["files"] == ["mmio_stale_data"]
    got = {x["id"]: x for x in M.in_force({"mmio_stale_data": "Mitigation: Clear CPU buffers",
                                           "mds": "Mitigation: Clear CPU buffers"})}
    assert got["verw_exit"]["files"] == ["mds", "mmio_stale_data"]


# --- the recorded machines --------------------------------------------------------------
def sysfs(root):
    d = root / "sys" / "devices" / "system" / "cpu" / "vulnerabilities"
    return {f.name: f.read_text().strip() for f in d.iterdir()}


def listed(path):
    out = {}
    for line in path.read_text().splitlines():
        if line.startswith("#") or ":" not in line:
            continue
        k, v = line.split(":", 1)
        out[k.strip()] = v.strip()
    return out


MACHINES = dict(
    {p.name: sysfs(p) for p in sorted((FIX / "machines").iterdir())
     if (p / "sys" / "devices" / "system" / "cpu" / "vulnerabilities").is_dir()},
    **{p.stem: listed(p) for p in sorted((FIX / "mitigations" / "machines").glob("*.txt"))},
    **{f"atlas-{p.parents[2].name}-{json.loads(p.read_text())['kernel']['release']}":
       json.loads(p.read_text())["mitigations"]
       for p in sorted((ROOT / "data" / "machines").glob("*/runs/*/fingerprint.json"))})
EXPECT = {
    # issue 71's case: one VERW on every exit, asked for by tsa; no IBRS on entry
    "amd-epyc-zen3-kvm-tsa": {"verw_exit": ["tsa"], "srso_safe_ret": ["spec_rstack_overflow"],
                              "retpoline": ["spectre_v2"], "ibrs_fw": ["spectre_v2"],
                              "ibpb_switch": ["spectre_v2"], "rsb_fill": ["spectre_v2"],
                              "swapgs_fence": ["spectre_v1"], "ssbd_prctl": ["spec_store_bypass"]},
    "amd-epyc-zen4-kvm": {"retpoline": ["spectre_v2"], "rsb_fill": ["spectre_v2"],
                          "swapgs_fence": ["spectre_v1"]},
    "intel-icelake-kvm": {"retpoline": ["spectre_v2"], "rsb_fill": ["spectre_v2"],
                          "rrsba_dis": ["spectre_v2"], "swapgs_fence": ["spectre_v1"],
                          "its_thunks": ["indirect_target_selection"]},
    "intel-xeon-kvm": {"eibrs": ["retbleed", "spectre_v2"], "ibpb_switch": ["spectre_v2"],
                       "pbrsb_vmexit": ["spectre_v2"], "swapgs_fence": ["spectre_v1"],
                       "feature_off": ["tsx_async_abort"], "ssbd_prctl": ["spec_store_bypass"]},
}


def test_the_recorded_machines_are_all_there():
    assert {"amd-epyc-zen3-kvm-tsa", "amd-epyc-zen4-kvm", "intel-xeon-kvm", "intel-icelake-kvm",
            "intel-f6m207-kvm-fc-v1300"} <= set(MACHINES)
    assert sum(k.startswith("atlas-") for k in MACHINES) >= 5


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_a_recorded_machine_s_strings_give_the_right_rows(name):
    vulns = MACHINES[name]
    assert M.unclassified(vulns) == []
    got = {x["id"]: x["files"] for x in M.in_force(vulns)}
    if name in EXPECT:
        assert got == EXPECT[name]
    assert "ibrs_entry_exit" not in got  # no recorded machine writes IBRS on entry
    for x in M.in_force(vulns):
        for f in x["files"]:
            assert not vulns[f].startswith(NEVER), (name, f)


def test_the_zen3_tsa_guest_pays_one_verw_on_every_exit_and_no_ibrs_on_entry():
    vulns = MACHINES["amd-epyc-zen3-kvm-tsa"]
    on_exit = [x for x in M.in_force(vulns) if "exit" in x["where"]]
    assert [(x["id"], x["files"], x["instruction"]) for x in on_exit] == \
        [("verw_exit", ["tsa"], "verw")]
    assert "IBRS written on every entry" not in json.dumps(M.in_force(vulns))
    fw = next(x for x in M.in_force(vulns) if x["id"] == "ibrs_fw")
    assert fw["where"] == ["firmware"] and not fw["on_path"]


def test_work_the_kernel_still_does_where_it_says_vulnerable_is_apart():
    zen4 = MACHINES["amd-epyc-zen4-kvm"]  # spec_rstack_overflow: Vulnerable: Safe RET, no microcode
    assert "srso_safe_ret" not in {x["id"] for x in M.in_force(zen4)}
    assert [x["id"] for x in M.attempted(zen4)] == ["srso_safe_ret"]
    icelake = MACHINES["intel-icelake-kvm"]  # mmio: Vulnerable: Clear CPU buffers attempted
    assert "verw_exit" not in {x["id"] for x in M.in_force(icelake)}
    assert "verw_exit" in {x["id"] for x in M.attempted(icelake)}


# --- facts_changed: what tw compare lists first ----------------------------------------------
def atlas_fp(release):
    for p in (ROOT / "data" / "machines" / "amd-epyc-f25m1-kvm" / "runs").glob("*/fingerprint.json"):
        fp = json.loads(p.read_text())
        if fp["kernel"]["release"] == release:
            return fp
    raise LookupError(release)


def tsa_fp():
    return Doctor(root=FIX / "machines" / "amd-epyc-zen3-kvm-tsa", which=lambda n: None,
                  euid=1000).fingerprint()


def test_facts_changed_names_tsa_first_with_its_verw_on_the_way_out():
    a, b = atlas_fp("6.18.44-fc-v782"), tsa_fp()
    rows = M.facts_changed(a, b)
    first = rows[0]
    assert first["fact"] == "vulnerabilities/tsa"
    assert (first["a"], first["b"]) == ("Not affected",
                                        "Mitigation: Clear CPU buffers: user/kernel boundary")
    assert first["where"] == ["exit"] and first["added"] == ["verw_exit"]
    assert "VERW" in first["work"]
    # no other vulnerability verdict changed between the two builds
    assert [r["fact"] for r in rows if r["kind"] == "vulnerability"] == ["vulnerabilities/tsa"]
    # the way back removes it
    back = M.facts_changed(b, a)[0]
    assert back["removed"] == ["verw_exit"] and back["added"] == []
    assert M.facts_changed(b, b) == []


def test_facts_changed_lists_the_deciding_facts_recorded_on_both_sides():
    a = tsa_fp()
    b = json.loads(json.dumps(a))
    b["cpuid"]["leaves"]["0x80000021.0"]["ecx"] = "0x00000086"  # TSA_SQ_NO, TSA_L1_NO set
    b["cpu"]["bugs"] = [x for x in b["cpu"]["bugs"] if x != "tsa"]
    b["kernel_state"]["mitigation_params"]["tsa"] = "off"
    rows = {r["fact"]: r for r in M.facts_changed(a, b)}
    assert rows["cpuid:0x80000021.0"]["a"] == {"eax": "0x18000265", "ecx": "0x00000080"}
    assert rows["cpu bugs"]["b"] == [x for x in a["cpu"]["bugs"] if x != "tsa"]
    assert rows["cmdline:tsa"]["a"] is None and rows["cmdline:tsa"]["b"] == "off"
    assert all(r["where"] == [] for r in rows.values())
    # a fact one fingerprint never recorded (an older one) is no change
    old = json.loads(json.dumps(a))
    del old["cpuid"], old["cpu"]["bugs"]
    assert not [r for r in M.facts_changed(old, b) if r["fact"].startswith(("cpuid", "cpu bugs"))]


def test_a_verw_another_file_already_asked_for_is_no_new_work():
    a = {"mitigations": {"mds": "Mitigation: Clear CPU buffers; SMT vulnerable", "tsa": "Not affected"}}
    b = {"mitigations": {"mds": "Mitigation: Clear CPU buffers; SMT vulnerable",
                         "tsa": "Mitigation: Clear CPU buffers: user/kernel boundary"}}
    r = M.facts_changed(a, b)[0]
    assert r["added"] == [] and r["where"] == ["exit"] and "already asked for by mds" in r["work"]


def test_the_report_lists_the_verw_once_by_where_its_work_runs():
    """The report's section on the Zen 3 TSA guest: one VERW on every exit, named by tsa, in
    the table of the mitigations on the path; no IBRS on entry anywhere."""
    from twtools.analyse import causes
    from twtools.present import causes as present_causes
    from twtools.present.document import Doc, MarkdownExporter

    def cell(v, ns):
        return {"variant": v, "op": "null", "shape": "ret", "supported": True,
                "undisturbed_ns": ns, "undisturbed_ci_low": ns - 1, "undisturbed_ci_high": ns + 1}
    cells = [cell("64-syscall", 361.3), cell("32-syscall", 398.3), cell("32-int80", 1645.3)]
    fp = json.loads((ROOT / "data" / "machines" / "amd-epyc-f25m1-kvm" / "runs"
                     / "vm-20261125T012530Z-17226" / "fingerprint.json").read_text())
    fp["mitigations"] = MACHINES["amd-epyc-zen3-kvm-tsa"]
    doc = Doc()
    present_causes.section(doc, {"causes": causes.compute_from(cells, fp)})
    text = MarkdownExporter().render(doc, None).replace("\\_", "_")
    assert "IBRS written on" not in text
    table = text.split("The mitigations on the path, by where their work runs", 1)[1].split("\n#", 1)[0]
    verw_rows = [l for l in table.splitlines() if "one VERW on every exit" in l]
    assert len(verw_rows) == 1 and "| tsa |" in verw_rows[0]
    assert "every exit to user space" in verw_rows[0]
    # int 0x80 alone pays the swapgs fence (an IDT entry)
    fence = [l for l in table.splitlines() if "lfence after swapgs" in l]
    assert len(fence) == 1 and "32-int80" in fence[0] and "32-syscall" not in fence[0]


def test_a_measured_verw_prices_the_effect_through_the_cost_model():
    """The hook for a user-space VERW or lfence price: compute_from(..., prices=...)."""
    from twtools.analyse import causes
    cells = [{"variant": "64-syscall", "op": "null", "shape": "ret", "supported": True,
              "undisturbed_ns": 361.3, "undisturbed_ci_low": 360.3, "undisturbed_ci_high": 362.3}]
    fp = {"mitigations": MACHINES["amd-epyc-zen3-kvm-tsa"]}

    def verw(doc):
        part = next(p for p in doc["mechanisms"]["64-syscall"]["parts"]
                    if p["part"] == "mitigations on the path")
        return next(x for x in part["in_force"] if x["id"] == "verw_exit")
    assert verw(causes.compute_from(cells, fp))["price_ns"] is None
    price = {"value": 22.0, "ci_low": 21.0, "ci_high": 23.0}
    assert verw(causes.compute_from(cells, fp, prices={"verw": price}))["price_ns"] == price
