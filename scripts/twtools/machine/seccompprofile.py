"""A container engine's seccomp profile read as the engine reads it, into the OCI runtime
spec's `linux.seccomp` that it hands its runtime (machine.seccompruntime compiles that).

Docker reads its profiles with moby/profiles' seccomp package (seccomp/seccomp_linux.go,
setupSeccomp), podman and buildah with containers/common's (pkg/seccomp/seccomp_linux.go,
setupSeccomp).  Both take the same JSON: `defaultAction`, `defaultErrnoRet`, either
`architectures` or `archMap` (an architecture and its subarchitectures), `syscalls` of rules
with `names` (or the old `name`), `action`, `errnoRet`, `args`, `includes` and `excludes`
(`arches`, `caps`, `minKernel`), and `flags`.  containers/common also takes errno names
(`defaultErrno`, `errno`: "ENOSYS"), which win over the numbers.  What they do with it, and
so what this module does, branch by branch:

  archMap          the entry of the native architecture only (SCMP_ARCH_X86_64 here) gives
                   the architectures: it and its subArchitectures (x86, x32): a 32-bit
                   program in a Docker container is allowed what the profile allows.
  includes/excludes  decided for the native architecture's Go name ("amd64") alone, and for
                   the container's capability bounding set: Docker's default set unless told
                   (caps_set); minKernel against the running kernel's "major.minor".
  name and names   one rule may not have both; neither may a profile have both
                   architectures and archMap.

A rule that does not apply is left out, and read() says which and why.  The result's
syscalls are the OCI spec's: names, action, errnoRet, args; the runtime reads them next.
"""
import errno as errnos
import platform
import re

# Docker's default capabilities: moby's oci/caps/defaults.go, DefaultCapabilities().
DOCKER_CAPS = ("CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
               "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
               "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE")
# podman's: containers/common's pkg/config/default.go, DefaultCapabilities.
PODMAN_CAPS = ("CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
               "CAP_NET_BIND_SERVICE", "CAP_SETFCAP", "CAP_SETGID", "CAP_SETPCAP", "CAP_SETUID",
               "CAP_SYS_CHROOT")
# Every capability (include/uapi/linux/capability.h, CAP_LAST_CAP 40 in Linux 6.x).
ALL_CAPS = ("CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
            "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
            "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW",
            "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT",
            "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
            "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
            "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE",
            "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ",
            "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE")
CAP_SETS = {"docker": DOCKER_CAPS, "podman": PODMAN_CAPS, "none": (), "all": ALL_CAPS}
CAPS_HELP = ("docker (Docker's default set, the default), podman, none, all, or capability "
             "names (CAP_SYS_ADMIN or SYS_ADMIN), comma-separated; words and names add up: "
             "docker,CAP_SYS_ADMIN")

# The native architecture as the engines name it: moby's goToNative[runtime.GOARCH] and
# libseccomp's native arch string are both "amd64" on x86-64; its OCI name.
NATIVE_WORD = "amd64"
NATIVE_ARCH = "SCMP_ARCH_X86_64"

ACTIONS = ("SCMP_ACT_KILL", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_TRAP",
           "SCMP_ACT_ERRNO", "SCMP_ACT_TRACE", "SCMP_ACT_ALLOW", "SCMP_ACT_LOG",
           "SCMP_ACT_NOTIFY")
OPERATORS = ("SCMP_CMP_NE", "SCMP_CMP_LT", "SCMP_CMP_LE", "SCMP_CMP_EQ", "SCMP_CMP_GE",
             "SCMP_CMP_GT", "SCMP_CMP_MASKED_EQ")
# A profile's size limits: no container profile comes near them; beyond is not a profile.
MAX_RULES = 20000
MAX_NAMES = 50000


class ProfileError(ValueError):
    """The profile is not one an engine or a runtime takes: says where and why."""


def caps_set(text):
    """The bounding set --caps names: {'CAP_...'}; ProfileError for a word that is neither a
    set's name nor a capability."""
    out = set()
    for w in (text or "docker").split(","):
        w = w.strip()
        if w.lower() in CAP_SETS:
            out.update(CAP_SETS[w.lower()])
            continue
        name = w.upper() if w.upper().startswith("CAP_") else "CAP_" + w.upper()
        if name not in ALL_CAPS:
            raise ProfileError(f"--caps: {w!r} is neither a set nor a capability",
                               ) from None
        out.add(name)
    return frozenset(out)


def _int(v, what, lo=0, hi=(1 << 64) - 1):
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise ProfileError(f"{what} is {str(v)[:40]!s}, not a whole number from {lo} to {hi}")
    return v


def _strings(v, what):
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ProfileError(f"{what} must be a list of strings")
    return v


def _errno(name, number, what):
    """containers/common's getErrno(): an errno name, if given, wins over the number; else
    the number (None when neither)."""
    if name not in (None, ""):
        if not isinstance(name, str):
            raise ProfileError(f"{what}: errno name {str(name)[:40]!r} is not a string")
        if name.isdigit():
            return _int(int(name), f"{what} errno", 0, 4095)
        v = getattr(errnos, name, None)
        if not name.startswith("E") or not isinstance(v, int):
            raise ProfileError(f"{what}: unknown errno {name[:40]!r}")
        return v
    if number is None:
        return None
    return _int(number, f"{what} errnoRet", 0, 4095)


def kernel_version(release=None):
    """(kernel, major) of a release string, as moby's parseRelease reads it ("%d.%d")."""
    m = re.match(r"(\d+)\.(\d+)", release or platform.release())
    return (int(m.group(1)), int(m.group(2))) if m else None


def _min_kernel(v, what):
    """moby's KernelVersion.UnmarshalJSON: "<kernel>.<major>", each a small whole number, not
    0.0."""
    if not isinstance(v, str) or not re.fullmatch(r"\d{1,3}\.\d{1,3}", v) or \
            tuple(map(int, v.split("."))) == (0, 0) or max(map(int, v.split("."))) > 255:
        raise ProfileError(f"{what}.minKernel: invalid kernel version {str(v)[:40]!r}, "
                           'expected "<kernel>.<major>"')
    return tuple(int(x) for x in v.split("."))


def _filter(f, what):
    if f is None:
        return {}
    if not isinstance(f, dict):
        raise ProfileError(f"{what} is not an object")
    out = {"arches": _strings(f.get("arches"), f"{what}.arches"),
           "caps": _strings(f.get("caps"), f"{what}.caps")}
    if f.get("minKernel") not in (None, ""):
        out["minKernel"] = _min_kernel(f["minKernel"], what)
    return out


def _left_out(rule, caps, kernel):
    """Why setupSeccomp leaves a rule out of the spec, or None: moby's order (excludes before
    includes; arches, caps, then minKernel), which containers/common's shares but for
    minKernel, which it does not read (an older kernel is all that differs)."""
    exc, inc = rule["excludes"], rule["includes"]
    if NATIVE_WORD in exc.get("arches", []):
        return f"excludes.arches names {NATIVE_WORD}, the native architecture"
    hit = [c for c in exc.get("caps", []) if c in caps]
    if hit:
        return f"excludes.caps: the container has {hit[0]}"
    if exc.get("minKernel") and kernel is not None and kernel >= exc["minKernel"]:
        return f"excludes.minKernel {'.'.join(map(str, exc['minKernel']))}: the kernel is newer"
    if inc.get("arches") and NATIVE_WORD not in inc["arches"]:
        return f"includes.arches ({', '.join(inc['arches'])}) leaves out {NATIVE_WORD}"
    miss = [c for c in inc.get("caps", []) if c not in caps]
    if miss:
        return f"includes.caps: the container lacks {miss[0]}"
    if inc.get("minKernel") and (kernel is None or kernel < inc["minKernel"]):
        return f"includes.minKernel {'.'.join(map(str, inc['minKernel']))}: the kernel is older"
    return None


def read(doc, caps=None, release=None, where="the profile"):
    """An engine's profile (parsed JSON) as the OCI spec its runtime gets:
    ({'defaultAction', 'defaultErrnoRet', 'architectures', 'flags', 'syscalls': [{'names',
    'action', 'errnoRet', 'args', 'at'}]}, notes), notes saying what was left out and why.
    caps: the container's bounding set (Docker's default when None).  ProfileError for what
    the engine refuses."""
    caps = frozenset(DOCKER_CAPS if caps is None else caps)
    if not isinstance(doc, dict):
        raise ProfileError(f"{where}: not a JSON object")
    rules = doc.get("syscalls") or []
    if not isinstance(rules, list) or len(rules) > MAX_RULES:
        raise ProfileError(f"{where}: syscalls must be a list of at most {MAX_RULES} rules")
    # setupSeccomp: "No default action specified, no syscalls listed, assume seccomp disabled"
    if not doc.get("defaultAction") and not rules:
        raise ProfileError(f"{where}: no defaultAction and no syscalls: an engine reads that as "
                           "seccomp turned off, so there is no wall to measure")
    default = doc.get("defaultAction")
    if default not in ACTIONS:
        raise ProfileError(f"{where}: defaultAction {str(default)[:40]!r} is not one of "
                           f"{', '.join(ACTIONS)}")
    arches = _strings(doc.get("architectures"), f"{where}: architectures")
    arch_map = doc.get("archMap") or []
    if arches and arch_map:
        # moby's and containers/common's setupSeccomp (getArchitectures) refuse both
        raise ProfileError(f"{where}: both 'architectures' and 'archMap' are given; an engine "
                           "takes one or the other")
    if not isinstance(arch_map, list):
        raise ProfileError(f"{where}: archMap must be a list")
    notes = []
    for i, a in enumerate(arch_map):
        if not isinstance(a, dict) or not isinstance(a.get("architecture"), str):
            raise ProfileError(f"{where}: archMap[{i}] has no architecture")
        if a["architecture"] == NATIVE_ARCH:
            # setupSeccomp: the native entry, then its subarchitectures; the first one only
            arches = [NATIVE_ARCH] + _strings(a.get("subArchitectures"),
                                              f"{where}: archMap[{i}].subArchitectures")
            notes.append(f"archMap: {NATIVE_ARCH} with its subarchitectures "
                         f"{', '.join(arches[1:]) or 'none'}")
            break
    else:
        if arch_map:
            notes.append(f"archMap has no {NATIVE_ARCH} entry: the native architecture only")
    flags = doc.get("flags")
    if flags is not None:
        flags = _strings(flags, f"{where}: flags")
    spec = {"defaultAction": default,
            "defaultErrnoRet": _errno(doc.get("defaultErrno"), doc.get("defaultErrnoRet"),
                                      f"{where}: default"),
            "architectures": arches, "flags": flags, "syscalls": []}
    kernel = kernel_version(release)
    names_total = 0
    for i, r in enumerate(rules):
        at = f"{where}: syscalls[{i}]"
        if not isinstance(r, dict):
            raise ProfileError(f"{at} is not an object")
        if r.get("name") and r.get("names"):
            raise ProfileError(f"{at}: both 'name' and 'names' are given; an engine takes one "
                               "or the other")
        names = [r["name"]] if r.get("name") else _strings(r.get("names"), f"{at}.names")
        if not names or not all(re.fullmatch(r"[a-z0-9_]{1,64}", n) for n in names):
            raise ProfileError(f"{at}: names must be a list of system call names")
        names_total += len(names)
        if names_total > MAX_NAMES:
            raise ProfileError(f"{where}: more than {MAX_NAMES} names: not a profile")
        if r.get("action") not in ACTIONS:
            raise ProfileError(f"{at}: action {str(r.get('action'))[:40]!r} is not one of "
                               f"{', '.join(ACTIONS)}")
        args = r.get("args") or []
        if not isinstance(args, list) or len(args) > 6:
            raise ProfileError(f"{at}: args must be a list of at most 6 comparisons")
        cmps = []
        for j, a in enumerate(args):
            if not isinstance(a, dict) or a.get("op") not in OPERATORS:
                raise ProfileError(f"{at}.args[{j}]: op must be one of {', '.join(OPERATORS)}")
            cmps.append({"index": _int(a.get("index"), f"{at}.args[{j}].index", 0, 5),
                         "value": _int(a.get("value", 0), f"{at}.args[{j}].value"),
                         "valueTwo": _int(a.get("valueTwo", 0), f"{at}.args[{j}].valueTwo"),
                         "op": a["op"]})
        rule = {"names": names, "action": r["action"], "args": cmps, "at": i,
                "errnoRet": _errno(r.get("errno"), r.get("errnoRet"), at),
                "includes": _filter(r.get("includes"), f"{at}.includes"),
                "excludes": _filter(r.get("excludes"), f"{at}.excludes")}
        why = _left_out(rule, caps, kernel)
        if why:
            notes.append(f"syscalls[{i}] ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
                         f" left out: {why}")
            continue
        del rule["includes"], rule["excludes"]
        spec["syscalls"].append(rule)
    return spec, notes
