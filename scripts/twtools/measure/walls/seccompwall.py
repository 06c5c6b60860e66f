"""The seccomp wall: a filter between B's process and the kernel, installed by syscost in the
measured child alone (syscost/wall.c), after its set-up; A runs the same copy bare.

What B runs behind is what the chosen runtime would load for the profile: read as Docker's
and podman's engines read it (machine.seccompprofile), compiled and laid out as runc, crun or
libseccomp alone lay it out (machine.seccompruntime), installed with the flags that runtime
passes (syscost --seccomp-flags).  Everything the kernel would refuse is refused here first,
with the kernel's reason, before anything is written or run: a filter seccomp_check_filter()
or bpf_check_classic() refuses, a stack past MAX_INSNS_PER_PATH (machine.seccompsim).

Where the filter answers the measured call itself, syscost checks for that answer (--errno),
from the filter run in user space: SECCOMP_RET_ERRNO's errno; SECCOMP_RET_TRACE with no
ptrace tracer and SECCOMP_RET_USER_NOTIF with no supervisor's listener both answer ENOSYS
(__seccomp_filter; seccomp_do_user_notification).  A call the wall answers by killing or
trapping is not run: its row says so.
"""
import hashlib
import json
import platform
from pathlib import Path

from ...core import files, paths
from ...machine import registry, seccomp, seccompprofile, seccompruntime, seccompsim, sysnr
from .base import Run, Wall, refused
from .spec import PODMAN_PROFILE, PROFILES, WallError, named, read_file

ENOSYS = 38
UNDEFINED = ("the wall's answer depends on arguments this call leaves undefined (glibc's "
             "getppid wrapper sets none; the stubs pass three): no one answer to measure")
# The calls syscost itself makes once the wall is up (strace of each way in, behind a
# one-instruction filter): reading its clock and counters, writing a write-file cell's file,
# printing its JSON, exiting.  A wall that kills or traps one of them, or refuses its write
# (it could not report), stops the run, whatever the measured call: it is said before the
# run, and the cell left out.  A refused ioctl (stdio asking whether stdout is a terminal) or
# the like is no matter.
OWN_CALLS = {"x86_64": ("write", "read", "openat", "close", "lseek", "newfstatat", "fstat",
                        "getrusage", "ioctl", "getpid", "ftruncate", "brk", "exit_group",
                        "clock_gettime"),
             "i386": ("write", "read", "openat", "close", "_llseek", "statx", "fstat64",
                      "getrusage", "ioctl", "getpid", "ftruncate64", "brk", "exit_group",
                      "clock_gettime64")}


# Values an argument the call leaves undefined may hold (its register's leftover: often 0, a
# small count, an address on the stack or the heap, a pattern): the answer must be the same
# for all of them, or the wall has no one answer to measure.  A rule that refuses one exact
# value (args.json's getppid of 2^64 - 16) keeps one answer; a rule that allows only some
# (getppid's first argument 0 or 8) does not: the kernel then answers some calls one way and
# the rest the other, as glibc's registers happen to be.
PROBES = (0, 1, 0x5A5A5A5A5A5A5A5A, 0x00007FFC12345678, 0x0000555555559AC0)


def unfixed_args(variant, op):
    """The argument positions a cell's call leaves to whatever its registers hold: every one
    for getppid through glibc's wrapper (it takes none and sets none), those past the three
    the stubs pass otherwise; write's buffer is an address, its descriptor one of the first
    free ones."""
    name = seccomp.OP_CALL.get(op)
    if registry.get(variant).entry == "libc" and name == "getppid":
        return tuple(range(6))
    return (0, 1, 3, 4, 5) if name == "write" else (3, 4, 5)


def _sha(b):
    return hashlib.sha256(b).hexdigest()[:16]


def answer_of(ret):
    """(errno syscost must see, or 0 for the call's own result, or None: the call cannot be
    measured) and the answer in words."""
    act = ret & seccomp.RET_ACTION_FULL
    if act == seccomp.RET_ERRNO:
        e = ret & seccomp.RET_DATA
        if e == 0:
            return None, "answered 0 without being made (SECCOMP_RET_ERRNO with errno 0)"
        return min(e, 4095), f"answered {seccomp.action_name(ret)} without being made"
    if act == seccomp.RET_TRACE:
        return ENOSYS, ("answered ENOSYS: SECCOMP_RET_TRACE with no ptrace tracer attached "
                        "(__seccomp_filter)")
    if act == seccomp.RET_USER_NOTIF:
        return ENOSYS, ("answered ENOSYS: SECCOMP_RET_USER_NOTIF with no supervisor's listener "
                        "(seccomp_do_user_notification)")
    if act in (seccomp.RET_ALLOW, seccomp.RET_LOG):
        return 0, seccomp.action_name(ret)
    return None, f"the wall's answer to this call is to {seccomp.action_name(ret)}"


class SeccompWall(Wall):
    kind = "seccomp"

    def __init__(self, spec, runtime=seccompruntime.DEFAULT_RUNTIME, caps=None,
                 caps_text="docker"):
        super().__init__(spec)
        self.what = spec["what"]
        self.times, self.notes, self.runtime, self.layout = 1, [], None, None
        self.flags, self.flag_names, self.stub = 0, [], 0
        self.caps_text = caps_text
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
            self.program = read_file(path, self.spec, "seccomp filter")
            self.source = f"{path} (raw BPF)"
        else:
            self._compile(what, runtime, caps)
        try:
            self.prog = seccompsim.load(self.program)
        except seccompsim.BadFilter as e:
            raise WallError(f"--wall {self.spec}: the kernel would refuse this filter: {e}") \
                from None
        bad = seccompsim.stack_refused([self.prog] * self.times)
        if bad is not None:
            raise WallError(
                f"--wall {self.spec}: the kernel refuses filter {bad + 1} of this stack "
                f"(seccomp_attach_filter: ENOMEM past MAX_INSNS_PER_PATH, "
                f"{seccompsim.MAX_INSNS_PER_PATH} instructions as it keeps them, each filter "
                f"{seccompsim.converted_len(self.prog)} once converted to eBPF and those below "
                f"the new one {seccompsim.STACK_PENALTY} more)",
                f"at most {bad} of these filters fit")
        self.file = None
        self.calls = {}
        self._own = {}

    def _compile(self, what, runtime, caps):
        if what == "podman":
            path = PODMAN_PROFILE
            if not path.exists():
                raise WallError(f"--wall {self.spec}: podman's default profile, {path}, is not "
                                "installed", "apt-get install golang-github-containers-common")
        else:
            path = named(PROFILES, what, ".json")
        raw = read_file(path, self.spec, "seccomp profile")
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise WallError(f"--wall {self.spec}: {path}: not JSON ({str(e)[:80]})") from None
        try:
            spec, notes = seccompprofile.read(doc, caps, where=str(paths.shown(path)))
            f = seccompruntime.compile(spec, runtime)
        except seccompprofile.ProfileError as e:
            raise WallError(f"--wall {self.spec}: {e}") from None
        except seccomp.NoLibseccomp as e:
            raise WallError(f"--wall {self.spec}: {e}",
                            "apt-get install libseccomp2 (the timewrite package depends on it)") \
                from None
        self.program, self.notes = f.program, notes + f.notes
        self.runtime, self.layout, self.stub = f.runtime, f.layout, f.stub
        self.flags, self.flag_names = f.flags, f.flag_names
        self.source = (f"{paths.shown(path)} (read as Docker and podman read it, compiled as "
                       f"{runtime} compiles it, libseccomp {seccomp.version()})")

    def answer(self, variant, op, abi):
        """(the call as seccomp_data has it, the filter's return value), or (None, None); the
        value None where the answer depends on arguments the call leaves undefined."""
        c = seccomp.cell_call(abi, op)
        if c is None:
            return None, None
        name, nr, arch, call_args = c
        progs = [self.prog] * self.times
        ret, _, read = seccompsim.run_stack(progs, nr, arch, call_args)
        loose = [i for i in unfixed_args(variant, op) if f"args[{i}]" in read]
        if loose:
            base = list(call_args) + [0] * (6 - len(call_args))
            for v in PROBES:
                probe = [v if i in loose else a for i, a in enumerate(base)]
                if name == "write" and 0 in loose:
                    probe[0] = 3 + v % 8            # a descriptor: one of the first free
                if seccompsim.run_stack(progs, nr, arch, probe)[0] != ret:
                    return c, None
        return c, ret

    def own_calls_refused(self, abi):
        """Why the wall stops syscost itself on this ABI (one of its own calls answered other
        than allow), or None."""
        if abi not in self._own:
            arch = seccomp.ABI_ARCH[abi]
            why = None
            for name in OWN_CALLS[abi]:
                nr = seccomp.number(name, arch)
                if nr is None:
                    continue
                args = {"write": (1, 0, 0), "ioctl": (1, 0x5401, 0)}.get(name, (0, 0, 0))
                ret = seccompsim.run_stack([self.prog] * self.times, nr, arch, args)[0]
                act = ret & seccomp.RET_ACTION_FULL
                if act in (seccomp.RET_KILL_PROCESS, seccomp.RET_KILL_THREAD,
                           seccomp.RET_TRAP) or (name == "write" and act not in (
                               seccomp.RET_ALLOW, seccomp.RET_LOG)):
                    why = (f"the wall answers syscost's own {name} ({abi}), which it makes to "
                           f"read its clock, write its file or report, with "
                           f"{seccomp.action_name(ret)}: the run could not finish")
                    break
            self._own[abi] = why
        return self._own[abi]

    def up(self, out_dir, cells):
        """Write the filter where syscost reads it (the results directory keeps it, so the run
        says exactly which program was measured), and each measured call as seccomp_data
        shows it, with the kernel's table sizes that decide its cache."""
        self.file = Path(out_dir) / "wall-seccomp.bpf"
        files.write_bytes(self.file, self.program)
        for variant, op in cells:
            c, ret = self.answer(variant, op, registry.get(variant).abi)
            if c is not None:
                self.calls[f"{variant} {op}"] = {"name": c[0], "nr": c[1],
                                                 "arch": seccomp.ARCH_NAMES[c[2]],
                                                 "args": list(c[3]), "answer": ret}
        return self.describe()

    def describe(self):
        return {"kind": "seccomp", "spec": self.spec, "source": self.source,
                "instructions": len(self.prog), "times": self.times,
                "sha256_16": _sha(self.program), "notes": self.notes,
                "file": self.file.name if self.file else None,
                "program_hex": self.program.hex(), "runtime": self.runtime,
                "layout": self.layout, "stub": self.stub, "flags": self.flags,
                "flag_names": self.flag_names,
                "caps": self.caps_text if self.runtime else None,
                "calls": self.calls, "kernel": platform.release(),
                "table_sizes": sysnr.table_sizes()}

    def notices(self, cells):
        """What the run will do that the user should hear first, as (what, what follows)
        pairs: calls answered by logging (each writes a line to the kernel's log), by a
        trap or a kill (not measured), by ENOSYS for want of a tracer or supervisor; and the
        flags that log."""
        out, by = [], {}
        for variant, op in cells:
            c, ret = self.answer(variant, op, registry.get(variant).abi)
            if c is not None and ret is None:
                by.setdefault((UNDEFINED, "its row is reported without a figure"), []).append(
                    f"{variant} {op}")
                continue
            if c is None or (ret & seccomp.RET_ACTION_FULL in (seccomp.RET_ALLOW,
                                                              seccomp.RET_ERRNO)
                             and not self.own_calls_refused(registry.get(variant).abi)):
                continue
            own = self.own_calls_refused(registry.get(variant).abi)
            if own:
                by.setdefault((own, "its row is reported without a figure"), []).append(
                    f"{variant} {op}")
                continue
            e, what = answer_of(ret)
            todo = "its figure is what the wall's answer costs"
            if ret & seccomp.RET_ACTION_FULL == seccomp.RET_LOG:
                what = ("allowed and logged (SCMP_ACT_LOG): the kernel writes a line to its "
                        "log (audit_seccomp, rate-limited) on every call")
                todo = "the figure includes the logging; dmesg shows the lines"
            elif e is None:
                what += ": not measured"
                todo = "its row is reported without a figure"
            by.setdefault((what, todo), []).append(f"{variant} {op}")
        for (what, todo), where in by.items():
            out.append((f"{self.spec}: {', '.join(where[:6])}"
                        f"{', ...' if len(where) > 6 else ''}: {what}", todo))
        if self.flags & seccompruntime.FLAG_LOG:
            out.append((f"{self.spec}: installed with SECCOMP_FILTER_FLAG_LOG (the profile's "
                        "flags): every answer but allow is logged",
                        "a refused call writes a line to the kernel's log"))
        return out

    def before(self, variant, op, abi):
        """syscost's arguments for one B run, or why it cannot run: what the filter answers,
        from the program run in user space."""
        c, ret = self.answer(variant, op, abi)
        if c is None:
            return refused(f"the call has no number in the {abi} table")
        if ret is None:
            return refused(UNDEFINED)
        own = self.own_calls_refused(abi)
        if own:
            return refused(own)
        e, what = answer_of(ret)
        if e is None:
            return refused(what)
        args = ["--seccomp", str(self.file)]
        if self.times > 1:
            args += ["--seccomp-times", str(self.times)]
        if self.flags:
            args += ["--seccomp-flags", str(self.flags)]
        if e:
            args += ["--errno", str(e)]
        return Run(args)

