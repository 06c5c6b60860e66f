"""A wall from its spec: make() for tw ab (ready to go up), blueprint() for tw explain (what
it is, put up nowhere)."""
import platform

from ...machine import seccompruntime, sysnr
from .auditwall import AuditWall, rules_of
from .seccompwall import SeccompWall
from .spec import parse
from .tracerwall import TracerWall


def make(spec, enable_audit=False, runtime=seccompruntime.DEFAULT_RUNTIME, caps=None,
         caps_text="docker"):
    """The wall a spec names, ready to go up; WallError (exit 2) for any refusal, before
    anything is made or run.  runtime and caps: how a seccomp profile is read and laid out
    (--runtime, --caps)."""
    s = parse(spec)
    if s["kind"] == "seccomp":
        return SeccompWall(s, runtime=runtime, caps=caps, caps_text=caps_text)
    if s["kind"] == "tracer":
        return TracerWall(s)
    return AuditWall(s, enable=enable_audit)


def blueprint(spec, runtime=seccompruntime.DEFAULT_RUNTIME, caps=None, caps_text="docker"):
    """What a wall is, without putting it up (tw explain --wall): {'kind', 'spec', 'program'
    (a seccomp filter's bytes), 'times', 'rules' (audit's, as word lists), 'source', 'notes',
    and for a seccomp profile 'runtime', 'layout', 'stub', 'flags', 'flag_names', and the
    running kernel's 'table_sizes' (the cache's)}."""
    s = parse(spec)
    out = {"kind": s["kind"], "spec": s["spec"], "program": None, "times": 1, "rules": [],
           "source": None, "notes": [], "kernel": platform.release()}
    if s["kind"] == "seccomp":
        w = SeccompWall(s, runtime=runtime, caps=caps, caps_text=caps_text)
        out.update(program=w.program, times=w.times, source=w.source, notes=w.notes,
                   runtime=w.runtime, layout=w.layout, stub=w.stub, flags=w.flags,
                   flag_names=w.flag_names, caps=caps_text if w.runtime else None,
                   table_sizes=sysnr.table_sizes())
    elif s["kind"] == "audit":
        out["rules"], out["source"] = rules_of(s["what"], s["spec"])
    elif s["kind"] == "tracer":
        out["source"] = "walls/tracer.bpf.c"
    return out
