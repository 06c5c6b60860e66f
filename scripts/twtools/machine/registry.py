"""The variants this project builds: the rows of variants/matrix."""
from ..core.paths import ROOT

MATRIX = ROOT / "variants" / "matrix"


def variants():
    """The rows of variants/matrix as dicts: name ('64-libc'), bits, abi, mechanism."""
    rows = []
    for line in MATRIX.read_text().splitlines():
        line = line.split("#", 1)[0].split()
        if not line:
            continue
        bits, abi, mech = line[:3]
        rows.append({"name": f"{bits}-{mech}", "bits": int(bits), "abi": abi, "mechanism": mech})
    return rows
