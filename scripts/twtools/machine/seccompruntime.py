"""The OCI spec's `linux.seccomp` compiled as a container runtime compiles it: the filter's
bytes, laid out as that runtime lays them out, and the flags it installs them with.

A runtime turns the spec (machine.seccompprofile reads an engine's profile into it) into a
filter with libseccomp: seccomp_init with the default action, seccomp_arch_add per
architecture, one rule per call name, then its own load.  Three are followed here, each
step naming the runtime's function it follows:

  runc        libcontainer/specconv SetupSeccomp (flags: SPEC_ALLOW when the profile names
              none; one rule per name), libcontainer/seccomp InitSeccomp (getAction: TRACE
              and ERRNO without errnoRet answer EPERM, errnoRet on other actions is not read;
              NOTIFY refused as the default action and for write; libseccomp's binary tree,
              SetOptimize(2), once there are more than 32 rules), matchCall (a rule that
              repeats the default skipped; a name libseccomp does not know skipped; two
              conditions on one argument become one rule each), and patchbpf's PatchAndLoad:
              the -ENOSYS stub (generatePatch, generateEnosysStub) put before libseccomp's
              program, so that a call newer than every name of the profile answers ENOSYS
              instead of the default action.
  crun        src/libcrun/seccomp.c: libcrun_generate_seccomp (errnoRet refused on any action
              but ERRNO and TRACE, get_seccomp_action, one rule per name, several conditions
              on one argument one rule each, libseccomp's default layout, no stub) and
              libcrun_apply_seccomp (flags: SPEC_ALLOW when the profile names none).
  libseccomp  the spec's rules given to libseccomp as written, one seccomp_rule_add_array per
              name with all its conditions (two on one argument: libseccomp's own EINVAL),
              its default layout, and only the flags the profile names.

The program is exported into a memfd (seccomp_export_bpf), which no size fills (a pipe of
64 KiB did: a large filter hung the export), and checked as the kernel checks it
(machine.seccompsim.load).  Flags are returned as the seccomp() flags word the runtime
passes: `syscost --seccomp-flags` installs the filter with them.
"""
import ctypes
import os
from dataclasses import dataclass, field

from ..core import files
from . import seccomp, seccompsim
from .seccompprofile import ProfileError

RUNTIMES = ("runc", "crun", "libseccomp")
DEFAULT_RUNTIME = "runc"

# seccomp() flags (include/uapi/linux/seccomp.h).
FLAG_TSYNC = 1
FLAG_LOG = 2
FLAG_SPEC_ALLOW = 4
FLAG_NEW_LISTENER = 8
FLAG_WAIT_KILLABLE_RECV = 32
FLAG_NAMES = {"SECCOMP_FILTER_FLAG_TSYNC": FLAG_TSYNC, "SECCOMP_FILTER_FLAG_LOG": FLAG_LOG,
              "SECCOMP_FILTER_FLAG_SPEC_ALLOW": FLAG_SPEC_ALLOW,
              "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV": FLAG_WAIT_KILLABLE_RECV}

# libseccomp's attributes (enum scmp_filter_attr) and tokens.
_FLTATR_CTL_OPTIMIZE = 8
_ARCH_NATIVE = 0
_NR_SCMP_ERROR = -1
_API_SPEC_ALLOW = 4          # seccomp_api_get(): 4 and above know SECCOMP_FILTER_FLAG_SPEC_ALLOW
_API_NOTIFY = 6

EPERM = 1
ENOSYS = 38
RET_ERRNO_ENOSYS = seccomp.RET_ERRNO | ENOSYS


@dataclass
class Filter:
    """A compiled profile: program (the filter's bytes), flags (seccomp()'s flags word),
    flag_names, runtime, layout (in words), stub (instructions runc put before libseccomp's
    program), rules (libseccomp rules added), notes (what was left out or changed, and why)."""
    program: bytes
    flags: int
    flag_names: list
    runtime: str
    layout: str
    stub: int = 0
    rules: int = 0
    notes: list = field(default_factory=list)


def _action(word, errno_ret, runtime, where):
    """The filter's return value for an OCI action word.  runc's getAction: ERRNO and TRACE
    carry errnoRet or EPERM, any other action ignores it.  crun's get_seccomp_action, after
    seccomp_action_supports_errno refuses errnoRet on an action other than ERRNO or TRACE
    (libseccomp's own macros carry data on those two only, so the libseccomp runtime
    refuses it too)."""
    if errno_ret is not None and word not in ("SCMP_ACT_ERRNO", "SCMP_ACT_TRACE") and \
            runtime != "runc":
        raise ProfileError(f"{where}: errno value specified for action `{word}` (crun's "
                           "libcrun_generate_seccomp refuses it; runc ignores it)")
    data = EPERM if errno_ret is None else errno_ret
    if word == "SCMP_ACT_ERRNO":
        return seccomp.RET_ERRNO | (data & seccomp.RET_DATA)
    if word == "SCMP_ACT_TRACE":
        return seccomp.RET_TRACE | (data & seccomp.RET_DATA)
    return {"SCMP_ACT_KILL": seccomp.RET_KILL_THREAD,
            "SCMP_ACT_KILL_THREAD": seccomp.RET_KILL_THREAD,
            "SCMP_ACT_KILL_PROCESS": seccomp.RET_KILL_PROCESS, "SCMP_ACT_TRAP": seccomp.RET_TRAP,
            "SCMP_ACT_ALLOW": seccomp.RET_ALLOW, "SCMP_ACT_LOG": seccomp.RET_LOG,
            "SCMP_ACT_NOTIFY": seccomp.RET_USER_NOTIF}[word]


def _flags(spec, runtime, L, notes):
    """(flags word, names): runc's SetupSeccomp and setFlag/filterFlags, crun's
    libcrun_apply_seccomp, or the profile's own for libseccomp."""
    given = spec.get("flags")
    if given is None:
        if runtime in ("runc", "crun") and L.seccomp_api_get() >= _API_SPEC_ALLOW:
            # runc: "set the default of specs.LinuxSeccompFlagSpecAllow, if it is supported";
            # crun: "if no seccomp flag was specified use a sane default"
            notes.append(f"flags: none in the profile, so {runtime} installs the filter with "
                         "SECCOMP_FILTER_FLAG_SPEC_ALLOW (no speculative store bypass "
                         "mitigation forced on the container)")
            return FLAG_SPEC_ALLOW, ["SECCOMP_FILTER_FLAG_SPEC_ALLOW"]
        return 0, []
    word, names = 0, []
    for f in given:
        if f not in FLAG_NAMES:
            raise ProfileError(f"seccomp flag {f!r} is not known to {runtime} (one of "
                               f"{', '.join(FLAG_NAMES)})")
        if f == "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV":
            raise ProfileError(f"seccomp flag {f} goes with a user-space supervisor's listener "
                               "(SECCOMP_FILTER_FLAG_NEW_LISTENER), and tw runs none: the "
                               "kernel refuses it alone (EINVAL)")
        if f == "SECCOMP_FILTER_FLAG_TSYNC" and runtime == "runc":
            # runc's setFlag: "flagTsync is recognized but ignored"
            notes.append("flags: SECCOMP_FILTER_FLAG_TSYNC is recognised and ignored by runc")
            continue
        word |= FLAG_NAMES[f]
        names.append(f)
    return word, names


def _arch_token(L, word):
    """libseccomp's token for an OCI architecture word (crun: strip SCMP_ARCH_, lowercase,
    seccomp_arch_resolve_name; runc's ConvertStringToArch names the same)."""
    name = word[len("SCMP_ARCH_"):].lower() if word.startswith("SCMP_ARCH_") else word.lower()
    tok = L.seccomp_arch_resolve_name(name.encode()) if len(name) < 32 else 0
    if not tok:
        raise ProfileError(f"seccomp unknown architecture `{word}`")
    return tok


def _export(L, ctx):
    """seccomp_export_bpf into a memfd: the filter's bytes, whatever their size."""
    fd = os.memfd_create("tw-seccomp", os.MFD_CLOEXEC)
    try:
        rc = L.seccomp_export_bpf(ctx, fd)
        if rc < 0:
            raise ProfileError(f"libseccomp could not export the filter: {os.strerror(-rc)}")
        size = os.fstat(fd).st_size
        os.lseek(fd, 0, os.SEEK_SET)
        return files.read_fd(fd, size)
    finally:
        os.close(fd)


def _conditions(args):
    cmps = (seccomp.ArgCmp * max(1, len(args)))()
    for j, a in enumerate(args):
        cmps[j] = seccomp.ArgCmp(a["index"], seccomp.CMP[a["op"]], a["value"], a["valueTwo"])
    return cmps


def _add(L, ctx, act, nr, args, name, where):
    """seccomp_rule_add_array; libseccomp's refusal named."""
    rc = L.seccomp_rule_add_array(ctx, act, nr, len(args), _conditions(args))
    if rc < 0:
        why = os.strerror(-rc)
        if -rc == 22 and len({a["index"] for a in args}) < len(args):
            why += ": two conditions on one argument in one rule"
        raise ProfileError(f"{where} {name}: libseccomp refused the rule ({why})")


def compile(spec, runtime=DEFAULT_RUNTIME):
    """The spec (seccompprofile.read) compiled as `runtime` compiles it: a Filter.
    ProfileError for what the runtime refuses, NoLibseccomp without libseccomp."""
    if runtime not in RUNTIMES:
        raise ProfileError(f"unknown runtime {runtime!r} (one of {', '.join(RUNTIMES)})")
    L = seccomp.lib()
    notes = []
    default_word = spec["defaultAction"]
    if default_word == "SCMP_ACT_NOTIFY":
        # runc's InitSeccomp: "SCMP_ACT_NOTIFY cannot be used as default action"; and every
        # call would wait for a supervisor, which tw does not run
        raise ProfileError("SCMP_ACT_NOTIFY cannot be the default action (runc's InitSeccomp "
                           "refuses it; every call would wait for a user-space supervisor)")
    default = _action(default_word, spec.get("defaultErrnoRet"), runtime, "defaultAction")
    # specconv's SetupSeccomp: one rule per name, each with the block's action and args
    calls = [{"name": n, "action": r["action"], "errnoRet": r.get("errnoRet"),
              "args": r["args"], "at": r["at"]} for r in spec["syscalls"] for n in r["names"]]
    for c in calls:
        c["act"] = _action(c["action"], c["errnoRet"], runtime, f"syscalls[{c['at']}]")
        if c["action"] == "SCMP_ACT_NOTIFY":
            if runtime == "runc" and c["name"] == "write":
                raise ProfileError(f"syscalls[{c['at']}]: SCMP_ACT_NOTIFY cannot be used for "
                                   "the write syscall (runc's InitSeccomp)")
            if L.seccomp_api_get() < _API_NOTIFY:
                raise ProfileError("seccomp notify unsupported: libseccomp's API level is "
                                   f"below {_API_NOTIFY}")
    flags, flag_names = _flags(spec, runtime, L, notes)
    if any(c["action"] == "SCMP_ACT_NOTIFY" for c in calls):
        notes.append(f"SCMP_ACT_NOTIFY: {runtime} adds SECCOMP_FILTER_FLAG_NEW_LISTENER and "
                     "hands the listener to a supervisor; tw runs none, so a measured call "
                     "the filter answers so is refused")
    ctx = L.seccomp_init(default)
    if not ctx:
        raise ProfileError("libseccomp refused the default action")
    try:
        tokens = []
        for w in spec.get("architectures") or []:
            tok = _arch_token(L, w)
            rc = L.seccomp_arch_add(ctx, tok)
            if rc < 0 and rc != -17:              # crun: -EEXIST is no error
                raise ProfileError(f"libseccomp refused architecture {w}: {os.strerror(-rc)}")
            tokens.append(tok)
        layout = "libseccomp's default: a linear chain of the calls per architecture"
        if runtime == "runc" and len(calls) > 32:
            # InitSeccomp: "Enable libseccomp binary tree optimization for longer rulesets"
            if L.seccomp_attr_set(ctx, _FLTATR_CTL_OPTIMIZE, 2) == 0:
                layout = ("libseccomp's binary tree (runc sets optimisation level 2 for more "
                          "than 32 rules)")
        added = 0
        for c in calls:
            where = f"syscalls[{c['at']}]"
            if c["act"] == default:
                # runc's matchCall: "This rule is redundant, silently skip it"; crun: continue
                continue
            nr = L.seccomp_syscall_resolve_name_arch(_ARCH_NATIVE, c["name"].encode())
            if nr == _NR_SCMP_ERROR:
                notes.append(f"{c['name']}: unknown to libseccomp {seccomp.version()}, left out "
                             + (f"(as {runtime} leaves it out)" if runtime != "libseccomp" else
                                "(as runc and crun leave it out)"))
                continue
            args = c["args"]
            if runtime != "libseccomp" and len({a["index"] for a in args}) < len(args):
                # runc's matchCall and crun: "If two or more arguments have the same
                # condition, revert to old behavior, adding each condition as a separate rule"
                notes.append(f"{where} {c['name']}: two conditions on one argument, added as "
                             f"{len(args)} rules of one condition each (as {runtime} does): "
                             "any one of them matching is enough")
                for a in args:
                    _add(L, ctx, c["act"], nr, [a], c["name"], where)
                    added += 1
            else:
                _add(L, ctx, c["act"], nr, args, c["name"], where)
                added += 1
        program = _export(L, ctx)
    finally:
        L.seccomp_release(ctx)
    stub = []
    if runtime == "runc":
        stub = enosys_stub(spec, calls, default_word, tokens, L)
        if stub:
            layout += (f"; runc's -ENOSYS stub before it ({len(stub)} instructions: a call "
                       "above the newest name of the profile answers ENOSYS)")
    prog = b"".join(seccomp.pack(i) for i in stub) + program
    try:
        seccompsim.load(prog)
    except seccompsim.BadFilter as e:
        raise ProfileError(f"the kernel would refuse the compiled filter: {e}") from None
    return Filter(prog, flags, flag_names, runtime, layout, len(stub), added, notes)


# ---- runc's -ENOSYS stub (libcontainer/seccomp/patchbpf/enosys_linux.go) -----------------

L_ = seccompsim
_J = {"eq": (L_.JEQ, False), "ne": (L_.JEQ, True), "gt": (L_.JGT, False),
      "le": (L_.JGT, True), "set": (L_.JSET, False), "notset": (L_.JSET, True)}


def _jump_if(cond, val, skip_true, skip_false=0):
    """golang.org/x/net/bpf's JumpIf, assembled (jumpToRaw): a negated test is the opposite
    opcode with its two skips swapped."""
    op, flip = _J[cond]
    jt, jf = (skip_false, skip_true) if flip else (skip_true, skip_false)
    return (L_.JMP | op | L_.K, jt, jf, val & 0xFFFFFFFF)


def _ja(n):
    return (L_.JMP | L_.JA, 0, 0, n)


def _ret(v):
    return (L_.RET | L_.K, 0, 0, v)


def _ld(off):
    return (L_.LD | L_.W | L_.ABS, 0, 0, off)


def _audit_arch(tok):
    """scmpArchToAuditArch: x32 is x86-64's audit architecture (its calls set bit 30)."""
    return seccomp.AUDIT_ARCH_X86_64 if tok == seccomp.AUDIT_ARCH_X32 else tok


def enosys_stub(spec, calls, default_word, tokens, L):
    """runc's generatePatch: the stub's instructions, or [] where runc adds none.

    generatePatch adds none when the default action is permissive (isAllowAction: ALLOW, LOG,
    TRACE).  It also means to add none when defaultErrnoRet is ENOSYS, but compares that
    errno with the whole return value SCMP_ACT_ERRNO(ENOSYS) (0x50026), which no errnoRet
    equals: podman's profile, defaultErrnoRet 38, gets the stub too, as it does under runc.

    findLastSyscalls: per architecture of the profile and the native one, the largest number
    any call name of the profile has there (every name, those skipped as repeating the
    default included).  generateEnosysStub then lays out, per audit architecture, a section
    that answers ENOSYS above that number, and before them a load of the architecture and a
    jump per architecture to its section.  runc walks Go maps for both, in an order Go draws
    anew each time: this lays the native architecture's jump first and its section last, and
    a compat call runs one compare more (in a runc container it may be the other way round)."""
    if default_word in ("SCMP_ACT_ALLOW", "SCMP_ACT_LOG", "SCMP_ACT_TRACE"):
        return []
    if spec.get("defaultErrnoRet") is not None and spec["defaultErrnoRet"] == RET_ERRNO_ENOSYS:
        return []
    toks = list(dict.fromkeys(tokens + [seccomp.AUDIT_ARCH_X86_64]))
    last = {}
    for tok in toks:
        largest = 0
        for c in calls:
            nr = L.seccomp_syscall_resolve_name_arch(tok, c["name"].encode())
            if nr != _NR_SCMP_ERROR and nr > largest:
                largest = nr
        last.setdefault(_audit_arch(tok), {})
        if largest:
            last[_audit_arch(tok)][tok] = largest
    # sections: the native one laid out last (prepended first), so its section is nearest
    # the filter; the jumps: the native one checked first
    order = sorted(last, key=lambda a: a == seccomp.AUDIT_ARCH_X86_64, reverse=True)
    tail = [_ja(1), _ret(RET_ERRNO_ENOSYS)]
    table = {}
    for audit in order:
        maxes = last[audit]
        base_enosys = len(tail) - 1
        base_filter = base_enosys + 1
        section = [_ld(0)]
        if not maxes:
            continue
        if len(maxes) == 1:
            (tok, sysno), = maxes.items()
            if base_enosys + 1 <= 255:
                st = [_jump_if("gt", sysno, base_enosys + 1), _ja(base_filter)]
            else:
                st = [_jump_if("le", sysno, 1), _ret(RET_ERRNO_ENOSYS), _ja(base_filter)]
            if audit == seccomp.AUDIT_ARCH_X86_64:
                if tok == seccomp.AUDIT_ARCH_X86_64:
                    st = [_jump_if("set", seccompsim.X32_SYSCALL_BIT, len(st) - 1)] + st
                else:
                    st = [_jump_if("notset", seccompsim.X32_SYSCALL_BIT, len(st) - 1)] + st
            section += st
        else:
            x32, x64 = maxes[seccomp.AUDIT_ARCH_X32], maxes[seccomp.AUDIT_ARCH_X86_64]
            if base_enosys + 2 <= 255:
                section += [_jump_if("set", seccompsim.X32_SYSCALL_BIT, 1),
                            _jump_if("gt", x64, base_enosys + 2, 1),
                            _jump_if("gt", x32, base_enosys + 1), _ja(base_filter)]
            else:
                section += [_jump_if("set", seccompsim.X32_SYSCALL_BIT, 1),
                            _jump_if("gt", x64, 1, 2), _jump_if("le", x32, 1),
                            _ret(RET_ERRNO_ENOSYS), _ja(base_filter)]
        tail = section + tail
        table[audit] = len(tail)
    # "Add a dummy 'jump to filter' for any architecture we might miss below"
    tail = [_ja(len(tail))] + tail
    for audit in reversed(order):
        jump = len(tail) - table.get(audit, 0)
        if jump <= 255:
            tail = [_jump_if("eq", audit, jump)] + tail
        else:
            tail = [_jump_if("ne", audit, 1), _ja(jump)] + tail
    return [_ld(4)] + tail
