"""Bar plots of a harness run: gradient time relative to the hand-written gradient and to the
Numba primal, one PNG per (base, size), log scale.

Requires a result dict of :func:`apps.bench.runner.run`; uses matplotlib (Agg backend) when it
is installed.  Guarantees: writes ``ratio_vs_<base>_<size>.png`` into ``out`` and returns their
paths; returns ``[]`` without matplotlib.  Peers measured at a smaller size are hatched.
"""
from __future__ import annotations

from pathlib import Path

import apps
from apps.bench.report import ratio


def make_plots(result, out: Path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    files = []
    tools = result["meta"]["tools"]
    cases = result["cases"]
    for size in [s for s in apps.SIZES if any(c["size"] == s for c in cases)]:
        cs = [c for c in cases if c["size"] == size]
        for base in ("handwritten", "primal"):
            cols = [t for t in tools if t != base]
            fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(cs) + 2), 4.5))
            width = 0.8 / max(1, len(cols))
            any_bar = False
            for j, t in enumerate(cols):
                xs, ys, hatch = [], [], []
                for i, c in enumerate(cs):
                    v = ratio(c, t, base)
                    if v is not None:
                        xs.append(i + (j - (len(cols) - 1) / 2) * width)
                        ys.append(v)
                        hatch.append("//" if c["tools"][t].get("reduced_size") else None)
                if xs:
                    bars = ax.bar(xs, ys, width, label=t, color=f"C{j}")
                    for b, h in zip(bars, hatch):
                        if h:
                            b.set_hatch(h)
                    any_bar = True
            ax.set_xticks(range(len(cs)))
            ax.set_xticklabels([c["app"] for c in cs], rotation=30, ha="right")
            if any_bar:
                ax.set_yscale("log")
                ax.legend(fontsize=8, ncol=2)
            ax.axhline(1.0, color="k", lw=0.8)
            ax.set_ylabel(f"time / {base} time (log)")
            ax.set_title(f"gradient time relative to {base}, size {size} "
                         f"(hatched: peer measured at a smaller size)")
            fig.tight_layout()
            path = Path(out) / f"ratio_vs_{base}_{size}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            files.append(str(path))
    return files
