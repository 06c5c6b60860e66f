"""The one version string (twtools.core.version): a valid Debian version from `git describe`,
what `tw --version` prints, and a field meta.json may carry.

Why it can break: a describe form that makes an invalid Debian version (dpkg-deb refuses it, or
it sorts wrong: an untagged build above a tagged release), `tw --version` going through the
unknown-command path, meta.json's schema refusing the field tw run writes.
"""
import re
import subprocess
import sys

import pytest

from conftest import ROOT
from twtools.analyse import schema
from twtools.core import version

# Debian policy 5.6.12: an upstream version starts with a digit; letters, digits, . + ~ only
# (no hyphen: this is a native package, without a Debian revision).
DEBIAN_UPSTREAM = re.compile(r"^[0-9][A-Za-z0-9.+~]*$")


@pytest.mark.parametrize("described,dirty,want", [
    ("902e064d709f", False, "0.0~git20261126.902e064d709f"),
    ("v1.2-0-g902e064d709f", False, "1.2"),
    ("v1.2-3-g902e064d709f", False, "1.2+git20261126.3.902e064d709f"),
    ("1.2-3-g902e064d709f", True, "1.2+git20261126.3.902e064d709f.dirty"),
    ("release_one-3-g902e064d709f", False, "0.0~release.one.3.g902e064d709f"),
])
def test_describe_becomes_a_debian_version(described, dirty, want):
    v = version.debian(described, 1795681021, dirty)
    assert v == want and DEBIAN_UPSTREAM.match(v)


def test_untagged_sorts_below_a_tagged_release():
    p = subprocess.run(["dpkg", "--compare-versions", version.debian("abcdef1", 0), "lt",
                        version.debian("v0.1-0-gabcdef1", 0)])
    assert p.returncode == 0


def test_tw_version_prints_the_checkouts():
    p = subprocess.run([sys.executable, ROOT / "scripts" / "tw", "--version"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"tw {version.get()}\n"
    assert DEBIAN_UPSTREAM.match(version.get()) or version.get() == "unknown"


def test_meta_json_may_carry_the_version():
    meta = {"schema": "timewrite-results/1", "version": version.get(), "state": "complete"}
    schema.check(schema.STAGES["meta"][2], meta)
    with pytest.raises(schema.Invalid):
        schema.check(schema.STAGES["meta"][2], dict(meta, version=3))
