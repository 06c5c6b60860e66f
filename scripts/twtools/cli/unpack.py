"""tw unpack ARCHIVE --into DIR --host NAME: a results archive fetched from a host, unpacked
into the collection folder DIR/NAME/ by core.unpack (which refuses links, absolute names,
'..', oversized members and anything outside the archive's one folder, before writing).

The fleet playbook runs it on the controller for every archive it fetched, so that what a
host sent is checked by the same code, and tested by the same tests, as `tw fleet` itself.
"""
import hashlib
import re
from pathlib import Path

from ..core import ui, unpack
from ..core.ui import UserError

# A host folder's name, the one rule the playbook's tw_safe_name applies too
# (fleet/roles/timewrite/defaults/main.yml): the inventory name when it is plain, else its
# plain characters after a '_' and 10 hex digits of its SHA-1.  No name makes a path (/, ..,
# ., .hidden) or carries shell or terminal metacharacters, and two names never share a folder
# ('db;1' and 'db 1' both became 'db_1' under the old rule).
PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}")
UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def folder_name(host):
    if PLAIN.fullmatch(host):
        return host
    return "_" + UNSAFE.sub("_", host)[:80] + "-" + hashlib.sha1(host.encode()).hexdigest()[:10]


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
        e.message = f"host {args.host}: {e.message}"
        raise
    print(out)
    return 0
