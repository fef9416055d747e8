"""What is debated and how: the protocol, agents, rounds, data set and seeds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.config.fields import ConfigPart, config_part, option
from engine.options import MAX_AGENTS, MAX_OFFSET, MAX_QUESTIONS, MAX_ROUNDS, MAX_SEED

TIE_BREAKS = ("random", "first")


@config_part("experiment")
@dataclass
class ExperimentConfig(ConfigPart):
    """The experiment: every option changes results (the run id hashes each)."""

    protocol: str = option("mad", "the debate protocol ('debate protocols' lists each: paper, options)")
    agents: int = option(3, "number of agents (samples for sc; cot always uses 1)", low=1, high=MAX_AGENTS)
    rounds: int = option(
        2,
        (
            "total rounds including the first answer (cot/sc: 1); every output numbers them from 0 "
            "(round 0: the first answers)"
        ),
        low=1,
        high=MAX_ROUNDS,
    )
    dataset: str = option(
        "arithmetic",
        (
            "'arithmetic' (generated), a JSONL/JSON/CSV/Parquet path, or hf:NAME[:CONFIG][:SPLIT] "
            "(Hugging Face datasets: hub, local cache or a folder of files; GSM8K, MATH(-500), "
            "MMLU(-Pro), GPQA, ARC, GSM-IC and HH-RLHF columns are mapped)"
        ),
    )
    task: str | None = option(None, "numeric | math | choice | pair (guessed from the file when omitted)")
    limit: int | None = option(
        None, "number of questions (default: 100 for arithmetic, else all)", low=1, high=MAX_QUESTIONS
    )
    offset: int = option(
        0,
        (
            "questions skipped at the start of the data set (arithmetic: of its seeded stream) before"
            " --limit counts (default 0)"
        ),
        low=0,
        high=MAX_OFFSET,
    )
    seed: int = option(
        0,
        (
            "run seed (default 0): agent i samples with seed*1000+i; it also seeds the arithmetic "
            "questions, random graphs and groups, and each question's draws (e.g. tied votes)"
        ),
        low=0,
        high=MAX_SEED,
    )
    first_round_seed: int | None = option(
        None,
        (
            "seed of the round-0 replies only, in place of --seed (default: --seed): first answers "
            "stay fixed while later rounds change with --seed"
        ),
        low=0,
        high=MAX_SEED,
    )
    tie_break: str = option(
        "random",
        (
            "a tied vote: 'random' (default; a draw seeded by --seed and the question, never agent "
            "order, which --strong-agents sets) | 'first' (the answer seen first in agent order, Du "
            "et al.'s rule)"
        ),
        choices=TIE_BREAKS,
    )
    agent_settings: list[Any] = option([], "per-agent overrides of the settings above (YAML only)", cli=False)
    prompts: dict[str, Any] = option({}, "prompt templates by task (YAML only)", cli=False)
