"""The atlas's digests kept between runs (analyse.atlas): a kept digest must be the very one the
analysis computes, and anything that would make it another run's, an older analysis's or a
stranger's must make it computed again.

Why it can break: a key that leaves out something a digest depends on (the run's meta or
fingerprint, its name, the analysis's source) serves a stale figure after an edit; a reader
that trusts the cache folder follows a symbolic link, reads another user's file or a damaged
one and crashes or serves it; a cache that cannot be written (no home, a file where the folder
goes) fails the report instead of only slowing it.
"""
import json
import os
import shutil

import pytest

from twtools.analyse import atlas, fleet


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "timewrite" / "atlas-digests"


@pytest.fixture
def one_machine(tmp_path):
    """A copy of the atlas's machine with the least raw rounds, as an atlas of its own."""
    root = tmp_path / "atlas"
    machine = min((p for p in atlas.ATLAS.iterdir() if (p / "runs").is_dir()),
                  key=lambda p: sum(f.stat().st_size for f in p.glob("runs/*/percall.json.xz")))
    shutil.copytree(machine, root / machine.name)
    return root


def _refuse(*_):
    raise AssertionError("digested again where a kept digest should serve")


def test_a_kept_digest_is_the_computed_one(cache, monkeypatch):
    computed, skipped = atlas.load()
    assert computed and not skipped
    assert len(list(cache.glob("*.json"))) == len(computed)
    monkeypatch.setattr(fleet, "digest_doc", _refuse)
    kept, skipped = atlas.load()
    assert kept == computed and not skipped


def test_an_edit_of_a_run_or_of_the_analysis_is_digested_again(cache, one_machine, monkeypatch):
    first, _ = atlas.load(one_machine)
    names = set(cache.glob("*.json"))
    run = next(one_machine.glob("*/runs/*"))
    for stem in ("meta.json", "fingerprint.json"):
        with open(run / stem, "a") as f:
            f.write("\n")                          # the same document, other bytes
        again, _ = atlas.load(one_machine)
        assert again == first
        assert len(set(cache.glob("*.json")) - names) == 1, stem
        names = set(cache.glob("*.json"))
    monkeypatch.setattr(atlas, "_analysis_key", lambda: "another analysis")
    again, _ = atlas.load(one_machine)
    assert again == first and len(set(cache.glob("*.json")) - names) == len(first)


@pytest.mark.parametrize("damage", ["garbage", "another key", "not a digest", "link", "fifo",
                                    "another user's", "huge"])
def test_a_damaged_or_foreign_entry_is_digested_again(cache, one_machine, tmp_path, damage):
    first, _ = atlas.load(one_machine)
    kept = sorted(cache.glob("*.json"))
    decoy = tmp_path / "decoy.json"
    decoy.write_text(json.dumps({"key": kept[0].stem, "digest": {"planted": True}}))
    for p in kept:
        p.unlink()
        if damage == "garbage":
            p.write_bytes(b"\x00{not json")
        elif damage == "another key":
            p.write_text(json.dumps({"key": "0" * 64, "digest": {"planted": True}}))
        elif damage == "not a digest":
            p.write_text(json.dumps({"key": p.stem, "digest": [1, 2]}))
        elif damage == "link":
            os.symlink(decoy, p)
        elif damage == "fifo":
            os.mkfifo(p)
        elif damage == "another user's":
            if os.geteuid() != 0:
                pytest.skip("not root: cannot give a file to another user")
            p.write_text(json.dumps({"key": p.stem, "digest": {"planted": True}}))
            os.chown(p, 65534, 65534)
        elif damage == "huge":
            with open(p, "wb") as f:
                f.truncate(atlas.CACHE_MAX + 1)
    again, skipped = atlas.load(one_machine)
    assert again == first and not skipped
    assert all("planted" not in d for d in again)


def test_a_cache_that_cannot_be_written_is_only_slower(tmp_path, one_machine, monkeypatch):
    (tmp_path / "xdg").write_text("a file where the cache folder would go\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    a, skipped = atlas.load(one_machine)
    b, _ = atlas.load(one_machine)
    assert a and a == b and not skipped
