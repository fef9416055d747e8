"""app/page.py without a browser: the embedded JSON (safe inside <script>, plain values) and
a page that names nothing on the network (tests/engine/test_page_browser.py renders it)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from app.page import page_html, page_json, write_page
from tests.support.paths import ROOT
from tests.support.result_dirs import simulated_run


def _data(html: str) -> list:
    return json.loads(re.search(r'id="debate-data">(.*?)</script>', html, re.S).group(1))


def test_model_text_cannot_close_the_data_block_and_reads_back_unchanged():
    text = "</script><script>alert(1)</script><!-- & \u2028"
    view = {"run_id": "r", "question_id": "q", "question": text, "rounds": [{"turns": [{"text": text}]}]}
    html = page_html([view])
    assert html.count("</script>") == 3  # the data, the settings and the code: nothing in the data
    assert "<!--" not in html
    (back,) = _data(html)
    assert back["question"] == text and back["rounds"][0]["turns"][0]["text"] == text


def test_values_become_plain_json_and_agents_dicts():
    view = {
        "run_id": "r",
        "question_id": "q",
        "consensus": float("nan"),
        "weights": np.array([0.5, np.inf]),
        "n_agents": np.int64(2),
        "agents": [(0, "m", None, True), {"agent_id": 1, "model": "m", "group": None, "strong": False}],
    }
    (back,) = json.loads(page_json([view]))
    assert back["consensus"] is None and back["weights"] == [0.5, None] and back["n_agents"] == 2
    assert back["agents"][0] == {"agent_id": 0, "model": "m", "group": None, "strong": True}
    assert back["agents"][1]["agent_id"] == 1


def test_the_page_is_one_file_that_fetches_nothing(tmp_path):
    path = write_page([], tmp_path / "sub" / "p.html", title="<b>t</b>")
    html = path.read_text()
    assert "<title>&lt;b&gt;t&lt;/b&gt;</title>" in html
    assert not re.search(r"\b(src|href)\s*=\s*[\"']", html)  # no script, style sheet, font or image to load
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", html)
    assert "default-src 'none'" in html  # and the browser is told to refuse any fetch
    assert _data(html) == []


def test_the_policy_runs_only_the_page_script_by_its_hash():
    """No 'unsafe-inline' script: the policy names the one inline script by its sha256 (the
    browser test checks that the page still runs under it)."""
    html = page_html([{"run_id": "r", "question_id": "q"}])
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html).group(1)
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert "unsafe" not in directives["script-src"]
    (script,) = re.findall(r"<script>(.*?)</script>", html, re.S)  # the code; the data blocks run nothing
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    assert directives["script-src"] == f"'sha256-{digest}'"
    assert directives["default-src"] == "'none'"


@pytest.mark.skipif(sys.platform == "win32", reason="a file-size limit (RLIMIT_FSIZE) is POSIX")
@pytest.mark.slow  # two child processes each load the results and write a page under a size limit
def test_a_page_that_cannot_be_written_leaves_nothing_behind_and_names_the_file(tmp_path):
    """A write that fails half-way (here: past a file-size limit, as on a full disk) leaves no
    partial page and no temporary file, an older page as it was, and one line naming the page."""
    run = tmp_path / "run"
    simulated_run(run, n_questions=2, protocol="mad", agents=3, rounds=2)
    pages = tmp_path / "pages"
    pages.mkdir()
    page = pages / "debates.html"
    limit = 20_000  # bytes; the page is larger (its script alone is)
    code = f"""
import resource, signal, sys
from app.cli import main
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, resource.RLIM_INFINITY))
sys.exit(main(["show", {str(run)!r}, "--html", {str(page)!r}]))
"""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    for old in (None, "an older page"):
        if old is not None:
            page.write_text(old)
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.splitlines() == [
            f"debate: error: {page}: cannot write the page: File too large; nothing written"
        ]
        assert [p.name for p in pages.iterdir()] == ([] if old is None else [page.name])
        assert old is None or page.read_text() == old
    assert len(page_html([])) > limit
