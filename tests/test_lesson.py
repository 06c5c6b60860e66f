"""tw lesson and tw lesson --class, for real: a quick run measured here, the lesson built from it
with live evidence, and both pages rendered in chromium at 1280x900 and at a phone's width.

Checked: every chapter (one per registry mechanism) has its diagram, an image that loaded,
whose SVG carries a measured figure (this machine's, or an atlas machine's where the mechanism
does not run here); the mechanism the support oracle refuses here keeps its chapter and states
the reason; every exercise's check command exists and runs (exit 0); the answers are hidden
until opened; the page never scrolls sideways, at either width; outside text (a host name with
markup) arrives escaped.  (The class page, which measures nothing, is test_lesson_class.py.)

Why it can break: a chain step the diagram cannot place, a figure missing from a chapter, a
check command renamed in the CLI, an exporter that lets a host name's markup through, a wide
table or code block that widens the page on a phone.  Skips: not root (bpftrace, the census
check), or chromium missing for a non-root user (said so).
"""
import base64
import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import ROOT, need_root
from test_browser import render as render_page

DESKTOP, PHONE = (1280, 900), (390, 844)
FACTS = """(async () => {
  const imgs = [...document.images];
  await Promise.all(imgs.map(i => i.decode().then(() => true, () => false)));
  const chapters = [...document.querySelectorAll('h2')].filter(h => /\\(\\d\\d-[a-z0-9]+\\)$/.test(h.innerText))
    .map(h => { let n = h.nextElementSibling, img = null, text = '';
                while (n && n.tagName !== 'H2') { if (!img && n.querySelector && n.querySelector('img')) img = n.querySelector('img');
                                                    text += n.innerText + '\\n'; n = n.nextElementSibling; }
                return {title: h.innerText, text: text.slice(0, 4000),
                        img: img ? {ok: img.naturalWidth > 0, src: img.src.slice(0, 300000)} : null}; });
  return {viewport: [innerWidth, innerHeight], scrollWidth: document.documentElement.scrollWidth,
          chapters, details: [...document.querySelectorAll('details')].map(d => d.open),
          checks: [...document.querySelectorAll('p')].map(p => p.innerText).filter(t => t.startsWith('Check: ')),
          h1: document.querySelector('h1') ? document.querySelector('h1').innerText : null,
          body: document.body.innerText.slice(0, 200000)};
})()"""


def tw(*args, timeout=900):
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "tw"), *map(str, args)],
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]
    return p


def render(path, size, shot, workdir):
    return render_page(path, shot, tempfile.mkdtemp(prefix="browser-", dir=workdir), size[0],
                       size[1], facts=FACTS, mobile=size[0] < 600)


def svg_of(src):
    assert src.startswith("data:image/svg+xml;base64,"), src[:60]
    return base64.b64decode(src.split(",", 1)[1]).decode()


@pytest.fixture(scope="module")
def lesson(tmp_path_factory, quick_run):
    need_root()
    tmp = tmp_path_factory.mktemp("lesson")
    res = tmp / "res"
    # the test run's one quick run (conftest.quick_run), copied: its meta.json is changed below
    assert (quick_run[0] / "percall.json").exists(), quick_run[1].stderr[-2000:]
    shutil.copytree(quick_run[0], res, symlinks=True)
    # a host name with markup: outside text, which must arrive as text
    meta = json.loads((res / "meta.json").read_text())
    meta["host"] = "lab<b>7</b> [x](javascript:alert(1))"
    (res / "meta.json").write_text(json.dumps(meta))
    out = tmp / "out"
    tw("lesson", "--results", res, "--out", out)
    return {"res": res, "out": out, "tmp": tmp,
            "variants": {v["name"]: v for v in json.loads((res / "variants.json").read_text())}}


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1280x900", "phone-390"])
def test_every_chapter_has_its_diagram_with_a_figure(lesson, size, tmp_path):
    shot = tmp_path / f"lesson-{size[0]}.png"
    facts, errors = render(lesson["out"] / "lesson.html", size, shot, tmp_path)
    print(f"\nlesson.html first screen at {size[0]}x{size[1]}: {shot}")
    assert errors == [], errors
    assert facts["scrollWidth"] <= size[0], f"the page is {facts['scrollWidth']} px wide"
    from twtools.machine import registry
    names = [m.name for m in registry.mechanisms()]
    seen = [re.search(r"\((\d\d-[a-z0-9]+)\)$", c["title"]).group(1) for c in facts["chapters"]]
    assert sorted(seen) == sorted(names)
    for c in facts["chapters"]:
        assert c["img"] and c["img"]["ok"], c["title"]
        svg = svg_of(c["img"]["src"])
        assert re.search(r"(measured here|on the atlas machine [^:]+): [0-9.]+ (ns|µs)", svg), \
            (c["title"], svg[-600:])
        assert "<script" not in svg
    # the answers wait to be asked for
    assert facts["details"] and not any(facts["details"])


def test_the_mechanism_that_does_not_run_here_says_why(lesson, tmp_path):
    facts, _ = render(lesson["out"] / "lesson.html", DESKTOP, tmp_path / "s.png", tmp_path)
    refused = [n for n, v in lesson["variants"].items() if not v.get("supported")]
    if not refused:
        pytest.skip("every mechanism runs on this machine (the support oracle refuses none)")
    for c in facts["chapters"]:
        name = re.search(r"\((\d\d-[a-z0-9]+)\)$", c["title"]).group(1)
        if name in refused:
            assert "Not on this machine:" in c["text"], c["text"][:500]
            reason = lesson["variants"][name]["reason"]
            assert reason.split(":")[0][:40] in c["text"], (reason, c["text"][:800])


def test_every_check_command_exists_and_runs(lesson, tmp_path):
    facts, _ = render(lesson["out"] / "lesson.html", DESKTOP, tmp_path / "s.png", tmp_path)
    assert len(facts["checks"]) >= 4
    for text in facts["checks"]:
        cmd = shlex.split(text.removeprefix("Check: ").strip())
        exe = cmd[0]
        if exe == "scripts/tw":
            cmd = [sys.executable, str(ROOT / "scripts" / "tw"), *cmd[1:]]
        else:
            assert shutil.which(exe), f"{exe} is not installed: {text}"
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, (text, p.stderr[-1500:])


def test_outside_text_arrives_escaped(lesson):
    html = (lesson["out"] / "lesson.html").read_text()
    md = (lesson["out"] / "lesson.md").read_text()
    assert "lab&lt;b&gt;7&lt;/b&gt;" in html and "<b>7</b>" not in html
    assert 'href="javascript' not in html
    assert "lab\\<b\\>7" in md
