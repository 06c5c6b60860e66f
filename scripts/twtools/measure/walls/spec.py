"""The walls' grammar: what `--wall SPEC` may say, the files a spec names (read as outside
input: a regular file only, bounded), and the cells a wall is measured on by default."""
import re
from pathlib import Path

from ...core import files, paths, ui

WALLS = paths.ROOT / "walls"
PROFILES = WALLS / "profiles"
AUDIT_RULES = WALLS / "audit"
# podman's default profile as Debian ships it (golang-github-containers-common).
PODMAN_PROFILE = Path("/usr/share/containers/seccomp.json")
# A spec's file is at most this large: no profile, rules file or filter comes near it.
MAX_SPEC_FILE = 4 << 20

SPEC_HELP = ("seccomp:allow | seccomp:container | seccomp:args | seccomp:docker | "
             "seccomp:podman | seccomp:FILE (an OCI or Docker profile) | "
             "seccomp:stack:N[:PROFILE] | seccomp:bpf:FILE | seccomp:numbers-only | "
             "audit:compliance | audit:FILE | audit:context | tracer:raw_syscalls")

# tw ab --wall's cells by default, and tw run --walls': every way in that enters the kernel
# (the vDSO's own 32-bit entry included) that works here, a null call, getppid, a one-byte
# write to /dev/null and a 256-byte write to a file.  glibc's wrapper first: it is how real
# programs make the call, and the first row is the figure to quote (docs/walls.md, "The
# shape of the call").
WALL_VARIANTS = ("64-libc", "64-syscall", "64-int80", "32-int80", "32-syscall", "32-sysenter",
                 "32-vdso", "32-libc")
WALL_OPS = ("null", "getppid", "write-devnull", "write-file")


def wall_variants():
    """WALL_VARIANTS that work here (their syscost --probe), in that order."""
    from ...machine import probe, registry
    return [v for v in WALL_VARIANTS if v in registry.names() and probe.check("syscost", v)[0]]


class WallError(ui.UserError):
    """The wall cannot go up here, or the spec names none: the message says why, in one
    line; a user's mistake, exit 2."""


def parse(spec):
    """A wall spec, checked: {'kind', 'spec', 'what'} (what: the word or path after the
    kind).  WallError for one that names no wall."""
    kind, _, rest = str(spec).partition(":")
    if kind not in ("seccomp", "audit", "tracer") or not rest:
        raise WallError(f"--wall {spec!r}: not a wall", f"one of {SPEC_HELP}")
    if kind == "tracer" and rest != "raw_syscalls":
        raise WallError(f"--wall {spec!r}: the tracer wall is tracer:raw_syscalls")
    if kind == "seccomp" and rest.startswith("stack:"):
        m = re.fullmatch(r"stack:(\d{1,2})(?::(.+))?", rest)
        if not m or not 1 <= int(m.group(1)) <= 64:
            raise WallError(f"--wall {spec!r}: seccomp:stack:N takes N from 1 to 64 (syscost "
                            "installs at most 64; the kernel's own limit is per instruction, "
                            "checked when the profile is compiled)")
    return {"kind": kind, "spec": str(spec), "what": rest}


def named(folder, word, suffix):
    """The project's file named `word` (walls/profiles/container.json for 'container'), else
    `word` as a path of the user's."""
    p = folder / f"{word}{suffix}"
    return p if re.fullmatch(r"[a-z][a-z0-9-]*", word) and p.is_file() else Path(word)


def read_file(path, spec, what):
    """The bytes of a file a spec names, read as outside input (core.files.read_regular): a
    FIFO, a device or a directory refused at once, never waited on; WallError (exit 2) for
    what cannot be read, naming it."""
    try:
        raw = files.read_regular(path, limit=MAX_SPEC_FILE, what=what)
    except ui.DataError as e:
        raise WallError(f"--wall {spec}: {e.message}") from None
    except OSError as e:
        raise WallError(f"--wall {spec}: {path}: {e.strerror}") from None
    if raw is None:
        raise WallError(f"--wall {spec}: {path}: no such file")
    return raw
