"""``Report``: the segment plan of one specialization, as ``Gradient.report`` prints it.

Requires: the plan entries ``coarsen.transforms.gradient`` builds (``plan_entry``, here: one dict per segment of
interest, plus ``"loop run"`` and ``"loop checkpoint"`` entries).
Guarantees: ``TransformReport`` is the one report protocol: every transform's ``report(*args,
file=None)`` builds a report of its class (``Report`` here; ``JvpReport``, ``JacobianReport``,
``SecondOrderReport`` and the CUDA batch's ``BatchReport`` next to their transforms), prints
``rep.format()`` (``print_report``) and returns it; ``str(rep)`` is the same text.
``plan_entry(seg)`` is one segment of interest as plain data (JSON-serializable,
cached with the source); ``Report`` is a list-like of the segment entries (``loops`` and
``checkpoints`` apart), ``format()`` the text ``g.report()`` prints; nothing here compiles or
runs code.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

__all__ = ["Report", "TransformReport", "plan_entry", "print_report"]


class TransformReport:
    """The report protocol: ``format()`` is the text a transform's ``report`` prints."""

    def format(self):
        raise NotImplementedError

    def __str__(self):
        return self.format()


def print_report(rep, file=None):
    """Print ``rep.format()`` to ``file`` (default: standard output) and return ``rep``."""
    print(rep.format(), file=file or sys.stdout)
    return rep


@dataclass
class Report(TransformReport):
    """The segment plan of one specialization (see ``Gradient.report``)."""
    function: str
    signature: tuple
    coarsen: bool
    segments: list
    transform_seconds: float
    tape_bytes: object = None
    strides: tuple = ()         # the last call's stride k of each checkpointed loop
    tape_lines: object = None   # ``coarsen.transforms.tape_lines.TapeLines`` when the report asked for it
    snapshots: tuple = ()       # per checkpointed loop: 0 (two-level), or the revolve's snapshots
    passes: tuple = ()          # the reverse passes that ran, in order (coarsen.ad.reverse.pipeline)

    def __post_init__(self):
        # how each prange (or parallel) loop was run (coarsen.ad.reverse.parallel), and how
        # each loop was checkpointed under a tape budget (coarsen.ad.reverse.checkpoint), apart
        self.loops = [e for e in self.segments if e.get("kind") == "loop run"]
        self.checkpoints = [e for e in self.segments if e.get("kind") == "loop checkpoint"]
        self.segments = [e for e in self.segments if e.get("kind") not in ("loop run", "loop checkpoint")]

    def __iter__(self):
        return iter(self.segments)

    def __len__(self):
        return len(self.segments)

    def __getitem__(self, k):
        return self.segments[k]

    def __repr__(self):
        # short, so that ``g.report()`` at a REPL prompt does not echo the plan a second time
        n = len(self.segments)
        mode = "coarse" if self.coarsen else "fine-grained"
        return f"<coarsen Report of {self.function}: {mode}, {n} segment{'' if n == 1 else 's'}>"

    def __str__(self):
        return self.format()

    def format(self):
        out = [(f"coarsen plan for {self.function}({', '.join(self.signature)}), "
                f"{'coarse' if self.coarsen else 'fine-grained (coarsen=False): no segments'}")]
        for e in self.segments:
            a, b = e["lines"]
            where = f"line {a}" if a == b else f"lines {a}-{b}"
            head = f"  segment {e['segment']} ({where}, {e['kind']})"
            if e["fallback"]:
                what = "fine-grained (cost model)" if e.get("strategy") == "fine" and e.get("costs") \
                    else "fine-grained fallback"
                out.append(f"{head}: {what}: {e['fallback']}")
                continue
            ops = ""
            if e["ops_after"] is not None:
                ops = f", ops {e['ops_before']} fine -> {e['ops_after']} coarse" if e["ops_before"] is not None \
                    else f", {e['ops_after']} ops, independent of the trip count"
            out.append(f"{head}: in ({', '.join(e['inputs'])}) out ({', '.join(e['outputs'])}){ops}")
            c = e.get("costs")
            if c:
                pre = "n/a" if c["preaccumulate"] is None else f"{c['preaccumulate']:.0f}"
                out.append(f"    strategy {e['strategy']} (estimated cost: recompute {c['recompute']:.0f}, "
                           f"cut {c['cut']:.0f}, preaccumulate {pre}, fine {c['fine']:.0f}; {c['why']})")
            if e["closed_form"]:
                out.append(f"    closed form: {e['closed_form']}")
            elif e.get("closed_form_fallback"):
                out.append(f"    loop kept: {e['closed_form_fallback']}")
            if e["formula"] and not e["closed_form"]:
                out.append(f"    {e['formula']}")
        for e in self.loops:
            out.append(f"  loop (line {e['lines'][0]}): differentiated {e['how']}")
        strides, snapshots = iter(self.strides), iter(self.snapshots)
        for e in self.checkpoints:
            k = next(strides, None) if e["how"].startswith("checkpointed") else None
            s = int(next(snapshots, 0)) if k is not None else 0
            last = "" if k is None else f"; the last call: k = {int(k)}" if not s else \
                f"; the last call: binomial (revolve), {s} snapshots, units of k = {int(k)} trips"
            out.append(f"  loop (line {e['lines'][0]}): {e['how']}{last}")
        out.append(f"  symbolic + code generation time: {self.transform_seconds:.3f} s")
        if self.tape_bytes is not None:
            out.append(f"  tape of the last call: {self.tape_bytes} bytes")
        if self.passes:
            out.append(f"  passes that ran: {', '.join(self.passes)}")
        if self.tape_lines is not None:
            out.append(self.tape_lines.format())
        return "\n".join(out)


def plan_entry(seg):
    """One segment of interest as plain data (JSON-serializable, cached with the source)."""
    plan = seg.plan
    lifted = plan.lifted
    jac = lifted.jac if lifted is not None else None
    formula = lifted.formula if lifted is not None else None
    entry = {
        "segment": seg.index,
        "lines": list(plan.lines),
        "kind": plan.kind,
        "inputs": list(seg.inputs),
        "outputs": list(seg.outputs),
        "ops_before": int(jac.ops_before) if jac is not None else None,
        "ops_after": int(jac.ops_after) if jac is not None else None,
        "closed_form": formula if plan.kind == "loop" else None,
        "closed_form_fallback": plan.closed_form_fallback,
        "fallback": plan.fallback,
        "formula": formula,
        "strategy": plan.strategy or ("closed form" if plan.kind == "loop" and jac is not None
                                      else "fine" if plan.fallback else "recompute"),
        "costs": None if plan.costs is None else {
            "recompute": plan.costs.recompute, "cut": plan.costs.cut,
            "preaccumulate": plan.costs.preaccumulate,
            "fine": plan.costs.fine, "why": plan.costs.why},
    }
    if entry["kind"] == "loop" and jac is not None:
        # a closed form replaces a loop: fine AD would pay per trip; count one trip's worth
        entry["ops_before"] = None
    return entry
