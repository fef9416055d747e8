"""``--prompt-layout paper|shared`` (engine/protocols/layout.py): the paper layout is today's prompts
and run ids, byte for byte; the shared layout gives the agents that read the same answers prompts
with a byte-identical prefix (the first prompt, then boards of every answer in agent order, own
included, labelled), for every protocol that has it, end to end on the simulated model (no Ray);
the others refuse it in one line or say it changes nothing."""

from __future__ import annotations

import hashlib
import json

import pytest

from actors.local_run import run_local
from backends.simulated_backend import SimulatedBackend
from engine.config import ConfigError, RunConfig
from engine.prompts import SEPARATOR, PromptError, PromptSet, build_messages
from engine.protocols.base import AgentCall, Board, SummaryCall
from engine.protocols.layout import PROMPT_LAYOUT, answer_board
from engine.records import GenRequest
from engine.tasks import arithmetic_questions

# run ids computed before --prompt-layout existed (HEAD 9fe5310): a paper-layout run keeps its id
PINNED_IDS = [
    ({}, "mad-1f113ed03c"),
    ({"protocol": "cot"}, "cot-fb392607b7"),
    ({"protocol": "sc", "agents": 5}, "sc-870ee3ff3a"),
    ({"protocol": "mad", "agents": 4, "rounds": 3}, "mad-fe9a23ff6e"),
    ({"protocol": "mad", "memory": "summary"}, "mad-d64e8379c9"),
    ({"protocol": "mad", "talk": "one-by-one"}, "mad-2e131845d1"),
    ({"protocol": "sparse", "agents": 6, "density": 0.4}, "sparse-2d2e0b4151"),
    ({"protocol": "probmad", "agents": 5, "density": 0.5}, "probmad-2267d49d74"),
    ({"protocol": "group", "agents": 6, "rounds": 4, "groups": "3+3"}, "group-241f2fc118"),
    ({"protocol": "group", "agents": 4, "memory": "full"}, "group-6625a8a753"),
    ({"protocol": "s2mad", "agents": 6, "rounds": 4}, "s2mad-2f4da86cd9"),
    ({"protocol": "cortex", "agents": 4}, "cortex-0c82464783"),
    ({"protocol": "reconcile", "agents": 3}, "reconcile-35b072853c"),
    ({"protocol": "chateval", "agents": 3}, "chateval-b6eb677baa"),
    ({"protocol": "prd", "agents": 3}, "prd-ba93d4157b"),
]

# sha256 (16 hex) of every request's messages of two questions, computed before the option existed
# (re-pinned when the simulated replies got their first word from the call's seed,
# backends.simulated_backend.reply_tag: with that word set back to "let" the old digests come back)
PINNED_PROMPTS = [
    ({"protocol": "mad", "agents": 3, "rounds": 3}, "ec506ed402f1f4ef", 18),
    ({"protocol": "mad", "agents": 3, "rounds": 3, "memory": "summary"}, "89af623cffbf2894", 30),
    ({"protocol": "mad", "agents": 3, "rounds": 3, "memory": "last"}, "a0c0777aa4a81340", 18),
    ({"protocol": "group", "agents": 4, "rounds": 4, "groups": "2+2"}, "b4b6f477472eb950", 36),
    ({"protocol": "s2mad", "agents": 4, "rounds": 4, "groups": "2+2"}, "dff64fe48d13836c", 36),
    ({"protocol": "reconcile", "agents": 3, "rounds": 3}, "01821ce07865103d", 18),
]


class Capture(SimulatedBackend):
    """The simulated model, keeping every request it answers."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.requests: list[GenRequest] = []

    def generate(self, requests):
        self.requests += requests
        return super().generate(requests)


def captured(n_q: int = 1, reply_tokens: int = 12, **kw) -> tuple[Capture, list]:
    backend = Capture(reply_tokens=reply_tokens, accuracy=0.5, follow=0.3)
    cfg = RunConfig.flat(backend="simulated", **kw).validate()
    rows = run_local(cfg, arithmetic_questions(n_q, seed=3), backend)
    return backend, rows


def user_text(req: GenRequest) -> str:
    (user,) = [m for m in req.messages if m["role"] == "user"]
    return user["content"]


def shared_part(text: str) -> str:
    """A shared-layout message up to the reader's own part (the last block)."""
    return text[: text.rindex(SEPARATOR) + len(SEPARATOR)]


def sent(backend: Capture, rows: list) -> list[tuple]:
    """(call record, the request it sent) of every call, in order (run_local answers one at a time)."""
    records = [r for _, log in rows for r in log.records]
    assert len(records) == len(backend.requests)
    return list(zip(records, backend.requests))


# --------------------------------------------------------------------------- paper layout: unchanged


@pytest.mark.parametrize("kw, run_id", PINNED_IDS)
def test_paper_layout_keeps_every_run_id(kw, run_id):
    assert RunConfig.flat(backend="simulated", **kw).run_id() == run_id
    assert RunConfig.flat(backend="simulated", prompt_layout="paper", **kw).run_id() == run_id


@pytest.mark.parametrize("kw, digest, n_requests", PINNED_PROMPTS)
def test_paper_layout_sends_todays_prompts_byte_for_byte(kw, digest, n_requests):
    backend, _ = captured(n_q=2, prompt_layout="paper", **kw)
    sent = json.dumps([r.messages for r in backend.requests]).encode()
    assert (hashlib.sha256(sent).hexdigest()[:16], len(backend.requests)) == (digest, n_requests)


def test_shared_is_hashed_where_it_is_read_and_nowhere_else():
    for protocol in ("mad", "group", "s2mad"):
        paper = RunConfig.flat(protocol=protocol, backend="simulated")
        assert RunConfig.flat(protocol=protocol, backend="simulated", prompt_layout="shared").run_id() != paper.run_id()
    for protocol in ("cot", "sc", "reconcile"):  # their prompts are the same in both layouts
        paper = RunConfig.flat(protocol=protocol, backend="simulated")
        assert RunConfig.flat(protocol=protocol, backend="simulated", prompt_layout="shared").run_id() == paper.run_id()


# --------------------------------------------------------------------------- the builder


def test_build_messages_with_boards_is_one_user_message_after_the_system_prompt():
    prompts = PromptSet.for_task("numeric")
    boards = (answer_board(0, [2, 0, 1], ["zero", "one", "two"]),)  # texts by agent id; shown in id order
    history = [{"role": "user", "content": "old"}, {"role": "assistant", "content": "reply"}]
    msgs, user = build_messages(
        prompts,
        "What is 1+1?",
        "debate",
        history,
        [(1, "ignored")],
        "Be brief.",
        values={"who": "Agent 1"},
        boards=boards,
    )
    assert [m["role"] for m in msgs] == ["system", "user"] and msgs[1] == user
    assert user["content"] == (
        f"{prompts.first('What is 1+1?')}\n\n"
        "These are the solutions of every agent after round 0:\n"
        "Agent 0: ```zero```\nAgent 1: ```one```\nAgent 2: ```two```\n\n"
        "Using the solutions on the boards above as additional information, can you provide an updated "
        "answer? Explain your reasoning. "
        "Your final answer should be a single number, in the form \\boxed{answer}, at the end of your response.\n"
        "You are Agent 1 on the boards above."
    )
    with_image, _ = build_messages(
        prompts, "q", "debate", [], [], values={"who": "Agent 0"}, boards=boards, image="data:image/png;base64,AA"
    )
    assert with_image[0]["content"][0]["text"].startswith(prompts.first("q"))  # the image joins the one message


def test_the_shared_stages_are_overridable_like_the_others():
    prompts = PromptSet.for_task(
        "numeric",
        {"all": {"shared_entry": "\n[$label] $text", "shared_board": "Round $round:$entries", "shared_turn": "$who?"}},
    )
    msgs, _ = build_messages(
        prompts, "q", "debate", [], [], values={"who": "Agent 0"}, boards=(Board(1, (("Agent 0", "a"),)),)
    )
    assert msgs[0]["content"].endswith("\n\nRound 1:\n[Agent 0] a\n\nAgent 0?")
    with pytest.raises(PromptError, match=r"prompts.all.shared_entry: bad placeholder\(s\) \['peers'\]"):
        PromptSet.for_task("numeric", {"all": {"shared_entry": "$peers"}})


# --------------------------------------------------------------------------- MAD


@pytest.mark.parametrize("memory", ["full", "last"])
def test_mad_readers_share_the_first_prompt_and_every_board_byte_for_byte(memory):
    backend, rows = captured(protocol="mad", agents=3, rounds=3, prompt_layout="shared", memory=memory)
    first = [r for r in backend.requests if r.meta["kind"] == "first"]
    later = [r for r in backend.requests if r.meta["kind"] == "debate"]
    assert len(first) == 3 and len(later) == 6
    round0 = user_text(first[0])
    assert all(user_text(r) == round0 for r in first)  # round 0: the paper's prompt, one for all
    by_round = [later[:3], later[3:]]
    for t, reqs in enumerate(by_round, start=1):
        texts = [user_text(r) for r in reqs]
        assert all(len(r.messages) == 1 for r in reqs)  # one user message, no transcript
        assert all(x.startswith(round0 + SEPARATOR) for x in texts)
        assert len({shared_part(x) for x in texts}) == 1  # byte-identical up to the reader's own part
        for i, x in enumerate(texts):
            assert x.endswith(x[x.rindex(SEPARATOR) :]) and f"You are Agent {i} on the boards above." in x
        boards = shared_part(texts[0])[len(round0) :]
        kept = range(t) if memory == "full" else [t - 1]
        assert boards.count("These are the solutions of every agent") == len(kept)
        for u in kept:  # every answer of round u, in agent order, labelled, own included
            at = [boards.index(f"\nAgent {j}: ```", boards.index(f"after round {u}:")) for j in range(3)]
            assert at == sorted(at)
    full_1, full_2 = (shared_part(user_text(reqs[0])) for reqs in by_round)
    if memory == "full":  # round 2's shared part extends round 1's
        assert full_2.startswith(full_1)
    else:
        assert "after round 0" not in full_2
    assert sum(r.prompt_tokens for _, log in rows for r in log.records) == rows[0][0]["prompt_tokens"]


def test_mad_boards_show_what_the_agents_said_and_the_oracle_reads_the_peers():
    backend, rows = captured(protocol="mad", agents=3, rounds=2, prompt_layout="shared")
    log = rows[0][1]
    said = {r.agent_id: r.text for r in log.records if r.round == 0}
    for req in (r for r in backend.requests if r.meta["kind"] == "debate"):
        assert all(f"Agent {j}: ```{said[j]}```" in user_text(req) for j in range(3))
    calls = [r for r in log.records if r.round == 1]
    assert [c.peers for c in calls] == [[1, 2], [0, 2], [0, 1]]
    answers = {r.agent_id: r.answer for r in log.records if r.round == 0}
    for req, rec in zip((r for r in backend.requests if r.meta["kind"] == "debate"), calls):
        assert req.meta["peer_answers"] == [answers[j] for j in rec.peers]
        assert req.meta["own_answer"] == answers[rec.agent_id]


def test_mad_summary_memory_makes_one_summary_of_the_whole_board_per_model():
    backend, rows = captured(protocol="mad", agents=3, rounds=3, memory="summary", prompt_layout="shared")
    summaries = [r for r in backend.requests if r.meta["kind"] == "summary"]
    assert len(summaries) == 2  # one per round, not one per reader
    assert all(f"Agent {j}: ```" in user_text(s) for s in summaries for j in range(3))  # labelled, all of them
    last = [user_text(r) for r in backend.requests if r.meta["kind"] == "mad_summary_debate"][-3:]
    assert len({shared_part(x) for x in last}) == 1 and shared_part(last[0]).count("\nSummary: ```") == 2
    records = rows[0][1].records
    assert [(r.agent_id, r.peers) for r in records if r.kind == "mad_summary"] == [(-1, [0, 1, 2])] * 2

    backend, rows = captured(
        protocol="mad", agents=3, rounds=2, memory="summary", prompt_layout="shared", models="big*1,small*2"
    )
    calls = [r for r in rows[0][1].records if r.kind == "mad_summary"]
    assert [(c.model, c.group) for c in calls] == [("big", 0), ("small", 1)]  # summary group k: the k-th model
    edges = {(e[1], e[2]) for e in rows[0][1].edges if e[0] == 1}
    assert edges == {(-1, 0), (-2, 1), (-2, 2)}  # each agent reads its own model's summary
    turns = [user_text(r) for r in backend.requests if r.meta["kind"] == "mad_summary_debate"]
    assert shared_part(turns[1]) == shared_part(turns[2]) != shared_part(turns[0])


def test_a_lone_mad_agent_is_shown_its_own_reply():
    backend, _ = captured(protocol="mad", agents=1, rounds=2, prompt_layout="shared", memory="summary")
    (turn,) = [r for r in backend.requests if r.meta["kind"] == "self_check"]
    assert "Agent 0: ```" in user_text(turn) and len(backend.requests) == 2  # no summary of one reply


# --------------------------------------------------------------------------- groups


def assert_groups_share_boards(backend: Capture, rows: list) -> None:
    """Every debate turn is one user message; in a round, the speakers of a group send the same
    text up to their own part; an intra-group board lists the group's agents only (labelled, id
    order), an inter-group board (summaries) is the same for every speaker."""
    calls = sent(backend, rows)
    group_of = {rec.agent_id: rec.group for rec, _ in calls if rec.round == 0}
    turns = [(rec, req) for rec, req in calls if rec.agent_id >= 0 and rec.round > 0]
    assert turns
    by_round: dict[tuple, dict[int, set[str]]] = {}
    for rec, req in turns:
        assert len(req.messages) == 1 and f"You are Agent {rec.agent_id} of Group {rec.group} " in user_text(req)
        part = shared_part(user_text(req))
        by_round.setdefault((rec.question_id, rec.round), {}).setdefault(rec.group, set()).add(part)
        newest = part[part.rindex("These are") :]
        if rec.kind.endswith("_inter"):
            assert "\nGroup 0: ```" in newest and "Agent" not in newest
        else:
            labels = [line.split(":")[0] for line in newest.splitlines()[1:] if line.startswith("Agent ")]
            shown = [int(x.split()[1]) for x in labels]
            group = [a for a, g in group_of.items() if g == rec.group]
            assert shown == sorted(shown) and set(shown) <= set(group)
            if rec.kind.startswith("gd_"):  # every member, own reply included (S2-MAD: its unique ones)
                assert shown == sorted(group)
    for groups in by_round.values():
        assert all(len(parts) == 1 for parts in groups.values())


@pytest.mark.parametrize("memory", ["last", "full"])
def test_group_debate_members_of_a_group_share_their_boards(memory):
    backend, rows = captured(
        protocol="group", agents=5, rounds=5, groups="2+3", memory=memory, prompt_layout="shared", n_q=2
    )
    assert_groups_share_boards(backend, rows)
    records = [r for r in rows[0][1].records if r.agent_id >= 0]
    assert [r.kind for r in records if r.round == 2] == ["gd_inter"] * 5
    summaries = [req for rec, req in sent(backend, rows) if rec.agent_id < 0]
    assert summaries and all(user_text(s).count("\nAgent ") in (2, 3) for s in summaries)
    last = [req for rec, req in sent(backend, rows) if rec.round == 4 and rec.agent_id >= 0][0]
    assert shared_part(user_text(last)).count("These are") == (4 if memory == "full" else 1)
    for row, log in rows:
        assert sum(r.prompt_tokens for r in log.records) == row["prompt_tokens"]


@pytest.mark.parametrize("extra", [{}, {"filter": False}, {"jump": False}, {"groups": "1+4"}])
def test_s2mad_speakers_of_a_group_share_one_board(extra):
    kw = {"protocol": "s2mad", "agents": 5, "rounds": 5, "groups": "2+3", "prompt_layout": "shared", "n_q": 4}
    backend, rows = captured(**{**kw, **extra})
    assert_groups_share_boards(backend, rows)
    assert any(row["n_skipped"] for row, _ in rows) or extra.get("jump") is False


def test_s2mad_shared_boards_hold_the_groups_unique_replies():
    """With answer similarity, an intra board lists one reply per distinct answer of the group,
    the first in id order; every speaker of the group gets the same board."""
    from engine.protocols import Context, Reply, Step, get_protocol
    from tests.support.protocol_driver import drive

    cfg = RunConfig.flat(
        protocol="s2mad", agents=4, rounds=2, groups="1", prompt_layout="shared"
    ).validate()  # one group
    said = ["7", "7", "8", "9"]
    steps: list[Step] = []

    def answer(req):
        steps.append(req)
        return [Reply(f"A{c.agent}", said[c.agent]) for c in req.calls]

    drive(get_protocol("s2mad")(Context(arithmetic_questions(1, seed=0)[0], cfg, key=1)), answer)
    calls = steps[1].calls
    assert [c.agent for c in calls] == [0, 1, 2, 3]  # every agent has a differing mate: all speak
    assert {c.boards for c in calls} == {(Board(0, (("Agent 0", "A0"), ("Agent 2", "A2"), ("Agent 3", "A3"))),)}
    assert [c.peers for c in calls] == [[2, 3], [0, 2, 3], [0, 3], [0, 2]]


# --------------------------------------------------------------------------- other protocols


@pytest.mark.parametrize("protocol, extra", [("sc", {}), ("cot", {}), ("reconcile", {"rounds": 3})])
def test_protocols_whose_prompts_are_already_shared_run_them_unchanged(protocol, extra):
    from app.sweep import unread_given

    a, _ = captured(protocol=protocol, agents=3, **extra)
    b, _ = captured(protocol=protocol, agents=3, prompt_layout="shared", **extra)
    assert [r.messages for r in a.requests] == [r.messages for r in b.requests]
    cfg = RunConfig.flat(protocol=protocol, agents=3, prompt_layout="shared", backend="simulated").validate()
    (line,) = unread_given(cfg, {"prompt_layout": "shared"})
    assert line.startswith("--prompt-layout changes nothing here: ")


@pytest.mark.parametrize(
    "protocol, extra",
    [("sparse", {"density": 0.5}), ("probmad", {"density": 0.5}), ("cortex", {}), ("chateval", {}), ("prd", {})],
)
def test_protocols_whose_readers_differ_refuse_shared_in_one_line(protocol, extra, capsys):
    from app.cli import main

    with pytest.raises(ConfigError, match=f"--prompt-layout shared is not available with --protocol {protocol}:"):
        RunConfig.flat(protocol=protocol, agents=3, prompt_layout="shared", **extra).validate()
    flags = [f"--{k}={v}" for k, v in extra.items()]
    code = main(["run", "--backend", "simulated", "--protocol", protocol, "--prompt-layout", "shared", *flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith(f"debate: error: --prompt-layout shared is not available with --protocol {protocol}")


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"protocol": "mad", "talk": "one-by-one"}, "--prompt-layout shared needs --talk simultaneous"),
        ({"protocol": "s2mad", "group_density": 0.5}, r"--prompt-layout shared needs --group-density 1 \(got 0.5\)"),
        ({"protocol": "mad", "prompt_layout": "both"}, "--prompt-layout 'both' is not one of paper, shared"),
    ],
)
def test_shared_refuses_readers_that_differ_within_a_protocol(kw, message):
    with pytest.raises(ConfigError, match=message):
        RunConfig.flat(**{"prompt_layout": "shared", "agents": 4, **kw}).validate()


def test_a_sweep_over_layouts_keeps_one_cell_for_protocols_that_do_not_read_it(tmp_path):
    from app.sweep import expand, parse_sweep

    spec = parse_sweep(
        {
            "backend": "simulated",
            "limit": 2,
            "agents": 5,
            "grid": {"protocol": ["mad", "sc", "sparse"], "prompt_layout": ["paper", "shared"], "density": [0.5]},
        }
    )
    cells = [c for c in expand(spec, tmp_path / "out") if c.valid]
    assert sorted((c.config.experiment.protocol, c.config.option(PROMPT_LAYOUT)) for c in cells) == [
        ("mad", "paper"),
        ("mad", "shared"),
        ("sc", "paper"),
        ("sparse", "paper"),
    ]


def test_report_labels_say_shared():
    from app.report import RunData, base_label

    for protocol in ("mad", "group", "s2mad"):
        cfg = RunConfig.flat(protocol=protocol, agents=4, prompt_layout="shared", backend="simulated")
        data = RunData(run_dir=None, run_id="x", run={}, config=cfg.to_dict(), questions=[], calls=None)
        assert "layout=shared" in base_label(data).split()


def test_the_paper_layout_call_has_no_boards():
    assert AgentCall(agent=0, stage="first").boards is None and SummaryCall(0, []).board is None


@pytest.mark.slow  # loads the packaged SmolLM2 tokenizer (its first use on a machine converts the GGUF: ~35 s)
@pytest.mark.parametrize("system", [None, "You are a careful mathematician."])
def test_two_readers_token_ids_share_the_whole_board_prefix_under_a_real_chat_template(system):
    """The packaged model's own chat template and tokenizer (as the local backends count prompts,
    backends.model_store.chat_token_ids): two readers of the same boards send token ids that agree
    through the end of the last board, and round 2's ids start with round 1's shared part."""
    from transformers import AutoTokenizer

    from backends.model_store import chat_token_ids, resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model("smollm2-135m-instruct"))
    prompts = PromptSet.for_task("numeric")
    question = "What is the result of 12+5*3+7-2*9?"
    replies = [
        f"Agent {j} thinks: 12 + 15 + 7 - 18 = {16 + j}. So the answer is \\boxed{{{16 + j}}}." for j in range(3)
    ]
    b0 = answer_board(0, range(3), replies)
    b1 = answer_board(1, range(3), [r.replace("thinks", "now thinks") for r in replies])

    def ids(reader: int, boards: tuple[Board, ...]) -> tuple[list[int], str]:
        msgs, user = build_messages(
            prompts, question, "debate", [], [], system, values={"who": f"Agent {reader}"}, boards=boards
        )
        return chat_token_ids(tok, msgs), user["content"]

    def common(a: list[int], b: list[int]) -> list[int]:
        k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        return a[:k]

    for boards in ((b0,), (b0, b1)):
        (a, text), (b, _) = ids(0, boards), ids(2, boards)
        prefix = tok.decode(common(a, b))
        assert shared_part(text).rstrip() in prefix  # the first prompt and every board, whole
        assert f"Agent {2}: ```" in prefix and len(common(a, b)) < len(a)
    (one, text1), (two, _) = ids(1, (b0,)), ids(1, (b0, b1))
    assert shared_part(text1).rstrip() in tok.decode(common(one, two))  # round 2 extends round 1's prefix
