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
  vars_files: ["{defaults}"]
  tasks:
    - block:
        - ansible.builtin.include_tasks: "{check}"
        - ansible.builtin.copy:
            dest: "{out}/{{{{ inventory_hostname | hash('sha1') }}}}.json"
            content: "{{{{ {{'host': inventory_hostname, 'name': tw_safe_name}} | to_json }}}}"
      rescue:
        - ansible.builtin.copy:
            dest: "{out}/{{{{ inventory_hostname | hash('sha1') }}}}.json"
            content: "{{{{ {{'host': inventory_hostname, 'refused': ansible_failed_result.msg}} | to_json }}}}"
"""


def playbook(tmp_path, extra=()):
    """{host: what the play wrote for it}: its name, or why its variables were refused."""
    inv = {"all": {"hosts": {h: {"ansible_connection": "local",
                                 "ansible_python_interpreter": sys.executable} for h in HOSTS}}}
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "inv.json").write_text(json.dumps(inv))
    (tmp_path / "play.yml").write_text(PLAY.format(defaults=ROLE / "defaults" / "main.yml",
                                                   check=ROLE / "tasks" / "check.yml", out=out))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_HOME=str(tmp_path / "home"))
    p = subprocess.run([ANSIBLE, "-i", tmp_path / "inv.json", tmp_path / "play.yml", *extra],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    got = {}
    for f in out.iterdir():
        d = json.loads(f.read_text())
        got[d["host"]] = d
    assert set(got) == set(HOSTS), (p.stdout[-3000:], p.stderr[-2000:])
    return p, got


@pytest.fixture(scope="module")
def names(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("names")
    p, got = playbook(tmp)
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


@pytest.mark.parametrize("var,value", [
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
])
def test_each_hostile_variable_is_refused_for_every_host(tmp_path, var, value):
    p, got = playbook(tmp_path, ["-e", json.dumps({var: value})])
    for h, d in got.items():
        assert "refusing this host's variables" in d.get("refused", ""), (h, d)
    assert not list(tmp_path.glob("**/PWNED")) and not (ROOT / "PWNED").exists()


def test_good_variables_pass(tmp_path):
    p, got = playbook(tmp_path, ["-e", json.dumps({"tw_run_args": "--quick --only doctor,variants,bench"})])
    assert p.returncode == 0 and not any("refused" in d for d in got.values()), p.stdout[-2000:]
