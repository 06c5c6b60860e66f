"""The package's layers import only downwards (docs/architecture.md):

    core  <-  machine  <-  measure, analyse  <-  present  <-  cli

core imports nothing of the project; machine imports core; measure and analyse import core
and machine, never each other; present imports core, machine and analyse, never measure; cli
may import everything.  Why it can break: a convenient import across a layer (a measuring
stage summarising its own samples, a page reaching into a runner) that brings back what the
structure removed.  Every import of every module is read with ast, lazy ones inside
functions included."""
import ast

import pytest

from conftest import ROOT

PKG = ROOT / "scripts" / "twtools"
ALLOWED = {"core": {"core"}, "machine": {"core", "machine"},
           "measure": {"core", "machine", "measure"}, "analyse": {"core", "machine", "analyse"},
           "present": {"core", "machine", "analyse", "present"},
           "cli": {"core", "machine", "measure", "analyse", "present", "cli"}}


def imports_of(path):
    """The twtools layers a module imports, from its absolute and relative imports."""
    layer = path.relative_to(PKG).parts[0]
    depth = len(path.relative_to(PKG).parts) - 1       # packages below twtools/<layer>/
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if (node.module or "").startswith("twtools."):
                    out.add(node.module.split(".")[1])
                continue
            up = node.level - 1                          # how many packages above this one
            if up < depth:
                out.add(layer)                           # inside its own layer
            else:
                base = (node.module or "").split(".")[0]
                if base:
                    out.add(base)
                else:                                    # "from .. import x": x is a layer
                    out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("twtools."):
                    out.add(a.name.split(".")[1])
    return layer, out


MODULES = sorted(p for p in PKG.rglob("*.py") if p.relative_to(PKG).parts[0] in ALLOWED)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_imports_go_down_only(path):
    layer, used = imports_of(path)
    wrong = used - ALLOWED[layer]
    assert not wrong, f"{path.relative_to(PKG)} ({layer}) imports {', '.join(sorted(wrong))}"


def test_the_checker_sees_a_wrong_import(tmp_path):
    bad = PKG / "measure" / "_layer_probe.py"
    bad.write_text("from ..analyse import stats\n")
    try:
        assert imports_of(bad) == ("measure", {"analyse"})
    finally:
        bad.unlink()


# ---- only cli/ holds commands ---------------------------------------------------------------
# docs/architecture.md: "cli/: the commands".  A command's add_arguments()/main() outside cli/
# is a second home for argument parsing and error paths (issue 18).  These modules still
# define one while their owners move them; each entry is removed when its command reaches
# cli/, and the list is then empty.
COMMANDS_NOT_YET_MOVED = {
    "machine/entrypath.py",     # tw vdso, tw classify-libc (moving with the one ELF reader)
}
COMMAND_FUNCTIONS = ("add_arguments", "main")


def command_functions(path):
    """The names of the top-level functions of a module that make it a command."""
    tree = ast.parse(path.read_text())
    return sorted(n.name for n in tree.body
                  if isinstance(n, ast.FunctionDef) and n.name in COMMAND_FUNCTIONS)


@pytest.mark.parametrize("path", [p for p in MODULES if p.relative_to(PKG).parts[0] != "cli"],
                         ids=lambda p: str(p.relative_to(PKG)))
def test_only_cli_defines_commands(path):
    rel = str(path.relative_to(PKG))
    found = command_functions(path)
    if rel in COMMANDS_NOT_YET_MOVED:
        assert found, f"{rel} defines no command any more: remove it from COMMANDS_NOT_YET_MOVED"
        return
    assert not found, f"{rel} defines {', '.join(found)}: commands live in cli/"


def test_every_command_module_is_in_cli():
    """Every `tw` command's module, as cli/__init__.py names it, is in cli/ or on the list."""
    from twtools import cli
    outside = {mod for mod, _ in cli.COMMANDS.values() if not mod.startswith("cli.")}
    assert {m.replace(".", "/") + ".py" for m in outside} <= COMMANDS_NOT_YET_MOVED, outside


def test_the_command_checker_sees_a_command(tmp_path):
    probe = tmp_path / "m.py"
    probe.write_text("def add_arguments(p, n):\n    pass\n\n\ndef main(a, n):\n    return 0\n")
    assert command_functions(probe) == ["add_arguments", "main"]
