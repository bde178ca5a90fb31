"""Reverse mode: from a typed IR function to the derivative program as a gast module.

Requires: a typed ``ir.Function``, the names of the differentiated parameters, and the
analysis ``Facts`` (``coarsen.analysis.activity``).
Guarantees: a ``gast.Module`` with the runtime helpers it needs and one function
``<name>_value_and_grad(*params)`` returning ``(value, (adjoint of each wrt parameter,))``.
The function runs a forward sweep (the primal, saving on typed tapes the values the reverse
sweep reads that would otherwise be overwritten) and a reverse sweep (adjoint statements in
reverse order, restoring saved values as it goes): the invariant is that at the reverse point
of every statement, each variable the reverse sweep reads holds its forward value there.
Tapes are a float64 buffer and an int64 buffer that grow geometrically; ``range`` loops are
reversed by index arithmetic, ``while`` loops by a trip counter.  Adjoints are named
``<variable>_bar``; the original source line heads each block as a comment.
"""
from __future__ import annotations

import gast

from ..errors import CoarsenError
from ..ir.nodes import (Array, Assign, Const, For, If, NEWAXIS, Scalar, Segment, Slice, Store,
                        Var, While, walk)
from ..analysis.activity import intact, is_temp
from . import build as B
from .build import X
from ..ir.primitives import primitive
from .runtime import helper_source
from .canonical import real_name

FT, FP, IT, IP = "_ftape", "_fpos", "_itape", "_ipos"


def _err(stmt, problem, hint=None):
    loc = stmt.loc
    return CoarsenError(problem, filename=loc.filename, lineno=loc.lineno, col_offset=loc.col,
                        source_line=loc.text, hint=hint)


class Emitter:
    def __init__(self, fn, wrt, facts, tbr=frozenset()):
        self.fn = fn
        self.types = fn.types
        self.wrt = list(wrt)
        self.f = facts
        self.active = facts.active
        self.tbr = set(tbr)
        self.helpers = set()
        self.counter = 0
        self.uses_ftape = False
        self.uses_itape = False
        self.extra_inits = []     # (name, type) of emitter-made variables to pre-initialize
        self.depth = 0
        self.recompute = {}
        self.reads_at = {}
        self.region = self.new_region()
        self.find_recomputable(fn.body)

    # ------------------------------------------------------------------ naming
    def fresh(self, base):
        self.counter += 1
        return f"{base}{self.counter}"

    @staticmethod
    def bar(name):
        return name + "_bar"

    def ty(self, name):
        return self.types.get(name)

    def is_arr(self, operand):
        return isinstance(operand, Var) and isinstance(self.types.get(operand.name), Array)

    def nd(self, operand):
        if isinstance(operand, Var):
            t = self.types.get(operand.name)
            return t.ndim if isinstance(t, Array) else 0
        return 0

    def intact(self, name):
        """Is ``name`` never overwritten after it is first set (activity's ``intact``)?"""
        return intact(self.f, name)

    def taped(self, name):
        return name in self.tbr and not intact(self.f, name)

    tape_sites = frozenset()

    def taped_at(self, s):
        """Must the assignment ``s`` save the value it overwrites?  Arrays: when the variable
        is to be recorded at all; scalars: when ``s`` may overwrite a value the reverse sweep
        still reads (``_tape_sites``)."""
        if isinstance(self.types.get(s.target), Array):
            return self.taped(s.target)
        return id(s) in self.tape_sites and not intact(self.f, s.target)

    def helper(self, name):
        self.helpers.add(name)
        return name

    # ------------------------------------------------------------------ operands
    def val(self, operand):
        if isinstance(operand, Var):
            if self.in_reverse and operand.name in self.recompute:
                s = self.recompute[operand.name]
                return X(B.subscript(s.args[0].name, self.index_node(s.index)), False)
            return X(B.name(operand.name), self.is_arr(operand))
        return X(B.const(operand.value))

    in_reverse = False
    lifted_names = {}     # canonical -> real names of lifted segments (coarsen.ad.canonical)

    def _written_before_use(self, block, getitem, base, idx_vars, after=()):
        """Is ``base`` written, or an index variable reassigned, between the element read
        ``getitem`` and a use of its value (then re-reading the element later would not give
        the value that was used)?  ``after``: the rest of each enclosing block, innermost
        first (a read in a segment or a branch may be used after it)."""
        from ..ir.nodes import uses
        k = next(i for i, st in enumerate(block) if st is getitem)
        changed = False
        def writes(sub):
            return (isinstance(sub, Store) and sub.array == base) or \
                (isinstance(sub, Assign) and sub.target in idx_vars) or \
                (isinstance(sub, For) and sub.var in idx_vars)

        for st in list(block[k + 1:]) + [x for rest in after for x in rest]:
            # a loop after the read that both uses the value and writes: a later trip's use
            # follows an earlier trip's write, whatever their order in the body
            for loop in walk([st]):
                if isinstance(loop, (For, While)) and any(writes(x) for x in walk([loop])) and \
                        any(isinstance(u, Var) and u.name == getitem.target
                            for x in walk([loop]) for u in uses(x)):
                    return True
            for sub in walk([st]):
                if changed and any(isinstance(u, Var) and u.name == getitem.target for u in uses(sub)):
                    return True
            for sub in walk([st]):
                if writes(sub):
                    changed = True
                    if any(isinstance(u, Var) and u.name == getitem.target for u in uses(sub)):
                        return True
        return False

    def find_recomputable(self, block, loop_vars=(), after=()):
        """Scalar temporaries read from an array, at indices that hold still while the
        temporary lives: the reverse sweep re-reads the element instead of saving it on the
        tape.  ``after``: the rest of each enclosing block, innermost first."""
        for i, s in enumerate(block):
            inner = (block[i + 1:],) + after
            if isinstance(s, Assign) and s.op == "getitem" and is_temp(s.target) \
                    and self.f.defs.get(s.target) == 1 and not self.is_arr(Var(s.target)):
                base = s.args[0].name
                # a written array qualifies too: re-reading it in the reverse sweep makes it
                # recorded, so every write saves and restores the element it overwrites, and
                # the array holds its forward contents at each reverse point
                # indices: any integer variable works (the reverse sweep restores what it
                # reads), unless it is reassigned between the read and the use
                ok = intact(self.f, base) and base not in self.fn.views
                idx_vars = {it.name for it in s.index if isinstance(it, Var)}
                if ok and self._written_before_use(block, s, base, idx_vars, after):
                    ok = False
                if ok:
                    self.recompute[s.target] = s
            elif isinstance(s, If):
                self.find_recomputable(s.body, loop_vars, inner)
                self.find_recomputable(s.orelse, loop_vars, inner)
            elif isinstance(s, For):
                self.find_recomputable(s.body, loop_vars + (s.var,), inner)
            elif isinstance(s, While):
                self.find_recomputable(s.body, loop_vars, inner)
            elif isinstance(s, Segment):
                self.find_recomputable(s.stmts, loop_vars, inner)

    def index_node(self, index):
        items = []
        for it in index:
            if it == NEWAXIS:
                items.append(B.const(None))
            elif isinstance(it, Slice):
                items.append(B.slice_(*(None if p is None else self.val(p) for p in (it.lower, it.upper, it.step))))
            else:
                items.append(B.ex(self.val(it)))
        if len(items) == 1:
            return items[0]
        return gast.Tuple(elts=items, ctx=gast.Load())

    # ------------------------------------------------------------------ tapes
    def push(self, name):
        t = self.types[name]
        if isinstance(t, Array):
            self.uses_ftape = True
            self.uses_itape = True
            out = [B.assign(B.tuple_(FT, FP), B.call(self.helper("_push_array"), FT, FP, name))]
            out += self.rereserve_after_array()
            for d in range(t.ndim):
                out += self.push_int(B.subscript(B.attr(f"{name}.shape"), d))
            return out
        if t.kind == "f64":
            return self.push_float(B.name(name))
        return self.push_int(B.name(name))

    # Scalar pushes are plain stores: capacity is reserved ahead, per straight-line region
    # (before a range loop for all its trips, per trip in a while loop, at entry for the rest).
    def push_float(self, value):
        self.uses_ftape = True
        self.region["f"] += 1
        return [B.assign(B.subscript(FT, B.name(FP)), value), B.augassign(FP, "+", 1)]

    def push_int(self, value):
        self.uses_itape = True
        self.region["i"] += 1
        return [B.assign(B.subscript(IT, B.name(IP)), value), B.augassign(IP, "+", 1)]

    @property
    def count_f(self):
        return self.region["f"]

    @property
    def count_i(self):
        return self.region["i"]

    def new_region(self):
        return {"f": 0, "i": 0, "nested": False, "holders": []}

    def enter_region(self):
        saved = self.region
        self.region = self.new_region()
        return saved

    def reserve_stmt(self, tape, pos, k_node, trips=None):
        need = X(B.name(pos)) + (X(k_node) if trips is None else X(k_node) * trips)
        if self.workspace:
            return self.workspace_check(tape, need)
        return B.assign(tape, B.call(self.helper("_reserve"), tape, need))

    def rest_holders(self):
        """Placeholders, after a nested loop, re-reserving the enclosing region's pushes per
        trip (the nested loop may have used the room reserved before it)."""
        out = []
        for tape, pos, key in ((FT, FP, "f"), (IT, IP, "i")):
            k = gast.Constant(value=0, kind=None)
            node = self.reserve_stmt(tape, pos, k)
            self.region["holders"].append((key, k, node))
            out.append(node)
        self.region["nested"] = True
        return out

    def close_holders(self, region):
        for key, k, node in region["holders"]:
            k.value = region[key]
            if region[key] == 0:
                node._coarsen_drop = True

    def leave_region(self, saved, trips):
        """Reservation statements for the pushes counted since ``enter_region``: all trips
        up front for a loop body without nested loops, else per trip (and after each nested
        loop, through the placeholders)."""
        region = self.region
        self.region = saved
        self.close_holders(region)
        out = []
        for tape, pos, key in ((FT, FP, "f"), (IT, IP, "i")):
            k = region[key]
            if k:
                per_trip = trips is None or region["nested"]
                out.append(self.reserve_stmt(tape, pos, k, None if per_trip else trips))
        per_trip = trips is None or region["nested"]
        return out, per_trip

    workspace = False
    bounds = None      # the BoundsPlan (coarsen.analysis.bounds); None: no index checks

    def index_checks(self, s):
        """Forward code checking the indices of the element access ``s`` before it runs."""
        if self.bounds is None:
            return []
        from ..analysis.bounds import inline_check
        return [inline_check(c, self.val) for c in self.bounds.inline.get(id(s), ())]

    def hoisted_checks(self, loop):
        """Index checks of the accesses in ``loop``'s body, run once before it."""
        if self.bounds is None:
            return []
        from ..analysis.bounds import hoisted_check
        out = [hoisted_check(c, loop, self.val) for c in self.bounds.hoisted.get(id(loop), ())]
        return [c for c in out if c is not None]

    def workspace_check(self, tape, need):
        """Workspace mode (CUDA): tapes are fixed slices; on overflow flag it and stop."""
        zeros = [B.const(0.0) for _ in self.wrt]
        ret = B.return_(B.tuple_(0.0, gast.Tuple(elts=zeros, ctx=gast.Load()), B.tuple_(0, 0)))
        return B.if_(B.compare(need, ">", B.subscript(B.attr(f"{tape}.shape"), 0)),
                     [B.assign(B.subscript("_status", 0), 1), ret])

    def pop(self, name):
        t = self.types[name]
        if isinstance(t, Array):
            fn = self.helper(f"_pop_array{t.ndim}")
            out = [B.assign(B.tuple_(name, FP, IP), B.call(fn, FT, FP, IT, IP))]
            if t.dtype != "f64":
                out.append(B.assign(name, B.call(B.attr(f"{name}.astype"), B.attr("np.int64" if t.dtype == "i64" else "np.bool_"))))
            return out
        if t.kind == "f64":
            return [B.augassign(FP, "-", 1), B.assign(name, B.subscript(FT, B.name(FP)))]
        conv = "bool" if t.kind == "bool" else "int"
        return [B.augassign(IP, "-", 1), B.assign(name, B.call(conv, B.subscript(IT, B.name(IP))))]

    def push_region(self, array, index):
        """Save the part of ``array`` a store overwrites."""
        region = B.subscript(array, self.index_node(index))
        nd = self.region_ndim(array, index)
        self.uses_ftape = True
        if nd == 0:
            return self.push_float(region)
        return [B.assign(B.tuple_(FT, FP), B.call(self.helper("_push_array"), FT, FP, region))] \
            + self.rereserve_after_array()

    def rereserve_after_array(self):
        """An array push may fill the room reserved ahead for the region's scalar pushes (it
        grows the tape for itself only): reserve that room again after it, per trip."""
        k = gast.Constant(value=0, kind=None)
        node = self.reserve_stmt(FT, FP, k)
        self.region["holders"].append(("f", k, node))
        self.region["nested"] = True
        return [node]

    def pop_region(self, array, index):
        region = B.subscript(array, self.index_node(index))
        nd = self.region_ndim(array, index)
        if nd == 0:
            return [B.augassign(FP, "-", 1), B.assign(region, B.subscript(FT, B.name(FP)))]
        return [B.assign(FP, B.call(self.helper(f"_pop_into{nd}"), FT, FP, region))]

    def region_ndim(self, array, index):
        t = self.types[array]
        nint = sum(1 for it in index if isinstance(it, (Var, Const)))
        nnew = sum(1 for it in index if it == NEWAXIS)
        return t.ndim - nint + nnew

    # ------------------------------------------------------------------ shapes
    def shape_of(self, operand, pre_fwd, pre_rev):
        """An expression for an array operand's shape valid in the reverse sweep at this
        statement; records the shape on the int tape when the variable may be overwritten."""
        name = operand.name
        nd = self.types[name].ndim
        if intact(self.f, name) or self.taped(name):
            return B.attr(f"{name}.shape")
        self.uses_itape = True
        dims = []
        for d in range(nd):
            pre_fwd.extend(self.push_int(B.subscript(B.attr(f"{name}.shape"), d)))
        for d in reversed(range(nd)):
            v = self.fresh("_shape")
            self.extra_inits.append((v, Scalar("i64")))
            pre_rev.append(B.augassign(IP, "-", 1))
            pre_rev.append(B.assign(v, B.subscript(IT, B.name(IP))))
            dims.insert(0, v)
        return B.tuple_(*dims)

    # ------------------------------------------------------------------ adjoint updates
    def accumulate(self, name, expr, pre_fwd, pre_rev, out):
        """name_bar += expr (or = expr for a set-once temporary); expr has name's shape."""
        bar = self.bar(name)
        node = B.ex(expr)
        if name in self.f.set_temps:
            if self.is_arr(Var(name)) and isinstance(node, (gast.Name, gast.Subscript)):
                node = B.call(gast.Attribute(value=node, attr="copy", ctx=gast.Load()))
            out.append(B.assign(bar, node))
        else:
            out.append(B.augassign(bar, "+", node))

    def accumulate_region(self, name, index, expr, pre_fwd, pre_rev, out):
        bar = self.bar(name)
        if name in self.f.set_temps:
            shape = self.shape_of(Var(name), pre_fwd, pre_rev)
            dt = self.types[name]
            out.append(B.assign(bar, B.call("np.zeros", shape)))
        if any(it == NEWAXIS for it in index):
            base_idx = tuple(it for it in index if it != NEWAXIS)
            g_idx = []
            for it in index:
                if it == NEWAXIS:
                    g_idx.append(B.const(0))
                elif isinstance(it, Slice):
                    g_idx.append(B.slice_())
            gnode = B.subscript(expr, gast.Tuple(elts=g_idx, ctx=gast.Load()) if len(g_idx) > 1 else g_idx[0])
            index = base_idx
            expr = gnode
        if not index:
            out.append(B.augassign(bar, "+", expr))
            return
        out.append(B.augassign(B.subscript(bar, self.index_node(index)), "+", expr))

    def reduce_to(self, operand, contrib, out_nd, others_arrays, pre_fwd, pre_rev):
        """Sum an adjoint contribution over broadcast axes so it matches ``operand``."""
        nd = self.nd(operand)
        if nd == 0:
            if out_nd == 0:
                return contrib
            return X(B.call("np.sum", contrib))
        if nd == out_nd and not others_arrays:
            return contrib
        if operand.name in self.f.set_temps:
            shape = self.shape_of(operand, pre_fwd, pre_rev)
        else:
            shape = B.attr(f"{self.bar(operand.name)}.shape")
        return X(B.call(self.helper(f"_sum_to_{out_nd}_{nd}"), contrib, shape), True)

    # ------------------------------------------------------------------ blocks
    def block(self, stmts):
        fwd, rev = [], []
        for s in stmts:
            f, r = self.stmt(s)
            self.record_reads(s, r)
            if f:
                f[0]._coarsen_loc = s.loc
            if r:
                r[0]._coarsen_loc = s.loc
            fwd.extend(f)
            rev[:0] = r
        return fwd, rev

    def stmt(self, s):
        if isinstance(s, Segment):
            return self.segment(s)
        if isinstance(s, Assign):
            return self.assign(s)
        if isinstance(s, Store):
            return self.store(s)
        if isinstance(s, If):
            bf, br = self.block(s.body)
            of, orr = self.block(s.orelse)
            fwd = [B.if_(self.val(s.cond), bf, of)]
            rev = []
            if br or orr:
                if br:
                    rev = [B.if_(self.val(s.cond), br, orr)]
                else:
                    rev = [B.if_(B.ex(X(gast.UnaryOp(op=gast.Not(), operand=B.ex(self.val(s.cond))))), orr)]
            return fwd, rev
        if isinstance(s, For):
            self.depth += 1
            saved = self.enter_region()
            bf, br = self.block(s.body)
            reserve, per_trip = self.leave_region(saved, self.trip_count(s))
            self.depth -= 1
            args = self.range_args(s)
            if per_trip:
                fwd = [B.for_range(s.var, args, reserve + bf)]
            else:
                fwd = reserve + [B.for_range(s.var, args, bf)]
            fwd = self.hoisted_checks(s) + fwd
            fwd += self.rest_holders()
            if not br:
                return fwd, []
            rev = self.reverse_range(s, br)
            return fwd, rev
        if isinstance(s, While):
            self.depth += 1
            tf, tr = self.block(s.test_body)
            saved = self.enter_region()
            bf, br = self.block(s.body)
            reserve, _ = self.leave_region(saved, None)
            bf = reserve + bf
            self.depth -= 1
            if tr:
                raise _err(s, "internal: a loop condition needs reverse code")
            if not br:
                body = tf + [B.if_(B.ex(X(gast.UnaryOp(op=gast.Not(), operand=B.ex(self.val(s.test))))), [B.break_()])] + bf
                return [B.while_(B.const(True), body)] + self.rest_holders(), []
            trips = self.fresh("_trips")
            self.types[trips] = Scalar("i64")
            self.f.defs[trips] = 1
            if self.depth > 0:
                self.f.in_loop.add(trips)
            self.tbr.add(trips)
            fwd = []
            if self.taped(trips):
                self.extra_inits.append((trips, Scalar("i64")))
                fwd += self.push(trips)
            fwd.append(B.assign(trips, 0))
            body = tf + [B.if_(B.ex(X(gast.UnaryOp(op=gast.Not(), operand=B.ex(self.val(s.test))))), [B.break_()])] \
                + bf + [B.augassign(trips, "+", 1)]
            fwd.append(B.while_(B.const(True), body))
            fwd += self.rest_holders()
            r = self.fresh("_trip")
            rev = [B.for_range(r, [B.name(trips)], br)]
            if self.taped(trips):
                rev += self.pop(trips)
            return fwd, rev
        raise TypeError(s)

    # ------------------------------------------------------------------ segments
    def fwd_pops(self, s):
        """Forward code of a lifted statement (with its tape pushes) and the pops that undo it:
        float pops (run before the segment's step, which needs entry values) and condition pops
        (run after it: the step chooses its path by the conditions' values in the segment)."""
        if isinstance(s, Assign):
            fwd, fpops, cpops = self.index_checks(s), [], []
            if self.taped_at(s):
                fwd += self.push(s.target)
                (fpops if self.types[s.target].kind == "f64" else cpops).extend(self.pop(s.target))
            fwd.append(B.assign(s.target, self.primal(s)))
            return fwd, fpops, cpops
        fb, fpb, cpb = self.fwd_pops_block(s.body)
        fo, fpo, cpo = self.fwd_pops_block(s.orelse)
        fwd = [B.if_(self.val(s.cond), fb, fo)]

        def branch(pb, po):
            if not (pb or po):
                return []
            if pb:
                return [B.if_(self.val(s.cond), pb, po)]
            return [B.if_(B.ex(X(gast.UnaryOp(op=gast.Not(), operand=B.ex(self.val(s.cond))))), po)]
        return fwd, branch(fpb, fpo), branch(cpb, cpo)

    def fwd_pops_block(self, stmts):
        fwd, fpops, cpops = [], [], []
        for st in stmts:
            f, fp, cp = self.fwd_pops(st)
            if f:
                f[0]._coarsen_loc = st.loc
            fwd += f
            fpops[:0] = fp
            cpops[:0] = cp
        return fwd, fpops, cpops

    def segment(self, seg):
        info = seg.info
        if "partials" not in info:
            return self.block(seg.stmts)
        if info.get("kind") == "loop":
            return self.loop_segment(seg)
        fwd, pass_rev = [], []
        for st in seg.passengers:
            f, r = self.stmt(st)
            self.record_reads(st, r)
            if f:
                f[0]._coarsen_loc = st.loc
            fwd += f
            pass_rev[:0] = r
        lifted = [st for st in seg.stmts if not any(st is p for p in seg.passengers)]
        lf, fpops, cpops = self.fwd_pops_block(lifted)
        fwd += lf
        step = self.segment_step(seg)
        names = {n for n in _names_read(step + fpops + cpops) if n in self.types}
        passenger_defs = {p.target for p in seg.passengers}
        cond_defs = {st.target for st in walk(lifted)
                     if isinstance(st, Assign) and self.types[st.target].kind == "bool"}
        for n in names:
            # when the step reads each value: conditions as they stand at the segment's end,
            # passengers' results after the passengers (before the lifted statements, which
            # may reassign them), everything else on entry
            if n in cond_defs:
                self.reads_at.setdefault(n, []).append(("end", seg))
            elif n in passenger_defs:
                self.reads_at.setdefault(n, []).append(("mid", seg))
            else:
                self.reads_at.setdefault(n, []).append(seg)
        return fwd, fpops + step + cpops + pass_rev

    def loop_segment(self, seg):
        """A loop replaced by the exact closed form of its carried values."""
        import sympy
        info = seg.info
        n = self.fresh("_n")
        self.types[n] = Scalar("i64")
        nsym = sympy.Symbol(n, integer=True)
        fwd = [B.assign(n, B.call("int", self.sym_expr(info["trip_count"])))]
        tmps = []
        for v in info["carried"]:
            e = info["finals_n"][v].xreplace({info["n_symbol"]: nsym})
            t = self.fresh("_closed")
            self.types[t] = self.types[v]
            conv = "float" if self.types[v].kind == "f64" else "int"
            fwd.append(B.assign(t, B.call(conv, self.sym_expr(e))))
            tmps.append((v, t))
        pops = []
        inner = {}
        for st in walk(seg.stmts):
            if isinstance(st, Assign):
                inner[st.target] = inner.get(st.target, False) or self.taped_at(st)
        for v, t in tmps:
            if inner.get(v):
                fwd += self.push(v)
                pops[:0] = self.pop(v)
            fwd.append(B.assign(v, B.name(t)))
        fwd[0].coarsen_comment = f"loop (line {seg.loc.lineno}) in closed form: " + \
            "; ".join(info["formula"].splitlines())
        step = self.segment_step(seg)
        names = {nm for nm in _names_read(step + pops) if nm in self.types}
        rev = pops + step
        if info.get("singular"):
            # at the closed form's singular points the loop runs, one coarse step per trip
            import sympy
            guard = self.sym_expr(sympy.Or(*info["singular"]))
            names |= {nm for nm in _names_read([guard]) if nm in self.types}
            loop_fwd, loop_rev = self.stmt(info["loop"])
            fwd = [B.if_(guard, loop_fwd, fwd)]
            fwd[0].coarsen_comment = "exact closed form, except at its singular points (the loop)"
            rev = [B.if_(self.sym_expr(sympy.Or(*info["singular"])), loop_rev or [gast.Pass()], rev)]
        for nm in names:
            self.reads_at.setdefault(nm, []).append(seg)
        return fwd, rev

    def sym_expr(self, expr):
        """A SymPy expression as a gast expression (recomputable element reads re-read)."""
        from .. import symbolic as S
        node = gast.parse(S.to_python(expr)).body[0].value
        if self.lifted_names:
            names = self.lifted_names

            class Real(gast.NodeTransformer):
                def visit_Name(self, n):
                    n.id = real_name(n.id, names)
                    return n
            node = Real().visit(node)
        if self.recompute:
            rec = self.recompute
            emitter = self

            class Sub(gast.NodeTransformer):
                def visit_Name(self, n):
                    if isinstance(n.ctx, gast.Load) and n.id in rec:
                        st = rec[n.id]
                        return B.subscript(st.args[0].name, emitter.index_node(st.index))
                    return n
            node = Sub().visit(node)
        return node

    def segment_step(self, seg):
        info = seg.info
        partials = info["partials"]
        outs = [o for o in seg.outputs if o in self.active and any(k[0] == o for k in partials)]
        ins = []
        for o, i in sorted(partials, key=lambda k: (k[1], k[0])):
            if i in self.active and i not in ins:
                ins.append(i)
        code = []
        g = {}
        for o in outs:
            if o in ins:
                gname = self.fresh("_g")
                self.extra_inits.append((gname, self.types[o]))
                code.append(B.assign(gname, B.name(self.bar(o))))
                g[o] = X(B.name(gname))
            else:
                g[o] = X(B.name(self.bar(o)))
        late_reset = []
        for o in seg.outputs:
            if o not in self.active or o in self.f.set_temps:
                continue
            if intact(self.f, o) and o not in ins:
                continue
            (code if o in ins else late_reset).append(B.assign(self.bar(o), 0.0))
        paths = info.get("paths") or [((), partials, info["jac"])]
        branches = []
        for decisions, path_partials, jac in paths:
            body = self.path_step(path_partials, jac, outs, ins, g)
            got = {i for (o, i) in path_partials if o in outs}
            body += self.zero_unset_inputs(seg, got)
            branches.append((decisions, body))
        if len(branches) == 1:
            code += branches[0][1]
        else:
            chain = None
            for decisions, body in reversed(branches):
                if chain is None:
                    chain = body or [gast.Pass()]
                    continue
                tests = []
                for cond, flag in decisions:
                    t = B.ex(self.val(cond))
                    tests.append(t if flag else gast.UnaryOp(op=gast.Not(), operand=t))
                test = tests[0] if len(tests) == 1 else gast.BoolOp(op=gast.And(), values=tests)
                chain = [B.if_(test, body, chain)]
            code += chain
        code += late_reset
        if code:
            a, b = info["lines"]
            where = f"line {a}" if a == b else f"lines {a}-{b}"
            code[0].coarsen_comment = f"segment {seg.index} ({where}), one preaccumulated step: {info.get('formula', '')}"
        return code

    def path_step(self, partials, jac, outs, ins, g):
        """The preaccumulated step of one straight-line path: ``in_bar += sum(d out/d in * out_bar)``."""
        code = []
        # only the replacements the partials need (values are recomputed by the forward code)
        needed = set()
        for (o, i), e in partials.items():
            if o in outs and i in ins:
                needed |= e.free_symbols
        keep = []
        for sym, e in reversed(jac.replacements):
            if sym in needed:
                keep.append((sym, e))
                needed |= e.free_symbols
        for sym, e in reversed(keep):
            code.append(B.assign(real_name(sym.name, self.lifted_names), self.sym_expr(e)))
        pre_fwd, pre_rev = [], []
        for i in ins:
            total = None
            for o in outs:
                if (o, i) not in partials:
                    continue
                p = X(self.sym_expr(partials[(o, i)]))
                term = g[o] if (isinstance(p.node, gast.Constant) and p.node.value == 1) else g[o] * p
                total = term if total is None else total + term
            if total is not None:
                self.accumulate(i, total, pre_fwd, pre_rev, code)
        return code

    def zero_unset_inputs(self, seg, ins_with_contrib):
        """A set-once temporary fed into the segment whose partials are all zero (its value
        was overwritten) still needs its adjoint defined: zero."""
        out = []
        for i in seg.inputs:
            if i in self.f.set_temps and i in self.active and i not in ins_with_contrib:
                out.append(B.assign(self.bar(i), 0.0))
        return out

    def trip_count(self, s):
        start, stop, step = s.start, s.stop, s.step
        if isinstance(step, Const) and step.value == 1:
            if isinstance(start, Const) and start.value == 0:
                return self.val(stop)
            return self.val(stop) - self.val(start)
        return X(B.call(self.helper("_range_len"), self.val(start), self.val(stop), self.val(step)))

    def record_reads(self, s, rev):
        """Which primal variables the reverse code of ``s`` (its own part) reads."""
        if isinstance(s, Segment):
            return   # recorded by segment() itself
        if isinstance(s, (Assign, Store)):
            names = _names_read(rev)
        elif isinstance(s, If):
            names = {s.cond.name} if isinstance(s.cond, Var) and rev else set()
        elif isinstance(s, For):
            names = {b.name for b in (s.start, s.stop, s.step) if isinstance(b, Var)} if rev else set()
        else:
            names = set()
        for n in names:
            if n in self.types:
                self.reads_at.setdefault(n, []).append(s)

    def range_args(self, s):
        start, stop, step = s.start, s.stop, s.step
        if isinstance(step, Const) and step.value == 1:
            if isinstance(start, Const) and start.value == 0:
                return [self.val(stop)]
            return [self.val(start), self.val(stop)]
        return [self.val(start), self.val(stop), self.val(step)]

    def reverse_range(self, s, body_rev):
        start, stop, step = s.start, s.stop, s.step
        if isinstance(step, Const) and step.value == 1:
            return [B.for_range(s.var, [self.val(stop) - 1, self.val(start) - 1, -1], body_rev)]
        if isinstance(step, Const) and step.value == -1:
            return [B.for_range(s.var, [self.val(stop) + 1, self.val(start) + 1], body_rev)]
        k = self.fresh("_k")
        n = B.call(self.helper("_range_len"), self.val(start), self.val(stop), self.val(step))
        body = [B.assign(s.var, self.val(start) + X(B.name(k)) * self.val(step))] + body_rev
        return [B.for_range(k, [X(n) - 1, -1, -1], body)]

    # ------------------------------------------------------------------ primal ops
    def primal(self, s):
        """The primal expression of the assignment ``s``: its primitive's emitter."""
        return primitive(s.op).emit(self, s, [self.val(a) for a in s.args])

    # ------------------------------------------------------------------ assignments
    def assign(self, s):
        t = s.target
        fwd = self.index_checks(s)
        pre_fwd, pre_rev = [], []
        taped = self.taped_at(s)
        if taped:
            fwd += self.push(t)
        fwd.append(B.assign(t, self.primal(s)))
        rev = []
        if taped:
            rev += self.pop(t)
        if t not in self.active:
            return fwd, rev
        active_args = [p for p in primitive(s.op).diff_positions(len(s.args))
                       if isinstance(s.args[p], Var) and s.args[p].name in self.active]
        contribs = []
        g = X(B.name(self.bar(t)), self.is_arr(Var(t)))
        is_set = t in self.f.set_temps
        self_ref = any(isinstance(a, Var) and a.name == t for a in s.args)
        needs_reset = not is_set and not intact(self.f, t)
        # accumulation t = t + e / t = t - e: the adjoint of t flows through unchanged
        if self_ref and primitive(s.op).accumulates and isinstance(s.args[0], Var) and s.args[0].name == t \
                and not (isinstance(s.args[1], Var) and s.args[1].name == t) \
                and self.nd(s.args[0]) == self.nd(Var(t)):
            body = []
            if 1 in active_args:
                body += self.vjp(s, 1, g, pre_fwd, pre_rev)
            return pre_fwd + fwd, rev + pre_rev + body
        capture = []
        if self_ref and needs_reset and active_args:
            gname = self.fresh("_g")
            self.extra_inits.append((gname, self.types[t]))
            capture.append(B.assign(gname, B.name(self.bar(t))))
            g = X(B.name(gname), self.is_arr(Var(t)))
        reset = []
        if needs_reset:
            if self.is_arr(Var(t)):
                reset.append(B.assign(self.bar(t), B.call("np.zeros", B.attr(f"{t}.shape"))))
            else:
                reset.append(B.assign(self.bar(t), 0.0))
        for p in active_args:
            contribs += self.vjp(s, p, g, pre_fwd, pre_rev)
        if capture:
            body = capture + reset + contribs
        else:
            body = contribs + reset
        return pre_fwd + fwd, rev + pre_rev + body

    def vjp(self, s, p, g, pre_fwd, pre_rev):
        self.in_reverse = True
        try:
            return self._vjp(s, p, g, pre_fwd, pre_rev)
        finally:
            self.in_reverse = False

    def _vjp(self, s, p, g, pre_fwd, pre_rev):
        """Adjoint updates of operand ``p`` of ``s`` given the output's adjoint ``g``: local
        partials (broadcasting undone in ``reduce_to``) or the primitive's structural VJP."""
        prim = primitive(s.op)
        args = s.args
        arg = args[p]
        out = []
        if prim.partials is not None:
            rule = prim.partials[p]
            vals = [self.val(a) for a in args]
            if prim.partials_see_constants:
                partial = rule(*vals, consts=tuple(a.value if isinstance(a, Const) else None
                                                   for a in args))
            else:
                partial = rule(*vals)
            pn = B.ex(partial)
            if isinstance(pn, gast.Constant) and pn.value == 1.0:
                contrib = g
            elif isinstance(pn, gast.UnaryOp) and isinstance(pn.operand, gast.Constant) and pn.operand.value == 1.0:
                contrib = -g
            else:
                contrib = g * partial
            others = [a for i, a in enumerate(args) if i != p and self.is_arr(a)]
            contrib = self.reduce_to(arg, contrib, self.nd(Var(s.target)),
                                     bool(others) and self.nd(arg) > 0, pre_fwd, pre_rev)
            self.accumulate(arg.name, contrib, pre_fwd, pre_rev, out)
            return out
        if prim.vjp is None:
            raise _err(s, f"no derivative rule for {s.op!r}")
        prim.vjp(self, s, p, g, pre_fwd, pre_rev, out)
        return out

    def broadcast_into(self, arg, gg, pre_fwd, pre_rev, out):
        """arg_bar += gg broadcast to arg's shape."""
        if arg.name in self.f.set_temps:
            shape = self.shape_of(arg, pre_fwd, pre_rev)
            out.append(B.assign(self.bar(arg.name), B.binop(B.call("np.zeros", shape), "+", gg)))
        else:
            out.append(B.augassign(self.bar(arg.name), "+", gg))

    # ------------------------------------------------------------------ stores
    def store(self, s):
        a = s.array
        fwd, rev = self.index_checks(s), []
        if a in self.tbr:
            fwd += self.push_region(a, s.index)
        region = B.subscript(a, self.index_node(s.index))
        v = self.val(s.value)
        if s.aug is None:
            fwd.append(B.assign(region, v))
        elif self.bounds is not None and self.is_arr(s.value):
            # a[s] = a[s] + v: Numba's in-place a[s] += v does not check that v's shape
            # broadcasts to the region's (it reads past v's end); the sum checks, as NumPy does
            fwd.append(B.assign(region, B.binop(B.subscript(a, self.index_node(s.index)),
                                               "+" if s.aug == "add" else "-", v)))
        else:
            fwd.append(B.augassign(region, "+" if s.aug == "add" else "-", v))
        if a in self.tbr:
            rev += self.pop_region(a, s.index)
        if a not in self.active:
            return fwd, rev
        pre_fwd, pre_rev = [], []
        body = []
        rnd = self.region_ndim(a, s.index)
        if isinstance(s.value, Var) and s.value.name in self.active:
            g = X(B.subscript(self.bar(a), self.index_node(s.index)), rnd > 0)
            if s.aug == "sub":
                g = -g
            contrib = self.reduce_to(s.value, g, rnd, rnd > 0 and self.nd(s.value) > 0, pre_fwd, pre_rev)
            self.accumulate(s.value.name, contrib, pre_fwd, pre_rev, body)
        if s.aug is None:
            body.append(B.assign(B.subscript(self.bar(a), self.index_node(s.index)), 0.0))
        return pre_fwd + fwd, rev + pre_rev + body


def _replace_loop(block, loop, seg):
    """Put the loop segment ``seg`` where ``loop`` stands (its statements keep the loop)."""
    for k, st in enumerate(block):
        if st is loop:
            body = seg.info.get("singular_body")
            loop.body = [body] if body is not None else list(seg.stmts)
            seg.stmts = [loop]
            block[k] = seg
            return True
        for sub in (getattr(st, "body", None), getattr(st, "orelse", None), getattr(st, "stmts", None)):
            if isinstance(sub, list) and sub is not seg.stmts and _replace_loop(sub, loop, seg):
                return True
    return False


def _drop_dead_adjoint_code(body, primal_names):
    """Remove compiler-made assignments whose value is never read (adjoints nobody
    accumulates into, captured adjoints, unused segment temporaries, initial values), until
    none is left: generated modules have no dead temporaries.  The user's own statements are
    never removed."""
    import re
    made = re.compile(r"^(.*_bar|_g\d+|_s\d+_\w+|_shape\d+|_closed\d+|_n\d+)$")

    def removable(st, loaded):
        if isinstance(st, gast.AugAssign) and isinstance(st.target, gast.Name):
            name = st.target.id      # x_bar += ... with x_bar never read
            return name not in loaded and bool(made.match(name))
        if not (isinstance(st, gast.Assign) and len(st.targets) == 1
                and isinstance(st.targets[0], gast.Name)):
            return False
        name = st.targets[0].id
        if name in loaded:
            return False
        return bool(made.match(name)) or getattr(st, "_coarsen_init", False)

    while True:
        loaded = {n.id for st in body for n in gast.walk(st)
                  if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load)}
        changed = False

        def prune(stmts):
            nonlocal changed
            out = []
            for st in stmts:
                if removable(st, loaded):
                    changed = True
                    continue
                for field in ("body", "orelse"):
                    sub = getattr(st, field, None)
                    if isinstance(sub, list) and sub:
                        new = prune(sub)
                        setattr(st, field, new or [gast.Pass()])
                out.append(st)
            return out

        body = prune(body)
        if not changed:
            return body


def _drop_marked(stmts):
    """Remove the reservation placeholders that turned out to reserve nothing."""
    out = []
    for st in stmts:
        if getattr(st, "_coarsen_drop", False):
            continue
        for field in ("body", "orelse"):
            sub = getattr(st, field, None)
            if isinstance(sub, list) and sub:
                new = _drop_marked(sub)
                setattr(st, field, new or [gast.Pass()])
        out.append(st)
    return out


def _names_read(nodes):
    out = set()
    for n in nodes:
        for sub in gast.walk(n):
            if isinstance(sub, gast.Name) and isinstance(sub.ctx, gast.Load):
                out.add(sub.id)
    return out


def _to_be_recorded(fn, reads_at):
    """Variables whose values the reverse sweep reads at a point where a later assignment
    (later in program order, or in a loop around both) may have overwritten them: exactly
    these are saved before each assignment and restored when it is reversed.  A value read
    only after its last assignment (an accumulator used after its loop) needs no tape."""
    from ..analysis.activity import statement_positions
    order, loops_of = statement_positions(fn.body)
    defs = {}
    for st in walk(fn.body):
        if isinstance(st, Assign):
            defs.setdefault(st.target, []).append(st)
        elif isinstance(st, For):
            defs.setdefault(st.var, []).append(st)
    out = set()
    for v, readers in reads_at.items():
        if v in fn.params and v not in defs:
            continue
        for r in readers:
            pr = order[id(r)]
            hit = False
            for d in defs.get(v, ()):
                if isinstance(d, For) and d.var == v:
                    continue   # the reverse loop sets its own index
                if order[id(d)] >= pr or any(lp in loops_of[id(r)] for lp in loops_of[id(d)]):
                    hit = True
                    break
            if hit:
                out.add(v)
                break
    # arrays whose elements the reverse sweep reads must be restored across stores
    stored = {st.array for st in walk(fn.body) if isinstance(st, Store)}
    for v in reads_at:
        if v in stored and isinstance(fn.types.get(v), Array):
            out.add(v)
    return out


def _tape_sites(fn, reads_at):
    """The scalar assignments that must save the value they overwrite.

    A forward may-analysis over the structured IR: a variable is *pending* from a point whose
    reverse code reads its value until the next assignment to it; an assignment met while its
    variable is pending overwrites a value the reverse sweep will read, so it is taped.
    (An accumulator read only after its loop, say, is then taped once per outer trip, not once
    per inner trip.)  Loops iterate to a fixpoint; both arms of an ``if`` are joined."""
    from ..ir.nodes import Segment
    start, mid, end = {}, {}, {}
    for v, readers in reads_at.items():
        for r in readers:
            if isinstance(r, tuple):
                (end if r[0] == "end" else mid).setdefault(id(r[1]), set()).add(v)
            else:
                start.setdefault(id(r), set()).add(v)
    marked = set()

    def flow(block, pending):
        pending = set(pending)
        for st in block:
            pending |= start.get(id(st), set())
            if isinstance(st, Assign):
                if st.target in pending:
                    marked.add(id(st))
                pending.discard(st.target)
            elif isinstance(st, If):
                pending = flow(st.body, pending) | flow(st.orelse, pending)
            elif isinstance(st, For):
                pending = loop(st.body, pending)
            elif isinstance(st, While):
                pending = flow(st.test_body, pending)
                pending = loop(st.test_body + st.body, pending)
            elif isinstance(st, Segment):
                pending = flow(st.passengers, pending)
                pending |= mid.get(id(st), set())
                pending = flow([x for x in st.stmts if not any(x is p for p in st.passengers)], pending)
            pending |= end.get(id(st), set())
        return pending

    def loop(body, pending):
        entry = set(pending)
        out = set()
        for _ in range(4):
            new = flow(body, entry | out)
            if new <= out:
                break
            out |= new
        return entry | out

    flow(fn.body, set())
    return frozenset(marked)


def _init_value(t):
    if isinstance(t, Array):
        dt = {"f64": [], "i64": [B.attr("np.int64")], "bool": [B.attr("np.bool_")]}[t.dtype]
        return B.call("np.empty", B.tuple_(*([0] * t.ndim)), *dt)
    return {"f64": B.const(0.0), "i64": B.const(0), "bool": B.const(False)}[t.kind]


def _comment_pass(stmts, last=None):
    for st in stmts:
        loc = getattr(st, "_coarsen_loc", None)
        if loc is not None:
            key = (loc.filename, loc.lineno)
            if getattr(st, "coarsen_comment", None):
                last = key
            elif key != last:
                st.coarsen_comment = f"{loc.text}"
                last = key
        for field in ("body", "orelse"):
            sub = getattr(st, field, None)
            if isinstance(sub, list) and sub and field in ("body", "orelse"):
                _comment_pass(sub, last)
    return last


def differentiate_ir(fn, wrt, facts, entry_name, *, coarsen=False, budget_seconds=2.0,
                     workspace=False, boundscheck=True):
    """Build the derivative module for a typed IR function (see the module docstring).

    ``workspace=True`` (for CUDA) requires scalar code only: the tapes are not allocated but
    passed in as the extra parameters ``_ftape``, ``_itape`` (per-thread slices of one
    preallocated workspace) with ``_status`` (an int64 array: ``_status[0] = 1`` when a tape
    would overflow, and the function returns zeros at once).  ``boundscheck=True`` checks
    every array index in the forward sweep before its access (``coarsen.analysis.bounds``):
    an index out of range raises ``IndexError`` naming the source line."""
    types = fn.types
    if workspace:
        for v, t in types.items():
            if isinstance(t, Array):
                raise CoarsenError(f"the CUDA target supports functions of scalars only; {v!r} is an array",
                                   filename=fn.filename,
                                   hint="use target='cpu' (batched with prange) for functions with arrays")
    segments = []
    if coarsen:
        from ..analysis.segments import plan_segments
        from .lift import closed_form_segment, differentiate_segment
        from .canonical import lift_canonically
        from .. import symbolic as S
        segments = plan_segments(fn, facts)
        loop_bodies = {}
        for st in walk(fn.body):
            if isinstance(st, For) and len(st.body) == 1 and isinstance(st.body[0], Segment):
                loop_bodies[id(st.body[0])] = st
        for seg in list(segments):
            budget = S.Budget(max_ops=4000, seconds=budget_seconds)
            loop = loop_bodies.get(id(seg))
            if loop is not None:
                info = lift_canonically(closed_form_segment, seg, types, facts.active, budget,
                                        loop=loop)
                if "partials" in info and info["singular"]:
                    # the loop stays as the path for the singular points (exactness there)
                    from ..ir.nodes import Segment as _Seg
                    body = _Seg(list(seg.stmts), seg.loc, seg.index, passengers=list(seg.passengers),
                                inputs=list(seg.inputs), outputs=list(seg.outputs), info=dict(seg.info))
                    body.info.update(lift_canonically(differentiate_segment, body, types,
                                                      facts.active, budget))
                    if "partials" not in body.info:
                        info = {"fallback": "closed form needs the loop at singular points, and the "
                                "loop body could not be lifted"}
                    else:
                        info["singular_body"] = body
                if "partials" in info:
                    seg.info.update(info)
                    seg.info["kind"] = "loop"
                    seg.info["loop"] = loop
                    seg.outputs = list(info["carried"])
                    seg.inputs = sorted({i for (_, i) in info["partials"]})
                    _replace_loop(fn.body, loop, seg)
                    continue
                seg.info["closed_form_fallback"] = info.get("fallback")
            seg.info.update(lift_canonically(differentiate_segment, seg, types, facts.active,
                                             budget))
    # index checks (boundscheck): proven, hoisted before loops, or inline before accesses
    # the canonical names segments were lifted under (coarsen.ad.canonical), to print back
    lifted_names = {}
    for seg in segments:
        lifted_names.update(seg.info.get("names", {}))
        sub = seg.info.get("singular_body")
        if sub is not None:
            lifted_names.update(sub.info.get("names", {}))
    from ..analysis.bounds import plan_bounds
    bounds = plan_bounds(fn) if boundscheck else None
    # phase 1: which primal variables does the reverse sweep read?
    # The reverse sweep's reads decide what is taped, and taping adds restore code that reads
    # more (the condition of an if whose branch now restores an array element, a loop's
    # bounds): emit until the reads no longer grow (monotone, so this ends).
    reads = {}
    tbr, sites = set(), frozenset()
    for _ in range(8):
        em = Emitter(fn, wrt, facts, tbr)
        em.lifted_names = lifted_names
        em.tape_sites = sites
        em.workspace = workspace
        em.bounds = bounds
        fwd, rev = em.block(fn.body)
        grown = False
        for v, rs in em.reads_at.items():
            known = reads.setdefault(v, [])
            for r in rs:
                key = (r[0], id(r[1])) if isinstance(r, tuple) else id(r)
                if key not in {((k[0], id(k[1])) if isinstance(k, tuple) else id(k)) for k in known}:
                    known.append(r)
                    grown = True
        if not grown and _ > 0:
            break
        plain = {v: [r[1] if isinstance(r, tuple) else r for r in rs] for v, rs in reads.items()}
        tbr = _to_be_recorded(fn, plain)
        for v in facts.active:
            if isinstance(types.get(v), Array) and not intact(facts, v) and v not in facts.set_temps:
                tbr.add(v)
        sites = _tape_sites(fn, reads)
    else:
        raise CoarsenError("internal: the tape analysis did not settle", filename=fn.filename)
    top_f, top_i = em.count_f, em.count_i
    em.close_holders(em.region)
    fwd = _drop_marked(fwd)
    prologue = []
    for p in fn.params:
        if p in facts.stored and isinstance(types[p], Array):
            prologue.append(B.assign(p, B.call(gast.Attribute(value=B.name(p), attr="copy", ctx=gast.Load()))))
    inits = {}
    for v in sorted(tbr):
        if v not in fn.params and em.taped(v) and v in types and isinstance(types[v], Array):
            inits[v] = types[v]
    for st in walk(fn.body):
        if isinstance(st, Assign) and st.target not in fn.params and em.taped_at(st):
            inits[st.target] = types[st.target]
    for v in sorted(facts.active):
        if v not in fn.params and isinstance(types.get(v), Array) and v not in facts.set_temps:
            inits[v] = types[v]
    for v, t in em.extra_inits:
        inits.setdefault(v, t)
    for v in sorted(inits):
        st = B.assign(v, _init_value(inits[v]))
        st._coarsen_init = True
        prologue.append(st)
    if workspace:
        prologue.append(B.assign(FP, 0))
        prologue.append(B.assign(IP, 0))
        for k, tape in ((top_f, FT), (top_i, IT)):
            if k:
                prologue.append(em.workspace_check(tape, X(k)))
    else:
        if em.uses_ftape:
            prologue.append(B.assign(FT, B.call("np.empty", top_f + 64)))
            prologue.append(B.assign(FP, 0))
        if em.uses_itape:
            prologue.append(B.assign(IT, B.call("np.empty", top_i + 64, B.attr("np.int64"))))
            prologue.append(B.assign(IP, 0))
    if prologue:
        prologue[0].coarsen_comment = "prologue: copies of written inputs, tapes, initial values"
    value_name = "_value"
    mid = [B.assign(value_name, B.call("float", fn.result), comment="reverse sweep")]
    # tape high-water marks (pushes happen only in the forward sweep), for reports
    mid.append(B.assign("_tape_floats", B.name(FP) if em.uses_ftape else 0))
    mid.append(B.assign("_tape_ints", B.name(IP) if em.uses_itape else 0))
    adj_init = []
    seeded = fn.result in facts.active      # the result's adjoint starts at 1, the others at 0
    for v in sorted(facts.active | set(wrt)):
        if v in facts.set_temps:
            continue
        t = types.get(v)
        if isinstance(t, Array):
            adj_init.append(B.assign(Emitter.bar(v), B.call("np.zeros", B.attr(f"{v}.shape"))))
        else:
            adj_init.append(B.assign(Emitter.bar(v), 1.0 if seeded and v == fn.result else 0.0))
    seed = []
    if seeded and (fn.result in facts.set_temps or isinstance(types.get(fn.result), Array)):
        seed = [B.assign(Emitter.bar(fn.result), 1.0)]
    grads = []
    for w in wrt:
        grads.append(B.name(Emitter.bar(w)))
    ret = B.return_(B.tuple_(value_name, gast.Tuple(elts=grads, ctx=gast.Load()),
                             B.tuple_("_tape_floats", "_tape_ints")))
    if fwd:
        fwd[0].coarsen_comment = "forward sweep" + (("\n" + fwd[0].coarsen_comment) if getattr(fwd[0], "coarsen_comment", None) else "")
    body = prologue + fwd + mid + adj_init + seed + rev + [ret]
    _comment_pass(fwd)
    _comment_pass(rev)
    for st in fwd[:1]:
        loc = getattr(st, "_coarsen_loc", None)
        if loc is not None:
            st.coarsen_comment = "forward sweep\n" + loc.text
    params = list(fn.params) + ([FT, IT, "_status"] if workspace else [])
    body = _drop_dead_adjoint_code(body, set(fn.types))
    func = B.funcdef(entry_name, params, body)
    helpers = helper_source(sorted(em.helpers)) if em.helpers else ""
    # import what the code uses (generated modules pass `ruff check`)
    used = {n.id for node in [func] + list(gast.parse(helpers).body if helpers else [])
            for n in gast.walk(node) if isinstance(n, gast.Name)}
    header = gast.parse("".join(line for mod, line in (("math", "import math\n"),
                                                       ("np", "import numpy as np\n"))
                                if mod in used) or "\n")
    helper_mod = gast.parse(helpers) if helpers else gast.Module(body=[], type_ignores=[])
    module = gast.Module(body=header.body + helper_mod.body + [func], type_ignores=[])
    em.segments = segments
    return module, em
