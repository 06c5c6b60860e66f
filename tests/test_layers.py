"""The package's layers import only downwards (docs/architecture.md):

    core  <-  store  <-  machine  <-  measure, analyse  <-  present  <-  service, drivers  <-  cli

core imports nothing of the project; store (the databases on disk) imports core; machine
imports core and store; measure and analyse import those, never each other; present imports
core, store, machine and analyse, never measure; service (tw watch's loop, the per-call
matrix a command prices with) and drivers (the benchmarks of the toolkit itself) import
everything below them, never each other; cli may import everything.  Why it can break: a convenient import across a layer (a measuring
stage summarising its own samples, a page reaching into a runner) that brings back what the
structure removed.  Every import of every module is read with ast, lazy ones inside
functions included."""
import ast
import functools
import re

import pytest

from conftest import ROOT

PKG = ROOT / "scripts" / "twtools"
ALLOWED = {"core": {"core"}, "store": {"core", "store"}, "machine": {"core", "store", "machine"},
           "measure": {"core", "store", "machine", "measure"},
           "analyse": {"core", "store", "machine", "analyse"},
           "present": {"core", "store", "machine", "analyse", "present"},
           "service": {"core", "store", "machine", "measure", "analyse", "present", "service"},
           "drivers": {"core", "store", "machine", "measure", "analyse", "present", "drivers"},
           "cli": {"core", "store", "machine", "measure", "analyse", "present", "service",
                   "drivers", "cli"}}


@functools.lru_cache(maxsize=None)
def _parsed(text):
    return ast.parse(text)


def parsed(path):
    """The module's syntax tree, parsed once per text: four checks below each read all of the
    package's modules (ast.walk only reads a tree)."""
    return _parsed(path.read_text())


@functools.lru_cache(maxsize=None)
def _walked(text):
    return tuple(ast.walk(_parsed(text)))


def nodes(path):
    """Every node of the module's syntax tree (ast.walk's order), walked once per text: the
    layer, circle and class checks each read every node of the package's modules, and the
    walk cost as much again as reading the list it makes."""
    return _walked(path.read_text())


def imports_of(path):
    """The twtools layers a module imports, from its absolute and relative imports."""
    layer = path.relative_to(PKG).parts[0]
    depth = len(path.relative_to(PKG).parts) - 1       # packages below twtools/<layer>/
    out = set()
    for node in nodes(path):
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


@pytest.fixture(scope="module", autouse=True)
def package_parsed_once():
    """Every module parsed and walked before the file's first test.  A fixture that outlives
    a test keeps the file whole on one `make check` worker (conftest.keeps_together), so the
    package is parsed once in the run, where its tests one by one on both workers parsed it
    twice."""
    for p in MODULES:
        nodes(p)


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
COMMANDS_NOT_YET_MOVED = set()
COMMAND_FUNCTIONS = ("add_arguments", "main")


def command_functions(path):
    """The names of the top-level functions of a module that make it a command."""
    tree = parsed(path)
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


# ---- no circles ---------------------------------------------------------------------------------
# Issue 45: two modules that each take names from the other are one module in two files; neither
# can be read, tested or moved alone.  The layer check above sees only climbs between layers; a
# circle inside one layer (analyse/fleet.py <-> analyse/rundigest.py) or across a package
# (machine/doctor.py -> tracers/base.py -> probe.py -> doctor.py) passed it.  Every import
# counts, a lazy one inside a function too: it is the same dependency, only paid later.

def module_name(path, pkg=PKG):
    """twtools.a.b for scripts/twtools/a/b.py (twtools.a for a/__init__.py)."""
    parts = list(path.relative_to(pkg.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(pkg=PKG):
    """{module: {modules of the package it imports}}, every Import/ImportFrom anywhere in it.
    `from .x import name` is an edge to x, and to x.name when that is a module."""
    mods = {module_name(p, pkg): p for p in sorted(pkg.rglob("*.py"))}
    graph = {}
    for m, p in mods.items():
        here = m.split(".") if p.name == "__init__.py" else m.split(".")[:-1]
        edges = set()
        for node in nodes(p):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = (here[:len(here) - node.level + 1] if node.level else [])
                target = ".".join(base + ([node.module] if node.module else []))
                names = [target] + [f"{target}.{a.name}" for a in node.names]
            else:
                continue
            edges |= {n for n in names if n in mods and n != m}
        graph[m] = edges
    return graph


def circles(graph):
    """The strongly connected parts of more than one node (Tarjan), each sorted, sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_no_import_circle():
    found = circles(import_graph())
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_circle_checker_sees_a_lazy_import(tmp_path):
    pkg = tmp_path / "twtools" / "analyse"
    pkg.mkdir(parents=True)
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import g\n    return g\n")
    (pkg / "c.py").write_text("from .a import b\n")
    assert circles(import_graph(tmp_path / "twtools")) == [["twtools.analyse.a", "twtools.analyse.b"]]


# The C programs: each X.c with its X.h is one room, and a room depends on every room whose
# header it (or its header) includes.  A name is declared in the header of the file that
# defines it (docs/architecture.md, "The mechanism contract"), so a circle of includes is a
# circle of names: options.c included syscost.h, the header of the file that calls
# parse_args (issue 45).
C_DIRS = (ROOT / "timewrite", ROOT / "syscost")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def c_rooms(dirs=C_DIRS):
    """{room: {rooms it includes}} over the .c and .h files of dirs."""
    files = [p for d in dirs for p in sorted(d.glob("*.[ch]"))]
    rooms = {p.stem for p in files}
    graph = {r: set() for r in rooms}
    for p in files:
        for inc in INCLUDE.findall(p.read_text()):
            room = inc.rsplit("/", 1)[-1].rsplit(".", 1)[0]
            if room in rooms and room != p.stem:
                graph[p.stem].add(room)
    return graph


def test_no_include_circle_in_the_c_programs():
    found = circles(c_rooms())
    assert not found, "include circles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_include_checker_sees_a_circle(tmp_path):
    (tmp_path / "main.c").write_text('#include "opts.h"\n')
    (tmp_path / "opts.h").write_text("void parse(void);\n")
    (tmp_path / "opts.c").write_text('#include "main.h"\n#include "opts.h"\n')
    (tmp_path / "main.h").write_text("extern int shared;\n")
    assert circles(c_rooms([tmp_path])) == [["main", "opts"]]


# ... and the includes say what is used only when each name is declared in the header of the file
# that defines it: syscost.h declared parse_args, which options.c defines, so syscost.c's use of
# it was an edge to options.c that no include showed.  Every name an X.h declares (an extern
# variable, a function) is defined in X.c, where there is one.  The one exception is a hook:
# tw_cli.h's tw_usage, the usage text each program defines for the shared parser.
HOOKS = {("tw_cli.h", "tw_usage")}
DECL_EXTERN = re.compile(r"^extern\b[^;(]*?\b(\w+)\s*(?:\[[^\]]*\])?\s*;", re.M)
DECL_FUNC = re.compile(r"^(?!typedef|static|#|extern)\w[\w \t*]*?\b(\w+)\s*\([^;{]*\)\s*"
                       r"(?:__attribute__\s*\(\([^;]*\)\))?\s*;", re.M)


def declared(header_text):
    """The names a header declares: extern variables and function prototypes."""
    return set(DECL_EXTERN.findall(header_text)) | set(DECL_FUNC.findall(header_text))


def defines(text, name):
    """Whether a C file defines name at file scope (a function, or a variable with or without
    an initialiser), not static."""
    return re.search(rf"(?m)^(?!extern|static)(?:\w[\w \t*]*?\b)?{name}\s*"
                     rf"(?:\([^;]*$|(?:\[[^\]]*\])?\s*(?:=|;))", text) is not None


def misplaced(dirs=C_DIRS):
    """[(header, name)] for each name a header declares that its own .c does not define."""
    out = []
    for d in dirs:
        for h in sorted(d.glob("*.h")):
            c = h.with_suffix(".c")
            if not c.exists():
                continue            # a contract others fulfil (tw_syscall.h: the stubs)
            text = c.read_text()
            out += [(h.name, n) for n in sorted(declared(h.read_text()))
                    if (h.name, n) not in HOOKS and not defines(text, n)]
    return out


def test_each_header_declares_only_what_its_own_file_defines():
    wrong = misplaced()
    assert not wrong, "; ".join(f"{h} declares {n}, which {h[:-2]}.c does not define"
                                for h, n in wrong)


def test_the_definition_checker_sees_a_name_out_of_place(tmp_path):
    (tmp_path / "run.h").write_text("extern const char *const names[3];\nint cpu;\n"
                                    "void parse_args(int argc, char **argv);\nextern int n;\n")
    (tmp_path / "run.c").write_text("#include \"run.h\"\nint n = 1;\nconst char *const names[3];\n")
    (tmp_path / "opts.c").write_text("void\nparse_args(int argc, char **argv)\n{\n}\n")
    assert misplaced([tmp_path]) == [("run.h", "parse_args")]


# The command room keeps arguments and the call (issue 45): a class there is a service or a
# state machine that belongs below it (tw watch's Watch lived in cli/watch.py).  It holds
# none: the parsers' type is core.ui.ArgumentParser.


def classes_in(path):
    return {(path.name, n.name) for n in nodes(path)
            if isinstance(n, ast.ClassDef)}


def test_the_command_room_holds_no_service():
    found = set().union(*(classes_in(p) for p in (PKG / "cli").glob("*.py")))
    assert not found, sorted(found)


def test_the_class_checker_sees_a_service(tmp_path):
    p = tmp_path / "watch.py"
    p.write_text("class Watch:\n    def run(self):\n        while True:\n            pass\n")
    assert classes_in(p) == {("watch.py", "Watch")}
