"""A text printer for the IR, in the spirit of a jaxpr.

Requires: an ``ir.Function`` (typed or not).
Guarantees: a deterministic, indented listing: one primitive per line with its type when
known, loops and branches as nested regions; each variable assigned in a branch is shown
merging through ``gamma`` at the end of its ``if``, and each variable a loop carries through
``mu`` at its header.
"""
from __future__ import annotations

from .nodes import Assign, For, If, Segment, Store, While, walk


def _assigned(block):
    out = []
    for s in walk(block):
        if isinstance(s, Assign) and s.target not in out:
            out.append(s.target)
    return out


def _idx(index):
    return "[" + ", ".join(str(i) for i in index) + "]"


def format_function(fn):
    params = ", ".join(f"{p}: {fn.types.get(p, '?')}" for p in fn.params)
    lines = [f"def {fn.name}({params}):"]

    def ty(name):
        t = fn.types.get(name)
        return f": {t}" if t is not None else ""

    def block(stmts, ind):
        pad = "  " * ind
        for s in stmts:
            if isinstance(s, Assign):
                args = ", ".join(str(a) for a in s.args)
                extra = _idx(s.index) if s.index else ""
                attrs = "".join(f", {k}={v!r}" for k, v in s.attrs)
                lines.append(f"{pad}{s.target}{ty(s.target)} = {s.op}({args}{extra}{attrs})")
            elif isinstance(s, Store):
                op = {"add": "+=", "sub": "-="}.get(s.aug, "=")
                lines.append(f"{pad}{s.array}{_idx(s.index)} {op} {s.value}")
            elif isinstance(s, If):
                lines.append(f"{pad}if {s.cond}:")
                block(s.body, ind + 1)
                if s.orelse:
                    lines.append(f"{pad}else:")
                    block(s.orelse, ind + 1)
                for v in sorted(set(_assigned(s.body)) | set(_assigned(s.orelse))):
                    if v not in fn.temps:
                        lines.append(f"{pad}{v} = gamma({s.cond}, {v}, {v})")
            elif isinstance(s, For):
                carried = [v for v in _assigned(s.body) if v not in fn.temps]
                lines.append(f"{pad}for {s.var} in {'prange' if s.parallel else 'range'}({s.start}, {s.stop}, {s.step}):"
                             + (f"  # mu: {', '.join(carried)}" if carried else ""))
                block(s.body, ind + 1)
            elif isinstance(s, Segment):
                kind = s.plan.kind if s.plan is not None else "block"
                lines.append(f"{pad}segment {s.index} ({kind}; in {', '.join(s.inputs)}; out {', '.join(s.outputs)}):")
                block(s.stmts, ind + 1)
            elif isinstance(s, While):
                carried = [v for v in _assigned(s.body) if v not in fn.temps]
                lines.append(f"{pad}while:" + (f"  # mu: {', '.join(carried)}" if carried else ""))
                block(s.test_body, ind + 1)
                lines.append(f"{pad}  break unless {s.test}")
                block(s.body, ind + 1)
        if not stmts:
            lines.append(f"{pad}pass")

    block(fn.body, 1)
    lines.append(f"  return {fn.result}")
    return "\n".join(lines) + "\n"
