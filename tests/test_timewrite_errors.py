"""timewrite fails loudly, names the file, and never writes a partial result silently.

The seed treated a short write as an error and could not read a pipe or an
input over 2 GiB.  This breaks when a write error (ENOSPC, EFBIG) is ignored or
loses its errno on the way back from a hand-written stub (the contract returns
-errno), when SIGXFSZ kills the program instead of write() failing with EFBIG,
when a short write is not continued, when an unopenable outfile is not
reported with its name, when a closed stdin lets the output file take fd 0,
when an input too large for the variant's buffers is discovered only after the
output file has been created, or when outfile is the file on standard input
(by its own name, a hard link, a symbolic link or /proc/self/fd/0) and is
truncated instead of refused: an interrupted `timewrite f <f` once left
2.5 MB of a 20 MB file."""
import os
import re
import resource
import shutil
import signal
import subprocess

import pytest

from conftest import WRITE_VARIANTS, need_supported, need_tool

DATA = bytes((i * 7 + 3) & 0xFF for i in range(1 << 20))


def tw(build, variant, args, stdin=None, data=DATA, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 300)
    cmd = [str(build / f"timewrite-{variant}"), *map(str, args)]
    if stdin is not None:
        return subprocess.run(cmd, stdin=stdin, **kw)
    kw["text"] = False
    p = subprocess.run(cmd, input=data, **kw)
    p.stdout, p.stderr = p.stdout.decode(), p.stderr.decode()
    return p


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_enospc(build, variant):
    need_supported("timewrite", variant)
    p = tw(build, variant, ["--sizes", "4096", "/dev/full"])
    assert p.returncode == 1, p.stderr
    assert f"timewrite-{variant}: /dev/full: No space left on device" in p.stderr
    assert p.stdout == ""


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_file_size_limit_gives_efbig(build, tmp_path, variant):
    """RLIMIT_FSIZE of 10000 bytes: 4096 + 4096 + a short 1808, then EFBIG.

    The file must end at exactly the limit with the input's first bytes, and
    the status must be 1, not death by SIGXFSZ."""
    need_supported("timewrite", variant)
    out = tmp_path / "limited"

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (10000, 10000))

    p = tw(build, variant, ["--sizes", "4096", out], preexec_fn=limit)
    assert p.returncode != -signal.SIGXFSZ, "killed by SIGXFSZ"
    assert p.returncode == 1, p.stderr
    assert f"timewrite-{variant}: {out}: File too large" in p.stderr
    assert out.stat().st_size == 10000
    assert out.read_bytes() == DATA[:10000]


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_short_write_is_continued(build, tmp_path, variant):
    """Under the same limit, strace shows the short write's remainder retried.

    The third write of 4096 bytes returns 1808; the next request must be the
    other 2288 bytes of that chunk (which then fails with EFBIG), not the next
    chunk, which would skip data whenever a short write is followed by success."""
    need_tool("strace")
    need_supported("timewrite", variant)
    out = tmp_path / "limited"

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (10000, 10000))

    # strace logs to stderr, a pipe: a log file would itself hit the limit.
    p = subprocess.run(["strace", "-f", "-qq", "-y", "-s", "0", "-e", "trace=write",
                        build / f"timewrite-{variant}", "--sizes", "4096", out],
                       input=DATA, capture_output=True, timeout=120, preexec_fn=limit)
    log = p.stderr.decode()
    assert p.returncode == 1, log
    real = re.escape(os.path.realpath(out))
    calls = re.findall(rf"write\(\d+<{real}>, \S*, (\d+)\) += (-?\d+) ?(\w*)", log)
    assert [(int(n), int(r), e) for n, r, e in calls] == [
        (4096, 4096, ""), (4096, 4096, ""), (4096, 1808, ""), (2288, -1, "EFBIG")], log


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_missing_directory(build, tmp_path, variant):
    need_supported("timewrite", variant)
    out = tmp_path / "no" / "such" / "dir" / "out"
    p = tw(build, variant, ["--sizes", "4096", out])
    assert p.returncode == 1
    assert f"timewrite-{variant}: {out}: No such file or directory" in p.stderr
    assert p.stdout == ""


@pytest.mark.parametrize("where", ["file-as-dir", "procfs"])
@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_unwritable_place(build, tmp_path, variant, where):
    """Places even root cannot create a file in: below a regular file, in /proc."""
    need_supported("timewrite", variant)
    if where == "file-as-dir":
        (tmp_path / "somefile").write_text("x")
        out = tmp_path / "somefile" / "out"
    else:
        out = f"/proc/timewrite-test-{os.getpid()}"
    p = tw(build, variant, ["--sizes", "4096", out])
    assert p.returncode == 1
    assert p.stderr.startswith(f"timewrite-{variant}: {out}: ")
    assert p.stdout == ""
    assert not os.path.exists(out)


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_closed_stdin(build, tmp_path, variant):
    """With fd 0 closed the output must not become fd 0; refuse instead."""
    need_supported("timewrite", variant)
    out = tmp_path / "out"
    p = tw(build, variant, [out], stdin=subprocess.DEVNULL,
           preexec_fn=lambda: os.close(0))
    assert p.returncode == 1
    assert "stdin is closed" in p.stderr
    assert not out.exists()


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_empty_stdin(build, tmp_path, variant):
    need_supported("timewrite", variant)
    out = tmp_path / "out"
    p = tw(build, variant, [out], stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    rows = [r.split("\t") for r in p.stdout.splitlines()]
    assert [int(r[0]) for r in rows] == [256 << i for i in range(10)]
    assert all(r[4] == "0" for r in rows)
    assert out.exists() and out.stat().st_size == 0


@pytest.mark.parametrize("name", ["same-path", "hard-link", "symlink", "proc-fd"])
@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_stdin_as_outfile_is_refused(build, tmp_path, variant, name):
    """`timewrite f <f`, by any name: exit 1, one line, and f not touched at all.

    f's modification time is set in the past first: a truncation or a write,
    even one that put the same bytes back, would move it to now."""
    need_supported("timewrite", variant)
    f = tmp_path / "f"
    f.write_bytes(DATA)
    os.utime(f, ns=(1_000_000_000, 1_000_000_000))
    if name == "same-path":
        out = f
    elif name == "hard-link":
        out = tmp_path / "link"
        os.link(f, out)
    elif name == "symlink":
        out = tmp_path / "sym"
        out.symlink_to(f.name)
    else:
        out = "/proc/self/fd/0"     # timewrite's own stdin, seen through procfs
    with open(f, "rb") as stdin:
        p = tw(build, variant, ["--sizes", "4096", out], stdin=stdin)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert p.stderr.splitlines() == [
        f"timewrite-{variant}: {out}: is the file on standard input; writing it "
        "would destroy the input (nothing was written)"], p.stderr
    assert p.stdout == ""
    assert f.read_bytes() == DATA
    assert f.stat().st_mtime_ns == 1_000_000_000


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_same_device_on_both_sides_is_allowed(build, variant):
    """Only a regular file has data to lose: /dev/null in and out is fine."""
    need_supported("timewrite", variant)
    with open("/dev/null", "rb") as stdin:
        p = tw(build, variant, ["--sizes", "4096", "/dev/null"], stdin=stdin)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\t")[0] == "4096"


# --- inputs over 2 GiB ---------------------------------------------------------

BIG = (1 << 31) + 100_000_001            # ~2.1 GiB, not a multiple of 131072
MARKS = [0, (1 << 31) - 2048, BIG - 4096]  # 4 KiB each; the middle one straddles 2 GiB


def meminfo_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


@pytest.fixture(scope="module")
def big_input(tmp_path_factory):
    """A sparse 2.1 GiB file with distinct bytes at the start, across 2 GiB and at the end."""
    d = tmp_path_factory.mktemp("big")
    if shutil.disk_usage(d).free < BIG + (1 << 30):
        pytest.skip(f"{d}: less than {BIG + (1 << 30)} bytes free for a 2.1 GiB output")
    if meminfo_available() < BIG + (1 << 30):
        pytest.skip("less than 3.1 GiB of memory available to hold a 2.1 GiB input")
    src = d / "big.in"
    with open(src, "wb") as f:
        f.truncate(BIG)
        for i, off in enumerate(MARKS):
            f.seek(off)
            f.write(bytes(((off >> 12) + i + j) & 0xFF | 1 for j in range(4096)))
    yield src
    src.unlink()


def window(path, off, n=4096):
    with open(path, "rb") as f:
        f.seek(off)
        return f.read(n)


# 64-libc must cope; 64-int80 (buffers below 2 GiB) and 32-bit libc (a 4 GiB
# address space) may refuse, but only before creating the output.
@pytest.mark.parametrize("variant", ["64-libc", "64-int80", "32-libc"])
def test_input_over_2gib(build, big_input, variant):
    need_supported("timewrite", variant)
    out = big_input.with_name(f"big.{variant}.out")
    try:
        with open(big_input, "rb") as f:
            p = tw(build, variant, ["--sizes", "131072", out], stdin=f)
        if variant.startswith("64-") and variant != "64-int80":
            assert p.returncode == 0, p.stderr
        if p.returncode == 0:
            assert out.stat().st_size == BIG
            row = p.stdout.split("\t")
            assert int(row[0]) == 131072 and int(row[4]) == -(-BIG // 131072)
            for off in MARKS + [BIG // 2]:
                assert window(out, off) == window(big_input, off), off
        else:
            assert p.returncode == 1, p.stderr
            assert "cannot hold" in p.stderr and "nothing was written" in p.stderr
            assert not out.exists(), "refused after creating the output"
            assert p.stdout == ""
    finally:
        if out.exists():
            out.unlink()
