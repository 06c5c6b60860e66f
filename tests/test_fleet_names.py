"""The playbook's inventory data never becomes code or a path outside its folders.

Why it can break: tw_run_args, tw_dest and tw_python went through `make ... REPORT_ARGS=...`
and /bin/sh as root on the host, so 'REPORT_ARGS=--quick $(shell ...)' ran even under make -n,
and a dynamic inventory (cloud tags) makes them attacker-chosen.  tw_safe_name kept '..', '.'
and '.hidden' (host '..' wrote its status.json to the checkout root and cloned into /var/tmp
with force), and turned 'db;1' and 'db 1' into one archive path.  This file templates the
role's own defaults and runs its own check (fleet/roles/timewrite/tasks/check.yml) with
ansible-playbook against a hostile inventory on this machine (connection local): each host's
name must be the one `tw unpack --host` gives, distinct, and every hostile variable refused.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from twtools.cli.unpack import folder_name

ROLE = ROOT / "fleet" / "roles" / "timewrite"
ANSIBLE = Path(sys.executable).parent / "ansible-playbook"
HOSTS = ["good-host.example", "..", ".", ".hidden", "db;1", "db 1", "evil$(touch PWNED)",
         "-rf", "a/b", "x\x1b]0;t\x07", "ünïcode"]
PLAY = """
- hosts: all
  gather_facts: false
  vars_files: {files}
  tasks:
    - block:
        - ansible.builtin.include_tasks: "{check}"
        - ansible.builtin.set_fact:
            tw_test: "{{{{ tw_test | default([]) + [{{'host': inventory_hostname, 'name': tw_safe_name}}] }}}}"
      rescue:
        - ansible.builtin.set_fact:
            tw_test: "{{{{ tw_test | default([]) + [{{'host': inventory_hostname, 'refused': ansible_failed_result.msg}}] }}}}"
"""
# After every play, each host's list of what its plays gave, written once: a file per host
# and play took a module run each (a Python process on this machine), most of the time.
WRITE = """
- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.copy:
        dest: "{out}"
        content: "{{{{ ansible_play_hosts_all | map('extract', hostvars, 'tw_test') | list | to_json }}}}"
      run_once: true
"""


def playbook(tmp_path, settings=({},)):
    """(the finished ansible-playbook, [{host: what the play gave it: its name, or why its
    variables were refused}] per setting).  Each setting (variables over the role's
    defaults, as an inventory would give them) is one play of one playbook: starting
    ansible-playbook costs more than a play, and the plays are independent of each other."""
    inv = {"all": {"hosts": {h: {"ansible_connection": "local",
                                 "ansible_python_interpreter": sys.executable} for h in HOSTS}}}
    (tmp_path / "inv.json").write_text(json.dumps(inv))
    plays = []
    for i, setting in enumerate(settings):
        given = tmp_path / f"vars{i}.json"       # JSON is YAML: a vars file
        given.write_text(json.dumps(setting))
        # later vars files override earlier ones: the setting over the defaults
        files = json.dumps([str(ROLE / "defaults" / "main.yml"), str(given)])
        plays.append(PLAY.format(files=files, check=ROLE / "tasks" / "check.yml"))
    out = tmp_path / "results.json"
    (tmp_path / "play.yml").write_text("".join(plays) + WRITE.format(out=out))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_HOME=str(tmp_path / "home"))
    p = subprocess.run([ANSIBLE, "-i", tmp_path / "inv.json", tmp_path / "play.yml"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert out.exists(), (p.stdout[-3000:], p.stderr[-2000:])
    per_host = json.loads(out.read_text())
    assert len(per_host) == len(HOSTS) and all(len(r) == len(settings) for r in per_host), \
        (per_host, p.stdout[-3000:])
    results = [{r[i]["host"]: r[i] for r in per_host} for i in range(len(settings))]
    assert all(set(got) == set(HOSTS) for got in results), results
    return p, results


@pytest.fixture(scope="module")
def names(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("names")
    p, (got,) = playbook(tmp)
    assert p.returncode == 0, p.stdout[-3000:]
    assert not list(tmp.glob("**/PWNED")) and not (ROOT / "PWNED").exists()
    return {h: d["name"] for h, d in got.items()}


def test_the_playbook_and_tw_unpack_name_every_host_alike(names):
    assert set(names) == set(HOSTS)
    for h, n in names.items():
        assert n == folder_name(h), (h, n, folder_name(h))


def test_no_name_is_a_path_or_hidden_and_none_collide(names):
    for n in names.values():
        assert "/" not in n and not n.startswith((".", "-")) and n not in ("", ".", "..")
        assert all(c.isascii() and (c.isalnum() or c in "._-") for c in n), n
    assert len(set(names.values())) == len(names), names
    assert names["good-host.example"] == "good-host.example"


HOSTILE_VARIABLES = [
    ("tw_run_args", "--quick $(touch PWNED)"),
    ("tw_run_args", "--force --out /etc"),
    ("tw_run_args", "--for --out /etc"),
    ("tw_run_args", "REPORT_ARGS=--quick"),
    ("tw_dest", "/var/tmp"),
    ("tw_dest", "/var/tmp/timewrite-fleet/../../etc"),
    ("tw_dest", "relative/path"),
    ("tw_python", "python3; touch PWNED"),
    ("tw_setup", "full; reboot"),
    ("tw_scan_path", "/usr/bin $(id)"),
]
GOOD = {"tw_run_args": "--quick --only doctor,variants,bench"}


@pytest.fixture(scope="module")
def settings_run(tmp_path_factory):
    """One playbook: a play per hostile variable, then one with good variables."""
    tmp = tmp_path_factory.mktemp("settings")
    p, results = playbook(tmp, [{var: value} for var, value in HOSTILE_VARIABLES] + [GOOD])
    assert not list(tmp.glob("**/PWNED")) and not (ROOT / "PWNED").exists()
    return p, dict(zip([*HOSTILE_VARIABLES, "good"], results))


@pytest.mark.parametrize("var,value", HOSTILE_VARIABLES)
def test_each_hostile_variable_is_refused_for_every_host(settings_run, var, value):
    _, results = settings_run
    for h, d in results[(var, value)].items():
        assert "refusing this host's variables" in d.get("refused", ""), (h, d)


def test_good_variables_pass(settings_run):
    """The play after the hostile ones: nothing of theirs stays behind to refuse these."""
    p, results = settings_run
    assert not any("refused" in d for d in results["good"].values()), p.stdout[-2000:]
