import pytest

from engine.prompts import FORMATS, PromptError, PromptSet, build_messages


def test_templates_exist_for_every_task_and_mention_the_answer_format():
    for task, marker in [
        ("numeric", "\\boxed{answer}"),
        ("math", "\\boxed{answer}"),
        ("choice", "(X)"),
        ("pair", "A or B"),
    ]:
        p = PromptSet.for_task(task)
        assert "Q?" in p.first("Q?") and marker in p.first("Q?")
        deb = p.debate("Q?", [(1, "sol one"), (4, "sol four")])
        assert "sol one" in deb and "sol four" in deb and deb.index("sol one") < deb.index("sol four")
        assert "Q?" in p.self_check("Q?")


def test_override_and_bad_placeholder():
    p = PromptSet.for_task("numeric", {"numeric": {"first": "Solve $question now. \\boxed{}"}})
    assert p.first("2+2") == "Solve 2+2 now. \\boxed{}"
    with pytest.raises(PromptError, match=r"prompts.numeric.first: bad placeholder\(s\) \['questoin'\]"):
        PromptSet.for_task("numeric", {"numeric": {"first": "Solve $questoin"}})
    with pytest.raises(PromptError, match="unknown stage"):
        PromptSet.for_task("numeric", {"numeric": {"firts": "x"}})


def test_history_and_forgetting():
    p = PromptSet.for_task("numeric")
    hist = [
        {"role": "user", "content": "u0"},
        {"role": "assistant", "content": "r0"},
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "r1"},
    ]
    msgs, user = build_messages(p, "Q", "debate", hist, [(1, "peer")], system_prompt="sys")
    assert "peer" in user["content"] and "\\boxed{answer}" in user["content"]
    assert [m["content"] for m in msgs[:5]] == ["sys", "u0", "r0", "u1", "r1"] and msgs[-1] is user
    msgs, _ = build_messages(p, "Q", "debate", hist, [(1, "peer")], memory="last")
    assert [m["content"] for m in msgs[:2]] == ["u0", "r1"] and len(msgs) == 3
    with pytest.raises(PromptError):
        build_messages(p, "Q", "nonsense", [], [])
    msgs, _ = build_messages(p, "Q", "first", hist, [], memory="none")
    assert len(msgs) == 1


def test_override_for_all_tasks_and_unknown_scope():
    p = PromptSet.for_task("choice", {"all": {"peer": "[$agent] $text"}})
    assert p.peers_block([(3, "hi")]) == "[3] hi"
    with pytest.raises(PromptError, match="prompts.numerc"):
        PromptSet.for_task("numeric", {"numerc": {"first": "x"}})


def test_system_stage_is_per_task_and_yields_to_an_explicit_system_prompt():
    overrides = {"all": {"system": "Be brief. $format"}, "pair": {"system": "You rate dialogues."}}
    numeric = PromptSet.for_task("numeric", overrides)
    msgs, user = build_messages(numeric, "Q", "first", [], [])
    assert msgs[0] == {"role": "system", "content": "Be brief. " + FORMATS["numeric"]} and msgs[1] is user
    msgs, _ = build_messages(PromptSet.for_task("pair", overrides), "Q", "debate", [], [(1, "p")])
    assert msgs[0] == {"role": "system", "content": "You rate dialogues."}
    # an explicit system prompt (--system-prompt, an agent's) wins; "" means none at all
    assert build_messages(numeric, "Q", "first", [], [], system_prompt="mine")[0][0]["content"] == "mine"
    assert build_messages(numeric, "Q", "first", [], [], system_prompt="")[0][0]["role"] == "user"
    # by default there is no system message
    assert [m["role"] for m in build_messages(PromptSet.for_task("numeric"), "Q", "first", [], [])[0]] == ["user"]
    with pytest.raises(PromptError, match=r"prompts.all.system: bad placeholder\(s\) \['peers'\]"):
        PromptSet.for_task("numeric", {"all": {"system": "See $peers"}})
