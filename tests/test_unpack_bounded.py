"""tw unpack's work is bounded by the archive's real size, never by what its headers claim.

Why it can break: tarfile reads a GNU long-name or PAX header whole before anything can look
at it (a 2 MB archive once made a 2 GiB header, 2.16 GB of memory, and a 512 MiB PAX header
was accepted and extracted), and it lists every member before a count can be checked (a
million headers cost 30 s and 497 MB before the refusal).  A 3000-level name ran os.makedirs
out of stack (exit 70), and a duplicate member was extracted silently.  Each hostile archive
here is refused in one line with exit 3, by a child that runs under a 512 MiB address-space
limit and a wall-clock bound, so that a regression fails this test and not the machine.
"""
import gzip
import io
import resource
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TW = ROOT / "scripts" / "tw"
LIMIT = 512 << 20


def limited():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def unpack(archive, into):
    return subprocess.run([sys.executable, TW, "unpack", "--into", into, "--host", "h", archive],
                          capture_output=True, text=True, timeout=120, preexec_fn=limited)


def header(name, size, kind):
    ti = tarfile.TarInfo(name)
    ti.size, ti.type = 0, kind
    block = bytearray(ti.tobuf(format=tarfile.USTAR_FORMAT))
    block[124:136] = b"%011o\0" % size if size < 8 ** 11 else b"\x80" + size.to_bytes(11, "big")
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block[:512])
    return bytes(block[:512])


def good_member(name, data=b"{}"):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    return ti.tobuf(format=tarfile.USTAR_FORMAT) + data + bytes(-len(data) % 512)


@pytest.mark.parametrize("kind,size,needle", [
    (b"L", 2 << 30, "GNU long-name header of 2147483648 bytes"),
    (b"x", 512 << 20, "PAX header of 536870912 bytes"),
    (b"K", 1 << 20, "GNU long-link header"),
])
def test_a_huge_extended_header_is_refused_unread(tmp_path, kind, size, needle):
    """The header claims gigabytes and the file holds a few blocks: refused from the header."""
    a = tmp_path / "a.tar.gz"
    a.write_bytes(gzip.compress(header("././@LongLink", size, kind) + bytes(64 << 10)))
    p = unpack(a, tmp_path / "c")
    assert p.returncode == 3 and needle in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert not (tmp_path / "c").exists() or not any((tmp_path / "c").iterdir())


def test_more_members_than_a_results_directory_stops_the_walk(tmp_path):
    a = tmp_path / "many.tar.gz"
    body = io.BytesIO()
    body.write(good_member("run/"))
    for i in range(20000):
        body.write(good_member(f"run/f{i}", b""))
    a.write_bytes(gzip.compress(body.getvalue() + bytes(1024), compresslevel=1))
    p = unpack(a, tmp_path / "c")
    assert p.returncode == 3 and "more than 10000 members" in p.stderr, p.stderr


def test_a_3000_level_name_is_refused_not_a_crash(tmp_path):
    a = tmp_path / "deep.tar"
    with tarfile.open(a, "w", format=tarfile.PAX_FORMAT) as tf:
        ti = tarfile.TarInfo("run/" + "d/" * 3000 + "f")
        ti.size = 2
        tf.addfile(ti, io.BytesIO(b"{}"))
    p = unpack(a, tmp_path / "c")
    assert p.returncode == 3 and "folders deep" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_a_duplicate_member_is_refused(tmp_path):
    a = tmp_path / "dup.tar"
    with tarfile.open(a, "w") as tf:
        for data in (b"{}", b'{"x": 1}'):
            ti = tarfile.TarInfo("run/meta.json")
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    p = unpack(a, tmp_path / "c")
    assert p.returncode == 3 and "twice in the archive" in p.stderr, p.stderr


def test_a_name_too_long_for_the_kernel_is_a_damaged_archive_not_a_system_refusal(tmp_path):
    a = tmp_path / "long.tar"
    with tarfile.open(a, "w", format=tarfile.PAX_FORMAT) as tf:
        ti = tarfile.TarInfo("run/" + "n" * 300)
        ti.size = 2
        tf.addfile(ti, io.BytesIO(b"{}"))
    p = unpack(a, tmp_path / "c")
    assert p.returncode == 3 and "longer than the kernel takes" in p.stderr, p.stderr
