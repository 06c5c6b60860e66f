"""`tw`'s man page and bash completion, both drawn from the argparse parsers the commands build,
so that neither can drift from `tw CMD --help` (make deb runs this; docs/packaging.md).

    python3 -m twtools.cli.manual man  > tw.1        (needs Debian's python3-argparse-manpage)
    python3 -m twtools.cli.manual bash > tw          (/usr/share/bash-completion/completions/tw)

Run from scripts/ with a Python that can import every command (the project's .venv).  The man
page is written by argparse-manpage (Debian's python3-argparse-manpage, `build_manpages`), which
walks the parser and its subcommands; the completion is the commands and, per command, its
options.
"""
import argparse
import importlib
import sys

from . import COMMANDS, top_parser

DEBIAN_DIST_PACKAGES = "/usr/lib/python3/dist-packages"


def full_parser():
    """tw's parser with every command's own parser under it, as `tw CMD` builds each one."""
    parser, sub = top_parser()
    for name, (module, helptext) in COMMANDS.items():
        cmd = sub.add_parser(name, help=helptext, description=helptext,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        importlib.import_module(f"twtools.{module}").add_arguments(cmd, name)
    return parser


def manpage():
    try:
        from build_manpages.manpage import Manpage
    except ImportError:
        # Debian's package is in the system Python's path, not in a venv's: argparse-manpage
        # imports only the standard library, so its folder is added for it alone.
        sys.path.append(DEBIAN_DIST_PACKAGES)
        from build_manpages.manpage import Manpage
    parser = full_parser()
    parser.man_short_description = "how programs enter the Linux kernel on x86, and what it costs"
    parser._manpage = [{"heading": "see also",
                        "content": "/usr/share/doc/timewrite/, and the project's docs/ "
                                   "(docs/watch.md for tw watch, docs/packaging.md for the "
                                   "package)."}]
    return str(Manpage(parser))


def _options(parser):
    return sorted(o for a in parser._actions for o in a.option_strings)


def bash_completion():
    parser = full_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    lines = ["# bash completion for tw: generated from its argparse parsers at build time "
             "(twtools.cli.manual)",
             "_tw() {",
             "    local cur=${COMP_WORDS[COMP_CWORD]} cmd= i",
             "    for ((i = 1; i < COMP_CWORD; i++)); do",
             "        case ${COMP_WORDS[i]} in -*) ;; *) cmd=${COMP_WORDS[i]}; break ;; esac",
             "    done",
             "    local opts",
             "    case $cmd in",
             "    '') opts='" + " ".join(_options(parser) + list(sub.choices)) + "' ;;"]
    for name, p in sub.choices.items():
        lines.append(f"    {name}) opts='{' '.join(_options(p))}' ;;")
    lines += ["    esac",
              "    if [[ $cur == -* || -z $cmd ]]; then",
              "        mapfile -t COMPREPLY < <(compgen -W \"$opts\" -- \"$cur\")",
              "    else",
              "        mapfile -t COMPREPLY < <(compgen -f -- \"$cur\")",
              "    fi",
              "}",
              "complete -o filenames -F _tw tw", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what not in ("man", "bash"):
        sys.exit("usage: python3 -m twtools.cli.manual man|bash")
    sys.stdout.write(manpage() if what == "man" else bash_completion())
