"""Closed-form token cost model: predicted prompt and completion tokens of a protocol.

Every prompt the engine sends is a chat: a fixed framing per message plus the message contents,
and the contents are the prompt templates (fixed text), the question and earlier replies. So a
call's prompt length is a linear function of the question length ``Q``, the reply length ``C``
and the number of replies it shows. With

    g   tokens the chat template adds once per prompt (generation prompt, BOS, ...)
    f   tokens it adds per message (role markers, end-of-turn)
    a1  template tokens of the first prompt (without the question)
    a2  template tokens of the debate prompt (without the question and the peers block)
    a3  template tokens around ONE shown reply (the "peer" stage, without the reply)
    a4  template tokens of the self-check prompt (without the question)

an agent's prompt in round t >= 1 (full memory) that reads k_u replies in round u is

    P_t = g + (f + a1 + Q) + t (f + C) + sum_{u=1..t} (f + a2 + Q + k_u (a3 + C))

(a self-check round, k_u = 0, has a4 instead of a2); with forgetting the history is the first
prompt and the last reply only: P_t = g + (f + a1 + Q) + (f + C) + (f + a2 + Q + k_t (a3 + C)).
Round 0 is P_0 = g + f + a1 + Q. Completion tokens are C per call. A run is the sum over agents
and rounds: fully connected MAD has k = N-1, a regular graph of density D has k = D (N-1), and
ProbMAD has E[k] = D (N-1) with probability (1-D)^(N-1) of a self-check round.

The constants are *measured* from the engine's own prompt templates with the serving model's
token counter (:func:`measure`), so the same formulas serve the simulated whitespace tokenizer
(where they are exact) and a real tokenizer (where merges at the seams between a template and
inserted text make them approximate, typically within a few percent).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from engine.prompts import PromptSet

ContentCounter = Callable[[str], int]


@dataclass(frozen=True)
class Sizes:
    g: int
    f: int
    a1: int
    a2: int
    a3: int
    a4: int
    system: int = 0  # content tokens of the system prompt (0: none)


@dataclass(frozen=True)
class Cost:
    prompt_tokens: float
    completion_tokens: float
    calls: float

    @property
    def total(self) -> float:
        return self.prompt_tokens + self.completion_tokens


def measure(prompts: PromptSet, content_tokens: ContentCounter, chat_tokens: Callable[[list[dict]], int],
            system_prompt: str | None = None) -> Sizes:
    """Measure the constants from the templates: contents with an empty question and reply.

    ``content_tokens(text)`` counts a message body; ``chat_tokens(messages)`` counts a whole
    prompt (chat template applied), from which the per-prompt and per-message framing follow.
    """
    one = [{"role": "user", "content": "x"}]
    two = one + [{"role": "assistant", "content": "x"}]
    g_plus_f = chat_tokens(one) - content_tokens("x")
    f = chat_tokens(two) - chat_tokens(one) - content_tokens("x")
    q = "x"
    qx = content_tokens(q)
    a1 = content_tokens(prompts.render("first", question=q)) - qx
    a2 = content_tokens(prompts.render("debate", question=q, peers="")) - qx
    a3 = content_tokens(prompts.peers_block([(0, q)])) - qx
    a4 = content_tokens(prompts.render("self_check", question=q)) - qx
    return Sizes(g=g_plus_f - f, f=f, a1=a1, a2=a2, a3=a3, a4=a4,
                 system=content_tokens(system_prompt) if system_prompt else 0)


def _agent_prompts(s: Sizes, q: float, c: float, rounds: int, debate_msg: Callable[[int], float], forgetting: bool) -> float:
    """Sum of one agent's prompt tokens over all rounds. ``debate_msg(t)`` = f + content of round t's message."""
    base = s.g + s.f + s.a1 + q + ((s.f + s.system) if s.system else 0)
    total = base  # round 0
    history = 0.0
    for t in range(1, rounds):
        msg = debate_msg(t)
        if forgetting:
            total += base + (s.f + c) + msg
        else:
            total += base + t * (s.f + c) + history + msg
            history += msg
    return total


def topology_cost(s: Sizes, n_agents: int, rounds: int, question_tokens: float, reply_tokens: float,
                  peers_per_round: float, self_check_prob: float = 0.0, forgetting: bool = False) -> Cost:
    """MAD / sparse / ProbMAD / CoT / CoT-SC: each debate round every agent reads ``peers_per_round``
    replies on average (0 -> self-check); a fraction ``self_check_prob`` of debate turns self-check."""
    q, c = question_tokens, reply_tokens
    debate = s.f + s.a2 + q
    check = s.f + s.a4 + q

    def msg(_t: int) -> float:
        return (1 - self_check_prob) * debate + self_check_prob * check + peers_per_round * (s.a3 + c)

    prompt = n_agents * _agent_prompts(s, q, c, rounds, msg, forgetting)
    calls = n_agents * rounds
    return Cost(prompt_tokens=prompt, completion_tokens=calls * c, calls=calls)


def predict(protocol: str, s: Sizes, n_agents: int, rounds: int, question_tokens: float, reply_tokens: float,
            density: float | None = None, forgetting: bool = False) -> Cost:
    """Predicted tokens of one question for the MAD family (``cot``, ``sc``, ``mad``, ``sparse``, ``probmad``)."""
    n = n_agents
    if protocol == "cot":
        return topology_cost(s, 1, 1, question_tokens, reply_tokens, 0)
    if protocol == "sc":
        return topology_cost(s, n, 1, question_tokens, reply_tokens, 0)
    if protocol == "mad":
        return topology_cost(s, n, rounds, question_tokens, reply_tokens, n - 1, forgetting=forgetting)
    if protocol == "sparse":
        if density is None:
            raise ValueError("sparse needs density")
        k = density * (n - 1)
        return topology_cost(s, n, rounds, question_tokens, reply_tokens, k, 1.0 if k == 0 else 0.0, forgetting)
    if protocol == "probmad":
        if density is None:
            raise ValueError("probmad needs density")
        p_alone = (1 - density) ** (n - 1)
        return topology_cost(s, n, rounds, question_tokens, reply_tokens, density * (n - 1), p_alone, forgetting)
    raise ValueError(f"no cost model for protocol {protocol!r}")
