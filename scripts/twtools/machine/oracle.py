"""The support oracle: from a machine's facts, which mechanisms must work there, and which
cannot, each with the fact that decides it.

A mechanism's probe (its program run with --probe) says whether it worked; the oracle says
whether it should have.  Together they tell three things apart that a probe alone cannot:

  works        expected to work, and it did
  unsupported  a stated fact of this machine rules it out, and the probe agrees
  broken       every fact says it must work, yet the probe failed: a bug in the stub, the
               build or the project, reported as an error, never excused as "unsupported"

When a fact is unknown (a kernel config that cannot be read, a vendor this project has no
entry for), the oracle says so and the probe decides; that outcome is labelled as such.

The facts come from a fingerprint (twtools.machine.doctor), so recorded machines can be
replayed: tests/fixtures/machines/ holds an AMD and an Intel capture and kernel forms this
project cannot boot here (FRED, ia32_emulation=0, vdso32=0, vsyscall=none).
"""
from . import registry, vendors

MUST, CANNOT, UNKNOWN = "must", "cannot", "unknown"


def _fact(value, why):
    return {"value": value, "why": why}


def facts(fp):
    """{need: {value: True|False|None, why}} for every need the registry knows, from a
    fingerprint.  None means the fingerprint cannot tell; why then says what is missing."""
    cpu = fp.get("cpu") or {}
    vendor = cpu.get("vendor")
    v = vendors.lookup(vendor)
    fred = fp.get("fred")
    out = {}

    ia32 = fp.get("ia32_emulation")
    out["ia32"] = _fact(ia32, (fp.get("ia32_detail") or {}).get("why")
                        or "the fingerprint does not record IA32 emulation")

    vd = fp.get("vdso32") or {}
    if ia32 is False:
        out["vdso32"] = _fact(False, "no IA32 emulation, so no 32-bit process (and no 32-bit vDSO)")
    elif vd.get("available") is True:
        out["vdso32"] = _fact(True, "a 32-bit process was given AT_SYSINFO (its vDSO was read)")
    elif vd.get("available") is False:
        out["vdso32"] = _fact(False, vd.get("why") or "no 32-bit vDSO")
    else:
        out["vdso32"] = _fact(None, vd.get("why") or "the 32-bit vDSO was not looked at")

    who = f"{v['name']} ({vendor.strip()})" if v else repr(vendor)
    if v is None:
        out["sysenter32"] = _fact(None, f"CPU vendor {who} is not in this project's vendor table")
        out["syscall32"] = _fact(None, f"CPU vendor {who} is not in this project's vendor table")
    elif fred:
        # arch/x86/entry/entry_fred.c, fred_other(): a SYSENTER event from 32-bit code goes to
        # do_fast_syscall_32, a SYSCALL event from 32-bit code to exc_invalid_op (#UD).
        out["syscall32"] = _fact(False, "FRED is on: the kernel answers syscall from 32-bit code "
                                        "with #UD (entry_fred.c, fred_other)")
        if v["fast32"] == "sysenter":
            out["sysenter32"] = _fact(True, f"FRED is on and the CPU is {who}: the kernel takes "
                                            "sysenter from 32-bit code (fred_other -> "
                                            "do_fast_syscall_32)")
        else:
            out["sysenter32"] = _fact(False, f"{who} CPUs raise #UD for sysenter in "
                                             "compatibility mode")
    else:
        for insn in ("sysenter", "syscall"):
            if v["fast32"] == insn:
                out[f"{insn}32"] = _fact(True, f"{who} CPUs take {insn} from 32-bit code under a "
                                               "64-bit kernel")
            else:
                out[f"{insn}32"] = _fact(False, f"{who} CPUs raise #UD for {insn} from 32-bit code "
                                                "under a 64-bit kernel (compatibility mode)")

    vs = fp.get("vsyscall") or {}
    mode = vs.get("mode")
    if mode in ("xonly", "emulate"):
        out["vsyscall"] = _fact(True, f"the vsyscall page is mapped ({vs.get('why') or mode}): "
                                      "a call into it faults and the kernel emulates it")
    elif mode == "none":
        out["vsyscall"] = _fact(False, vs.get("why") or "vsyscall=none: no vsyscall page is mapped")
    else:
        out["vsyscall"] = _fact(None, vs.get("why") or "the fingerprint does not record the vsyscall mode")

    v64 = fp.get("vdso64") or {}
    if v64.get("available") in (True, False):
        out["vdso64"] = _fact(v64["available"], v64.get("why") or
                              ("64-bit processes get a vDSO" if v64["available"] else "no 64-bit vDSO"))
    else:
        out["vdso64"] = _fact(None, v64.get("why") or "the fingerprint does not record the 64-bit vDSO")
    return out


def predict(fp, mechanisms=None):
    """{variant: {expect: must|cannot|unknown, why, needs: {need: fact}}} for every mechanism
    of the registry (or the given ones)."""
    f = facts(fp)
    out = {}
    for m in mechanisms if mechanisms is not None else registry.mechanisms():
        needs = {n: f[n] for n in m.needs}
        against = [n for n, x in needs.items() if x["value"] is False]
        unknown = [n for n, x in needs.items() if x["value"] is None]
        if against:
            out[m.name] = {"expect": CANNOT, "why": "; ".join(needs[n]["why"] for n in against),
                           "needs": needs}
        elif unknown:
            out[m.name] = {"expect": UNKNOWN,
                           "why": "cannot tell: " + "; ".join(needs[n]["why"] for n in unknown),
                           "needs": needs}
        else:
            why = "; ".join(dict.fromkeys(needs[n]["why"] for n in m.needs)) if m.needs else \
                f"{m.name} needs nothing beyond a 64-bit x86 kernel"
            out[m.name] = {"expect": MUST, "why": why, "needs": needs}
    return out


def judge(prediction, probe_ok, probe_why):
    """The status of one variant from the oracle's prediction and its probe's outcome:
    {status: works|unsupported|broken|unpredicted, supported, reason, expect}."""
    expect = prediction["expect"]
    # The probe's own message ends with the stub's general hint; the oracle's fact replaces it.
    probe_why = (probe_why or "no reason given").split("; ")[0]
    if probe_ok:
        if expect == CANNOT:
            # The facts said no, the machine said yes: the oracle is wrong about this machine.
            return {"status": "unpredicted", "supported": True, "expect": expect,
                    "reason": f"works, although the oracle expected it not to ({prediction['why']})"}
        return {"status": "works", "supported": True, "expect": expect, "reason": None}
    if expect == MUST:
        return {"status": "broken", "supported": False, "expect": expect,
                "reason": f"BROKEN: its probe failed ({probe_why}), but it must work here: "
                          f"{prediction['why']}"}
    if expect == CANNOT:
        return {"status": "unsupported", "supported": False, "expect": expect,
                "reason": f"{prediction['why']} (probe: {probe_why})"}
    return {"status": "unsupported", "supported": False, "expect": expect,
            "reason": f"{probe_why} (not predicted: {prediction['why']})"}
