"""tw scan's work is bounded per file and per walk, whatever a file or a tree claims.

Why it can break: the ELF reader builds a tuple per section header a file claims (a sparse
file claiming 4M sections cost 1.3 GB, 16M a MemoryError that aborted the whole scan); a code
segment full of `cd 80` makes a candidate of every other byte (0.5 GB and 18 s per MB); a
sparse 1 GiB file was read whole, in every worker; os.walk recursed once per directory level
(RecursionError at about 1000, exit 70, no output); every hard link was read again (2000 links
read 3.85 GB); and a scan of / read /proc/kmsg, taking the system logger's lines.  Each case
runs `tw scan` in a child under a 1 GiB address-space limit and a wall-clock bound: the file
over budget is one problem record, and the rest of the scan goes on.
"""
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
TW = ROOT / "scripts" / "tw"
LIMIT = 1 << 30


def limited():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def scan(*args, timeout=240):
    p = subprocess.run([sys.executable, TW, "scan", "--json", "--jobs", "1", *map(str, args)],
                       capture_output=True, text=True, timeout=timeout, preexec_fn=limited)
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    recs = [json.loads(x) for x in p.stdout.splitlines()]
    return p, [r for r in recs if r.get("record") == "file"], \
        [r for r in recs if r.get("record") == "problem"], recs[-1]


def small_elf():
    return Path(shutil.which("true")).read_bytes()


def test_a_file_claiming_300000_sections_is_one_problem(tmp_path):
    data = bytearray(small_elf())
    shoff = len(data)
    data += bytes(300001 * 64)
    struct.pack_into("<Q", data, 0x28, shoff)          # e_shoff
    struct.pack_into("<H", data, 0x3C, 0)              # e_shnum 0: the count is in sh[0]
    struct.pack_into("<H", data, 0x3E, 0)              # no section-name table
    struct.pack_into("<Q", data, shoff + 0x20, 300000)  # sh[0].sh_size
    (tmp_path / "many").write_bytes(data)
    shutil.copy(shutil.which("true"), tmp_path / "good")
    p, files, problems, summ = scan(tmp_path)
    assert p.returncode == 1
    assert [x["kind"] for x in problems] == ["damaged ELF"] and "claims 300000 sections" in problems[0]["why"]
    assert [Path(f["path"]).name for f in files] == ["good"]


def test_a_sparse_gigabyte_is_not_read(tmp_path):
    f = tmp_path / "sparse"
    with open(f, "wb") as o:
        o.write(small_elf()[:64])
        o.truncate(1 << 30)
    p, files, problems, summ = scan(tmp_path)
    assert [x["kind"] for x in problems] == ["sparse file"], problems
    assert summ["bytes"] < 1 << 20


def test_code_full_of_int80_is_over_its_budget_and_the_scan_goes_on(tmp_path):
    src = tmp_path / "dense.c"
    src.write_text('__asm__(".text\\n.globl blob\\nblob:\\n.rept 1100000\\nint $0x80\\n.endr\\n");\n'
                   "int main(void) { return 0; }\n")
    cc = subprocess.run(["cc", "-O0", "-o", tmp_path / "dense", src], capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    shutil.copy(shutil.which("true"), tmp_path / "good")
    p, files, problems, summ = scan(tmp_path)
    assert [x["kind"] for x in problems] == ["over budget"], problems
    assert "candidate entry sites" in problems[0]["why"]
    assert [Path(f["path"]).name for f in files] == ["good"]


def test_a_tree_1500_deep_is_walked_without_recursion(tmp_path):
    """Well past Python's recursion limit (1000), where os.walk raised RecursionError."""
    top = tmp_path / "deep"
    top.mkdir()
    here = os.getcwd()
    os.chdir(top)
    made = 0
    try:
        for _ in range(1500):
            os.mkdir("d")
            os.chdir("d")
            made += 1
        shutil.copy(shutil.which("true"), "deep")
        os.chdir(here)
        p, files, problems, summ = scan(top)
        assert p.returncode == 0 and len(files) == 1
        assert files[0]["path"].endswith("/d" * 1500 + "/deep")
    finally:
        # Taken down level by level: shutil.rmtree (and so pytest's own clean-up of old
        # temporary folders) recurses once per level and would fail on this tree.
        os.chdir(top)
        for _ in range(made):
            os.chdir("d")
        if os.path.exists("deep"):
            os.unlink("deep")
        for _ in range(made):
            os.chdir("..")
            os.rmdir("d")
        os.chdir(here)


def test_hard_links_are_read_once(tmp_path):
    shutil.copy(shutil.which("true"), tmp_path / "t0")
    for i in range(1, 200):
        os.link(tmp_path / "t0", tmp_path / f"t{i}")
    p, files, problems, summ = scan(tmp_path)
    assert len(files) == 1 and summ["hard_links"] == 199
    assert summ["bytes"] == (tmp_path / "t0").stat().st_size


def test_pseudo_file_systems_are_never_entered():
    """/proc and /sys are other file systems (not entered by default), and stay unentered
    with --cross-filesystems: nothing is read from them."""
    for extra in ([], ["--cross-filesystems"]):
        p = subprocess.run([sys.executable, TW, "scan", "--json", "--jobs", "1", *extra, "/proc",
                            "/sys"], capture_output=True, text=True, timeout=120, preexec_fn=limited)
        assert "Traceback" not in p.stderr
        recs = [json.loads(x) for x in p.stdout.splitlines()]
        assert recs[-1]["files"] == 0 and recs[-1]["bytes"] == 0, recs[-1]
        assert set(recs[-1]["not_entered"]) == {"/proc", "/sys"}
