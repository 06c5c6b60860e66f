#!/usr/bin/env python3
"""Extract every string a CPU-vulnerability file in sysfs can print, from the kernel's bugs.c.

    scripts/mitigation_strings.py VERSION=PATH/TO/bugs.c [VERSION=PATH ...] > corpus.tsv

Writes tests/fixtures/mitigations/bugs-strings.tsv's rows (docs/mitigations.md says where
each version came from): one row per string, with the version and the source file it came
from, the sysfs file (/sys/devices/system/cpu/vulnerabilities/<file>) that prints it, where
in bugs.c it is (a `*_strings[]` array, a `*_show_state()` or `*_state()` function,
cpu_show_common()) and its role:

    whole    the whole of what the file prints (or its first part, before "; ")
    part     a part appended to a first part (spectre_v2's "; IBPB: conditional", an
             "; SMT vulnerable", l1tf's VMX states)
    format   a sysfs_emit() format with its %s left in, which says how the parts join

Only strings: no code is kept.  This is a maintainer's tool, run by hand when a new kernel
is added; no test runs it, and it reads only the files it is given.  Standard library only.
"""
import re
import sys

# Which sysfs file each array and function feeds (arch/x86/kernel/cpu/bugs.c, cpu_show_*()).
ARRAYS = {
    "mds_strings": "mds", "taa_strings": "tsx_async_abort", "mmio_strings": "mmio_stale_data",
    "rfds_strings": "reg_file_data_sampling", "srbds_strings": "srbds",
    "gds_strings": "gather_data_sampling", "spectre_v1_strings": "spectre_v1",
    "retbleed_strings": "retbleed", "its_strings": "indirect_target_selection",
    "tsa_strings": "tsa", "spectre_v2_strings": "spectre_v2", "ssb_strings": "spec_store_bypass",
    "srso_strings": "spec_rstack_overflow", "vmscape_strings": "vmscape",
    "l1tf_vmx_states": "l1tf",
}
# Arrays whose strings only reach the kernel log (pr_info), never a sysfs file.
LOG_ONLY = {"spectre_v2_user_strings"}
FUNCTIONS = {
    "l1tf_show_state": "l1tf", "itlb_multihit_show_state": "itlb_multihit",
    "mds_show_state": "mds", "tsx_async_abort_show_state": "tsx_async_abort",
    "mmio_stale_data_show_state": "mmio_stale_data", "rfds_show_state": "reg_file_data_sampling",
    "old_microcode_show_state": "old_microcode", "its_show_state": "indirect_target_selection",
    "stibp_state": "spectre_v2", "ibpb_state": "spectre_v2", "pbrsb_eibrs_state": "spectre_v2",
    "spectre_bhi_state": "spectre_v2", "spectre_v2_show_state": "spectre_v2",
    "spectre_v2_module_string": "spectre_v2", "srbds_show_state": "srbds",
    "retbleed_show_state": "retbleed", "srso_show_state": "spec_rstack_overflow",
    "gds_show_state": "gather_data_sampling", "tsa_show_state": "tsa",
    "vmscape_show_state": "vmscape",
}
# The parts that name a vulnerability file in cpu_show_common(), by the X86_BUG_ it tests.
COMMON = {"X86_BUG_CPU_MELTDOWN": "meltdown"}

LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')


def unescape(s):
    return s.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def defines(text):
    """#define NAME "literal" (L1TF_DEFAULT_MSG)."""
    return {m.group(1): unescape(m.group(2))
            for m in re.finditer(r'^#define\s+(\w+)\s+"((?:[^"\\]|\\.)*)"\s*$', text, re.M)}


def body(text, start):
    """The text from the first { at or after start to its matching }."""
    i = text.index("{", start)
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j + 1]
    raise ValueError("unbalanced braces")


def literals(code, defs):
    """Every string a piece of code can produce: literals (adjacent ones joined, as C joins
    them) and #define'd strings used by name."""
    out = []
    for m in re.finditer(r'((?:"(?:[^"\\]|\\.)*"\s*)+)|\b([A-Z][A-Z0-9_]*_MSG)\b', code):
        if m.group(1):
            out.append("".join(unescape(x) for x in LITERAL.findall(m.group(1))))
        elif m.group(2) in defs:
            out.append(defs[m.group(2)])
    return out


def role(s):
    if "%" in s:
        return "format"
    # "; IBPB: ...", ", no microcode", " - vulnerable module loaded", and the lower-case words
    # a format's "SMT %s" takes ("vulnerable", "disabled", "enabled with STIBP protection")
    return "part" if s.startswith(("; ", ", ", " - ")) or s[:1].islower() else "whole"


def extract(text):
    """[(sysfs file, where in bugs.c, role, string)] for one bugs.c."""
    defs = defines(text)
    code = strip_comments(text)
    rows = []
    for m in re.finditer(r"static\s+const\s+char\s*\*\s*const\s+(\w+)\s*\[\]\s*=", code):
        name = m.group(1)
        if name in LOG_ONLY:
            continue
        f = ARRAYS.get(name)
        if f is None:
            raise SystemExit(f"unknown string array {name}: add it to ARRAYS or LOG_ONLY")
        part = name == "l1tf_vmx_states"
        for s in literals(body(code, m.end()), defs):
            rows.append((f, f"array:{name}", "part" if part else "whole", s))
    for m in re.finditer(r"^static\s+(?:inline\s+)?(?:const\s+)?(?:ssize_t|char\s*\*)\s*(\w+)\s*\(",
                         code, re.M):
        name = m.group(1)
        if name not in FUNCTIONS:
            continue
        if code[code.index(")", m.end()) + 1:].lstrip().startswith(";"):
            continue  # a prototype
        b = body(code, m.end())
        for s in literals(b, defs):
            if s.strip() in ("", "\n"):
                continue
            rows.append((FUNCTIONS[name], f"fn:{name}", role(s), s))
    m = re.search(r"static\s+ssize_t\s+cpu_show_common\s*\(", code)
    if m:
        b = body(code, m.end())
        bug = None
        for line in b.splitlines():
            c = re.search(r"case\s+(X86_BUG_\w+)\s*:", line)
            if c:
                bug = c.group(1)
            for s in literals(line, defs):
                if s == "%s\n":
                    continue
                f = COMMON.get(bug, "*") if bug else "*"
                rows.append((f, "fn:cpu_show_common", role(s), s))
            if re.search(r"^\s*}\s*$", line):
                bug = None
    return rows


def main(argv):
    if not argv or any("=" not in a for a in argv):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    print("# version\tsource\tfile\tfrom\trole\tstring")
    seen = set()
    for a in argv:
        version, path = a.split("=", 1)
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for f, where, rl, s in extract(text):
            s = s.rstrip("\n")
            key = (version, f, where, s)
            if key in seen:
                continue
            seen.add(key)
            print("\t".join((version, "arch/x86/kernel/cpu/bugs.c", f, where, rl,
                             s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n"))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
