"""tw run's walls stage: walls.json, each wall's tw ab run (raw rounds, the wall's program and
facts) and the host's own walls (audit's state, tracers on raw_syscalls)."""
from pathlib import Path

from ...core import files, ui
from ...machine import hostwalls
from ...machine.walldefs import HEADLINE_CELLS, HEADLINE_WALL
from .factory import make
from .spec import WALL_OPS, WallError, wall_variants

SCHEMA = "timewrite-walls/1"
# tw run --walls: one wall of each kind, and the two container engines' own profiles.
STANDARD = ("seccomp:allow", "seccomp:container", "seccomp:docker", "seccomp:podman",
            "audit:compliance", "tracer:raw_syscalls")
ROUNDS = {"quick": 16, "default": 24, "long": 64}
COPIES = 8


def standard_specs(audit_on):
    """STANDARD, with the audit wall as the host allows without consent: the compliance rules
    where audit is on, else audit:context (what the host's own state costs a new process)."""
    return [s if s != "audit:compliance" or audit_on else "audit:context" for s in STANDARD]


def stage(out, mode="default", full=False, variants=None, progress=ui.progress):
    """walls.json in out.  full: every standard wall over every way in (tw run --walls);
    else the container profile on the headline's two cells."""
    from .. import ab
    from ...machine import registry
    host = hostwalls.host_walls()
    audit = host["audit"]
    if full:
        specs = standard_specs(audit.get("enabled") == 1)
        cells = [(v, op) for v in (variants or wall_variants()) for op in WALL_OPS
                 if op in registry.get(v).ops]
    else:
        specs = [HEADLINE_WALL]
        cells = [c for c in HEADLINE_CELLS if c[0] in (variants or [c[0] for c in
                                                                   HEADLINE_CELLS])]
    doc = {"schema": SCHEMA, "mode": mode, "full": full, "host": host, "walls": []}
    rounds = ROUNDS.get(mode, ROUNDS["default"])
    for spec in specs:
        progress(f"walls: {spec}, {len(cells)} cells, {rounds} rounds")
        entry = {"spec": spec, "ab": None, "why": None}
        try:
            wall = make(spec)
            sub = Path(out) / "walls" / spec.replace(":", "-")
            sub.mkdir(parents=True, exist_ok=True)
            entry["ab"] = ab.run_ab(sub, ab.Settings(
                a=ab.side("A (bare)"), b=ab.side(f"B (behind {spec})"),
                variants=sorted({v for v, _ in cells}, key=[c[0] for c in cells].index),
                ops=sorted({op for _, op in cells}), rounds=rounds, copies=COPIES, wall=wall))
        except WallError as e:
            entry["why"] = e.line()
        doc["walls"].append(entry)
    if full and not any(s.startswith("audit:compliance") for s in specs):
        doc["audit_why"] = ("audit is off here: the compliance rules run only with it on, and "
                            "turning it on makes every process started later in this boot pay "
                            "until reboot; `tw ab --wall audit:compliance --enable-audit` "
                            "measures them with consent")
    files.write_json(Path(out) / "walls.json", doc)
    return doc
