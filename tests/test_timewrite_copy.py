"""timewrite's output file is byte-for-byte its input, through every mechanism.

timewrite times writes, but a timing is only worth something if the writes did
the job.  This breaks when a stub passes the wrong register (the kernel writes
from the wrong address or the wrong length), when 64-bit int 0x80 gets a buffer
above 4 GiB (its pointer is truncated), when a short write is dropped instead of
continued, when the last partial chunk is lost or repeated, when a pipe on stdin
is read only up to the first 64 KiB, or when a rewind between passes forgets to
truncate, so the file keeps stale bytes from an earlier, longer content."""
import subprocess

import pytest

from conftest import WRITE_VARIANTS, need_supported

# Empty, one byte, an odd size that is no multiple of any buffer size, and a
# size above the largest default buffer (131072), so several 128 KiB chunks and
# a tail are written.
SIZES = {"empty": 0, "one": 1, "odd": 23 * 256 + 17, "big": 300001}

# 1000 is no power of two and the last size in the list, so the file left
# behind was written in 1000-byte chunks plus a tail.
FAST_SIZES = "256,1000"


def payload(n):
    """Deterministic, non-repeating bytes: a misplaced chunk shows up in cmp."""
    return bytes((i * 131 + (i >> 8) * 7 + 1) & 0xFF for i in range(n))


def timewrite(build, variant, out, data, how, args=()):
    """Run timewrite-<variant> with `data` on stdin, as a regular file or a pipe."""
    cmd = [str(build / f"timewrite-{variant}"), *args, str(out)]
    if how == "pipe":
        return subprocess.run(cmd, input=data, capture_output=True, timeout=300)
    src = out.with_name(out.name + ".in")
    src.write_bytes(data)
    with open(src, "rb") as f:
        return subprocess.run(cmd, stdin=f, capture_output=True, timeout=300)


@pytest.mark.parametrize("how", ["file", "pipe"])
@pytest.mark.parametrize("size", list(SIZES), ids=list(SIZES))
@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_copy_is_exact(build, tmp_path, variant, size, how):
    need_supported("timewrite", variant)
    data = payload(SIZES[size])
    out = tmp_path / "out"
    p = timewrite(build, variant, out, data, how, ["--sizes", FAST_SIZES])
    assert p.returncode == 0, p.stderr.decode()
    assert out.read_bytes() == data
    assert len(p.stdout.decode().splitlines()) == 2


@pytest.mark.parametrize("how", ["file", "pipe"])
@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_full_default_sweep_copies(build, tmp_path, variant, how):
    """The seed's own ten sizes, no options: the last pass is at 131072."""
    need_supported("timewrite", variant)
    data = payload(SIZES["big"])
    out = tmp_path / "out"
    p = timewrite(build, variant, out, data, how)
    assert p.returncode == 0, p.stderr.decode()
    assert out.read_bytes() == data
    assert len(p.stdout.decode().splitlines()) == 10


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_stale_longer_content_is_truncated(build, tmp_path, variant):
    """An existing, longer outfile ends up exactly as long as the input."""
    need_supported("timewrite", variant)
    out = tmp_path / "out"
    out.write_bytes(b"\xee" * 500000)
    data = payload(SIZES["odd"])
    p = timewrite(build, variant, out, data, "file", ["--sizes", "131072,256", "--reps", "2"])
    assert p.returncode == 0, p.stderr.decode()
    assert out.read_bytes() == data


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_pipe_larger_than_pipe_buffer(build, tmp_path, variant):
    """A `cat |` pipeline delivers many 64 KiB reads; all of them must arrive."""
    need_supported("timewrite", variant)
    src = tmp_path / "src"
    data = payload(1 << 20) + b"tail"
    src.write_bytes(data)
    out = tmp_path / "out"
    p = subprocess.run(["bash", "-c", 'cat "$1" | "$2" --sizes 4096 "$3"', "x",
                        str(src), str(build / f"timewrite-{variant}"), str(out)],
                       capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    assert out.read_bytes() == data
    row = p.stdout.decode().split()
    assert row[0] == "4096" and int(row[4]) == -(-len(data) // 4096)
