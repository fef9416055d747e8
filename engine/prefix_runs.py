"""A run folder's prefill after a perfect prefix cache, from its stored prompts.

:func:`run_prefill` re-tokenizes every call's stored messages (the prompts table and
``calls.prompt``, :mod:`engine.results`) with the serving model's tokenizer and counts what a
perfect prefix cache leaves to compute (:func:`engine.prefix.computed_prefill`, which has the
definition), beside the run's measured ``calls.cached_prompt_tokens``: the cost model's
prediction (:mod:`engine.cost_model`) on one side, vLLM's cache on the other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import UserError
from engine.prefix import computed_prefill

if TYPE_CHECKING:
    import pandas as pd

ChatTokenizer = Callable[[list[dict[str, str]]], Sequence[int]]


class PrefixInputError(UserError, ValueError):
    """A run folder whose prompts cannot be re-tokenized (none stored, a message missing)."""


def run_prefill(path: str | Path, tokenizer: ChatTokenizer) -> pd.DataFrame:
    """The perfect-cache prefill of every run under ``path`` (a run or sweep folder,
    :func:`engine.results.load`), from its stored prompts re-tokenized with ``tokenizer``
    (messages ``[{"role", "content"}, ...]`` -> token ids, chat template and generation prompt
    applied, as the server tokenized them; each call's reply is tokenized as the template renders
    an assistant turn, :func:`held_sequences`: for a Hugging Face tokenizer
    ``lambda m: tok.apply_chat_template(m, add_generation_prompt=True)``; for a simulated run
    :class:`engine.word_tokens.WordTokenizer`).

    One row per call that was sent to a model, in the order the run sent them (question by
    question as stored, then round, then as recorded): ``run_id``, ``question_id``, ``round``,
    ``agent_id``, ``kind``, ``model``, ``prompt_tokens`` (as re-tokenized), ``computed`` (what a
    perfect cache leaves, :func:`computed_prefill` per model and run) and the run's measured
    ``cached_prompt_tokens`` (null where the backend could not say). A reused reply (first-round
    reuse: never sent) and a call stored without its prompt are left out; a folder with no stored
    prompt at all is a :class:`PrefixInputError`."""
    # function-level: importing pyarrow, pyarrow.compute, pyarrow.parquet here keeps it off start-up
    from engine.results import ResultsError, load

    res = load(path)
    calls = _sent_calls(res.calls)
    if calls.empty:
        raise PrefixInputError(
            f"{path}: no call with a stored prompt (runs made with --no-store-prompts, or before prompts were stored)"
        )
    try:
        messages = [res.messages(row) for row in calls.to_dict("records")]
    except ResultsError as exc:
        raise PrefixInputError(f"{path}: {exc}") from None
    ids = [tokenizer(m) for m in messages]
    held = held_sequences(tokenizer, messages, list(calls["text"]), ids)
    calls["prompt_tokens"] = [len(x) for x in ids]
    calls["computed"] = 0
    for _, rows in calls.groupby("run_id", sort=False):
        where = list(rows.index)
        calls.loc[where, "computed"] = computed_prefill(
            [ids[i] for i in where], list(rows["model"]), [held[i] for i in where]
        )
    return calls[_COLUMNS].reset_index(drop=True)


_COLUMNS = [
    "run_id",
    "question_id",
    "round",
    "agent_id",
    "kind",
    "model",
    "prompt_tokens",
    "computed",
    "cached_prompt_tokens",
]


def held_sequences(
    tokenizer: ChatTokenizer,
    messages: list[list[dict[str, str]]],
    replies: list[str | None],
    prompts: list[Sequence[int]],
) -> list[Sequence[int] | None]:
    """Per call, what it leaves in a prefix cache: its prompt's ids followed by its reply's, as the
    chat template renders the reply when a later prompt quotes it as an assistant turn (the
    messages plus that turn, cut before the template's closing tokens). ``None`` (the prompt
    alone) for a call without a reply (an error row) or where the template does not render the
    prompt as the start of prompt + reply."""
    if not messages:
        return []
    closing = len(tokenizer([*messages[0], {"role": "assistant", "content": ""}])) - len(prompts[0])
    out: list[Sequence[int] | None] = []
    for msgs, reply, prompt in zip(messages, replies, prompts):
        if not isinstance(reply, str) or not reply:
            out.append(None)
            continue
        whole = tokenizer([*msgs, {"role": "assistant", "content": reply}])
        end = len(whole) - closing
        fits = end > len(prompt) and list(whole[: len(prompt)]) == list(prompt)
        out.append(whole[:end] if fits else None)
    return out


def _sent_calls(calls: pd.DataFrame) -> pd.DataFrame:
    """The calls a model was sent, with a stored prompt, in the order sent (positional index)."""
    sent = calls[calls["prompt"].notna() & ~calls["reused"].fillna(False).astype(bool)]
    sent = sent.assign(_at=range(len(sent)))
    first = sent.groupby(["run_id", "question_id"], sort=False)["_at"].transform("min")
    sent = sent.assign(_q=first).sort_values(["_q", "round", "_at"], kind="stable")
    return sent.drop(columns=["_at", "_q"]).reset_index(drop=True)


def prefill_totals(calls: pd.DataFrame) -> pd.DataFrame:
    """Per run: calls, prompt tokens, perfect-cache computed tokens and the measured cached
    tokens (null when no call knows them) of :func:`run_prefill`'s rows."""
    grouped = calls.groupby("run_id", sort=False)
    out = grouped[["prompt_tokens", "computed"]].sum()
    out["calls"] = grouped.size()
    out["cached_prompt_tokens"] = grouped["cached_prompt_tokens"].sum(min_count=1)
    return out.reset_index()


__all__ = ["ChatTokenizer", "PrefixInputError", "held_sequences", "prefill_totals", "run_prefill"]
