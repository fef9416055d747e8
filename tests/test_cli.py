"""Bad input: one line naming the culprit, exit status 2, and no Ray started."""

import json

import pytest

from engine.cli import main


def err(capsys, argv):
    with pytest.raises(SystemExit) as exc:  # argparse-level errors
        main(argv)
    return exc.value.code, capsys.readouterr().err


def fail(capsys, argv):
    code = main(argv)
    out = capsys.readouterr().err.strip()
    return code, out


def test_unknown_protocol_and_flag(capsys):
    code, text = err(capsys, ["run", "--protocol", "nope"])
    assert code == 2 and "--protocol" in text and "nope" in text
    code, text = err(capsys, ["run", "--agnets", "3"])
    assert code == 2 and "--agnets" in text


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--protocol", "sparse", "--agents", "6", "--density", "0.5"], "--density 0.5 with --agents 6"),
        (["--protocol", "sparse", "--agents", "5", "--density", "0.25"], "--agents 5"),
        (["--protocol", "probmad"], "--density is required"),
        (["--dataset", "/nonexistent/data.jsonl", "--task", "numeric"], "/nonexistent/data.jsonl"),
        (["--limit", "0"], "--limit"),
        (["--model", "/tmp"], "--model /tmp"),
        (["--model", "no-such-model"], "--model no-such-model"),
    ],
)
def test_bad_input_is_one_line_naming_the_culprit(capsys, argv, needle):
    code, text = fail(capsys, ["run", "--no-progress", *argv])
    assert code == 2
    assert text.startswith("debate: error:") and needle in text and len(text.splitlines()) == 1


def test_malformed_row_names_file_and_line(capsys, tmp_path):
    path = tmp_path / "gsm.jsonl"
    path.write_text(json.dumps({"question": "1+1?", "answer": "2"}) + "\n" + "{not json\n")
    code, text = fail(capsys, ["run", "--dataset", str(path), "--task", "numeric", "--backend", "simulated"])
    assert code == 2 and f"{path}:2" in text


def test_config_file_errors(capsys, tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("protocol: mad\nagnets: 3\n")
    code, text = fail(capsys, ["run", "--config", str(bad)])
    assert code == 2 and "unknown key 'agnets'" in text and str(bad) in text
    code, text = fail(capsys, ["run", "--config", str(tmp_path / "missing.yaml")])
    assert code == 2 and "missing.yaml" in text
