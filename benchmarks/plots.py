"""The benchmarks' figures: matplotlib without a display, each saved the same way."""

from __future__ import annotations

__all__ = ["figure", "save"]


def figure(*grid, **options):
    """``(fig, axes)`` of :func:`matplotlib.pyplot.subplots` (``grid`` and ``options`` its
    arguments), drawn without a display."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*grid, **options)


def save(fig, path: str, *, dpi: int = 120, **layout) -> None:
    """``fig`` laid out (``layout``: :meth:`~matplotlib.figure.Figure.tight_layout`'s
    arguments) and written to the PNG at ``path``."""
    fig.tight_layout(**layout)
    fig.savefig(path, dpi=dpi)
    print(f"wrote {path}")
