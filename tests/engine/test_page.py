"""engine/page.py without a browser: the embedded JSON (safe inside <script>, plain values) and
a page that names nothing on the network (tests/engine/test_page_browser.py renders it)."""

from __future__ import annotations

import json
import re

import numpy as np

from engine.page import page_html, page_json, write_page


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
