"""tw vdso --save FILE: the image and FILE.txt are written whole, and never through a link.

What it checks: --save writes the live 32-bit vDSO image and FILE.txt (its size and
AT_SYSINFO's offset, what tw doctor --record keeps), and a FILE that is a symbolic link is
refused in one line with exit 3, its target left as it was.

Why it can break: the save going back to Path.write_bytes (which follows the link)."""
from conftest import ROOT, need_supported, run
from twtools.machine import elf

TW = ROOT / "scripts" / "tw"


def test_save_writes_image_and_txt(tmp_path):
    need_supported("timewrite", "32-vdso")        # a 32-bit process with a vDSO
    out = tmp_path / "vdso32.so"
    p = run([str(TW), "vdso", "--save", str(out)], text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    image = out.read_bytes()
    assert elf.Elf(image, "vdso").symbol_table().get("__kernel_vsyscall")
    txt = (tmp_path / "vdso32.so.txt").read_text()
    assert f"vdso32_size={len(image)}\n" in txt and "at_sysinfo_offset=0x" in txt


def test_save_refuses_a_symbolic_link(tmp_path):
    need_supported("timewrite", "32-vdso")
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    link = tmp_path / "link"
    link.symlink_to(target)
    p = run([str(TW), "vdso", "--save", str(link)], text=True, timeout=120)
    assert p.returncode == 3, (p.returncode, p.stderr)
    lines = [l for l in p.stderr.splitlines() if l.startswith("tw vdso")]
    assert len(lines) == 1 and "refusing to write through it" in lines[0], p.stderr
    assert "Traceback" not in p.stderr
    assert target.read_text() == "keep me\n" and not (tmp_path / "link.txt").exists()
