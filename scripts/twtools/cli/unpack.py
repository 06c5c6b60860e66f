"""tw unpack ARCHIVE --into DIR --host NAME: a results archive fetched from a host, unpacked
into the collection folder DIR/NAME/ by core.unpack (which refuses links, absolute names,
'..', oversized members and anything outside the archive's one folder, before writing).

The fleet playbook runs it on the controller for every archive it fetched, so that what a
host sent is checked by the same code, and tested by the same tests, as `tw fleet` itself.
"""
import re
from pathlib import Path

from ..core import escape, ui, unpack
from ..core.ui import UserError

# A host folder's name: the inventory name with anything but these replaced, so that no
# host name can make a path (/, ..) or carry shell or terminal metacharacters into one.
SAFE = re.compile(r"[^A-Za-z0-9._-]")


def folder_name(host):
    name = SAFE.sub("_", host)[:100]
    return "_" + name if name in ("", ".", "..") or name.startswith(".") else name


def add_arguments(p, name):
    p.add_argument("archive", help="the tar archive (optionally compressed) the host sent")
    p.add_argument("--into", required=True, metavar="DIR", help="the collection folder")
    p.add_argument("--host", required=True, metavar="NAME",
                   help="the host it came from (its folder is NAME with every character "
                        "but letters, digits, '.', '_' and '-' replaced by '_')")


def main(args, name):
    into = Path(args.into)
    if into.is_symlink():
        raise UserError(f"{into}: is a symbolic link; give the real collection folder")
    host_dir = into / folder_name(args.host)
    if host_dir.is_symlink():
        raise UserError(f"{host_dir}: is a symbolic link; refusing to write through it")
    try:
        out = unpack.unpack(args.archive, host_dir)
    except ui.DataError as e:
        e.message = f"host {escape.terminal(args.host)}: {e.message}"
        raise
    print(out)
    return 0
