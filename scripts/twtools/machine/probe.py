"""Whether each variant's mechanism works here, asked of the variant itself (--probe)."""
from ..core import proc
# build/<program>-<variant>: defined in core (the tracers name a variant's binary too, and the
# probe asks the doctor for facts, so the name lives below both).
from ..core.paths import binary
from . import oracle, registry

EXIT_UNSUPPORTED = 77


def check(program, variant):
    """(supported, reason) for one variant, by running its --probe.

    A binary that is missing, or that the kernel cannot execute (no IA32
    emulation for 32-bit programs), is unsupported with that reason."""
    path = binary(program, variant)
    if not path.exists():
        return False, f"{path.name} is not built (run make)"
    try:
        # In its own process group (core.proc): the probe's own child, which tries the
        # mechanism, goes with it if tw is interrupted.
        p = proc.run([path, "--probe"], timeout=30)
    except OSError as e:
        return False, f"cannot execute {path.name}: {e.strerror} (32-bit programs need IA32 emulation)"
    if p.returncode == 0:
        return True, None
    why = p.stderr.strip().splitlines()
    why = why[-1] if why else f"exit status {p.returncode}"
    # "prog: mech: unsupported: reason" -> "reason"
    return False, why.split("unsupported: ", 1)[-1]


def check_all(program="timewrite", facts=None):
    """Every registry row, probed and judged by the support oracle.

    Each row carries supported and reason as before, plus status (works, unsupported,
    broken, unpredicted), expect (the oracle's must/cannot/unknown) and oracle (its reason).
    facts: the machine's entry facts (Doctor.entry_facts() or a fingerprint); taken live
    when not given."""
    if facts is None:
        from .doctor import Doctor
        facts = Doctor().entry_facts()
    pred = oracle.predict(facts)
    out = []
    for m in registry.mechanisms():
        if program == "timewrite" and "write-file" not in m.ops:
            continue        # timewrite only writes: it is built for the mechanisms that can
        ok, why = check(program, m.name)
        j = oracle.judge(pred[m.name], ok, why)
        out.append(dict(m.row(), supported=j["supported"], reason=j["reason"], status=j["status"],
                        expect=j["expect"], oracle=pred[m.name]["why"]))
    return out


def broken(rows):
    """The rows a run must report as errors: must work here, yet failed their probe."""
    return [r for r in rows if r.get("status") == "broken"]
