"""ChatEval (Chan et al. 2024): roles in the prompts, who reads whom under each communication
strategy, the summarizer's calls and what the agents see of them, the vote, failed calls, and the
closed-form cost, exact against the simulated model."""

from __future__ import annotations

import pytest

from actors.local_run import run_local
from backends.simulated_backend import SimulatedBackend, count_tokens
from engine import cost_model, cost_predict
from engine.config import ConfigError, RunConfig
from engine.options import Option
from engine.prompts import PromptSet
from engine.protocols import get_protocol
from engine.protocols.base import SUMMARIZER, AgentCall, Context, Reply, Step, SummaryCall, summary_node
from engine.protocols.chateval import CHATEVAL_ROLES, DEFAULT_ROLES, Role, agent_roles, chateval_cost
from engine.tasks import arithmetic_questions
from tests.support.protocol_driver import drive

GP, CR, NA = "General Public", "Critic", "News Author"


def _trace(cfg: RunConfig, answer=None, fail=()):
    """Run ChatEval on fake replies. An agent's reply text is ``A<agent>r<round>``, a summary's
    ``S<n>r<round>``; ``answer(call, round)`` gives its answer (default: the agent id);
    ``fail`` lists (round, agent) calls that end in an error."""
    steps: list[Step] = []
    made = {"summaries": 0}

    def reply(req):
        steps.append(req)
        out = []
        for call in req.calls:
            if isinstance(call, SummaryCall):
                made["summaries"] += 1
                out.append(Reply(f"S{made['summaries']}r{req.round}", "S"))
            elif (req.round, call.agent) in fail:
                out.append(Reply("", None, error="boom"))
            else:
                out.append(Reply(f"A{call.agent}r{req.round}", answer(call, req.round) if answer else str(call.agent)))
        return out

    ctx = Context(question=arithmetic_questions(1, seed=0)[0], cfg=cfg.validate(), key=7)
    return steps, drive(get_protocol("chateval")(ctx), reply)


def _calls(steps):
    return [
        (s.round, c.agent, c.stage, c.peers, c.values["history"])
        for s in steps
        for c in s.calls
        if isinstance(c, AgentCall)
    ]


# --------------------------------------------------------------------------- roles


def test_roles_are_assigned_cyclically_by_agent_id_and_numbered_when_repeated():
    roles = agent_roles(7)
    assert [r.name for r in roles] == [GP, CR, NA, "Psychologist", "Scientist", "General Public 2", "Critic 2"]
    assert [r.description for r in roles] == [r.description for r in DEFAULT_ROLES + DEFAULT_ROLES[:2]]
    own = [{"name": "Judge", "description": "You weigh both sides."}, {"name": "Skeptic", "description": "You doubt."}]
    assert agent_roles(3, own) == [
        Role("Judge", "You weigh both sides."),
        Role("Skeptic", "You doubt."),
        Role("Judge 2", "You weigh both sides."),
    ]


def test_the_role_reaches_the_first_prompt_and_the_name_every_turn_not_the_system_prompt():
    """The prompts an agent really sends (AgentCore renders them): the system prompt is the user's
    own; the first message holds the role's name and description and the cue with the name; a
    later turn holds the cue with the name but not the description again."""
    own = [
        {"name": "Judge", "description": "You weigh both sides carefully."},
        {"name": "Skeptic", "description": "You doubt every single step."},
    ]
    cfg = RunConfig.flat(
        protocol="chateval", agents=3, rounds=2, backend="simulated", system_prompt="Be exact.", chateval_roles=own
    ).validate()
    sent = []

    class Recording(SimulatedBackend):
        def generate(self, requests):
            sent.extend(requests)
            return super().generate(requests)

    ((row, log),) = run_local(cfg, arithmetic_questions(1, seed=0), Recording(reply_tokens=12))
    by_agent = {}
    for rec, req in zip(log.records, sent):
        by_agent.setdefault(rec.agent_id, []).append(req.messages)
    first, later = by_agent[2]  # agent 2 is "Judge 2" (roles cycle)
    assert first[0] == {"role": "system", "content": "Be exact."} and later[0] == first[0]
    assert (
        "You are now Judge 2, one of the referees in this task. You weigh both sides carefully." in first[1]["content"]
    )
    assert "make your talk short and clear, Judge 2 !" in first[1]["content"]
    assert "[Question]\n" + arithmetic_questions(1, seed=0)[0].text in first[1]["content"]
    assert (
        len(first) == 2 and len(later) == 4 and later[1] == first[1]
    )  # full memory: its first prompt, its reply, the turn
    turn = later[-1]["content"]
    assert "make your talk short and clear, Judge 2 !" in turn and "weigh both sides" not in turn
    assert "You doubt every single step." in by_agent[1][0][1]["content"]
    assert row["n_calls"] == 6 and row["n_summary_calls"] == 0


# --------------------------------------------------------------------------- who reads whom


def test_one_by_one_reads_everything_said_since_its_last_turn_in_order():
    steps, outcome = _trace(RunConfig.flat(protocol="chateval", agents=3, rounds=3))
    assert [len(s.calls) for s in steps] == [1] * 9 and [s.round for s in steps] == [0] * 3 + [1] * 3 + [2] * 3
    calls = _calls(steps)
    assert [(r, a, st, p) for r, a, st, p, _ in calls] == [
        (0, 0, "chateval_first", []),
        (0, 1, "chateval_first", [0]),
        (0, 2, "chateval_first", [0, 1]),
        (1, 0, "chateval_turn", [1, 2]),
        (1, 1, "chateval_turn", [2, 0]),
        (1, 2, "chateval_turn", [0, 1]),
        (2, 0, "chateval_turn", [1, 2]),
        (2, 1, "chateval_turn", [2, 0]),
        (2, 2, "chateval_turn", [0, 1]),
    ]
    history = {(r, a): h for r, a, _, _, h in calls}
    assert history[(0, 0)] == ""
    assert history[(0, 2)] == f"[{GP}]: A0r0\n[{CR}]: A1r0\n"
    assert history[(1, 1)] == f"[{NA}]: A2r0\n[{GP}]: A0r1\n"  # the rest of round 0, then round 1 so far
    assert history[(2, 0)] == f"[{CR}]: A1r1\n[{NA}]: A2r1\n"  # never its own lines, nothing twice
    assert outcome.rounds_run == 3 and outcome.info["talk"] == "one-by-one"


def test_simultaneous_talk_reads_the_others_previous_round():
    steps, _ = _trace(RunConfig.flat(protocol="chateval", agents=3, rounds=3, chateval_talk="simultaneous"))
    assert [len(s.calls) for s in steps] == [3, 3, 3]
    calls = _calls(steps)
    assert all(p == [] and h == "" for r, _, _, p, h in calls if r == 0)
    history = {(r, a): (p, h) for r, a, _, p, h in calls}
    assert history[(1, 1)] == ([0, 2], f"[{GP}]: A0r0\n[{NA}]: A2r0\n")
    assert history[(2, 0)] == ([1, 2], f"[{CR}]: A1r1\n[{NA}]: A2r1\n")


def test_the_summarizer_summarises_the_whole_chat_after_every_round_but_the_last_and_everyone_reads_it():
    steps, outcome = _trace(RunConfig.flat(protocol="chateval", agents=3, rounds=3, chateval_talk="summarizer"))
    assert [[type(c).__name__ for c in s.calls] for s in steps] == [
        ["AgentCall"] * 3,
        ["SummaryCall"],
        ["AgentCall"] * 3,
        ["SummaryCall"],
        ["AgentCall"] * 3,
    ]
    s1, s2 = steps[1].calls[0], steps[3].calls[0]
    assert (steps[1].round, steps[3].round) == (0, 1)
    assert s1.agent == 0 and s1.stage == "chateval_summary" and s1.sources == [0, 1, 2]
    round0 = f"[{GP}]: A0r0\n[{CR}]: A1r0\n[{NA}]: A2r0\n"
    round1 = f"[{GP}]: A0r1\n[{CR}]: A1r1\n[{NA}]: A2r1\n"
    assert s1.values["history"] == round0
    assert s2.values["history"] == round0 + "[Summarizer]: S1r0\n" + round1  # the earlier summary stays, once
    assert s2.answers == ["0", "1", "2", "S", "0", "1", "2"]
    calls = _calls(steps)
    history = {(r, a): (p, h) for r, a, _, p, h in calls}
    # the summary is added after the round's messages (ChatEval's code), not instead of them
    assert history[(1, 1)] == ([0, 2], f"[{GP}]: A0r0\n[{NA}]: A2r0\n[Summarizer]: S1r0\n")
    assert history[(2, 2)] == ([0, 1], f"[{GP}]: A0r1\n[{CR}]: A1r1\n[Summarizer]: S2r1\n")
    peer_answers = {(s.round, c.agent): c.peer_answers for s in steps for c in s.calls if isinstance(c, AgentCall)}
    assert peer_answers[(1, 1)] == ["0", "2", "S"]
    assert outcome.info["summaries"] == 2
    one, _ = _trace(RunConfig.flat(protocol="chateval", agents=3, rounds=1, chateval_talk="summarizer"))
    assert len(one) == 1  # one round: nobody would read a summary


# --------------------------------------------------------------------------- vote, errors


def test_majority_vote_of_the_last_round_and_no_early_stop():
    last = {0: "7", 1: "3", 2: "7"}

    def answer(call, round_):
        return "5" if round_ < 2 else last[call.agent]  # everyone agrees on 5 at once: no stop

    _, outcome = _trace(RunConfig.flat(protocol="chateval", agents=3, rounds=3), answer)
    assert outcome.answers_by_round == [["5"] * 3, ["5"] * 3, ["7", "3", "7"]]
    assert outcome.final_answer == "7" and not outcome.stopped_early and outcome.rounds_run == 3


def test_a_failed_call_shows_nothing_and_its_answer_is_none():
    steps, outcome = _trace(RunConfig.flat(protocol="chateval", agents=3, rounds=2), fail={(0, 0)})
    history = {(r, a): (p, h) for r, a, _, p, h in _calls(steps)}
    assert history[(0, 1)] == ([], "")  # agent 0 said nothing: no line, no edge
    assert history[(0, 2)] == ([1], f"[{CR}]: A1r0\n")
    assert history[(1, 0)] == ([1, 2], f"[{CR}]: A1r0\n[{NA}]: A2r0\n")
    assert outcome.answers_by_round[0] == [None, "1", "2"]
    steps, _ = _trace(
        RunConfig.flat(protocol="chateval", agents=3, rounds=2, chateval_talk="summarizer"), fail={(0, 1)}
    )
    assert steps[1].calls[0].sources == [0, 2] and "A1r0" not in steps[1].calls[0].values["history"]


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"chateval_talk": "round-robin"}, "--chateval-talk 'round-robin' is not one of"),
        ({"chateval_roles": "Critic"}, "--chateval-roles must be a list"),
        ({"chateval_roles": []}, "chateval_roles must be a non-empty list"),
        ({"chateval_roles": [{"name": "Critic"}]}, r"chateval_roles\[0\] must be a mapping with the keys name and"),
        ({"chateval_roles": [{"name": " ", "description": "x"}]}, r"chateval_roles\[0\]: name must be a non-empty"),
        (
            {"chateval_roles": [{"name": "A", "description": "x"}, {"name": "A", "description": "y"}]},
            "names must differ",
        ),
        (
            {"chateval_roles": [{"name": "A", "description": "x"}, {"name": "A 2", "description": "y"}], "agents": 3},
            "agents' names must differ",
        ),
        ({"chateval_roles": [{"name": "Summarizer", "description": "x"}]}, "from 'Summarizer'"),
    ],
)
def test_options_are_checked(kw, message):
    with pytest.raises(ConfigError, match=message):
        RunConfig.flat(protocol="chateval", **kw).validate()


def test_roles_are_yaml_only_and_part_of_the_run_id():
    from app.cli import main

    with pytest.raises(SystemExit):  # YAML only: no --chateval-roles flag
        main(["run", "--chateval-roles", "x"])
    with pytest.raises(TypeError, match="declare it with cli=False"):  # a list cannot be a flag
        Option("some_list", list, None, "a list given as a flag")
    own = [{"name": "Judge", "description": "You weigh both sides."}]
    assert (
        RunConfig.flat(protocol="chateval", chateval_roles=own).run_id() != RunConfig.flat(protocol="chateval").run_id()
    )
    assert (
        RunConfig.flat(protocol="chateval", chateval_talk="summarizer").run_id()
        != RunConfig.flat(protocol="chateval").run_id()
    )


# --------------------------------------------------------------------------- cost


def words(text: str) -> int:
    return len(text.split())


REPLY = 40
OWN_ROLES = [
    {"name": "Very Careful Judge", "description": "You weigh both sides of every claim."},
    {"name": "Skeptic", "description": "You doubt."},
]


@pytest.mark.parametrize("talk", ["one-by-one", "simultaneous", "summarizer"])
@pytest.mark.parametrize(
    "n, rounds, extra",
    [
        (3, 2, {}),
        (4, 3, {"system_prompt": "You are a careful referee."}),  # agents get it, the summarizer does not
        (1, 3, {}),  # alone: reads nobody (but the summary)
        (3, 1, {}),  # one round: no summary
        (7, 2, {}),  # personas repeat: "General Public 2"
        (3, 4, {"chateval_roles": OWN_ROLES}),  # names and roles of other lengths
        (3, 3, {"prompts": {"all": {"chateval_turn": "$role again, $name: $question\n${history}$name ! $format"}}}),
    ],
)
def test_cost_is_exact_against_the_simulated_model(talk, n, rounds, extra):
    """Tolerance 0 tokens: every call is fixed by N, T, the talk and the roles, and the simulated
    model counts whitespace tokens, so a formula off by one template word, one framing, one chat
    line or one name anywhere fails. The last case's turn override shows the role and the question
    again (their turn coefficients become 1)."""
    cfg = RunConfig.flat(
        protocol="chateval", agents=n, rounds=rounds, backend="simulated", chateval_talk=talk, **extra
    ).validate()
    qs = arithmetic_questions(4, seed=3)
    q_tokens = words(qs[0].text)
    assert all(words(q.text) == q_tokens for q in qs)
    rows = run_local(cfg, qs, SimulatedBackend(reply_tokens=REPLY, accuracy=0.5, follow=0.3))
    s = cost_predict.measure(
        PromptSet.for_task("numeric", cfg.experiment.prompts), words, count_tokens, cfg.sampling.system_prompt
    )
    pred = cost_predict.predict(
        "chateval", s, n, rounds, q_tokens, REPLY, chateval_talk=talk, chateval_roles=cfg.option(CHATEVAL_ROLES)
    )
    for row, _ in rows:
        assert (row["prompt_tokens"], row["completion_tokens"], row["n_calls"]) == (
            pred.prompt_tokens,
            pred.completion_tokens,
            pred.calls,
        )
    if extra.get("prompts"):
        assert (s.chateval_turn.role, s.chateval_turn.q) == (1, 1)


def test_cost_closed_form_by_hand():
    """The docstring's closed form for made-up constants (tolerance 0): N = 2 agents named with 1
    and 2 words, role descriptions of 3 and 1 words, T = 3, C = 10, Q = 5."""
    st = cost_model.ChatStage
    s = cost_model.Sizes(
        g=2,
        f=3,
        a1=0,
        a2=0,
        a3=0,
        a4=0,
        chateval_first=st(20, q=1, name=2, role=1, history=1),
        chateval_turn=st(7, name=1, history=1),
        chateval_summary=st(11, q=1, history=1),
        line=1,
        content_tokens=words,
    )
    roles = [Role("A", "x y z"), Role("B b", "w")]
    q, c = 5, 10
    l0, l1, ls = 1 + 1 + c, 1 + 2 + c, 1 + 1 + c  # chat lines: framing + name + reply
    # one-by-one: agent 0 reads nobody in round 0, agent 1 reads agent 0; later each reads the other
    p0 = [2 + 3 + (20 + q + 2 * 1 + 3 + 0), 2 + 3 + (20 + q + 2 * 2 + 1 + l0)]
    turn = [7 + 1 + l1, 7 + 2 + l0]
    expect = sum(3 * p0[i] + 3 * (2 * 3 + c + turn[i]) for i in range(2))  # T(T-1)/2 = 3
    assert chateval_cost(s, 3, q, c, "one-by-one", roles).prompt_tokens == expect
    # summarizer: nobody reads anyone in round 0; every later turn also shows the summary line
    p0 = [2 + 3 + (20 + q + 2 + 3), 2 + 3 + (20 + q + 4 + 1)]
    turn = [7 + 1 + l1 + ls, 7 + 2 + l0 + ls]
    agents = sum(3 * p0[i] + 3 * (2 * 3 + c + turn[i]) for i in range(2))
    summaries = (2 + 3 + 11 + q + (l0 + l1)) + (2 + 3 + 11 + q + 2 * (l0 + l1) + ls)  # after rounds 0 and 1
    cost = chateval_cost(s, 3, q, c, "summarizer", roles)
    assert cost.prompt_tokens == agents + summaries
    assert cost.calls == 2 * 3 + 2 and cost.completion_tokens == cost.calls * c


# --------------------------------------------------------------------------- end to end


def test_records_graph_and_label_of_a_summarizer_run():
    from app.report import RunData, base_label

    cfg = RunConfig.flat(
        protocol="chateval", agents=3, rounds=2, backend="simulated", chateval_talk="summarizer"
    ).validate()
    ((row, log),) = run_local(cfg, arithmetic_questions(1, seed=1), SimulatedBackend())
    assert row["n_calls"] == 7 and row["n_summary_calls"] == 1 and row["rounds_run"] == 2
    summary = [r for r in log.records if r.agent_id == SUMMARIZER]
    assert [(r.round, r.kind, r.peers) for r in summary] == [(0, "chateval_summary", [0, 1, 2])]
    assert sorted((r, s, d) for r, s, d, _ in log.edges if r == 0) == [(0, 0, -1), (0, 1, -1), (0, 2, -1)]
    # round 1: each agent reads the other agents' round-0 messages, then the summary: node -1
    # (not the agents behind it), in the order the chat shows them
    for dst in range(3):
        assert [s for r, s, d, _ in log.edges if r == 1 and d == dst] == [s for s in range(3) if s != dst] + [-1]
    turns = [g for g in log.graph_rows() if g["round"] == 1 and g["dst"] >= 0]
    assert len(turns) == 3 and all(g["dst_group"] is None and g["pruned"] is None for g in turns)
    (summary_row,) = [g for g in log.graph_rows() if g["dst"] < 0]
    assert summary_row["dst"] == summary_node(0) == -1 and summary_row["dst_group"] == 0
    data = RunData(run_dir=None, run_id="x", run={}, config=cfg.to_dict(), questions=[], calls=None)
    assert base_label(data) == "chateval 3x2 summarizer (SIMULATED)"
    cfg = RunConfig.flat(protocol="chateval", agents=3, rounds=2, backend="simulated", chateval_roles=OWN_ROLES)
    data = RunData(run_dir=None, run_id="x", run={}, config=cfg.to_dict(), questions=[], calls=None)
    assert base_label(data) == "chateval 3x2 own roles (SIMULATED)"
