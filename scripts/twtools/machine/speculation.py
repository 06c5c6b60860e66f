"""Per-process speculation mitigations, switched with prctl(PR_SET_SPECULATION_CTRL).

Comparing `mitigations=` settings normally needs a reboot per setting.  Two
mitigations can instead be chosen per process when the kernel leaves them to
prctl (the vulnerabilities files then read "... via prctl" / "conditional"):

  ssbd             Speculative Store Bypass Disable: the CPU stops speculating
                   loads past unresolved stores (SSBD, Spectre v4).
  indirect-branch  indirect branch speculation disabled for the task: the
                   kernel issues IBPB on context switches to it and sets STIBP.

The setting is inherited across fork and kept across execve, so applying it to
`tw run` covers every program it measures.  See the kernel's
Documentation/userspace-api/spec_ctrl.rst.
"""
import ctypes
import errno
import os

PR_GET_SPECULATION_CTRL = 52
PR_SET_SPECULATION_CTRL = 53
PR_SPEC_STORE_BYPASS = 0
PR_SPEC_INDIRECT_BRANCH = 1
# PR_GET_SPECULATION_CTRL's answer (include/uapi/linux/prctl.h).
PR_SPEC_NOT_AFFECTED = 0
PR_SPEC_PRCTL = 1 << 0
PR_SPEC_ENABLE = 1 << 1
PR_SPEC_DISABLE = 1 << 2
PR_SPEC_FORCE_DISABLE = 1 << 3

CONTROLS = {"ssbd": PR_SPEC_STORE_BYPASS, "indirect-branch": PR_SPEC_INDIRECT_BRANCH}
CHOICES = ("ssbd", "indirect-branch", "all")
STATUS_KEYS = ("Speculation_Store_Bypass", "SpeculationIndirectBranch")


def status(path="/proc/self/status"):
    """The two speculation lines of /proc/<pid>/status, as the kernel words them."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in STATUS_KEYS:
                    out[k] = v.strip()
    except OSError:
        pass
    return out


class NotControllable(OSError):
    """The kernel keeps this mitigation to itself (or the CPU is not affected): a fact of
    the machine, not a failure.  syscost --speculation exits 77 for the same reason."""


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def controllable(name):
    """(True, None) if the kernel leaves mitigation `name` to prctl for this task, else
    (False, why).  Asking PR_GET_SPECULATION_CTRL first is what tells "the kernel decides"
    (for example SpeculationIndirectBranch "always enabled" on a kernel whose spectre_v2_user
    mode is off, where PR_SET answers EPERM) from a real failure; syscost.c words it alike."""
    st = _libc().prctl(PR_GET_SPECULATION_CTRL, CONTROLS[name], 0, 0, 0)
    if st < 0:
        e = ctypes.get_errno()
        if e in (errno.EINVAL, errno.ENODEV):
            return False, f"{name}: this kernel has no such speculation control " \
                          f"(PR_GET_SPECULATION_CTRL: {os.strerror(e)})"
        raise OSError(e, f"prctl(PR_GET_SPECULATION_CTRL, {name}) failed: {os.strerror(e)}")
    if st & PR_SPEC_PRCTL:
        return True, None
    state = ("this CPU is not affected" if st == PR_SPEC_NOT_AFFECTED else
             "force-disabled" if st & PR_SPEC_FORCE_DISABLE else
             "always disabled" if st & PR_SPEC_DISABLE else
             "always enabled" if st & PR_SPEC_ENABLE else "no per-task control")
    return False, f"{name}: the kernel does not leave it to prctl ({state})"


def apply(choice):
    """Disable speculation of the chosen kind for this process and its children.

    Returns {"speculation": choice, "status": {...}} for meta.json.  Raises
    NotControllable, saying why, when the kernel does not leave a chosen mitigation to
    prctl, and OSError with a sentence when prctl fails for another reason."""
    names = list(CONTROLS) if choice == "all" else [choice]
    for name in names:
        ok, why = controllable(name)
        if not ok:
            raise NotControllable(errno.ENXIO, why)
    libc = _libc()
    for name in names:
        r = libc.prctl(PR_SET_SPECULATION_CTRL, CONTROLS[name], PR_SPEC_DISABLE, 0, 0)
        if r != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"prctl(PR_SET_SPECULATION_CTRL, {name}, disable) failed although "
                             f"PR_GET_SPECULATION_CTRL offered it: {os.strerror(e)}")
    return {"speculation": choice, "status": status()}
