"""The one table of CPU vendors: what each does with the fast 32-bit entry instructions.

A 64-bit kernel runs 32-bit code in compatibility mode.  There, Intel-compatible CPUs take
`sysenter` and raise #UD for `syscall`; AMD-compatible CPUs take `syscall` and raise #UD for
`sysenter`.  The kernel records which one works as a CPU feature (X86_FEATURE_SYSENTER32,
renamed X86_FEATURE_SYSFAST32 in 2026, set in arch/x86/kernel/cpu/intel.c, centaur.c and
zhaoxin.c; X86_FEATURE_SYSCALL32 in amd.c and hygon.c) and patches that instruction into the
32-bit vDSO's __kernel_vsyscall.
"""

# vendor_id (CPUID leaf 0) -> short name, the compat-mode instruction that works, and the one
# that raises #UD.
VENDORS = {
    "GenuineIntel": {"name": "Intel", "fast32": "sysenter", "ud32": "syscall"},
    "CentaurHauls": {"name": "Centaur", "fast32": "sysenter", "ud32": "syscall"},
    "  Shanghai  ": {"name": "Zhaoxin", "fast32": "sysenter", "ud32": "syscall"},
    "AuthenticAMD": {"name": "AMD", "fast32": "syscall", "ud32": "sysenter"},
    "HygonGenuine": {"name": "Hygon", "fast32": "syscall", "ud32": "sysenter"},
}


def lookup(vendor_id):
    """The table's entry for a vendor_id, or None for a vendor this table does not know.

    /proc/cpuinfo strips Zhaoxin's padded "  Shanghai  " to "Shanghai", so names are compared
    without their surrounding spaces."""
    if vendor_id is None:
        return None
    want = vendor_id.strip()
    for vid, entry in VENDORS.items():
        if vid.strip() == want:
            return dict(entry, vendor_id=vid)
    return None


def fast32(vendor_id):
    """'sysenter', 'syscall' or None: the instruction this vendor's CPUs take from 32-bit code."""
    e = lookup(vendor_id)
    return e["fast32"] if e else None


def name(vendor_id):
    e = lookup(vendor_id)
    return e["name"] if e else (vendor_id or "unknown")
