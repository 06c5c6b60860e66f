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

PR_SET_SPECULATION_CTRL = 53
PR_SPEC_STORE_BYPASS = 0
PR_SPEC_INDIRECT_BRANCH = 1
PR_SPEC_DISABLE = 1 << 2

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


def apply(choice):
    """Disable speculation of the chosen kind for this process and its children.

    Returns {"speculation": choice, "status": {...}} for meta.json; raises
    OSError with a sentence saying why the kernel refused (ENXIO: the kernel
    does not leave this mitigation to prctl; EPERM: forced off and locked)."""
    names = list(CONTROLS) if choice == "all" else [choice]
    libc = ctypes.CDLL(None, use_errno=True)
    for name in names:
        r = libc.prctl(PR_SET_SPECULATION_CTRL, CONTROLS[name], PR_SPEC_DISABLE, 0, 0)
        if r != 0:
            e = ctypes.get_errno()
            why = {errno.ENXIO: "this kernel/CPU does not leave it to prctl (see "
                                "/sys/devices/system/cpu/vulnerabilities)",
                   errno.EPERM: "it is forced on or off for this process and cannot change",
                   errno.EINVAL: "this kernel does not know the control"}.get(e, os.strerror(e))
            raise OSError(e, f"prctl(PR_SET_SPECULATION_CTRL, {name}, disable) failed: {why}")
    return {"speculation": choice, "status": status()}
