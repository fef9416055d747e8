"""What a user points the engine at, checked before Ray starts, one line each: YAML files read
with bounds (size, aliases), an --out that can be written in, and text that can be written as
UTF-8 (engine/inputs.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from engine.config import ConfigError, config_from_mapping, load_config_file
from tests.support.cli import timed_main

BOMB_LEVELS = "abcdefghi"  # 9 levels of 9 aliases each: 9**9 (387 million) strings when expanded


def bomb(key: str) -> str:
    """A "billion laughs" YAML text whose ``key`` holds the last of 9 levels of aliases."""
    lines = [f"{key}:", '  - &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, name in zip(BOMB_LEVELS, BOMB_LEVELS[1:], strict=False):
        lines.append(f"  - &{name} [{', '.join(['*' + prev] * 9)}]")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------- YAML
@pytest.mark.parametrize("key", ["prompts", "chateval_roles", "model_info"])
def test_a_config_alias_bomb_is_one_line_naming_the_file_at_once(capsys, tmp_path, no_ray, key):
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb(key))
    code, text, took = timed_main(capsys, ["run", "--config", str(path), "--backend", "simulated", "--no-progress"])
    assert code == 2 and len(text.splitlines()) == 1, text
    assert text.startswith(f"debate: error: --config {path}: its aliases (*name) repeat"), text
    assert took < 5, f"took {took:.1f} s"


def test_a_sweep_alias_bomb_and_a_samples_alias_bomb_are_refused(tmp_path):
    from app.sweep import SweepError, load_sweep
    from engine.protocols.reconcile import SamplesError, load_samples

    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(bomb("agent_settings"))
    with pytest.raises(SweepError, match=f"^{sweep}: its aliases"):
        load_sweep(sweep)
    samples = tmp_path / "samples.yaml"
    samples.write_text(bomb("x"))
    with pytest.raises(SamplesError, match=f"^--reconcile-samples {samples}: its aliases"):
        load_samples(str(samples))


def test_a_few_aliases_are_read_and_an_alias_in_its_own_value_is_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "base: &base {temperature: 0.2, max_tokens: 64}\n"
        "agent_settings: [*base, {<<: *base, temperature: 0.9}]\n"
        "agents: 2\n"
    )
    data = load_config_file(path)
    assert data["agent_settings"] == [{"temperature": 0.2, "max_tokens": 64}, {"temperature": 0.9, "max_tokens": 64}]
    path.write_text("agent_settings: &x [*x]\n")
    with pytest.raises(ConfigError, match=r": line 1: an alias refers to a value that holds it \(a cycle\)$"):
        load_config_file(path)


def test_a_yaml_file_too_large_is_refused_before_it_is_read(tmp_path):
    from engine.inputs import MAX_YAML_BYTES

    path = tmp_path / "huge.yaml"
    with path.open("wb") as fh:  # a sparse file: nothing written, nothing read
        fh.truncate(MAX_YAML_BYTES + 1)
    with pytest.raises(
        ConfigError, match=r"huge\.yaml: 16\.0 MiB is too large for a YAML file here \(at most 16 MiB\)"
    ):
        load_config_file(path)


def test_yaml_nested_too_deeply_or_not_utf8_is_one_line(tmp_path):
    from engine.inputs import load_yaml

    deep = tmp_path / "deep.yaml"
    deep.write_text("prompts: " + "[" * 700 + "]" * 700 + "\n")  # refused from about 600 levels
    with pytest.raises(ConfigError, match=r"deep\.yaml: nested too deeply to read$"):
        load_yaml(deep, f"--config {deep}", ConfigError)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"system_prompt: caf\xe9\n")
    with pytest.raises(ConfigError, match=r"latin\.yaml: line 1: not valid UTF-8 \(invalid continuation byte\)$"):
        load_config_file(latin)
    broken = tmp_path / "broken.yaml"
    broken.write_text("agents: [1\n")
    with pytest.raises(ConfigError) as err:
        load_config_file(broken)
    assert "not valid YAML" in str(err.value) and "\n" not in str(err.value)


# ---------------------------------------------------------------------------------- --out
def test_out_pointing_to_a_file_is_one_line_before_ray(capsys, tmp_path, no_ray):
    out = tmp_path / "results.txt"
    out.write_text("keep me\n")
    code, text, took = timed_main(
        capsys, ["run", "--backend", "simulated", "--limit", "2", "--no-progress", "--out", str(out)]
    )
    assert (code, text) == (2, f"debate: error: --out {out}: is a file, not a folder")
    assert out.read_text() == "keep me\n" and took < 5, f"took {took:.1f} s"


@pytest.fixture
def read_only_dir(tmp_path):
    """A folder nobody may write in: a read-only tmpfs mounted there (as root, where permission
    bits do not stop writes), else one with its write bits off (as another user)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() == 0:
        if shutil.which("mount") is None:
            pytest.skip("running as root without mount(8): a read-only folder cannot be made")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"running as root and mount is not permitted here: {done.stderr.decode().strip()}")
        yield ro
        subprocess.run(["umount", str(ro)], check=True)
        return
    ro.chmod(0o555)
    yield ro
    ro.chmod(0o755)


@pytest.mark.parametrize("where", ["itself", "a folder to make in it"])
def test_out_in_a_read_only_folder_is_one_line_before_ray(capsys, read_only_dir, no_ray, where):
    out = read_only_dir if where == "itself" else read_only_dir / "new" / "run"
    code, text, took = timed_main(
        capsys, ["run", "--backend", "simulated", "--limit", "2", "--no-progress", "--out", str(out)]
    )
    assert code == 2 and len(text.splitlines()) == 1, text
    what = "cannot write in the folder" if where == "itself" else "cannot create the folder"
    assert text.startswith(f"debate: error: --out {out}: {what} ("), text
    assert took < 5, f"took {took:.1f} s"
    assert os.listdir(read_only_dir) == []


def test_a_sweep_out_pointing_to_a_file_is_one_line(tmp_path):
    from app.sweep import SweepError, parse_sweep, run_sweep

    out = tmp_path / "sweep.out"
    out.write_text("x")
    spec = parse_sweep({"backend": "simulated", "limit": 1, "grid": {"seed": [0, 1]}}, "s.yaml")
    with pytest.raises(SweepError, match=f"^--out {out}: is a file, not a folder$"):
        run_sweep(spec, out, runner=object())


def test_a_writable_out_is_made_and_left_empty(tmp_path):
    from engine.inputs import check_out_dir

    out = tmp_path / "a" / "b"
    check_out_dir(out, "--out", ConfigError)
    assert out.is_dir() and os.listdir(out) == []


# ---------------------------------------------------------------------------------- text
def test_a_lone_surrogate_in_a_question_names_file_row_and_field(capsys, tmp_path, no_ray):
    data = tmp_path / "q.jsonl"
    rows = [{"question": "1+1?", "answer": "2"}, {"question": "What is 2+2? \ud800", "answer": "4"}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))  # json writes the escape "\ud800"
    argv = ["run", "--backend", "simulated", "--dataset", str(data), "--no-progress", "--out", str(tmp_path / "o")]
    code, text, took = timed_main(capsys, argv)
    assert code == 2 and len(text.splitlines()) == 1, text
    assert text == (
        f"debate: error: {data}:2: field 'question' cannot be written as UTF-8 text: "
        "character 14 is '\\ud800', a lone surrogate"
    )
    assert took < 5 and not (tmp_path / "o").exists()


@pytest.mark.parametrize("field", ["answer", "subject", "choices"])
def test_a_lone_surrogate_in_any_text_of_a_question_is_refused(tmp_path, field):
    from engine.dataset_routing import load_questions
    from engine.tasks import DatasetError

    row = {"question": "Which?", "answer": "x^2", "subject": "logic"}
    if field == "choices":
        row.update(choices=["yes", "n\udc80"], answer="A")
    else:
        row[field] += "\udc80"
    data = tmp_path / "q.jsonl"
    data.write_text(json.dumps(row) + "\n")
    name = "choices[1]" if field == "choices" else field
    with pytest.raises(DatasetError, match=rf"q\.jsonl:1: field '{re.escape(name)}' cannot be written as UTF-8 text"):
        load_questions(data, "choice" if field == "choices" else "math", None, 0)


def test_text_options_that_cannot_be_written_as_utf8_are_refused(capsys, tmp_path, no_ray):
    argv = ["run", "--backend", "simulated", "--no-progress", "--out", str(tmp_path / "o")]
    code, text, _ = timed_main(capsys, [*argv, "--system-prompt", "be brief \udcff"])
    assert code == 2 and text == (
        "debate: error: --system-prompt holds text that cannot be written as UTF-8: "
        "character 10 is '\\udcff', a lone surrogate"
    )
    with pytest.raises(ConfigError, match="^--prompts holds text that cannot be written as UTF-8"):
        config_from_mapping({"prompts": {"numeric": {"first": "Q: $question \ud800"}}}).validate()
    with pytest.raises(ConfigError, match="^--agent-settings holds text"):
        config_from_mapping({"agent_settings": [{"system_prompt": "\ud800"}]}).validate()


def test_questions_given_to_a_run_are_checked_too(tmp_path):
    from actors.prepare import prepare
    from engine.config import RunConfig
    from engine.tasks import DatasetError, Question

    q = Question("q1", "numeric", "1+1? \udc80", "2", source="mine", row=3)
    with pytest.raises(DatasetError, match=r"^mine:3: field 'question' cannot be written"):
        prepare(RunConfig.flat(backend="simulated", out=str(tmp_path / "o")), [q])


def test_the_out_check_leaves_nothing_behind_in_a_folder_that_existed(tmp_path):
    from engine.inputs import check_out_dir

    (tmp_path / "keep").write_text("x")
    check_out_dir(tmp_path, "--out", ConfigError)
    assert sorted(p.name for p in Path(tmp_path).iterdir()) == ["keep"]
