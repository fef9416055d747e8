"""The debate state machine for one question, and the protocol plans that drive it.

Pure logic: no Ray, no model. The coordinator actor owns one :class:`Debate` per question in
flight, asks it for the current round's turns, runs them, feeds the replies back and advances.

Protocols in this module (all share the same prompts, :mod:`engine.prompts`):

* ``cot``     one agent, one round (chain-of-thought baseline).
* ``sc``      CoT-SC(k): k independent samples in one round, majority vote.
* ``mad``     Du et al. fully connected debate with *simultaneous talk*: in round t >= 1 every
              agent reads all peers' round t-1 replies.
* ``sparse``  the same, but agent i reads only its neighbours in a static topology (regular
              graph of density D, ring, star, user edge list), as in Li et al. 2024.
* ``probmad`` each agent reads each peer's previous reply with probability D, resampled per
              round and question (Li et al. 2024, appendix E).

An agent that reads no peer in a debate round makes a ``self_check`` turn. The final answer is
the majority vote of the last round's parsed answers (:func:`engine.extract.majority_vote`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from engine.config import RunConfig
from engine.extract import answers_equal, majority_vote
from engine.records import CallRecord, Turn
from engine.tasks import Question
from topologies import Topology, make_topology


def question_key(seed: int, qid: str) -> int:
    """A stable 63-bit integer per (run seed, question) for per-question randomness."""
    h = hashlib.sha1(f"{seed}:{qid}".encode()).digest()
    return int.from_bytes(h[:8], "big") >> 1


def call_seed(agent_seed: int, key: int, round_: int) -> int:
    """Per-call sampling seed: reproducible, distinct per agent, question and round."""
    h = hashlib.sha1(f"{agent_seed}:{key}:{round_}".encode()).digest()
    return int.from_bytes(h[:4], "big")


def build_topology(cfg: RunConfig) -> Topology:
    """The topology a run's protocol uses (CoT/SC have no debate rounds, so it is never read)."""
    n = cfg.n_agents
    if cfg.protocol in ("cot", "sc", "mad"):
        return make_topology("full", n)
    if cfg.protocol == "probmad":
        return make_topology("probmad", n, density=cfg.density, seed=cfg.seed)
    kind = cfg.topology or ("edges" if cfg.edges else "regular")
    return make_topology(kind, n, density=cfg.density, edges=cfg.edges, center=cfg.center, seed=cfg.seed)


@dataclass
class Debate:
    """State of one question's debate: the rounds done so far and every agent's replies."""

    question: Question
    topology: Topology
    n_agents: int
    n_rounds: int
    key: int
    round: int = 0
    records: dict[tuple[int, int], CallRecord] = field(default_factory=dict)
    finished: bool = False

    def plan(self) -> list[Turn]:
        """The turns of the current round (every agent speaks once per round here)."""
        if self.finished:
            return []
        if self.round == 0:
            return [Turn(agent=i, round=0, kind="first") for i in range(self.n_agents)]
        peers = self.topology.peers(self.round, self.key)
        turns = []
        for i in range(self.n_agents):
            p = [j for j in peers.get(i, []) if j != i]
            turns.append(Turn(agent=i, round=self.round, kind="debate" if p else "self_check", peers=p))
        return turns

    def peer_texts(self, turn: Turn) -> list[tuple[int, str]]:
        """(agent id, previous-round text) of each peer the turn reads."""
        return [(j, self.records[(turn.round - 1, j)].text) for j in turn.peers]

    def peer_answers(self, turn: Turn) -> list[str | None]:
        return [self.records[(turn.round - 1, j)].answer for j in turn.peers]

    def record(self, rec: CallRecord) -> None:
        if rec.round != self.round:
            raise ValueError(f"record for round {rec.round} while the debate is in round {self.round}")
        self.records[(rec.round, rec.agent_id)] = rec

    def round_complete(self) -> bool:
        return all((self.round, i) in self.records for i in range(self.n_agents))

    def advance(self) -> bool:
        """Close the current round; return True if another round follows."""
        if not self.round_complete():
            raise ValueError(f"round {self.round} is not complete")
        if self.round + 1 >= self.n_rounds:
            self.finished = True
            return False
        self.round += 1
        return True

    @property
    def rounds_run(self) -> int:
        return len({r for r, _ in self.records})

    def answers(self, round_: int | None = None) -> list[str | None]:
        r = self.round if round_ is None else round_
        return [self.records[(r, i)].answer if (r, i) in self.records else None for i in range(self.n_agents)]

    def final_answer(self) -> str | None:
        return majority_vote(self.answers(self.rounds_run - 1))

    def consensus(self, round_: int) -> float:
        """Share of agents whose answer equals the round's majority answer (invalid = dissent)."""
        answers = self.answers(round_)
        maj = majority_vote(answers)
        if maj is None:
            return 0.0
        return sum(a == maj for a in answers) / len(answers)

    def correct(self) -> bool:
        return answers_equal(self.final_answer(), self.question.gold, self.question.task)
