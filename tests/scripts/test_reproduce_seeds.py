"""scripts/reproduce_seeds.py: the papers' tables (data in scripts/paper_tables/) run as one sweep
per row over seeds, printed beside the published numbers; unmappable rows listed, not run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.scripts import load_script


def _script():
    return load_script("reproduce_seeds")


FAKE = {
    "paper": "GroupDebate (fake excerpt for the test)",
    "settings": {"seeds_or_repeats": "five independent experiments"},
    "tables": [
        {
            "id": "Table 1",
            "title": "main",
            "dataset": "Arithmetic",
            "model": "GPT-3.5",
            "measure": {"accuracy_pct": "accuracy", "tokens_k": "tokens_k"},
            "rows": [
                {
                    "method": "MAD(4,3)",
                    "engine": {"protocol": "mad", "agents": 4, "rounds": 3},
                    "values": {"accuracy_pct": 90.0, "accuracy_pct_sd": 1.0, "tokens_k": 10.0},
                    "source": "Table 1, MAD(4,3)",
                },
                {
                    "method": "GD(4,3)",
                    "engine": {"protocol": "group", "agents": 4, "rounds": 3, "groups": "2+2"},
                    "values": {"accuracy_pct": 91.0, "tokens_k": 6.0},
                    "source": "Table 1, GD(4,3)",
                },
                {
                    "method": "RECONCILE",
                    "engine": {"unmappable": "protocol not implemented: reconcile"},
                    "values": {"accuracy_pct": 80.0},
                    "source": "Table 1, RECONCILE",
                },
                {
                    "method": "MAD(4,3)",
                    "dataset": "GSM8K",
                    "engine": {"protocol": "mad", "agents": 4, "rounds": 3},
                    "values": {"accuracy_pct": 80.0},
                    "source": "Table 1, MAD(4,3), GSM8K column",
                },
            ],
        }
    ],
}


@pytest.fixture
def script(tmp_path, monkeypatch):
    mod = _script()
    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "group.json").write_text(json.dumps(FAKE))
    monkeypatch.setattr(mod, "TABLES_DIR", tables)
    return mod


def test_list_maps_models_and_datasets_and_names_unmappable_rows(script, tmp_path, capsys):
    cfg = tmp_path / "mine.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {"max_tokens": 64, "models_map": {"GPT-3.5": "my-model"}, "datasets": {"Arithmetic": "arithmetic"}}
        )
    )
    assert script.main(["--paper", "group", "--config", str(cfg), "--list", "--backend", "simulated"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4 and "skip: protocol not implemented: reconcile" in lines[2]
    assert "skip: no dataset for 'GSM8K'" in lines[3]
    mad = json.loads(lines[0].split(" | ", 3)[3])
    assert mad["model"] == "my-model" and mad["dataset"] == "arithmetic" and mad["max_tokens"] == 64
    assert mad["protocol"] == "mad" and mad["backend"] == "simulated"
    assert script.main(["--paper", "group", "--list"]) == 0  # no dataset mapping: every row says so
    assert "no dataset for 'Arithmetic'" in capsys.readouterr().out


@pytest.mark.ray
def test_rows_run_as_sweeps_over_seeds_beside_the_published_numbers(script, tmp_path, capsys, ray_local):
    out = tmp_path / "out"
    assert (
        script.main(
            [
                "--paper",
                "group",
                "--backend",
                "simulated",
                "--dataset",
                "arithmetic",
                "--limit",
                "2",
                "--seeds",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "Arithmetic: accuracy_pct=90.0±1.0," in printed and "Arithmetic: tokens_k=10.0," in printed
    # ours: the same names, our values (percent, thousands of tokens per question), over the seeds
    gd_line = next(line for line in printed.splitlines() if line.startswith("GD(4,3)"))
    assert "accuracy_pct=" in gd_line.split("accuracy_pct=91.0", 1)[1] and "(2 seeds)" in printed
    assert "not run: protocol not implemented" in printed
    assert "[SIMULATED model]" in printed and "base" in printed
    # --dataset runs the MAD row of both dataset columns on one set: one run, printed once with both columns
    assert [ln.startswith("MAD(4,3)") for ln in printed.splitlines()].count(True) == 1
    assert "GSM8K: accuracy_pct=80.0" in printed
    report = json.loads((out / "reproduce.json").read_text())["papers"]["group"]
    mad, gd, rec = report
    assert mad["columns"] == ["Arithmetic", "GSM8K"]
    assert mad["ours"]["seeds"] == gd["ours"]["seeds"] == 2 and "ours" not in rec
    assert 0 <= gd["ours"]["accuracy_mean"] <= 1 and gd["ours"]["tokens_per_q"] < mad["ours"]["tokens_per_q"]
    measured = gd["ours"]["measures"]
    assert measured["accuracy_pct"]["mean"] == pytest.approx(100 * gd["ours"]["accuracy_mean"])
    assert measured["tokens_k"]["mean"] == pytest.approx(gd["ours"]["tokens_per_q"] / 1000)
    sweep = yaml.safe_load(Path(gd["ours"]["sweep"]).read_text())
    assert sweep["grid"] == {"seed": [0, 1]} and sweep["groups"] == "2+2" and sweep["protocol"] == "group"
    # resumable: a second run re-uses the finished cells
    assert (
        script.main(
            [
                "--paper",
                "group",
                "--backend",
                "simulated",
                "--dataset",
                "arithmetic",
                "--limit",
                "2",
                "--seeds",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    again = json.loads((out / "reproduce.json").read_text())["papers"]["group"]
    assert again[1]["ours"]["runs"] == gd["ours"]["runs"]


def test_rows_of_one_method_per_dataset_column_have_their_own_sweep_without_dataset_override(script, tmp_path):
    """Without --dataset each dataset column is its own run (own file); with it they merge into one row."""
    cfg = {"datasets": {"Arithmetic": "arithmetic", "GSM8K": str(tmp_path / "gsm8k.jsonl")}}
    args = type("A", (), {"tables": "", "dataset": None, "backend": "simulated", "limit": 2, "api_base": None})
    plans = [p for p in script.plan_rows("group", FAKE, cfg, args) if not p["skip"]]
    assert [p["method"] for p in plans] == ["MAD(4,3)", "GD(4,3)", "MAD(4,3)"]
    assert plans[0]["options"]["dataset"] != plans[2]["options"]["dataset"]
    args.dataset = "arithmetic"
    merged = [p for p in script.plan_rows("group", FAKE, {}, args) if not p["skip"]]
    assert [p["method"] for p in merged] == ["MAD(4,3)", "GD(4,3)"]
    assert merged[0]["published"] == {
        "Arithmetic: accuracy_pct": 90.0,
        "Arithmetic: accuracy_pct_sd": 1.0,
        "Arithmetic: tokens_k": 10.0,
        "GSM8K: accuracy_pct": 80.0,
    }
    assert merged[0]["source"] == "Table 1, MAD(4,3); Table 1, MAD(4,3), GSM8K column"
    assert merged[1]["published"] == {"accuracy_pct": 91.0, "tokens_k": 6.0}  # one column: no dataset prefix
    two_models = {
        **FAKE,
        "tables": [
            {
                **FAKE["tables"][0],
                "rows": [
                    {**FAKE["tables"][0]["rows"][0], "model": "GPT-4"},
                    {**FAKE["tables"][0]["rows"][0], "values": {"accuracy_pct": 95.0}},
                ],
            }
        ],
    }
    (both,) = script.plan_rows("group", two_models, {}, args)  # one model block per row: both kept, named
    assert both["published"]["Arithmetic / GPT-4: accuracy_pct"] == 90.0
    assert both["published"]["Arithmetic / GPT-3.5: accuracy_pct"] == 95.0


def test_the_published_column_wraps_and_never_cuts(script, capsys):
    values = {f"col{i}_accuracy_pct": 10.0 + i for i in range(8)}
    parts = script.published_parts(values)
    lines = script.wrap_parts(parts, 40)
    assert all(len(line) <= 40 for line in lines) and len(lines) > 1
    assert ", ".join(lines).replace(",,", ",") == ", ".join(parts)  # nothing lost, order kept
    long = script.wrap_parts(["average of 8 data sets (" + ", ".join(f"set{i}" for i in range(12)) + "): x=1"], 40)
    assert len(long) > 1 and all(len(line) <= 40 for line in long) and long[-1].endswith("x=1")
    assert " ".join(long) == "average of 8 data sets (" + ", ".join(f"set{i}" for i in range(12)) + "): x=1"
    plan = {
        "paper": "group",
        "table": "Table 1",
        "title": "t",
        "method": "M",
        "published": values,
        "source": "s",
        "skip": "why",
    }
    script.print_table([plan], simulated=False)
    printed = capsys.readouterr().out
    assert all(f"col{i}_accuracy_pct={10.0 + i}" in printed for i in range(8))


def test_the_papers_tables_map_onto_valid_run_configs():
    """scripts/paper_tables/*.json (read from the papers): every row cites where its numbers are
    printed; every runnable row's options build a RunConfig; the ablation rows map onto the
    engine's switches."""
    from engine.config import config_from_mapping

    mod = _script()
    args = type("A", (), {"tables": "", "dataset": "arithmetic", "backend": "simulated", "limit": 2, "api_base": None})
    for name in mod.PAPERS:
        paper = mod.load_paper(name)
        plans = mod.plan_rows(name, paper, {}, args)
        runnable = [p for p in plans if not p["skip"]]
        assert len(runnable) >= 4, name
        assert all(p["source"] and p["method"] for p in plans), name
        for p in runnable:
            config_from_mapping(p["options"], source=f"{name} {p['table']} {p['method']}")
    rows = {(p["table"], p["method"]): p for p in mod.plan_rows("s2mad", mod.load_paper("s2mad"), {}, args)}
    assert rows[("Table 4", "w/o Jump")]["options"]["jump"] is False
    assert rows[("Table 4", "w/ Sparse Commu.")]["options"]["group_density"] == 0.5
    assert rows[("Table 4", "w/o Filter")]["options"]["filter"] is False
    cortex = {(p["table"], p["method"]): p for p in mod.plan_rows("cortex", mod.load_paper("cortex"), {}, args)}
    assert (
        cortex[("Table 2", "Sparse Graph + MDM (w/o I_d and S_d in Equation (9))")]["options"]["cortex_weights"]
        == "mdm-individual"
    )
    assert cortex[("Table 2", "Sparse Graph + Peer Evaluation (PRD)")]["options"]["cortex_weights"] == "peer"
    assert cortex[("Table 1", "PRD")]["options"]["protocol"] == "prd"
    assert cortex[("Table 1", "ND")]["options"]["topology"] == "ring"  # Neighbor Debate: our reading
    skipped = [p for p in mod.plan_rows("cortex", mod.load_paper("cortex"), {}, args) if p["skip"]]
    assert [(p["table"], p["method"]) for p in skipped] == [("Table 2", "Sparse Graph")]  # the rest runs
    assert skipped[0]["skip"].startswith("not runnable: the paper builds the sparse graph from edge weights")
    ours = cortex[("Table 2", "Sparse Graph + MDM (Ours)")]["options"]
    assert ours["cortex_memory"] == "none" and "memory" not in ours  # eq. 13: CortexDebate's own key
    chateval = cortex[("Table 1", "ChatEval")]["options"]  # appendix F: a summarizer each round
    assert chateval["protocol"] == "chateval" and chateval["chateval_talk"] == "summarizer"
    reconcile = cortex[("Table 1", "RECONCILE")]["options"]  # appendix F: majority voting
    assert reconcile["protocol"] == "reconcile" and reconcile["reconcile_vote"] == "majority"
    assert "models" not in chateval and "every agent on one model" in cortex[("Table 1", "ChatEval")]["notes"][0]
    backbones = mod.load_paper("cortex")["settings"]["models"]
    mapped = {
        (p["table"], p["method"]): p
        for p in mod.plan_rows(
            "cortex", mod.load_paper("cortex"), {"models_map": {m: f"mine-{k}" for k, m in enumerate(backbones)}}, args
        )
    }
    assert mapped[("Table 1", "MLD")]["options"]["models"] == "mine-0,mine-1,mine-2,mine-3,mine-4"
    specs = config_from_mapping(mapped[("Table 1", "MLD")]["options"]).agent_specs()
    assert [a.model for a in specs] == [f"mine-{k}" for k in range(5)]  # agent i on the paper's i-th backbone
    s2 = [
        p
        for p in mod.plan_rows("s2mad", mod.load_paper("s2mad"), {"models_map": {"GPT-4-0613": "big"}}, args)
        if p["method"] == "S-MAD(5,4)" and p["paper_model"] == "GPT-4-0613"
    ]
    assert s2 and all(p["options"]["model"] == "big" and "models" not in p["options"] for p in s2)  # one backbone
    assert all(p["options"]["topology"] == "ring" for p in s2)  # S-MAD: neighbours only (our reading)
    group = {(p["table"], p["method"]): p for p in mod.plan_rows("group", mod.load_paper("group"), {}, args)}
    assert group[("Figure 9", "MAD+Forget")]["options"]["memory"] == "summary-last"
    assert group[("Figure 9", "MAD+Group")]["options"]["memory"] == "full"
    sparse = [p for p in mod.plan_rows("sparse", mod.load_paper("sparse"), {}, args) if not p["skip"]]
    assert all(p["options"]["first_round_seed"] == 0 for p in sparse)  # the paper's fixed first answers


def test_every_paper_row_runs_as_its_paper_ran_it_or_says_why():
    """The check of issue 24 without running: every runnable row passes its own configuration
    (the engine's checks, the protocol's), reads every option it sets, has a metric for every
    published number, and its prompts are valid templates for every task."""
    import pandas as pd  # noqa: F401  (the measures read pandas frames)

    from app.sweep import check_cell, normalise
    from engine.config import config_from_mapping
    from engine.prompts import FORMATS, PromptSet

    mod = _script()
    args = type("A", (), {"tables": "", "dataset": "arithmetic", "backend": "simulated", "limit": 2, "api_base": None})
    for name in mod.PAPERS:
        paper = mod.load_paper(name)
        for p in mod.plan_rows(name, paper, {}, args):
            where = f"{name} {p['table']} {p['method']}"
            spread = ("_sd", "_var")  # accuracy_sd, tokens_sd_k, score_var: the ± of another column
            published = [k.split(": ")[-1] for k in p["published"] if not any(m in k for m in spread)]
            assert all(k in p["measure"] or "saving" in k for k in published), (where, published)
            if p["skip"]:
                assert len(p["skip"]) > 40, where  # a reason, not a bare "no"
                continue
            cfg = config_from_mapping(p["options"], source=where)
            assert check_cell(normalise(cfg)) is None, where
            for task in FORMATS:
                PromptSet.for_task(task, p["options"].get("prompts"))
        assert paper.get("prompts", {}).get("_source"), name  # where the paper's prompts come from


def test_paper_prompts_apply_per_task_and_rows_add_their_own():
    mod = _script()
    args = type("A", (), {"tables": "", "dataset": "arithmetic", "backend": "simulated", "limit": 2, "api_base": None})
    from engine.prompts import PromptSet

    sparse = next(p for p in mod.plan_rows("sparse", mod.load_paper("sparse"), {}, args) if not p["skip"])
    numeric = PromptSet.for_task("numeric", sparse["options"]["prompts"])
    assert "Limit your output within 100 words" in numeric.system("Q")
    pair = PromptSet.for_task("pair", sparse["options"]["prompts"])
    assert "expert rater" in pair.system("Q") and "within 100 words" in pair.first("Q")
    gd = next(p for p in mod.plan_rows("group", mod.load_paper("group"), {}, args) if p["method"].startswith("GD"))
    assert PromptSet.for_task("choice", gd["options"]["prompts"]).system("Q").startswith("Welcome to the debate!")
    cortex = {
        p["method"]: p for p in mod.plan_rows("cortex", mod.load_paper("cortex"), {}, args) if p["table"] == "Table 6"
    }
    assert (
        PromptSet.for_task("numeric", cortex["ND"]["options"].get("prompts"))
        .system("Q")
        .startswith("You are a helpful")
    )
    assert PromptSet.for_task("numeric", cortex["GD"]["options"].get("prompts")).system("Q").startswith("Welcome")
    assert not cortex["MLD"]["options"].get("prompts")  # Fig. 6 is cut off: the engine's prompts
    args.no_paper_prompts = True
    assert all(
        not p.get("options", {}).get("prompts") for p in mod.plan_rows("sparse", mod.load_paper("sparse"), {}, args)
    )


def test_an_option_the_protocol_does_not_read_is_an_error_naming_the_row(script):
    args = type("A", (), {"tables": "", "dataset": "arithmetic", "backend": "simulated", "limit": 2, "api_base": None})
    table = {
        **FAKE["tables"][0],
        "rows": [{**FAKE["tables"][0]["rows"][0], "engine": {"protocol": "cortex", "memory": "last"}}],
    }
    with pytest.raises(
        script.TableError,
        match=r"^reproduce_seeds: scripts/paper_tables/group.json Table 1, row 'MAD\(4,3\)': --memory is ignored: "
        r"--protocol cortex does not read it here \(read by mad, sparse, probmad, group\)$",
    ):
        script.plan_rows("group", {**FAKE, "tables": [table]}, {}, args)
    bad = {**FAKE["tables"][0], "measure": {"accuracy_pct": "acuracy"}}
    with pytest.raises(script.TableError, match="measure 'acuracy' is not one of"):
        script.plan_rows("group", {**FAKE, "tables": [bad]}, {}, args)


def test_measures_read_each_rows_own_metric_from_its_rows():
    import pandas as pd

    mod = _script()
    questions = pd.DataFrame(
        {
            "correct": [True, False],
            "correct_by_round": [[False, True], [False, False, True]],  # the first stopped after round 1
            "consensus": [[0.5, 1.0], [0.25, 0.5, 1.0]],
            "prompt_tokens": [100, 300],
            "completion_tokens": [50, 50],
        }
    )
    calls = pd.DataFrame({"prompt_tokens": [10, 20, 60], "error": [None, None, "boom"]})
    assert mod.measure_run("accuracy", questions, calls, 3) == 50.0
    assert mod.measure_run("accuracy_avg_over_rounds", questions, calls, 3) == pytest.approx(100 * 3 / 6)
    assert [mod.measure_run(f"accuracy@{n}", questions, calls, 3) for n in range(3)] == [0.0, 50.0, 100.0]
    assert [mod.measure_run(f"unanimous@{n}", questions, calls, 3) for n in range(3)] == [0.0, 50.0, 100.0]
    assert mod.measure_run("accuracy@3", questions, calls, 3) != mod.measure_run(
        "accuracy@3", questions, calls, 3
    )  # nan
    assert mod.measure_run("tokens_k", questions, calls, 3) == 0.25
    assert mod.measure_run("prompt_tokens_per_call", questions, calls, 3) == 15.0  # an error row sent nothing
    ours = {"seeds": 3, "measures": {"score_pct": {"metric": "accuracy", "mean": 50.0, "sd": 2.0}}}
    assert mod.ours_parts(ours, "sd") == ["score_pct=50.0±2.0 (3 seeds)"]
    assert mod.ours_parts(ours, "var") == ["score_pct=50.0±4.0 (3 seeds)"]  # the paper prints a variance


def test_row_notes_are_printed_in_the_table(script, capsys):
    plan = {
        "paper": "cortex",
        "table": "Table 6",
        "title": "t",
        "method": "RECONCILE",
        "published": {"score_pct": 60.0},
        "source": "s",
        "skip": None,
        "options": {"protocol": "reconcile"},
        "ours": {"seeds": 2, "measures": {}, "tokens_per_q": 100.0, "prompt_per_q": 80.0},
        "notes": [
            "every agent on one model, not the paper's 5 backbones",
            "run without RECONCILE's convincing samples",
        ],
    }
    script.print_table([plan], simulated=True)
    printed = capsys.readouterr().out
    assert "note: every agent on one model, not the paper's 5 backbones" in printed
    assert "note: run without RECONCILE's convincing samples" in printed


def test_each_model_block_says_it_repeats_and_compares_with_its_own_mad(script, capsys):
    """A table of two model blocks: without models_map both run one model, and every row says its
    block repeats the other; with it each block runs its model, and a row's saving is against the
    MAD row of its own block (same model, same data), never the table's first MAD."""
    rows = FAKE["tables"][0]["rows"][:2]  # MAD(4,3), GD(4,3)
    two_blocks = {
        **FAKE,
        "tables": [
            {
                **FAKE["tables"][0],
                "rows": [  # GPT-4's published MAD 12k, GD 9k: the paper's own saving +25 %, GPT-3.5's +40 %
                    *rows,
                    {**rows[0], "model": "GPT-4", "values": {**rows[0]["values"], "tokens_k": 12.0}},
                    {**rows[1], "model": "GPT-4", "values": {**rows[1]["values"], "tokens_k": 9.0}},
                ],
            }
        ],
    }
    args = type("A", (), {"tables": "", "dataset": None, "backend": "simulated", "limit": 2, "api_base": None})
    cfg = {"datasets": {"Arithmetic": "arithmetic"}}
    plans = [p for p in script.plan_rows("group", two_blocks, cfg, args) if not p["skip"]]
    assert len(plans) == 4 and all(any("all 2 model blocks" in n for n in p["notes"]) for p in plans)
    named = {
        **two_blocks,
        "tables": [
            {
                **two_blocks["tables"][0],
                "rows": [
                    {**r, "engine": {**r["engine"], "models": f"{r.get('model', 'GPT-3.5')}*4"}}
                    for r in two_blocks["tables"][0]["rows"]
                ],
            }
        ],
    }
    plans = [p for p in script.plan_rows("group", named, cfg, args) if not p["skip"]]
    assert all(any("the run only names it" in n and "2 model blocks" in n for n in p["notes"]) for p in plans)
    mapped = {**cfg, "models_map": {"GPT-3.5": "small-model", "GPT-4": "big-model"}}
    plans = [p for p in script.plan_rows("group", two_blocks, mapped, args) if not p["skip"]]
    assert [p["options"]["model"] for p in plans] == ["small-model"] * 2 + ["big-model"] * 2
    assert not any(p["notes"] for p in plans)
    for p, (tokens, prompt) in zip(plans, [(1000, 800), (500, 400), (4000, 3000), (3000, 1500)]):
        p["ours"] = {"tokens_per_q": tokens, "prompt_per_q": prompt, "seeds": 2, "measures": {}}
    script.print_table(plans, simulated=True)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("MAD(4,3)", "GD(4,3)"))]
    assert ["base" in line for line in lines] == [True, False, True, False]
    assert "+50%/+50%" in lines[1] and "+25%/+50%" in lines[3]  # 1 - 500/1000, 1 - 3000/4000 (not /1000)
    assert " +40% " in lines[1] and " +25% " in lines[3]  # the paper's own: 1 - 6/10, 1 - 9/12 (its block's MAD)


def test_a_single_agent_row_compares_with_the_mad_row_of_its_model(script, capsys):
    """CoT runs the block's model on one agent ("M*1"), MAD on five ("M*5"): the same block."""
    ours = {"seeds": 2, "measures": {}, "prompt_per_q": 100.0}
    common = {"table": "Table 1", "title": "t", "source": "s", "skip": None, "notes": [], "published": {}, "paper": "p"}
    mad = {**common, "method": "MAD(5,3)", "options": {"protocol": "mad", "models": "M*5"}}
    cot = {**common, "method": "CoT", "options": {"protocol": "cot", "models": "M*1"}}
    other = {**common, "method": "CoT other", "options": {"protocol": "cot", "models": "N*1"}}
    mad["ours"], cot["ours"], other["ours"] = ({**ours, "tokens_per_q": t} for t in (1000.0, 200.0, 200.0))
    script.print_table([mad, cot, other], simulated=True)
    lines = capsys.readouterr().out.splitlines()
    assert "+80%/+0%" in next(line for line in lines if line.startswith("CoT "))
    assert "+80%" not in next(line for line in lines if line.startswith("CoT other"))


def test_a_row_of_several_data_set_columns_names_the_papers_saving_per_column(script, capsys):
    """With --dataset a row holds every column's published numbers: the paper's own saving vs its
    MAD row is printed per column, under the row (one cell cannot hold five)."""
    ours = {"seeds": 2, "measures": {}, "tokens_per_q": 100.0, "prompt_per_q": 80.0}
    common = {"table": "Table 1", "title": "t", "source": "s", "skip": None, "notes": [], "paper": "group"}
    mad = {**common, "method": "MAD(5,3)", "options": {"protocol": "mad"}, "ours": ours}
    gd = {**common, "method": "GD(5,3)", "options": {"protocol": "group"}, "ours": {**ours, "tokens_per_q": 60.0}}
    mad["published"] = {"Arithmetic: tokens_k": 12.1, "GSM8K: tokens_k": 13.7, "GSM8K: accuracy_pct": 82.0}
    gd["published"] = {"Arithmetic: tokens_k": 9.6, "GSM8K: tokens_k": 10.3, "GSM8K: accuracy_pct": 81.6}
    script.print_table([mad, gd], simulated=True)
    printed = capsys.readouterr().out
    assert "note: the paper's own saving vs its MAD row, by column: Arithmetic +21%, GSM8K +25%" in printed
    assert printed.count("by column") == 1  # not under the MAD row itself


def test_figure_9_rows_run_where_the_four_variants_differ_and_measure_without_published_numbers():
    """GroupDebate's Figure 9 prints no numbers and states no setting: its rows run at the main
    table's 5 agents x 3 rounds, where MAD, MAD+Forget, MAD+Group and GD cost different tokens (at
    the engine's 3 x 2 the first two and the last two are the same run), and ours are measured."""
    from engine.config import RunConfig
    from engine.plan import Planner

    args = type("A", (), {"tables": "Figure 9", "dataset": "arithmetic", "backend": "simulated", "limit": 3})
    args.api_base = None
    mod = _script()
    plans = mod.plan_rows("group", mod.load_paper("group"), {}, args)
    assert [p["method"] for p in plans] == ["MAD", "MAD+Forget", "MAD+Group", "GD"]
    assert all(p["options"]["agents"] == 5 and p["options"]["rounds"] == 3 for p in plans)
    assert all(
        set(p["measure"]) == {"accuracy_pct", "tokens_k"} and "5 agents x 3 rounds" in p["table_note"] for p in plans
    )
    keys = ("protocol", "agents", "rounds", "memory", "talk", "stage_rounds")
    totals = [
        Planner()
        .plan(RunConfig.flat(backend="simulated", limit=3, **{k: p["options"][k] for k in keys if k in p["options"]}))
        .per_question.total
        for p in plans
    ]
    assert len(set(totals)) == 4, totals
