"""Generated tokens/s of the transformers backend as it was (baseline) and as it is, on one debate-like workload.

The baseline is ``backends/transformers_backend.py`` at commit ``--baseline`` (default e41810b:
each row sampled on the host, 16 rows per batch), read with ``git show`` into a temporary module;
the current backend is the checkout's. Both run the same requests, one after the other in this
process, each after a warm-up call: waves of requests, one wave per debate round, every request
of a wave in flight at once (``generate(list)``: continuous batching within the wave), prompts
growing round by round as the peers' answers pile up. End of turn is disabled on both backends,
so every call generates exactly ``--max-tokens`` tokens and both sides do the same work;
tokens/s = completion tokens / wall time of all waves (prefill included).

Workloads (``--workload``; ``--waves``, ``--per-wave``, ``--first-prompt``, ``--prompt-growth``
and ``--max-tokens`` override their numbers):

* ``cpu`` (default): 2 waves of 16 calls, prompts of about 120 then 240 tokens, 32 tokens each;
* ``gpu``: issue 38's shape, 3 waves of 48 calls (144), prompts of about 600, 1,030 and 1,460
  tokens (about 1,030 on average), 64 tokens each.

Both sample at temperature 0.7, top-p 0.9, a seed per call. ``--model tiny`` builds (once, under
the engine's cache folder) a random-weight Llama with tests/support/tiny_vlm.py: SmolLM2-360M's
widths (hidden 960, 15 heads, 5 KV heads, MLP 2,560) and vocabulary size (49,152, tied embeddings)
with 26 layers, 0.30B parameters, stored in bfloat16. Its tokenizer is the tiny byte-level one
(about 1.5 characters a token), so its texts are noise; ids past that tokenizer decode to nothing.
Prints a table and saves ``bench/transformers.json`` with the machine and the commit.

Usage:
  .venv/bin/python scripts/bench_transformers.py --dtype float32    # SmolLM2-135M, 2 threads, cpu workload
  .venv/bin/python scripts/bench_transformers.py --model tiny --device cuda --dtype bfloat16 --workload gpu
  .venv/bin/python scripts/bench_transformers.py --baseline-file old.py   # the baseline's text from a file
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.config import DEFAULT_MODEL  # noqa: E402
from engine.records import GenRequest  # noqa: E402
from scripts._bench_common import finish, git_commit, log_for, machine_info, rich_table  # noqa: E402

BASELINE = "e41810b"
WORKLOADS: dict[str, dict[str, int]] = {
    "cpu": {"waves": 2, "per_wave": 16, "first_prompt": 120, "prompt_growth": 120, "max_tokens": 32},
    "gpu": {"waves": 3, "per_wave": 48, "first_prompt": 600, "prompt_growth": 430, "max_tokens": 64},
}
TINY = {
    "hidden_size": 960,
    "intermediate_size": 2560,
    "num_hidden_layers": 26,
    "num_attention_heads": 15,
    "num_key_value_heads": 5,
    "vocab_size": 49152,
    "tie_word_embeddings": True,
    "max_position_embeddings": 8192,
}


def load_baseline(commit: str = BASELINE, file: str | None = None) -> Any:
    """The ``TransformersBackend`` class of the backend file at ``commit`` (or in ``file``), from a temporary module."""
    if file:
        source = Path(file).read_text()
    else:
        source = subprocess.run(
            ["git", "show", f"{commit}:backends/transformers_backend.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    name = "transformers_backend_baseline"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their class's module up
        spec.loader.exec_module(module)
    return module.TransformersBackend


def tiny_model() -> str:
    """The folder of the 0.30B random-weight Llama (``TINY``), built on first use."""
    from backends.model_store import cache_dir
    from tests.support.tiny_vlm import build_tiny_text_model

    folder = cache_dir() / "bench-work" / "tiny-llama-0.3b"
    if not (folder / "config.json").exists():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
            build_tiny_text_model(Path(tmp) / "m", dtype="bfloat16", **TINY).rename(folder)
    return str(folder)


def _sentence(rng: random.Random, agent: int, question: int) -> str:
    x, y = rng.randint(2, 99), rng.randint(2, 99)
    return f"Agent {agent} adds {x} and {y} to get {x + y}, so question {question} has the answer {x + y}. "


def _messages(q: int, agent: int, rnd: int, filler: str) -> list[dict[str, str]]:
    """One agent's prompt in a debate round: the question, then (after round 0) its own last
    answer and its peers' answers, padded with ``filler``."""
    question = f"Question {q}: what is the sum of the numbers below? Give your final answer as a number."
    if rnd == 0:
        return [{"role": "user", "content": f"{question} {filler}"}]
    return [
        {"role": "user", "content": question},
        {"role": "assistant", "content": f"Round {rnd - 1}: I think the answer is {q * 7 + agent}."},
        {"role": "user", "content": f"These are the answers of the other agents: {filler} Give an updated answer."},
    ]


def debate_waves(encode, w: dict[str, int], temperature: float = 0.7, top_p: float = 0.9) -> list[list[GenRequest]]:
    """The workload's requests, one list per wave (round); wave r's prompts aim at
    ``first_prompt + r * prompt_growth`` tokens of ``encode`` (chat template included)."""
    rng = random.Random(0)
    waves = []
    for rnd in range(w["waves"]):
        target = w["first_prompt"] + rnd * w["prompt_growth"]
        wave = []
        for k in range(w["per_wave"]):
            q, agent = divmod(k, 6)  # six agents per question, like MAD's default
            sentences = [_sentence(rng, agent, q) for _ in range(20)]
            bare = len(encode(_messages(q, agent, rnd, "")))
            per = (len(encode(_messages(q, agent, rnd, "".join(sentences)))) - bare) / 20
            n = max(0, round((target - bare) / per))
            filler = "".join(sentences[i % 20] for i in range(n))
            seed = 1000 * q + 10 * rnd + agent
            wave.append(GenRequest(_messages(q, agent, rnd, filler), temperature, top_p, w["max_tokens"], seed))
        waves.append(wave)
    return waves


def run_side(backend_cls, waves: list[list[GenRequest]], args, log) -> dict[str, Any]:
    """Load ``backend_cls`` on the model, warm it up, run every wave; what it took and made."""
    t0 = time.perf_counter()
    backend = backend_cls(
        args.model, threads=args.threads, device=args.device, max_batch=args.max_batch, dtype=args.dtype
    )
    load_s = time.perf_counter() - t0
    backend.eos_ids = {-1}  # every call generates exactly max_tokens tokens
    warm = [GenRequest(r.messages, r.temperature, r.top_p, 4, r.seed) for r in waves[0][:2]]
    backend.generate(warm)
    sync = backend.torch.cuda.synchronize if str(backend.device).startswith("cuda") else (lambda: None)
    steps0, results, wave_s = backend.steps, [], []
    t0 = time.perf_counter()
    for wave in waves:
        start = time.perf_counter()
        results += backend.generate(wave)
        sync()
        wave_s.append(round(time.perf_counter() - start, 3))
    wall = time.perf_counter() - t0
    completion = sum(r.completion_tokens for r in results)
    side = {
        "wall_s": round(wall, 3),
        "tokens_per_s": round(completion / wall, 2),
        "prompt_tokens": sum(r.prompt_tokens for r in results),
        "completion_tokens": completion,
        "per_call": [[r.prompt_tokens, r.completion_tokens] for r in results],
        "finish_reasons": dict(Counter(r.finish_reason for r in results)),
        "steps": backend.steps - steps0,
        "wave_s": wave_s,
        "load_s": round(load_s, 2),
        "max_batch": backend.max_batch,
        "settings": dict(backend.settings),
    }
    log(f"  {completion} tokens in {wall:.2f} s: {completion / wall:.1f} tokens/s, {side['steps']} steps")
    del backend
    gc.collect()
    return side


def gpu_name(device: str | None) -> str | None:
    import torch

    if (device or ("cuda" if torch.cuda.is_available() else "cpu")).startswith("cuda"):
        return torch.cuda.get_device_name()
    return None


def measure(args, log=print) -> dict[str, Any]:
    """Both sides on the workload ``args`` describe; the JSON the script saves."""
    from transformers import AutoTokenizer

    from backends import model_store
    from backends.transformers_backend import TransformersBackend

    w = dict(WORKLOADS[args.workload])
    w.update({k: getattr(args, k) for k in w if getattr(args, k) is not None})
    model = args.model
    if args.model == "tiny":
        args.model = tiny_model()
    tokenizer = AutoTokenizer.from_pretrained(str(model_store.resolve_model(args.model)))
    waves = debate_waves(lambda m: model_store.chat_token_ids(tokenizer, m), w, args.temperature, args.top_p)
    sides = {}
    for name, cls in (("baseline", load_baseline(args.baseline, args.baseline_file)), ("current", TransformersBackend)):
        log(f"{name}: {sum(len(x) for x in waves)} calls in {len(waves)} waves")
        sides[name] = run_side(cls, waves, args, log)
    base, cur = sides["baseline"], sides["current"]
    return {
        "benchmark": "bench_transformers",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {**machine_info(), "gpu": gpu_name(args.device)},
        "commit": git_commit(),
        "baseline": args.baseline_file or args.baseline,
        "params": {
            "model": model,
            "model_path": str(model_store.resolve_model(args.model)),
            "device": args.device,
            "dtype": args.dtype,
            "threads": args.threads,
            "max_batch": args.max_batch,
            "workload": args.workload,
            "temperature": args.temperature,
            "top_p": args.top_p,
            **w,
        },
        "calls": sum(len(x) for x in waves),
        "sides": sides,
        "same_work": base["per_call"] == cur["per_call"],
        "ratio": round(cur["tokens_per_s"] / base["tokens_per_s"], 3),
    }


def print_table(res: dict[str, Any]) -> None:
    p = res["params"]
    device = res["sides"]["current"]["settings"]["device"]
    title = (
        f"transformers backend, {res['calls']} calls ({p['waves']} waves of {p['per_wave']}), "
        f"{p['max_tokens']} tokens each, {Path(p['model']).name} on {device} — current / baseline {res['ratio']:.2f}x"
    )
    console, table = rich_table(
        title, ("side", "max batch", "prompt tokens", "completion tokens", "steps", "wall s", "tokens/s")
    )
    for name, s in res["sides"].items():
        table.add_row(
            name,
            str(s["max_batch"]),
            f"{s['prompt_tokens']:,}",
            f"{s['completion_tokens']:,}",
            str(s["steps"]),
            f"{s['wall_s']:.2f}",
            f"{s['tokens_per_s']:.1f}",
        )
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=DEFAULT_MODEL, help="a hub id, a local folder, or 'tiny' (built here)")
    ap.add_argument("--device", default=None, help="cpu, cuda, ... (default: cuda when there is one)")
    ap.add_argument("--dtype", default="auto", help="float32, bfloat16, float16 or auto (the backend's default)")
    ap.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: 2 on the CPU, torch's own on a GPU)"
    )
    ap.add_argument(
        "--max-batch", type=int, default=None, help="rows per batch on both sides (default: each side's own)"
    )
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="cpu")
    for flag in ("waves", "per-wave", "first-prompt", "prompt-growth", "max-tokens"):
        ap.add_argument(f"--{flag}", type=int, default=None, help="overrides the workload's")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--top-p", type=float, default=0.9)
    ap.add_argument("--baseline", default=BASELINE, help="the commit whose backend file is the baseline")
    ap.add_argument("--baseline-file", default=None, help="the baseline backend's text from this file instead (no git)")
    ap.add_argument("--out", default="bench/transformers.json")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    if args.threads is None and gpu_name(args.device) is None:
        args.threads = 2
    res = measure(args, log=log_for(args.quiet))
    return finish(res, args.out, argv, args.quiet, print_table)


if __name__ == "__main__":
    sys.exit(main())
