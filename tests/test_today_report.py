"""The report's first screen, built by `tw report` as a user runs it: the "Here, today"
sentence lands right under the verdict with the recorded run's own exit price and count
(read back from the causes.json the report wrote), and on bare metal it names int 0x80's
own path, not a VM exit, both there and in "Three things this machine showed".

These build whole reports (every section, every plot), so they belong to `make test`; the
sentence itself is tested in-process in test_today.py, in the fast tier.

Why it can break: the report stops putting the sentence under the verdict; the first screen
speaks of a VM exit on bare metal; the sentence quotes figures other than those the report
wrote to causes.json.

The bare-metal results directory is built from recorded facts: the atlas's AMD EPYC run (its
meta.json and fingerprint.json as tw wrote them) with the fingerprint's virtualisation facts
set as tw doctor records bare metal (tests/fixtures/causes/bare-metal-6.18.json), and a
per-call matrix from a known host (test_causes.matrix) with no exit.
"""
import json
import re
import shutil
import subprocess
import sys

from conftest import ROOT
from test_causes import facts, matrix
from test_today import OWN_PATH

RUN = ROOT / "data" / "machines" / "amd-epyc-f25m1-kvm" / "runs" / "vm-20261125T012530Z-17226"


def bare_metal_results(tmp_path):
    """A results directory from the atlas run's recorded meta and fingerprint, made bare metal
    as tw doctor records it, and the known host's matrix without an exit."""
    d = tmp_path / "bare-metal"
    d.mkdir()
    shutil.copy(RUN / "meta.json", d / "meta.json")
    fp = json.loads((RUN / "fingerprint.json").read_text())
    bm = facts("bare-metal-6.18")
    fp["virtualization"] = bm["virtualization"]
    fp["virtualization_detail"] = dict(fp.get("virtualization_detail") or {},
                                       **{k: bm["virtualization_detail"][k]
                                          for k in ("hypervisor_flag", "vm")})
    (d / "fingerprint.json").write_text(json.dumps(fp))
    (d / "percall.json").write_text(json.dumps(matrix(0, extra=OWN_PATH)))
    return d


def report(d):
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "tw"), "report", str(d)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return (d / "report.md").read_text()


def test_bare_metal_report_first_screen_wording(tmp_path):
    md = report(bare_metal_results(tmp_path))
    head = md.split("## What each way into the kernel costs here")[0]
    assert "bare metal" in head.splitlines()[0], head.splitlines()[0]
    today = next(line for line in head.splitlines() if line.startswith("**Here, today:**"))
    assert "none of it is a VM exit (bare metal: the APIC read is a local access, no exit)" \
        in today, today
    assert "own path" in today and "VM exit per call" not in today, today
    first = re.search(r"^1\. \*\*Int 0x80 against the fast path\*\*: (.*)$", md, re.M).group(1)
    assert "Measured cause: int 0x80's own path" in first and "no VM exit" in first, first


def test_the_report_puts_the_sentence_right_under_the_verdict(tmp_path):
    d = tmp_path / "run"
    shutil.copytree(RUN, d)
    subprocess.run(["xz", "-d", str(d / "percall.json.xz")], check=True)
    lines = [x for x in report(d).splitlines() if x.strip()]
    v = next(i for i, x in enumerate(lines) if x.startswith("> **Verdict:"))
    today = lines[v + 1]
    assert today.startswith("**Here, today:** int 0x80 costs "), today
    # The recorded run's own figures, read back from causes.json as the report wrote it.
    c = json.loads((d / "causes.json").read_text())
    p = c["exit_price_ns"]
    assert f"one exit costs {p['value']:.0f} ns [{p['ci_low']:.0f}, {p['ci_high']:.0f}]" in today
    e = c["mechanisms"]["32-int80"]["exits_per_call"]
    assert f"{e['value']:.2f} [{e['ci_low']:.2f}, {e['ci_high']:.2f}] fitted" in today, today
