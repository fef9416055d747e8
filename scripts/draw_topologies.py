#!/usr/bin/env python
"""Draw the protocols' communication patterns for six agents as one PNG (the README's figure).

    .venv/bin/python scripts/draw_topologies.py docs/img/topologies.png

Every panel is built by the engine's own topology code (``topologies/``), so the figure shows
who reads whom in a debate round exactly as a run would: CoT-SC (no reading), fully connected
MAD, two sparse regular graphs, one seeded ProbMAD draw and GroupDebate's groups.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import networkx as nx  # noqa: E402

from topologies.factory import make_topology  # noqa: E402
from topologies.groups import make_groups  # noqa: E402

N = 6


def _positions(n: int) -> dict[int, tuple[float, float]]:
    return {i: (math.sin(2 * math.pi * i / n), math.cos(2 * math.pi * i / n)) for i in range(n)}


def _probmad_draw() -> nx.DiGraph:
    """One seeded round of ProbMAD: every agent reads each peer with probability 0.4."""
    return make_topology("probmad", N, 0.4, seed=3).graph(1)


def _panels() -> list[tuple[str, str, nx.DiGraph]]:
    """(title, protocol flags, reading graph: an edge u -> v means v reads u)."""
    empty = nx.DiGraph()
    empty.add_nodes_from(range(N))
    groups = make_groups("3+3", N, seed=1)
    intra = nx.DiGraph()
    intra.add_nodes_from(range(N))
    intra.add_edges_from((u, v) for v, peers in groups.intra_peers().items() for u in peers)
    return [
        ("CoT-SC: independent samples", "--protocol sc", empty),
        ("MAD: fully connected (D = 1)", "--protocol mad", make_topology("full", N).graph()),
        ("sparse MAD, D = 3/5", "--protocol sparse --density 3/5", make_topology("regular", N, 0.6).graph()),
        ("sparse MAD, D = 2/5 (ring)", "--protocol sparse --density 2/5", make_topology("regular", N, 0.4).graph()),
        ("ProbMAD, p = 0.4 (one draw)", "--protocol probmad --density 0.4", _probmad_draw()),
        ("GroupDebate: groups 3+3", "--protocol group --groups 3+3", intra),
    ]


def draw(out: Path) -> None:
    """Write the six-panel figure to ``out`` (PNG)."""
    panels = _panels()
    fig, axes = plt.subplots(2, 3, figsize=(11, 7.4))
    pos = _positions(N)
    for ax, (title, flags, g) in zip(axes.flat, panels, strict=True):
        mutual = [(u, v) for u, v in g.edges if u < v and g.has_edge(v, u)]
        one_way = [(u, v) for u, v in g.edges if not g.has_edge(v, u)]
        und = nx.Graph(mutual)
        nx.draw_networkx_edges(und, pos, ax=ax, width=1.6, edge_color="#4a6fa5")
        nx.draw_networkx_edges(
            g,
            pos,
            edgelist=one_way,
            ax=ax,
            width=1.3,
            edge_color="#c0504d",
            arrows=True,
            arrowsize=14,
            node_size=520,
            connectionstyle="arc3,rad=0.12",
        )
        nx.draw_networkx_nodes(g, pos, ax=ax, node_size=520, node_color="#f2f2f2", edgecolors="#333333")
        nx.draw_networkx_labels(g, pos, ax=ax, font_size=10)
        ax.set_title(title, fontsize=11)
        ax.text(0.5, -0.06, flags, transform=ax.transAxes, ha="center", fontsize=8.5, family="monospace")
        ax.set_xlim(-1.35, 1.35)
        ax.set_ylim(-1.35, 1.35)
        ax.set_aspect("equal")
        ax.axis("off")
    fig.suptitle(
        "Who reads whom in a debate round, 6 agents (blue line: both read each other; red arrow a → b: b reads a)",
        fontsize=12,
    )
    fig.tight_layout(h_pad=2.2)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    """Parse the output path and draw."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, nargs="?", default=Path("docs/img/topologies.png"))
    draw(p.parse_args(argv).out)


if __name__ == "__main__":
    main()
