"""make bench-walls' independent program measures the filter tw ab --wall seccomp:args does,
the call made the ways tw ab makes it.

walls/seccomp_ab.c writes the rules of walls/profiles/args.json with libseccomp's own C API,
so that its figure is a check of tw ab's from code that shares nothing with it.  This breaks
when either side's rules change without the other (the two then time different filters and
their agreement says nothing), when a way is missing or made another way than its tw ab
counterpart (glibc's getppid wrapper for 64-libc's ret row, the instruction inline for the
inline rows: what a wall adds depends on the shape of the call), or when the program stops
building or running: it is built and run here for one pair, and its JSON read; its figures
are not judged (a benchmark's, printed by make bench-walls)."""
import json
import re
import subprocess

from conftest import ROOT, need_tool

SRC = ROOT / "walls" / "seccomp_ab.c"


def test_the_c_rules_are_the_profiles():
    prof = json.loads((ROOT / "walls" / "profiles" / "args.json").read_text())
    deny = next(r for r in prof["syscalls"] if r.get("errnoRet") == 1)
    src = SRC.read_text()
    block = src[src.index("denied[] = {"):src.index("};", src.index("denied[] = {"))]
    assert sorted(re.findall(r'"([a-z0-9_]+)"', block)) == sorted(deny["names"])
    by_name = {r["names"][0]: r for r in prof["syscalls"] if "args" in r}
    w, g = by_name["write"], by_name["getppid"]
    assert (w["errnoRet"], w["args"][0]["op"], w["args"][0]["value"]) == (9, "SCMP_CMP_GE", 1 << 20)
    assert "SCMP_ACT_ERRNO(EBADF), SCMP_SYS(write), 1,\n\t    SCMP_A0(SCMP_CMP_GE, 1048576)" in src
    assert (g["errnoRet"], g["args"][0]["op"], g["args"][0]["value"]) == (22, "SCMP_CMP_EQ",
                                                                         2**64 - 16)
    assert "SCMP_ACT_ERRNO(EINVAL), SCMP_SYS(getppid), 1,\n\t    SCMP_A0(SCMP_CMP_EQ, " \
           "(scmp_datum_t)-16)" in src
    assert prof["architectures"] == ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"]
    # the ways: glibc's wrapper, and the two instructions inline, as the driver pairs them
    assert "return getppid();" in src
    assert '__asm__ volatile ("syscall"' in src and '__asm__ volatile ("int $0x80"' in src
    from twtools.drivers import wallbench
    assert dict((w, t) for t, w in wallbench.PAIRS) == {
        "64-libc": ("64-libc", "ret"), "64-syscall": ("64-syscall", "inline"),
        "64-int80": ("64-int80", "inline")}
    assert "seccomp_arch_add(ctx, SCMP_ARCH_X86)" in src and \
        "seccomp_arch_add(ctx, SCMP_ARCH_X32)" in src


def test_it_builds_and_runs(tmp_path):
    need_tool("cc")
    exe = tmp_path / "seccomp_ab"
    p = subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(SRC),
                        "-lseccomp"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([str(exe), "1"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    for way in ("64-libc", "64-syscall", "64-int80"):
        assert len(out[way]["bare_ns"]) == len(out[way]["filtered_ns"]) == 1
        # each figure printed to 0.1 ns: their difference, within the two roundings; with
        # one pair the median of the differences and the floors' difference are one figure
        for key in ("added_ns_median", "added_ns_floor"):
            assert abs(out[way][key] - (out[way]["filtered_ns"][0] -
                                        out[way]["bare_ns"][0])) <= 0.1 + 1e-9
    assert subprocess.run([str(exe), "0"], capture_output=True).returncode == 2


def test_the_floors_are_the_fastest_of_each_side(tmp_path):
    need_tool("cc")
    exe = tmp_path / "seccomp_ab"
    assert subprocess.run(["cc", "-O2", "-o", str(exe), str(SRC), "-lseccomp"]).returncode == 0
    p = subprocess.run([str(exe), "2"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    w = json.loads(p.stdout)["64-libc"]
    assert abs(w["added_ns_floor"] - (min(w["filtered_ns"]) - min(w["bare_ns"]))) <= 0.1 + 1e-9
