"""``debate show --html``'s page in a real headless Chromium (Selenium): stored simulated-model
runs (GroupDebate, CortexDebate, a 70-agent MAD) written to one HTML file, opened via file://.

Skipped, with the reason, only where no Chromium / chromedriver / Selenium is found
(scripts/setup.sh installs them on Debian/Ubuntu)."""

from __future__ import annotations

import copy
import json
import re
import tempfile
from pathlib import Path
from urllib.parse import quote

import pytest

from app.cli import main as cli_main
from app.page import FULL_GRAPH_AGENTS, write_page
from app.transcript import PREDICATES, debate_views
from engine.results import load
from tests.support.needs import need_browser
from tests.support.result_dirs import simulated_run
from tests.support.scripts import load_script

# A real headless Chromium per test (seconds each): CI runs them; the inner loop checks the page
# without a browser (tests/engine/test_page.py).
pytestmark = pytest.mark.slow

page_screenshot = load_script("page_screenshot")


def word_overlap(texts: list[str]) -> list[list[float]]:
    """CortexDebate's similarity without an embedding model: the Jaccard overlap of word sets."""
    words = [set(t.split()) for t in texts]
    return [
        [1.0 if i == j else len(a & b) / max(1, len(a | b)) for j, b in enumerate(words)] for i, a in enumerate(words)
    ]


HOSTILE = '</script><script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> <!-- &amp;'


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """Run folders of three simulated runs and their DebateViews, plus two hand-edited views."""
    out = tmp_path_factory.mktemp("runs")
    simulated_run(
        out / "group",
        n_questions=4,
        protocol="group",
        agents=4,
        rounds=3,
        groups="2+2",
        stage_rounds=1,
        models="big*1,small*3",
    )
    simulated_run(out / "cortex", n_questions=2, protocol="cortex", agents=4, rounds=2, similarity=word_overlap)
    simulated_run(out / "wide", n_questions=1, protocol="mad", agents=FULL_GRAPH_AGENTS + 6, rounds=2)
    views = debate_views(load(out))
    # a debate whose model text and question try to break out of the page
    hostile = copy.deepcopy(next(v for v in views if v.protocol == "group"))
    hostile.question_id = "hostile"
    hostile.question = HOSTILE
    hostile.rounds[0].turns[0].text = HOSTILE
    hostile.rounds[0].turns[1].answer = HOSTILE
    # a CortexDebate debate whose round 1 pruned edges (graphs.pruned), under a searchable id
    pruned = copy.deepcopy(
        next(v for v in views if v.protocol == "cortex" and any(t.pruned for t in v.rounds[1].turns))
    )
    pruned.question_id = "pruned"
    pruned.stopped_early, pruned.options["rounds"] = True, len(pruned.rounds) + 1  # as if the agents agreed early
    return out, [*views, hostile, pruned]


@pytest.fixture(scope="module")
def browser():
    need_browser()
    driver = page_screenshot.start_browser()
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def page_file(stored, tmp_path_factory):
    _, views = stored
    return write_page(views, tmp_path_factory.mktemp("page") / "debates.html", title="t")


@pytest.fixture
def page(stored, browser, page_file):
    """The page of every stored debate and the two hand-edited ones, freshly opened in the
    browser; the views as the page's data (dicts) and as DebateViews."""
    _, views = stored
    browser.get(page_file.as_uri())
    return browser, [v.to_dict() for v in views], views


def severe(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def items(driver):
    return driver.find_elements("css selector", "#qlist li.qitem")


def select(driver, views, view) -> None:
    """Click the list entry of ``view`` (the 'all' filter on, no search)."""
    driver.find_element("css selector", 'button[data-filter="all"]').click()
    at = next(i for i, v in enumerate(views) if v is view)
    driver.find_element("css selector", f'#qlist li[data-index="{at}"]').click()


def graphs(driver):
    return driver.find_elements("css selector", "#detail svg.round-graph")


def expected_edges(rnd) -> set[tuple[int, int]]:
    """The src -> dst pairs of a round: whom each call (summaries too) read, self-reads left out."""
    out = set()
    for t in [*rnd["turns"], *rnd["summaries"]]:
        out |= {(s, t["node"]) for s in t["read"] if s != t["node"]}
    return out


def test_every_debate_renders_without_a_browser_error(page):
    driver, views, _ = page
    assert severe(driver) == []
    assert len(items(driver)) == len(views)
    for i in range(len(views)):
        driver.find_element("css selector", f'#qlist li[data-index="{i}"]').click()
        assert len(graphs(driver)) == len(views[i]["rounds"]) > 0
    assert severe(driver) == []


def test_the_address_hash_opens_its_debate_and_a_malformed_one_the_first(stored, browser, page_file):
    """``#run/question`` (as the page sets it) opens that debate; a hash that is not valid
    percent-encoding (``%E0%A4%A``: a cut link) opens the first one, without a script error."""
    _, views = stored
    for at, tail in ((2, quote(f"{views[2].run_id}/{views[2].question_id}", safe="")), (0, "%E0%A4%A")):
        browser.get("about:blank")  # a new load, not a jump within the page open
        browser.get(f"{page_file.as_uri()}#{tail}")
        assert severe(browser) == []
        assert len(items(browser)) == len(views)
        title = browser.find_element("css selector", "#detail h2").text
        assert views[at].question_id in title and f"run {views[at].run_id}" in title
        assert browser.find_element("css selector", "#qlist li.sel").get_attribute("data-index") == str(at)


def test_group_debate_draws_every_agent_its_summaries_groups_and_edges(page):
    driver, views, _ = page
    view = next(v for v in views if v["protocol"] == "group")
    select(driver, views, view)
    drawn = graphs(driver)
    assert [g.get_attribute("data-round") for g in drawn] == [str(r["round"]) for r in view["rounds"]]
    seen: list[set[int]] = []
    for svg, rnd in zip(drawn, view["rounds"], strict=True):
        assert len(svg.find_elements("css selector", "g.agent-node")) == view["n_agents"] == 4
        assert len(svg.find_elements("css selector", "g.group-box")) == 2
        summaries = {int(g.get_attribute("data-node")) for g in svg.find_elements("css selector", "g.summary-node")}
        made = {s["node"] for s in rnd["summaries"]} | {n for t in rnd["turns"] for n in t["read"] if n < 0}
        assert summaries == made and made <= {-1, -2}  # a summary is drawn from the round it is made
        seen.append(summaries)
        lines = svg.find_elements("css selector", ".edge")
        drawn_edges = {(int(e.get_attribute("data-src")), int(e.get_attribute("data-dst"))) for e in lines}
        assert drawn_edges == expected_edges(rnd) and len(lines) == len(drawn_edges)
    assert any(expected_edges(r) for r in view["rounds"])  # the check above compared real edges
    assert {-1, -2} in seen  # the rounds after a stage draw both summaries
    strong = {a["agent_id"] for a in view["agents"] if a["strong"]}
    assert len(strong) == 1  # the one agent of the strongest model, ringed in every round
    for svg in drawn:
        assert {int(g.get_attribute("data-agent")) for g in svg.find_elements("css selector", "g.strong")} == strong
    # round 0 is the first answers, each node coloured by its answer: equal answers, equal colours
    first = {t["agent_id"]: t["answer"] for t in view["rounds"][0]["turns"] if not t["side"]}
    fill = {
        int(g.get_attribute("data-agent")): g.find_element("css selector", "circle").get_attribute("fill")
        for g in drawn[0].find_elements("css selector", "g.agent-node")
    }
    for a in first:
        for b in first:
            assert (fill[a] == fill[b]) == (first[a] == first[b])
    assert "round 0 — first answers" in driver.find_element("css selector", "#detail h3").text
    assert view["simulated"] and "SIMULATED" in driver.find_element("css selector", "#simulated").text
    # each call folds out its reply and the prompt messages it was sent (the prompts table)
    turn = view["rounds"][-1]["turns"][0]
    driver.execute_script("document.querySelectorAll('#detail details').forEach((d) => { d.open = true; })")
    blocks = driver.find_elements("css selector", f'details.turn[data-agent="{turn["agent_id"]}"]')
    shown = [b.find_element("css selector", "details.prompt pre").text for b in blocks]
    assert len(blocks) == len(view["rounds"])  # its call in every round
    assert turn["prompt"] and turn["prompt"][-1]["content"].split("\n")[0].strip() in shown[-1]


def test_filters_keep_what_debate_show_selects_and_search_narrows(page):
    driver, views, objects = page
    for name, keep in PREDICATES.items():  # wrong, right, disagree, changed: the page's filters
        driver.find_element("css selector", f'button[data-filter="{name}"]').click()
        shown = {int(li.get_attribute("data-index")) for li in items(driver)}
        assert shown == {i for i, v in enumerate(objects) if keep(v)}, name
    wrong = [v for v in views if v["correct"] is False]
    assert wrong and len(wrong) < len(views)  # the simulated runs have both: the filter changed the list
    driver.find_element("css selector", 'button[data-filter="all"]').click()
    assert len(items(driver)) == len(views)
    search = driver.find_element("css selector", "#search")
    search.send_keys("pruned")
    assert [li.get_attribute("data-index") for li in items(driver)] == [str(len(views) - 1)]
    search.clear()
    search.send_keys(" ")  # an input event: the cleared box shows all again
    assert len(items(driver)) == len(views)
    assert severe(driver) == []


def test_model_text_is_shown_as_text_and_runs_nothing(page):
    driver, views, _ = page
    hostile = next(v for v in views if v["question_id"] == "hostile")
    select(driver, views, hostile)
    assert driver.execute_script("return window.__pwned === undefined")
    assert driver.find_element("css selector", "#question-text").get_attribute("textContent") == HOSTILE
    replies = [p.get_attribute("textContent") for p in driver.find_elements("css selector", "pre.reply")]
    assert HOSTILE in replies
    assert driver.find_elements("css selector", "#detail img, #detail script") == []
    assert len(items(driver)) == len(views)  # the list after it still there: the data block was not cut
    assert severe(driver) == []


def test_pruned_edges_are_hidden_until_asked_and_shares_set_the_width(page):
    """Round 1 of a CortexDebate: its pruned edges (dashed) are drawn hidden, the legend's box
    shows them; kept edges are as wide as their share of the reader's weight; each reader's
    shares, kept and pruned, sum to 100 % (to rounding)."""
    driver, views, _ = page
    pruned = next(v for v in views if v["question_id"] == "pruned")
    select(driver, views, pruned)
    stored = {(src, t["node"]) for t in pruned["rounds"][1]["turns"] for src in t["pruned"]}
    svg = graphs(driver)[1]
    cut = svg.find_elements("css selector", ".edge.pruned")
    assert {(int(e.get_attribute("data-src")), int(e.get_attribute("data-dst"))) for e in cut} == stored
    assert stored and all(e.get_attribute("stroke-dasharray") and not e.is_displayed() for e in cut)
    kept = svg.find_elements("css selector", ".edge:not(.pruned)")
    assert kept and all(e.is_displayed() and not e.get_attribute("stroke-dasharray") for e in kept)
    if any(w != 1 for t in pruned["rounds"][1]["turns"] for w in t["weights"] or []):
        assert len({e.get_attribute("stroke-width") for e in kept}) > 1
    legends = driver.find_elements("css selector", ".legend")
    assert f"show the {len(stored)} pruned edge" in legends[1].text and "pruned" not in legends[0].text
    legends[1].find_element("css selector", "input.show-pruned").click()
    assert all(e.is_displayed() for e in cut)
    heads = driver.find_elements("css selector", "details.turn > summary")
    weighted = [h.text for h in heads if "read " in h.text and "%)" in h.text]
    assert weighted
    for text in weighted:
        shares = [int(x) for x in re.findall(r"\((\d+)%\)", text.split(" read ", 1)[1])]
        assert abs(sum(shares) - 100) <= len(shares), text


def test_pointing_at_an_agent_shows_only_its_edges(page):
    from selenium.webdriver.common.action_chains import ActionChains

    driver, views, _ = page
    pruned = next(v for v in views if v["question_id"] == "pruned")
    select(driver, views, pruned)
    svg = graphs(driver)[1]
    node = svg.find_element("css selector", 'g.agent-node[data-agent="0"]')
    ActionChains(driver).move_to_element(node).perform()
    opacity = {
        (e.get_attribute("data-src"), e.get_attribute("data-dst")): float(e.value_of_css_property("opacity"))
        for e in svg.find_elements("css selector", ".edge:not(.pruned)")
    }
    mine = {k: o for k, o in opacity.items() if "0" in k}
    assert mine and all(o == 1 for o in mine.values()) and all(o < 0.5 for k, o in opacity.items() if k not in mine)
    ActionChains(driver).move_to_element(driver.find_element("css selector", "#question-text")).perform()
    assert all(float(e.value_of_css_property("opacity")) == 1 for e in svg.find_elements("css selector", ".edge"))


def test_a_debate_stopped_early_says_after_which_round_of_how_many(page):
    driver, views, _ = page
    pruned = next(v for v in views if v["question_id"] == "pruned")
    select(driver, views, pruned)
    ran = len(pruned["rounds"])
    facts = driver.find_element("css selector", ".facts").text
    assert f"rounds: {ran} of {ran + 1} \u00b7 stopped early" in facts
    votes = driver.find_elements("css selector", ".vote")
    assert "stopped here" in votes[-1].text and not any("stopped" in v.text for v in votes[:-1])
    other = next(v for v in views if v["protocol"] == "group" and not v["stopped_early"])
    select(driver, views, other)
    assert "stopped" not in driver.find_element("css selector", "#detail").text


def test_a_wide_debate_is_drawn_compact_with_every_agent(page):
    driver, views, _ = page
    wide = next(v for v in views if v["n_agents"] > FULL_GRAPH_AGENTS)
    select(driver, views, wide)
    for svg in graphs(driver):
        assert len(svg.find_elements("css selector", "g.agent-node")) == wide["n_agents"]
        assert svg.find_elements("css selector", ".edge") == []
    assert "compact view" in driver.find_element("css selector", ".legend").text


def test_debate_show_html_writes_the_page_and_a_screenshot(stored, browser, tmp_path, capsys):
    out, objects = stored
    views = [v.to_dict() for v in objects[:-2]]  # the stored ones, not the two hand-edited
    html = tmp_path / "p" / "show.html"
    assert cli_main(["show", str(out / "group"), "--html", str(html), "--wrong"]) == 0
    assert "wrote" in capsys.readouterr().out
    text = html.read_text()
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text
    data = text.split('id="debate-data">', 1)[1].split("</script>", 1)[0]
    stored_wrong = [v["question_id"] for v in views if v["protocol"] == "group" and v["correct"] is False]
    assert [v["question_id"] for v in json.loads(data)] == stored_wrong
    png = tmp_path / "page.png"
    assert page_screenshot.main([str(html), str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_old_folders_debate_says_what_it_lacks(browser, tmp_path):
    """A debate with only the columns old folders have (no question text, kinds, groups, graph):
    one line per thing it lacks, and still every agent drawn."""
    lacks = ["question text not stored (folder written before it existed)", "call kinds not stored"]
    turns = [{"agent_id": a, "node": a, "answer": str(a % 2), "read": [], "text": "x"} for a in range(3)]
    old = {"run_id": "r", "question_id": "q", "n_agents": 3, "gold": "1", "rounds": [{"turns": turns}], "lacks": lacks}
    browser.get(write_page([old], tmp_path / "old.html").as_uri())
    assert [e.text for e in browser.find_elements("css selector", "#detail .lacks")] == [f"⚠ {line}" for line in lacks]
    (svg,) = graphs(browser)
    assert len(svg.find_elements("css selector", "g.agent-node")) == 3
    assert "not stored" in browser.find_element("css selector", "#question-text").text
    assert browser.find_elements("css selector", "#simulated") == []  # not simulated: no label
    assert severe(browser) == []


def test_each_call_shows_its_cached_prompt_tokens_when_it_knows_them(browser, tmp_path):
    """A call that reports its cached prompt tokens says so next to its token counts; one that
    does not (a backend that cannot say) shows only the counts; the debate's facts sum them."""
    turns = [
        {"agent_id": 0, "node": 0, "answer": "1", "read": [], "prompt_tokens": 120, "completion_tokens": 9,
         "cached_prompt_tokens": 96},
        {"agent_id": 1, "node": 1, "answer": "1", "read": [], "prompt_tokens": 80, "completion_tokens": 7},
    ]  # fmt: skip
    view = {"run_id": "r", "question_id": "q", "n_agents": 2, "gold": "1", "rounds": [{"turns": turns}]}
    view["tokens"] = {"prompt": 200, "completion": 16, "cached": 96}
    browser.get(write_page([view], tmp_path / "cached.html").as_uri())
    heads = [e.text for e in browser.find_elements("css selector", "#detail details.turn > summary")]
    assert "120 + 9 tokens (96 prompt tokens cached)" in heads[0]
    assert "80 + 7 tokens" in heads[1] and "cached" not in heads[1]
    assert "cached 96" in browser.find_element("css selector", "#detail .facts").text
    assert severe(browser) == []


def test_the_browser_leaves_no_temporary_folders_behind():
    """Chromium stopped by its driver leaves its temporary folders (``org.chromium.Chromium.*``);
    start_browser gives it its own, which quit() removes."""
    need_browser()
    tmp = Path(tempfile.gettempdir())
    before = set(tmp.glob("org.chromium.*")) | set(tmp.glob("debate-browser-*"))
    driver = page_screenshot.start_browser()
    driver.get("about:blank")
    driver.quit()
    assert set(tmp.glob("org.chromium.*")) | set(tmp.glob("debate-browser-*")) <= before
