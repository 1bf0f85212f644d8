"""Small matplotlib helpers (Agg backend; run.py selects it before anything imports pyplot)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def cdf(
    path: Path,
    series: dict[str, Sequence[float]],
    *,
    xlabel: str,
    title: str,
    marks: dict[str, float] | None = None,
    log_x: bool = False,
) -> None:
    """Empirical CDFs of several sample sets on one axis, with optional vertical reference lines."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6))
    for label, values in series.items():
        ordered = sorted(values)
        if not ordered:
            continue
        ys = [(i + 1) / len(ordered) for i in range(len(ordered))]
        ax.step(ordered, ys, where="post", label=f"{label} (n={len(ordered)})")
    for label, x in (marks or {}).items():
        ax.axvline(x, color="grey", ls="--", lw=1)
        ax.text(x, 0.02, f" {label}", rotation=90, va="bottom", fontsize=8, color="grey")
    if log_x:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("share of samples ≤ x")
    ax.set_ylim(0, 1.02)
    ax.set_title(title, fontsize=10, loc="left")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
