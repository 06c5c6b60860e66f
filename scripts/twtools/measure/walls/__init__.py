"""The walls of `tw ab --wall SPEC`: what stands between a program and the kernel, put up for
B's runs only, and the host left as it was found.  One room each:

  spec          the grammar (SPEC_HELP, parse), the files a spec names (read as outside input),
                the default cells (WALL_VARIANTS, WALL_OPS), WallError (exit 2)
  base          the Wall interface measure.ab's rounds use, and nothing else
  seccompwall   a filter in the measured child alone: a profile read as Docker and podman
                read it, laid out as runc, crun or libseccomp lay it out, installed with the
                runtime's flags (syscost --seccomp, --seccomp-flags)
  tracerwall    walls/tracer.bpf.c on raw_syscalls, attached for B's runs only
  auditwall     rules added for the run by a guard process that takes away exactly what it
                added, whatever happens to tw
  factory       make() a wall for tw ab, blueprint() one for tw explain
  stage         tw run's walls stage (walls.json)

A wall is one of:

  seccomp:allow               a one-instruction filter that allows everything: the price of
                              being filtered at all
  seccomp:container           walls/profiles/container.json, the project's container profile
  seccomp:args                walls/profiles/args.json, rules that inspect arguments
  seccomp:docker              walls/profiles/docker.json, Docker's default profile as published
  seccomp:podman              /usr/share/containers/seccomp.json, podman's as Debian ships it
  seccomp:FILE                any OCI or Docker profile
  seccomp:stack:N[:PROFILE]   the profile (container by default) N times over
  seccomp:bpf:FILE            a filter already compiled: raw BPF instructions
  seccomp:numbers-only        a hand-written filter that denies getppid and mount by their
                              x86-64 numbers without checking the architecture: the hole
  audit:compliance            walls/audit/compliance.rules, the project's audit rule set
  audit:FILE                  auditctl rule lines (-a, -A, -w), loaded for the run
  audit:context               no rule added: what audit costs a process started now, as the
                              host is (nothing where audit was never enabled in this boot)
  tracer:raw_syscalls         walls/tracer.bpf.c on raw_syscalls:sys_enter and sys_exit
"""
from .auditwall import AuditWall, Guard, read_rules, unused_gid
from .base import Run, Wall
from .factory import blueprint, make
from .seccompwall import SeccompWall
from .spec import (PODMAN_PROFILE, SPEC_HELP, WALL_OPS, WALL_VARIANTS, WallError, parse,
                   wall_variants)
from .stage import ROUNDS, SCHEMA, STANDARD, stage, standard_specs
from .tracerwall import TracerWall

__all__ = ["AuditWall", "Guard", "PODMAN_PROFILE", "ROUNDS", "Run", "SCHEMA", "SPEC_HELP",
           "STANDARD", "SeccompWall", "TracerWall", "WALL_OPS", "WALL_VARIANTS", "Wall",
           "WallError", "blueprint", "make", "parse", "read_rules", "stage", "standard_specs",
           "unused_gid", "wall_variants"]
