"""`tw doctor`: what this machine is, how it enters the kernel, and which instruments work.

The facts come from twtools.machine.doctor (a Doctor reading one system root); the table
from twtools.present.doctor.  `--record DIR` writes the facts as a system root confined to
DIR; `--sysroot DIR` reads one, every file bounded and regular (a FIFO or a gzip bomb in a
recording is one line naming it, exit 3).
"""
import json
import os
from pathlib import Path

from ..core import files, ui
from ..machine import doctor
from ..present import doctor as present


def add_arguments(parser, name):
    parser.add_argument("--json", action="store_true", help="print fingerprint.json to stdout")
    parser.add_argument("--out", metavar="DIR", help="write DIR/fingerprint.json")
    parser.add_argument("--fs", metavar="PATH", default=".",
                        help="path whose file system the runs will write to (default: .)")
    parser.add_argument("--sysroot", metavar="DIR", default=os.environ.get("TW_SYSROOT", "/"),
                        help="read /proc and /sys under DIR, e.g. a recording (default / or $TW_SYSROOT)")
    parser.add_argument("--record", metavar="DIR",
                        help="write this machine's facts under DIR as a system root that "
                             "--sysroot can replay (tests/fixtures/machines/ holds such "
                             "recordings); nothing is written outside DIR, and a symbolic "
                             "link inside it is refused, not followed")


def main(args, name):
    if args.record:
        dest, v = doctor.record(args.record)
        ui.progress(f"recorded this machine's facts under {dest} (32-bit vDSO: "
                    f"{v.get('form') or v.get('why')})")
        return 0
    if not Path(args.sysroot).is_dir():
        raise ui.UserError(f"--sysroot {args.sysroot}: not a directory",
                           "give a system root, e.g. a recording made with tw doctor --record")
    fp = doctor.Doctor(root=args.sysroot).fingerprint(fs_path=args.fs)
    if args.out:
        files.write_json(Path(args.out) / "fingerprint.json", fp)
        ui.progress(f"wrote {Path(args.out) / 'fingerprint.json'}")
    if args.json:
        print(json.dumps(fp, indent=1))
    else:
        print(present.format_table(fp))
    return 0
