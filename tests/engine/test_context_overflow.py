"""The --context-overflow truncate policy (engine.messages.truncate_oldest_turns), without a model."""

import pytest

from engine.config import ConfigError, RunConfig
from engine.messages import ContextOverflow, truncate_oldest_turns


def words(msgs):  # a stand-in tokenizer: one token per word
    return sum(len(m["content"].split()) for m in msgs)


def conv(n_turns, system=True):
    msgs = [{"role": "system", "content": "s"}] if system else []
    for k in range(n_turns):
        msgs += [{"role": "user", "content": f"u{k} " * 10}, {"role": "assistant", "content": f"a{k} " * 10}]
    return msgs + [{"role": "user", "content": "now " * 5}]


def test_fits_already_nothing_dropped():
    msgs = conv(3)
    assert truncate_oldest_turns(msgs, words, words(msgs) + 1) == (msgs, 0)


def test_oldest_turn_after_the_first_goes_first():
    msgs = conv(4)  # 1 + 80 + 5 = 86 tokens
    out, dropped = truncate_oldest_turns(msgs, words, 86)  # needs 87: one turn of 20 must go
    assert dropped == 2
    assert out == msgs[:3] + msgs[5:]  # system, first turn (u0, a0), then u2.. and the current message
    out, dropped = truncate_oldest_turns(msgs, words, 50)  # 86 -> 66 -> 46: two turns go
    assert dropped == 4 and out == msgs[:3] + msgs[7:]


def test_first_turn_goes_last_and_system_and_current_never():
    msgs = conv(3)
    out, dropped = truncate_oldest_turns(msgs, words, 8)  # only system + current (6 tokens) fit
    assert out == [msgs[0], msgs[-1]] and dropped == 6
    with pytest.raises(ContextOverflow, match="even after dropping every earlier turn"):
        truncate_oldest_turns(msgs, words, 6)


def test_roles_still_alternate_after_truncation():
    for limit in range(8, 120, 7):
        out, _ = truncate_oldest_turns(conv(5, system=False), words, limit)
        roles = [m["role"] for m in out]
        assert all(a != b for a, b in zip(roles, roles[1:])) and roles[-1] == "user"


def test_policy_flag_is_checked_and_changes_the_run_id():
    with pytest.raises(ConfigError, match="--context-overflow 'cut'"):
        RunConfig.flat(context_overflow="cut").validate()
    assert RunConfig.flat(context_overflow="truncate").run_id() != RunConfig().run_id()
    assert {s.context_overflow for s in RunConfig.flat(context_overflow="truncate", agents=3).agent_specs()} == {
        "truncate"
    }
