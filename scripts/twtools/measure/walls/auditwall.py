"""The audit wall: rules loaded for the run, and the host's audit rules exactly as found after.

What separates A from B is the audit context a process gets at fork (audit_alloc: once audit
has ever been enabled in the boot, every new task gets it unless a task rule says never).
Both sides' programs are forked by the same kind of parent, a `sh` that setpriv started under
a group id: A's under a group no process or user has, named by a rule `-A never,task -F gid=G`
(a task rule sees the new task's credentials, its parent's, at fork), so A's syscost gets no
context; B's under tw's own group, so it gets what every other process on the host gets.  (A
first version forked A's directly from tw and B's from a sh, matched by tw's pid: on a host
where audit was never enabled, so that neither side had a context, it called 9 of 28 cells
different, by 0.2-0.5 ns on the fast cells and 10 ns on 32-bit int 0x80: who forks a process
is itself a factor.)  Audit must be on (enabled 1) for the rules to run: where it is off, only
--enable-audit turns it on, since that leaves every process started later in this boot paying
until reboot (docs/walls.md).

The rules are added and deleted by a guard, a process of its own (its own session, so the
terminal's signals are not its) that tw talks to over a pipe: tw asks it to add each rule,
and it adds it with auditctl and answers.  It deletes exactly the rules it added itself, in
reverse order, and sets the enabled flag back if it turned it on, when tw says the run is
over or when the pipe closes without a word because tw died (SIGKILL included): a rule the
host already had, identical to one of the file's (auditctl answers "Rule exists"), is never
tw's to delete, and an add that was under way when tw died is finished and then undone, since
the guard, not tw, ran it.
"""
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from ...core import paths, proc
from ...machine.hostwalls import audit_status, auditctl, rules_now
from .base import Run, Wall
from .spec import AUDIT_RULES, WallError, named, read_file

# The guard: reads JSON commands, one a line: ["add", words] -> "added" | "exists" |
# "fail <message>"; ["enable"] -> "enabled" | "fail ..."; ["down"] -> the errors of taking
# down what it added, as JSON, then exits.  End of input without "down": tw died; take down
# all the same.
GUARD = r'''
import json, subprocess, sys
ctl = sys.argv[1]
added, turned_on = [], False

def run(words):
    return subprocess.run([ctl] + words, capture_output=True, text=True, timeout=60)

def undo(w):
    return (["-d"] + w[1:]) if w[0] in ("-a", "-A") else (["-W"] + w[1:])

def say(*parts):
    sys.stdout.write(" ".join(parts) + "\n")
    sys.stdout.flush()

def down():
    global turned_on
    errors = []
    while added:
        w = added.pop()
        p = run(undo(w))
        if p.returncode:
            errors.append(" ".join(undo(w)))
    if turned_on and run(["-e", "0"]).returncode:
        errors.append("-e 0")
    turned_on = False
    return errors

for line in sys.stdin:
    cmd = json.loads(line)
    if cmd[0] == "add":
        p = run(cmd[1])
        msg = (p.stderr or p.stdout or "").strip().replace("\n", " ")
        if p.returncode == 0:
            added.append(cmd[1])
            say("added")
        elif "rule exists" in msg.lower():
            say("exists")
        else:
            say("fail", msg or f"exit {p.returncode}")
    elif cmd[0] == "enable":
        p = run(["-e", "1"])
        if p.returncode == 0:
            turned_on = True
            say("enabled")
        else:
            say("fail", (p.stderr or p.stdout or "").strip().replace("\n", " "))
    elif cmd[0] == "down":
        say(json.dumps(down()))
        sys.exit(0)
down()
'''


class Guard:
    """The process that adds tw's audit rules and takes exactly those away again."""

    def __init__(self):
        self.p = subprocess.Popen([sys.executable, "-c", GUARD, auditctl()],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, bufsize=1,
                                  start_new_session=True)
        self.added, self.host_had = [], []

    def _ask(self, *cmd):
        try:
            self.p.stdin.write(json.dumps(list(cmd)) + "\n")
            self.p.stdin.flush()
            return self.p.stdout.readline().strip()
        except (BrokenPipeError, OSError):
            return "fail the guard process is gone"

    def add(self, words):
        """Add one rule: True when the guard added it, False when the host had it already;
        WallError for auditctl's refusal."""
        r = self._ask("add", list(words))
        if r == "added":
            self.added.append(list(words))
            return True
        if r == "exists":
            self.host_had.append(list(words))
            return False
        raise WallError(f"auditctl {shlex.join(words)} failed: {r.removeprefix('fail ')}")

    def enable(self):
        r = self._ask("enable")
        if r != "enabled":
            raise WallError(f"auditctl -e 1 failed: {r.removeprefix('fail ')}")

    def down(self):
        """Take down what the guard added (and the enabled flag): the errors, as auditctl
        words of what could not be undone."""
        r = self._ask("down")
        try:
            errors = json.loads(r)
        except ValueError:
            errors = [f"the guard did not answer ({r or 'nothing'})"]
        try:
            self.p.communicate(timeout=30)
        except (subprocess.TimeoutExpired, OSError, ValueError):
            proc.kill_group(self.p, grace=0.5)
        return errors


def unused_gid():
    """A group id no group of this host's and no running process has: the audit wall's never
    rule names it, so that it exempts tw's A side and nothing else."""
    import grp
    used = set()
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"Gid:"):
                        used.update(int(x) for x in line.split()[1:])
                        break
        except (OSError, ValueError):
            continue
    gid = 2147480000 + os.getpid() % 1000
    while True:
        try:
            grp.getgrgid(gid)
        except KeyError:
            if gid not in used:
                return gid
        gid += 1


def read_rules(path, spec=None):
    """The rule lines of an auditctl rules file: -a/-A (a syscall or task rule) and -w (a
    watch) only.  A line that would change audit itself (-D, -e, -f, -b, -r, ...) is refused:
    tw adds rules for a run and takes them away, nothing else."""
    spec = spec or f"audit:{path}"
    text = read_file(Path(path), spec, "audit rules file").decode("utf-8", "replace")
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            words = shlex.split(line)
        except ValueError as e:
            raise WallError(f"--wall {spec}: line {i}: {e}") from None
        if words[0] not in ("-a", "-A", "-w"):
            raise WallError(f"--wall {spec}: line {i} starts with {words[0]!r}",
                            "a rules file for a wall holds -a, -A and -w lines only")
        out.append(words)
    if not out:
        raise WallError(f"--wall {spec}: no rule in it")
    return out


def rules_of(what, spec):
    """(rules, source) of an audit spec's word: none for context, else its file's."""
    if what == "context":
        return [], None
    path = named(AUDIT_RULES, what, ".rules")
    return read_rules(path, spec), paths.shown(path)


class AuditWall(Wall):
    kind = "audit"

    def __init__(self, spec, enable=False):
        super().__init__(spec)
        self.what, self.enable = spec["what"], enable
        self.guard, self.before_state, self.gid = None, None, None
        self.turned_on = False
        self.rules, self.source = rules_of(self.what, self.spec)
        if auditctl() is None:
            raise WallError(f"--wall {self.spec}: auditctl is not installed",
                            "it comes with Debian's auditd package; `make test` unpacks it "
                            "into build/auditd without starting auditd (docs/walls.md)")
        if not proc.is_root():
            raise WallError(f"--wall {self.spec}: loading audit rules needs root")
        self.check_host()          # refused before anything is made: no output folder left

    def check_host(self):
        """audit's state now, refused where the wall cannot go up: before anything is made."""
        st = audit_status()
        if st["enabled"] is None:
            raise WallError(f"--wall {self.spec}: {st['why']}")
        if st["enabled"] == 2:
            raise WallError(f"--wall {self.spec}: audit is locked (enabled 2): its rules cannot "
                            "change until reboot")
        if self.rules and st["enabled"] == 0 and not self.enable:
            raise WallError(
                f"--wall {self.spec}: audit is off here, and its rules only run with it on",
                "turning it on (auditctl -e 1) makes every process started later in this boot "
                "pay for audit on every call until reboot, even once it is off again, unless "
                "a task rule says never; pass --enable-audit to accept that (docs/walls.md)")
        return st

    def up(self, out_dir, cells):
        st = self.check_host()
        self.before_state = st
        self.gid = unused_gid()
        self.guard = Guard()
        try:
            self.guard.add(self.never_rule())
            for words in self.rules:
                self.guard.add(words)
            if self.rules and st["enabled"] == 0:
                self.guard.enable()
                self.turned_on = True
        except BaseException:
            self.down()
            raise
        return self.describe()

    def never_rule(self):
        return ["-A", "never,task", "-F", f"gid={self.gid}"]

    def _forked_by_sh(self, gid):
        """A command run as a child of a sh whose group is gid (setpriv, util-linux)."""
        return lambda cmd: ["setpriv", f"--regid={gid}", "--clear-groups", "--", "/bin/sh",
                            "-c", '"$@"; exit $?', "sh"] + cmd

    def describe(self):
        st = self.before_state or {}
        return {"kind": "audit", "spec": self.spec, "rules": [shlex.join(w) for w in self.rules],
                "enabled_before": st.get("enabled"), "rules_before": st.get("rules"),
                "turned_on": self.turned_on,
                "host_had": [shlex.join(w) for w in (self.guard.host_had if self.guard else [])],
                "separation": f"-A never,task -F gid={self.gid}: both sides' programs are "
                              "forked by a sh; A's sh runs under that group, so A's processes "
                              "get no audit context, B's under tw's own, so they get what the "
                              "host gives every new process"}

    def before(self, variant, op, abi):
        return Run([], self._forked_by_sh(os.getgid()))

    def bare_wrapper(self, cmd):
        """A's program forked by the same kind of sh as B's, under the group the never rule
        names."""
        return self._forked_by_sh(self.gid)(cmd)

    def down(self):
        """Every rule tw added deleted, audit's flag set back, and the rules compared with
        the list before: {'rules_after', 'restored', 'left_behind', 'host_had'}."""
        errors = self.guard.down() if self.guard is not None else []
        host_had = [shlex.join(w) for w in self.guard.host_had] if self.guard else []
        self.guard = None
        after = rules_now()
        before = (self.before_state or {}).get("rules")
        out = {"rules_after": after, "restored": before == after and not errors,
               "errors": errors, "host_had": host_had,
               "left_behind": None if self.before_state is None or
               self.before_state.get("enabled") != 0 or not self.turned_on else
               "audit was turned on for the run: every process started since pays for its "
               "audit context until reboot, unless a task rule says never "
               "(auditctl -a never,task)"}
        self.turned_on = False
        return out
