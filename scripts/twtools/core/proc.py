"""Running programs."""
import os
import shutil
import subprocess


def is_root():
    return os.geteuid() == 0


def which(cmd):
    return shutil.which(cmd)


def run(cmd, timeout=600, check=False, **kw):
    """subprocess.run with text output captured and a timeout; cmd items become str."""
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    return subprocess.run([str(c) for c in cmd], timeout=timeout, check=check, **kw)
