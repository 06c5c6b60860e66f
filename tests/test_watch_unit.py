"""The systemd unit for tw watch (systemd/timewrite-watch.service), checked by systemd itself.

Why it can break: a directive renamed or misspelled (systemd ignores an unknown key with a
warning, so the hardening silently goes), an ExecStart systemd cannot run, a hardening line
dropped by an edit.  `systemd-analyze verify` runs for real; two broken copies show that the
check fails when it should.  Skips: systemd-analyze is not installed (said so).
"""
import shutil
import subprocess

import pytest

from conftest import ROOT

UNIT = ROOT / "systemd" / "timewrite-watch.service"
HARDENING = ("NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=read-only",
             "PrivateTmp=yes", "ProtectKernelModules=yes", "RestrictSUIDSGID=yes",
             "CapabilityBoundingSet=", "MemoryMax=", "ReadWritePaths=/var/lib/timewrite-watch",
             "ProtectKernelTunables=yes", "DevicePolicy=closed", "UMask=0077")


def verify(path):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (Debian: systemd)")
    return subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True,
                          text=True, timeout=120)


def test_unit_verifies_without_a_warning():
    p = verify(UNIT)
    assert p.returncode == 0 and not p.stderr.strip() and not p.stdout.strip(), p.stderr


def test_unit_keeps_its_hardening_and_signals():
    text = UNIT.read_text()
    for line in HARDENING:
        assert f"\n{line}" in text, line
    assert "ExecReload=/bin/kill -HUP $MAINPID" in text
    assert "KillSignal=SIGTERM" in text
    assert " watch --state /var/lib/timewrite-watch --listen 127.0.0.1:" in text


def test_verify_catches_a_broken_copy(tmp_path):
    text = UNIT.read_text()
    bad = tmp_path / "bad-exec.service"
    bad.write_text(text.replace("ExecStart=/usr/bin/env", "ExecStart=/nonexistent/env"))
    p = verify(bad)
    assert p.returncode != 0 and "not executable" in p.stderr, p.stderr
    typo = tmp_path / "typo.service"
    typo.write_text(text.replace("NoNewPrivileges=yes", "NoNewPrivilegs=yes"))
    p = verify(typo)
    assert "Unknown key" in p.stderr, p.stderr
