"""The harness's vocabulary: tool names, peer availability, and the messages of failed tools.

Requires only the standard library (nothing here imports a peer).  Guarantees:

* ``ALL_TOOLS`` is the column order of every report; ``GRAD_TOOLS`` is every tool but the primal;
  ``DEFAULT_TOOLS`` what runs without ``--tools`` (all but the forced-strategy variants of coarsen,
  ``STRATEGY_TOOLS``).
* :class:`Missing` and :class:`Unsupported` are the two outcomes that are reported, not treated as
  failures of the harness: a peer that cannot be imported, and a peer that cannot express an app.
* :func:`available_tools` splits a tool list into the tools to run and the optional peers whose
  package is not installed (:class:`SkippedPeer`, with the command that installs it), without
  importing anything: the report shows a peer's column only when the peer is installed.
* :func:`first_line` gives a one-line, bounded message for any exception, cut at a word boundary.
"""
from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

ALL_TOOLS = ("primal", "coarsen", "coarsen_fine", "coarsen_recompute", "coarsen_cut",
             "coarsen_preaccumulate", "handwritten", "jax", "autograd", "tangent", "torch")
#: coarsen with one strategy forced on every segment (``plan=``): on request only (--tools)
STRATEGY_TOOLS = {"coarsen_recompute": "recompute", "coarsen_cut": "cut",
                  "coarsen_preaccumulate": "preaccumulate"}
#: what runs when --tools is not given
DEFAULT_TOOLS = tuple(t for t in ALL_TOOLS if t not in STRATEGY_TOOLS)
#: tools that compute a gradient (everything but the primal)
GRAD_TOOLS = tuple(t for t in ALL_TOOLS if t != "primal")
#: tools whose allocations tracemalloc cannot see
UNTRACKED_MEMORY = ("jax", "torch")
#: Python-level peers: measured at a smaller size when too slow at the requested one
PY_LEVEL = ("autograd", "tangent", "torch")
#: tools whose generated, unchecked machine code could crash the process: probed in a child
CRASH_GUARDED = ("coarsen", "coarsen_fine", "coarsen_recompute", "coarsen_cut",
                 "coarsen_preaccumulate")
#: ADBench's tolerance on |x - y| / max(1, |x| + |y|)
TOL = 1e-8
#: longest message kept from an exception (reports put long ones in footnotes)
MESSAGE_LIMIT = 300


class Missing(Exception):
    """A peer that is not installed (ImportError): reported, not a failure."""


class Unsupported(Exception):
    """A peer that cannot express an app (e.g. tangent-ad on a construct it lacks)."""


class TooSlow(Exception):
    """A Python-level peer whose call at this size took longer than the harness's limit: it is
    not timed here but measured at a smaller size (``adapters.prepare``'s ``limit_s``)."""


@dataclass(frozen=True)
class Peer:
    """An optional peer: its tool name, the module it imports and how to install it."""

    tool: str
    module: str
    install: str
    in_bench_extra: bool = True


#: the optional peers; the ``bench`` extra installs all of them but PyTorch (whose default build
#: is several GB; the harness needs only a CPU build)
PEERS = {
    "jax": Peer("jax", "jax", "pip install jax"),
    "autograd": Peer("autograd", "autograd", "pip install autograd"),
    "tangent": Peer("tangent", "tangent", "pip install tangent-ad"),
    "torch": Peer("torch", "torch", "pip install torch", in_bench_extra=False),
}


@dataclass(frozen=True)
class SkippedPeer:
    """A requested peer that is not installed, so it has no column in the report."""

    tool: str
    reason: str
    install: str
    in_bench_extra: bool


def available_tools(tools, find_spec: Callable = importlib.util.find_spec):
    """Split ``tools`` into (tools to run, [SkippedPeer]) by whether each peer's module is
    installed.  Uses ``find_spec`` only (no import), so nothing heavy is loaded here."""
    keep, skipped = [], []
    for t in tools:
        peer = PEERS.get(t)
        if peer is None:
            keep.append(t)
            continue
        try:
            found = find_spec(peer.module) is not None
        except (ImportError, ValueError):
            found = False
        if found:
            keep.append(t)
        else:
            skipped.append(SkippedPeer(t, f"module {peer.module!r} is not installed",
                                       peer.install, peer.in_bench_extra))
    return keep, skipped


def first_line(e: BaseException, limit: int = MESSAGE_LIMIT) -> str:
    """The first non-empty line of ``e``'s message (for a CoarsenError, its problem line),
    at most ``limit`` characters, cut at a word boundary with an ellipsis."""
    s = str(e).strip().splitlines()
    line = next((x for x in s if x.strip()), "")
    # CoarsenError puts the location first; its problem line is the one after "CoarsenError:"
    for x in s:
        if x.startswith("CoarsenError:"):
            line = x[len("CoarsenError:"):].strip()
            break
    return shorten(line.strip(), limit)


def shorten(text: str, limit: int) -> str:
    """``text`` when it fits in ``limit`` characters, else cut at the last space before the limit
    (mid-word only when there is no space) and ended with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[:max(1, limit - 1)]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "\u2026"


def failure_message(e: BaseException) -> str:
    """``"<ExceptionType>: <first line>"``: how a failed tool is reported."""
    return f"{type(e).__name__}: {first_line(e)}"
