"""A made-up ``debate`` command, ``debate answers OUT``: how often each final answer was given in
a run folder's questions. One module with its flags and its run function; a test registers it
(:func:`app.cli.register_command`) and runs it."""

import argparse
from collections import Counter

from engine.results import load
from engine.safe_text import inert


def flags(parser: argparse.ArgumentParser) -> None:
    """``OUT``: the run folder; ``--top N``: the N most given answers (default 3)."""
    parser.add_argument("dir", metavar="OUT", help="a run folder")
    parser.add_argument("--top", type=int, default=3, metavar="N", help="the N most given answers (default 3)")


def run(args: argparse.Namespace) -> int:
    """Print ``answer: count`` lines, most given first; a folder without results is a UserError."""
    questions = load(args.dir).questions  # a ResultsError (a UserError) for a folder without results
    for answer, count in Counter(questions["final_answer"].fillna("(none)")).most_common(args.top):
        print(inert(f"{answer}: {count}"))
    return 0
