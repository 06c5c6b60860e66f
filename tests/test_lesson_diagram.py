"""The lesson's diagrams are drawn from a chain's data, and text reaches them only escaped.

Why it can break: a chain step the lane rule does not place (it then lands in the C handler
column, where a reader looks for the kernel's C code); a figure or a kernel function that
carries markup from a file (an SVG shown as an image cannot run script, but a malformed one
shows nothing at all); a step's priced cost left off.  Pure: no machine, no results.
"""
import xml.dom.minidom

from conftest import ROOT  # noqa: F401  (puts scripts/ on the path)
from twtools.machine import registry
from twtools.present import chains, lessondiagram

FP = {"kernel": {"release": "6.18.44"}, "virtualization": "kvm", "fred": False,
      "cpu": {"vendor": "AuthenticAMD", "family": 25, "model": 1},
      "vdso32": {"instruction": "syscall"}, "mitigations": {}}


def test_every_mechanisms_chain_draws_as_well_formed_svg():
    for m in registry.mechanisms():
        ch = chains.chain(m.name, FP, None)
        svg = lessondiagram.svg(f"{m.name} <&>", ch["steps"], "measured here: 1.0 ns")
        dom = xml.dom.minidom.parseString(svg)        # raises on malformed XML
        assert dom.documentElement.tagName == "svg"
        assert "measured here: 1.0 ns" in svg and "&lt;&amp;&gt;" in svg


def test_steps_go_to_their_columns():
    lane = lessondiagram.lane
    assert lane({"step": "`int $0x80` (cd 80)", "kernel": "the CPU"}) == 1
    assert lane({"step": "IDT vector 0x80 -> asm_int80_emulation",
                 "kernel": "arch/x86/entry/entry_64_compat.S (int80_emulation)"}) == 2
    assert lane({"step": "do_int80_emulation", "kernel": "arch/x86/entry/syscall_32.c"}) == 3
    assert lane({"step": "a VM exit to the hypervisor", "kernel": "the hypervisor"}) == 5
    assert lane({"step": "the i386 table", "kernel": "ia32_sys_call"}) == 4
    assert lane({"step": "iret back to user",
                 "kernel": "swapgs_restore_regs_and_return_to_usermode"}) == 2
    assert lane({"step": "the C library's wrapper (64-bit)", "kernel": "libc"}) == 0


def test_a_priced_step_shows_its_cost_and_hostile_text_stays_text():
    steps = [{"step": "a VM exit </text><script>alert(1)</script>", "kernel": "the hypervisor",
              "ns": {"value": 994.0}}]
    svg = lessondiagram.svg("t", steps, "f", lambda s: "≈ 994 ns here")
    assert "≈ 994 ns here" in svg and "<script>" not in svg
    xml.dom.minidom.parseString(svg)
