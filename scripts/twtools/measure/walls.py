"""The walls of `tw ab --wall SPEC`: what stands between a program and the kernel, put up for
B's runs only, and the host left as it was found.

A wall is one of:

  seccomp:allow               a one-instruction filter that allows everything: the price of
                              being filtered at all
  seccomp:container           walls/profiles/container.json, the project's container profile
  seccomp:args                walls/profiles/args.json, rules that inspect arguments
  seccomp:FILE                any OCI (Docker, podman, containerd) profile, compiled by
                              libseccomp as a runtime compiles it (machine.seccomp)
  seccomp:stack:N[:PROFILE]   the profile (container by default) N times over
  seccomp:bpf:FILE            a filter already compiled: raw BPF instructions (as
                              seccomp_export_bpf writes them, or a hand-written filter)
  seccomp:numbers-only        a hand-written filter that denies getppid and mount by their
                              x86-64 numbers without checking the architecture: the hole
  audit:compliance            walls/audit/compliance.rules, the project's audit rule set
  audit:FILE                  auditctl rule lines (-a, -A, -w), loaded for the run
  audit:context               no rule added: what audit costs a process started now, as the
                              host is (nothing where audit was never enabled in this boot)
  tracer:raw_syscalls         walls/tracer.bpf.c on raw_syscalls:sys_enter and sys_exit, as an
                              observability agent attaches it (build/tracerbpf)

How each goes up for B only:
- seccomp: `syscost --seccomp FILE` installs the exported filter in the measured child
  alone (wall.c), after its set-up; A runs the same copy bare.  Where the filter answers the
  measured call itself (SECCOMP_RET_ERRNO, as a profile's default does for the null call's
  invalid number), syscost checks for that answer (--errno), from the filter run in user
  space (analyse.seccompsim).
- tracer: attaching a raw_syscalls program slows every process on the machine, so the
  loader attaches it for B's runs only: once a round, before all of B's runs of the round,
  and detaches it before A's (each attach and detach waits for the kernel, longer than a
  run); which side goes first turns round by round.
- audit: the rules are loaded for the whole run; what separates A from B is the audit
  context a process gets at fork (audit_alloc: once audit has ever been enabled in the boot,
  every new task gets it unless a task rule says never).  Both sides' programs are forked by
  the same kind of parent, a `sh` that setpriv started under a group id: A's under a group
  no process or user has, named by a rule `-A never,task -F gid=G` (a task rule sees the
  new task's credentials, its parent's, at fork), so A's syscost gets no context; B's under
  tw's own group, so it gets what every other process on the host gets.  (A first version
  forked A's directly from tw and B's from a sh, matched by tw's pid: on a host where audit
  was never enabled, so that neither side had a context, it called 9 of 28 cells different,
  by 0.2-0.5 ns on the fast cells and 10 ns on 32-bit int 0x80: who forks a process is
  itself a factor.)  Audit must be on (enabled 1) for the rules to run: where it is off, only
  --enable-audit turns it on, since that leaves every process started later in this boot
  paying until reboot (docs/walls.md).  Every rule added is deleted at the end, the enabled
  flag set back, and the list of rules checked to be as it was; a guard process in its own
  session does the same if tw dies without doing it (SIGKILL included).
"""
import hashlib
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

from ..core import files, paths, proc, ui
from ..machine import hostwalls, seccomp, seccompsim
from ..machine.hostwalls import audit_status, auditctl, rules_now

WALLS = paths.ROOT / "walls"
PROFILES = WALLS / "profiles"
AUDIT_RULES = WALLS / "audit"
TRACER_OBJ = paths.BUILD / "walls" / "tracer.bpf.o"
TRACER_LOADER = paths.BUILD / "tracerbpf"
# tw run's walls stage: one wall of each kind.
STANDARD = ("seccomp:allow", "seccomp:container", "audit:compliance", "tracer:raw_syscalls")
# tw ab --wall's cells by default, and tw run --walls': every way in that enters the kernel
# (the vDSO's own 32-bit entry included) that works here, a null call, getppid, a one-byte
# write to /dev/null and a 256-byte write to a file.
WALL_VARIANTS = ("64-syscall", "64-int80", "32-int80", "32-syscall", "32-sysenter", "32-vdso",
                 "64-libc", "32-libc")
WALL_OPS = ("null", "getppid", "write-devnull", "write-file")


SPEC_HELP = ("seccomp:allow | seccomp:container | seccomp:args | seccomp:FILE (an OCI "
             "profile) | seccomp:stack:N[:PROFILE] | seccomp:bpf:FILE | seccomp:numbers-only | "
             "audit:compliance | audit:FILE | audit:context | tracer:raw_syscalls")


def wall_variants():
    """WALL_VARIANTS that work here (their syscost --probe), in that order."""
    from ..machine import probe, registry
    return [v for v in WALL_VARIANTS if v in registry.names() and probe.check("syscost", v)[0]]


class WallError(ui.UserError):
    """The wall cannot go up here: the message says why, in one line."""


def _bytes_name(b):
    return hashlib.sha256(b).hexdigest()[:16]


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
            raise WallError(f"--wall {spec!r}: seccomp:stack:N takes N from 1 to 64 (the "
                            "kernel's path limit allows far more, no program stacks so many)")
    return {"kind": kind, "spec": str(spec), "what": rest}


# ---- seccomp ---------------------------------------------------------------------------

def _named(folder, word, suffix):
    """The project's file named `word` (walls/profiles/container.json for 'container'), else
    `word` as a path of the user's."""
    p = folder / f"{word}{suffix}"
    return p if re.fullmatch(r"[a-z][a-z0-9-]*", word) and p.is_file() else Path(word)


class SeccompWall:
    kind = "seccomp"

    def __init__(self, spec):
        self.spec, self.what = spec["spec"], spec["what"]
        self.times, self.notes, self.profile = 1, [], None
        what = self.what
        if what.startswith("stack:"):
            n, _, what = what[len("stack:"):].partition(":")
            self.times, what = int(n), what or "container"
        if what == "allow":
            self.program, self.source = seccomp.ALLOW_ALL, "one instruction: return ALLOW"
        elif what == "numbers-only":
            self.program = seccomp.NUMBERS_ONLY
            self.source = ("getppid and mount denied by their x86-64 numbers, the architecture "
                           "unchecked: the hole, for teaching")
        elif what.startswith("bpf:"):
            path = Path(what[len("bpf:"):])
            try:
                self.program = path.read_bytes()[:(1 << 16) + 1]
            except OSError as e:
                raise WallError(f"--wall {self.spec}: {path}: {e.strerror}") from None
            self.source = f"{path} (raw BPF)"
        else:
            path = _named(PROFILES, what, ".json")
            try:
                self.profile = seccomp.load_profile(path)
                self.program, self.notes = seccomp.compile_profile(self.profile)
            except (seccomp.ProfileError, seccomp.NoLibseccomp) as e:
                raise WallError(f"--wall {self.spec}: {e}") from None
            self.source = f"{paths.shown(path)} (OCI profile, compiled by libseccomp " \
                          f"{seccomp.version()})"
        try:
            self.prog = seccompsim.parse(self.program)
        except seccompsim.BadFilter as e:
            raise WallError(f"--wall {self.spec}: not a seccomp filter: {e}") from None
        self.file = None

    def up(self, out_dir):
        """Write the filter where syscost reads it: the results directory keeps it, so the
        run says exactly which program was measured."""
        self.file = Path(out_dir) / "wall-seccomp.bpf"
        files.write_bytes(self.file, self.program)
        return self.describe()

    def describe(self):
        return {"kind": "seccomp", "spec": self.spec, "source": self.source,
                "instructions": len(self.prog), "times": self.times,
                "sha256_16": _bytes_name(self.program), "notes": self.notes,
                "file": self.file.name if self.file else None,
                "program_hex": self.program.hex()}

    def before(self, variant, op, abi):
        """(extra syscost args, command wrapper, None) for one B run, or (None, None, the
        reason it cannot run): what the filter answers, from the program run in user space."""
        c = seccomp.cell_call(abi, op)
        args = ["--seccomp", str(self.file)]
        if self.times > 1:
            args += ["--seccomp-times", str(self.times)]
        if c is None:
            return None, None, f"the call has no number in the {abi} table"
        _, nr, arch, call_args = c
        ret = seccompsim.run_stack([self.prog] * self.times, nr, arch, call_args)[0]
        act = ret & seccomp.RET_ACTION_FULL
        if act == seccomp.RET_ERRNO:
            e = ret & seccomp.RET_DATA
            if e == 0:
                return None, None, "the wall answers the call with 0 without making it"
            args += ["--errno", str(min(e, 4095))]
        elif act not in (seccomp.RET_ALLOW, seccomp.RET_LOG):
            return None, None, f"the wall's answer to this call is to {seccomp.action_name(ret)}"
        return args, None, None

    def down(self):
        return {}


# ---- tracer ----------------------------------------------------------------------------

class TracerWall:
    kind = "tracer"
    # Each attach and detach waits for the kernel (tracepoint registration, an RCU grace
    # period): about 0.1 s here, more than a run.  So the tracer goes up once a round, for all
    # of B's runs of it, and comes down before A's (measure.ab._rounds, grouped).
    grouped = True

    def __init__(self, spec):
        self.spec = spec["spec"]
        self.p = None
        self.attaches = 0
        self.attached = False
        if not proc.is_root():
            raise WallError(f"--wall {self.spec}: attaching a BPF program needs root")
        for f in (TRACER_LOADER, TRACER_OBJ):
            if not f.exists():
                raise WallError(f"--wall {self.spec}: {paths.shown(f)} is not built (run make)")

    def up(self, out_dir):
        # Its own session: the terminal's Ctrl-C is tw's to handle; its stdin is tw's pipe,
        # so when tw dies, however it dies, the loader reads EOF, detaches and exits.
        self.p = subprocess.Popen([str(TRACER_LOADER), str(TRACER_OBJ)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  start_new_session=True, bufsize=1)
        self._say("count", "count ")
        return self.describe()

    def _say(self, cmd, want):
        try:
            self.p.stdin.write(cmd + "\n")
            self.p.stdin.flush()
            line = self.p.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line.startswith(want):
            err = self.p.stderr.read() if self.p.poll() is not None else ""
            raise WallError(f"--wall {self.spec}: build/tracerbpf did not {cmd}: "
                            f"{(err.strip().splitlines() or [line.strip() or 'no answer'])[-1]}")
        return line

    def describe(self):
        return {"kind": "tracer", "spec": self.spec, "program": "walls/tracer.bpf.c",
                "attach": "raw_syscalls:sys_enter and sys_exit, for B's runs only: attached "
                          "once a round for all of them, detached before A's"}

    def before(self, variant, op, abi):
        if not self.attached:
            self._say("attach", "attached")
            self.attaches += 1
            self.attached = True
        return [], None, None

    def release(self):
        """Detach, if attached: before A's runs, at a round's end, at the end."""
        if self.attached:
            self._say("detach", "detached")
            self.attached = False

    def down(self):
        """Close the loader's input: it detaches (if it had not) and prints what it counted."""
        if self.p is None:
            return {}
        if self.attached and self.p.poll() is None:
            try:
                self.release()
            except WallError:
                pass            # closing its input below detaches it too
        try:
            out, err = self.p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill_group(self.p)
            return {"calls_seen": None}
        last = [ln for ln in (out or "").splitlines() if ln.startswith("{")]
        seen = json.loads(last[-1]) if last else {}
        self.p = None
        return {"calls_seen": seen.get("calls"), "attaches": self.attaches}


# ---- audit -----------------------------------------------------------------------------

def _ctl(*args, check=True):
    p = hostwalls.ctl(*args)
    if check and p.returncode != 0:
        msg = (p.stderr or p.stdout or "").strip().splitlines()
        raise WallError(f"auditctl {' '.join(args)} failed: {msg[-1] if msg else p.returncode}")
    return p


def unused_gid():
    """A group id no group of this host's and no running process has: the audit wall's never
    rule names it, so that it exempts tw's A side and nothing else."""
    import grp
    used = set()
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"Gid:"):
                        used.update(int(x) for x in line.split()[1:])
                        break
        except (OSError, ValueError):
            continue
    gid = 2147480000 + os.getpid() % 1000
    while True:
        try:
            grp.getgrgid(gid)
        except KeyError:
            if gid not in used:
                return gid
        gid += 1


def read_rules(path):
    """The rule lines of an auditctl rules file: -a/-A (a syscall or task rule) and -w (a
    watch) only.  A line that would change audit itself (-D, -e, -f, -b, -r, ...) is refused:
    tw adds rules for a run and takes them away, nothing else."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as e:
        raise WallError(f"--wall audit:{path}: {e.strerror}") from None
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            words = shlex.split(line)
        except ValueError as e:
            raise WallError(f"--wall audit:{path}: line {i}: {e}") from None
        if words[0] not in ("-a", "-A", "-w"):
            raise WallError(f"--wall audit:{path}: line {i} starts with {words[0]!r}",
                            "a rules file for a wall holds -a, -A and -w lines only")
        out.append(words)
    if not out:
        raise WallError(f"--wall audit:{path}: no rule in it")
    return out


def _undo(words):
    """The auditctl words that delete a rule added with `words`."""
    return (["-d"] + words[1:]) if words[0] in ("-a", "-A") else (["-W"] + words[1:])


class AuditWall:
    kind = "audit"

    def __init__(self, spec, enable=False):
        self.spec, self.what, self.enable = spec["spec"], spec["what"], enable
        self.added, self.guard, self.before_state = [], None, None
        self.turned_on = False
        if auditctl() is None:
            raise WallError(f"--wall {self.spec}: auditctl is not installed",
                            "it comes with Debian's auditd package; `make test` unpacks it "
                            "into build/auditd without starting auditd (docs/walls.md)")
        if not proc.is_root():
            raise WallError(f"--wall {self.spec}: loading audit rules needs root")
        if self.what == "context":
            self.rules = []
        else:
            path = _named(AUDIT_RULES, self.what, ".rules")
            self.source = paths.shown(path)
            self.rules = read_rules(path)

    def up(self, out_dir):
        st = audit_status()
        if st["enabled"] is None:
            raise WallError(f"--wall {self.spec}: {st['why']}")
        if st["enabled"] == 2:
            raise WallError(f"--wall {self.spec}: audit is locked (enabled 2): its rules cannot "
                            "change until reboot")
        self.before_state = st
        need_on = bool(self.rules) and st["enabled"] == 0
        if need_on and not self.enable:
            raise WallError(
                f"--wall {self.spec}: audit is off here, and its rules only run with it on",
                "turning it on (auditctl -e 1) makes every process started later in this boot "
                "pay for audit on every call until reboot, even once it is off again, unless "
                "a task rule says never; pass --enable-audit to accept that (docs/walls.md)")
        self.gid = unused_gid()
        self._start_guard(st["enabled"])
        try:
            self._add(self.never_rule())
            for words in self.rules:
                self._add(words)
            if need_on:
                _ctl("-e", "1")
                self.turned_on = True
        except BaseException:
            self.down()
            raise
        return self.describe()

    def _start_guard(self, enabled):
        """A process in its own session that restores audit if tw dies: it waits on a pipe
        whose other end only tw holds; EOF without 'done' means tw died."""
        script = ('read line; [ "$line" = done ] && exit 0; ' + "; ".join(
                      f'"$0" {shlex.join(_undo(w))} >/dev/null 2>&1' for w in
                      [self.never_rule()] + self.rules)
                  + (f'; "$0" -e {enabled} >/dev/null 2>&1' if enabled == 0 else ""))
        self.guard = subprocess.Popen(["/bin/sh", "-c", script, auditctl()],
                                      stdin=subprocess.PIPE, start_new_session=True,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _add(self, words):
        _ctl(*words)
        self.added.append(words)

    def never_rule(self):
        return ["-A", "never,task", "-F", f"gid={self.gid}"]

    def _forked_by_sh(self, gid):
        """A command run as a child of a sh whose group is gid (setpriv, util-linux)."""
        return lambda cmd: ["setpriv", f"--regid={gid}", "--clear-groups", "--", "/bin/sh",
                            "-c", '"$@"; exit $?', "sh"] + cmd

    def describe(self):
        st = self.before_state or {}
        return {"kind": "audit", "spec": self.spec, "rules": [shlex.join(w) for w in self.rules],
                "enabled_before": st.get("enabled"), "rules_before": st.get("rules"),
                "turned_on": self.turned_on,
                "separation": f"-A never,task -F gid={getattr(self, 'gid', None)}: both "
                              "sides' programs are forked by a sh; A's sh runs under that "
                              "group, so A's processes get no audit context, B's under tw's "
                              "own, so they get what the host gives every new process"}

    def before(self, variant, op, abi):
        return [], self._forked_by_sh(os.getgid()), None

    def bare_wrapper(self, cmd):
        """A's program forked by the same kind of sh as B's, under the group the never rule
        names."""
        return self._forked_by_sh(self.gid)(cmd)

    def down(self):
        """Every rule tw added deleted, audit's flag set back, and the rules compared with
        the list before: {'rules_after', 'restored', 'left_behind'}."""
        errors = []
        for words in reversed(self.added):
            p = _ctl(*_undo(words), check=False)
            if p.returncode != 0:
                errors.append(shlex.join(_undo(words)))
        self.added = []
        if self.turned_on:
            if _ctl("-e", "0", check=False).returncode != 0:
                errors.append("-e 0")
            self.turned_on = False
        if self.guard is not None:
            try:
                self.guard.communicate(b"done\n", timeout=10)
            except (subprocess.TimeoutExpired, OSError):
                proc.kill_group(self.guard, grace=0.5)
            self.guard = None
        after = rules_now()
        before = (self.before_state or {}).get("rules")
        return {"rules_after": after, "restored": before == after and not errors,
                "errors": errors,
                "left_behind": None if self.before_state is None or
                self.before_state.get("enabled") != 0 or not self.rules else
                "audit was turned on for the run: every process started since pays for its "
                "audit context until reboot, unless a task rule says never "
                "(auditctl -a never,task)"}


def blueprint(spec):
    """What a wall is, without putting it up or asking the machine anything (tw explain
    --wall): {'kind', 'spec', 'program' (a seccomp filter's bytes), 'times', 'rules' (audit's,
    as word lists), 'source', 'notes'}."""
    s = parse(spec)
    out = {"kind": s["kind"], "spec": s["spec"], "program": None, "times": 1, "rules": [],
           "source": None, "notes": []}
    if s["kind"] == "seccomp":
        w = SeccompWall(s)
        out.update(program=w.program, times=w.times, source=w.source, notes=w.notes)
    elif s["kind"] == "audit" and s["what"] != "context":
        path = _named(AUDIT_RULES, s["what"], ".rules")
        out.update(rules=read_rules(path), source=paths.shown(path))
    elif s["kind"] == "tracer":
        out["source"] = "walls/tracer.bpf.c"
    return out


def make(spec, enable_audit=False):
    """The wall a spec names, ready to go up."""
    s = parse(spec)
    if s["kind"] == "seccomp":
        return SeccompWall(s)
    if s["kind"] == "tracer":
        return TracerWall(s)
    return AuditWall(s, enable=enable_audit)


# ---- tw run's walls stage ------------------------------------------------------------------

SCHEMA = "timewrite-walls/1"
# The first screen's line: what the container profile adds to the 64-bit syscall and to
# int 0x80, the two ends of the matrix.  A few seconds in every mode.
HEADLINE_WALL = "seccomp:container"
HEADLINE_CELLS = (("64-syscall", "getppid"), ("32-int80", "getppid"))
ROUNDS = {"quick": 16, "default": 24, "long": 64}
COPIES = 8


def standard_specs(audit_on):
    """STANDARD, with the audit wall as the host allows without consent: the compliance rules
    where audit is on, else audit:context (what the host's own state costs a new process)."""
    return [s if s != "audit:compliance" or audit_on else "audit:context" for s in STANDARD]


def stage(out, mode="default", full=False, variants=None, progress=ui.progress):
    """tw run's walls stage: walls.json in out, each wall's tw ab run (raw rounds, the
    wall's program and facts) and the host's own walls (audit's state, tracers on
    raw_syscalls).  full: every standard wall over every way in (tw run --walls); else the
    container profile on the headline's two cells."""
    from . import ab
    from ..machine import registry
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
            entry["ab"] = ab.run_ab(sub, ab.side("A (bare)"), ab.side(f"B (behind {spec})"),
                                    sorted({v for v, _ in cells}, key=[c[0] for c in
                                                                       cells].index),
                                    sorted({op for _, op in cells}), rounds=rounds,
                                    copies=COPIES, wall=wall)
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
