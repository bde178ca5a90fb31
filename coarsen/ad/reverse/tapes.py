"""Tapes of the reverse pass: typed float and int buffers, pushes and pops, and capacity
reserved ahead per straight-line region.

Requires: an emitter with ``types``, ``f`` (activity facts), ``helper``, ``index_node``,
``fresh``, ``taped``, ``extra_inits``, ``workspace`` and ``wrt`` (``coarsen.ad.reverse.emitter``).
Guarantees: ``push``/``pop`` save and restore a variable (arrays with their shape), ``push_region``/
``pop_region`` the part of an array a store overwrites; scalar pushes are plain stores into room
reserved before a range loop for all its trips (per trip in a ``while`` loop, at entry for the
rest; re-reserved after nested loops and array pushes, which may use it up); in workspace mode
(CUDA) an overflow sets ``_status[0]`` and returns zeros instead of growing.

One reservation per loop nest (``nest_plan``): a ``range`` loop whose nested loops are all
``range`` loops with scalar pushes only (no array push, ``while``, reduction or checkpointed
loop below it), each with a trip count recomputable before the outermost loop (its bounds'
leaves, after ``recording.find_int_recomputable``'s expressions are expanded, are constants or
variables set on every path to the nest and assigned nowhere in it), reserves once before
itself ``pos + trips * (k + sum of its inner loops' totals)``, each inner total
``max(trips_inner, 0) * (k_inner + ...)``, and every reservation inside it is dropped.  The
counts ``k`` are per trip at compile time, both branches of an ``if`` counted: an upper bound
of the pushes, never less.  Other nests keep the per-trip reservations.

Tape lines (``tape_lines`` a list: the instrumented build of ``Gradient.report(...,
tape_lines=True)``, never the normal one): every push outside a reduction loop's trips adds
the entries it pushed to ``_tlf[site]`` / ``_tli[site]``, the site being the source line
(``tape_lines[site]``, a ``Loc``) of the statement whose code pushes.
"""
from __future__ import annotations

import gast

from ...analysis.activity import intact
from ...ir.nodes import NEWAXIS, Array, Assign, Const, For, Scalar, Var, walk
from ...codegen import build as B
from ...codegen import runtime as R
from ...codegen.build import X

FT, FP, IT, IP = "_ftape", "_fpos", "_itape", "_ipos"
TLF, TLI, TL_MARK = "_tlf", "_tli", "_tlmark"      # the tape-lines counters (instrumented build)


class TapeMixin:
    #: arrays the reverse sweep reads the shape of only (``recording.shape_recorded``)
    shape_recorded = frozenset()

    def saved_scalar(self, base, kind):
        """A fresh scalar that the forward sweep sets once per execution of a statement and the
        reverse sweep reads at that statement's reverse: ``(name, pushes, pops)``, the pushes
        (before setting it) and pops (after reading it) saving the value a later trip of an
        enclosing loop overwrites; both empty outside loops."""
        name = self.fresh(base)
        self.types[name] = Scalar(kind)
        self.f.defs[name] = 1
        if self.depth > 0:
            self.f.in_loop.add(name)
        self.tbr.add(name)
        if not self.taped(name):
            return name, [], []
        self.extra_inits.append((name, Scalar(kind)))
        return name, self.push(name), self.pop(name)

    def push(self, name, whole=False):
        """Save ``name``'s value before an assignment overwrites it.  An array the reverse
        sweep reads the shape of only (``shape_recorded``) saves its shape, unless ``whole``
        (a checkpoint's state)."""
        t = self.types[name]
        if isinstance(t, Array) and name in self.shape_recorded and not whole:
            out = []
            for d in range(t.ndim):
                out += self.push_int(B.subscript(B.attr(f"{name}.shape"), d))
            return out
        if isinstance(t, Array):
            self.uses_ftape = True
            self.uses_itape = True
            out = self.counted_array_push(
                [B.assign(B.tuple_(FT, FP), B.call(self.helper("_push_array"), FT, FP, name))])
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
        return [B.assign(B.subscript(FT, B.name(FP)), value), B.augassign(FP, "+", 1)] \
            + self.count_push(TLF, B.const(1))

    def push_int(self, value):
        self.uses_itape = True
        self.region["i"] += 1
        return [B.assign(B.subscript(IT, B.name(IP)), value), B.augassign(IP, "+", 1)] \
            + self.count_push(TLI, B.const(1))

    # ------------------------------------------------------------------ tape lines
    tape_lines = None     # None: the normal build; a list of Locs: the instrumented one
    cur_loc = None        # the Loc of the statement being emitted (ControlMixin.block)

    def count_push(self, counter, n):
        """Instrumented build only: ``counter[site] += n`` for the current source line."""
        if self.tape_lines is None or self.in_fused or self.workspace:
            return []
        loc = self.cur_loc
        key = None if loc is None else (loc.filename, loc.lineno)
        keys = [None if x is None else (x.filename, x.lineno) for x in self.tape_lines]
        if key in keys:
            site = keys.index(key)
        else:
            site = len(self.tape_lines)
            self.tape_lines.append(loc)
        return [B.augassign(B.subscript(counter, B.const(site)), "+", n)]

    def counted_array_push(self, stmts):
        """An array push (``stmts``), counted by the entries it adds (instrumented build)."""
        count = self.count_push(TLF, X(B.name(FP)) - X(B.name(TL_MARK)))
        if not count:
            return stmts
        return [B.assign(TL_MARK, B.name(FP))] + stmts + count

    @property
    def count_f(self):
        return self.region["f"]

    @property
    def count_i(self):
        return self.region["i"]

    def new_region(self):
        # "dynamic": something in it whose pushes are not counted at compile time (an array
        # push, a while, reduction or checkpointed loop, a range loop not reserved as a nest);
        # "inner": the nest plans of the range loops in it that are (``nest_plan``)
        return {"f": 0, "i": 0, "nested": False, "holders": [], "dynamic": False, "inner": []}

    def enter_region(self):
        saved = self.region
        self.region = self.new_region()
        return saved

    def reserve_stmt(self, tape, pos, k_node, trips=None):
        need = X(B.name(pos)) + (X(k_node) if trips is None else X(k_node) * trips)
        if self.workspace:
            return self.workspace_check(tape, need)
        return B.assign(tape, B.call(self.helper("_reserve"), tape, need))

    def rest_holders(self, nest=None):
        """Placeholders, after a nested loop, re-reserving the enclosing region's pushes per
        trip (the nested loop may have used the room reserved before it).  ``nest``: the
        loop's nest plan (``nest_plan``, applied), None when its pushes are not counted."""
        if nest is None:
            self.region["dynamic"] = True
        else:
            self.region["inner"].append(nest)
        out = []
        for tape, pos, key in ((FT, FP, "f"), (IT, IP, "i")):
            k = gast.Constant(value=0, kind=None)
            node = self.reserve_stmt(tape, pos, k)
            # (the pushes counted so far are placed before this placeholder: it reserves the
            # region's pushes after it, close_holders)
            self.region["holders"].append((key, k, node, self.region[key]))
            out.append(node)
        self.region["nested"] = True
        return out

    def close_holders(self, region):
        """Each placeholder reserves the pushes of the trip that may come after it: the
        region's count less those counted before it was made (code is emitted in program
        order: a push counted before it is placed before it, or on another path)."""
        for key, k, node, before in region["holders"]:
            k.value = region[key] - before
            if k.value < 0:
                raise AssertionError("internal: a tape placeholder counted more pushes than its region")
            if k.value == 0:
                node._coarsen_drop = True

    def leave_region(self, saved, trips, loop=None, defined=frozenset()):
        """Reservation statements for the pushes counted since ``enter_region``: all trips
        up front for a loop body without nested loops, else per trip (and after each nested
        loop, through the placeholders).  For a ``range`` loop (``loop``; ``defined``: the
        variables set on every path to it), ``self.left_nest`` is its nest plan or None."""
        region = self.region
        self.region = saved
        self.close_holders(region)
        self.left_counts = (region["f"], region["i"])     # for coarsen.ad.reverse.checkpoint
        self.left_region = region                         # for trip_plan
        self.left_nest = None if loop is None or trips is None else \
            self.nest_plan(region, loop, defined)
        out = []
        per_trip = trips is None or region["nested"]
        for tape, pos, key in ((FT, FP, "f"), (IT, IP, "i")):
            # (per trip, all of the trip's pushes: a placeholder after a loop in one branch
            # does not run on the other's path)
            k = region[key]
            if k:
                out.append(self.reserve_stmt(tape, pos, k, None if per_trip else trips))
        return out, per_trip

    # ------------------------------------------------------------------ nests
    def nest_plan(self, region, loop, defined):
        """The range loop ``loop``'s pushes as compile-time counts times trip counts known
        before the nest runs (module docstring), or None.  A plan is ``{"f": int or X, "i":
        ..., "reads": names, "region": region, "drops": []}``: the entries all of ``loop``'s
        trips push at most, per tape, as ints or expressions valid before the outermost loop
        of the nest (0: no pushes), and the variables they read."""
        if region["dynamic"]:
            return None
        if all(isinstance(per, int) and per == 0
               for per in (self.nest_per_trip(region, key) for key in ("f", "i"))):
            # nothing pushed in any trip: no reservation, whatever the trip count reads
            return {"f": 0, "i": 0, "reads": set(), "region": region, "drops": []}
        own = self.nest_trips(loop)
        if own is None:
            return None
        trips, reads = own
        plan = self.trip_plan(region, loop, defined, reads)
        if plan is None:
            return None
        for key in ("f", "i"):
            per = plan[key]
            plan[key] = 0 if isinstance(per, int) and per == 0 else \
                trips if isinstance(per, int) and per == 1 else trips * per
        return plan

    def trip_plan(self, region, loop, defined, reads=()):
        """The entries one trip of ``loop`` pushes at most per tape, as ints or expressions
        valid before ``loop`` (its inner loops' totals read only variables set on every path
        to it, ``defined``, and assigned nowhere in it), in the shape of a nest plan; None where
        they are not known there.  ``reads``: variables the caller's expression reads too.
        A reduction loop reversed trip by trip (``coarsen.ad.reverse.fused``) pops in each
        trip what the trip pushed, so this is all the room it needs, reserved once before it."""
        if region["dynamic"]:
            return None
        assigned = {loop.var} | {st.target for st in walk(loop.body) if isinstance(st, Assign)} \
            | {st.var for st in walk(loop.body) if isinstance(st, For)}
        plan = {"reads": set(reads), "region": region, "drops": []}
        for inner in region["inner"]:
            if inner["reads"] & assigned or not inner["reads"] <= defined:
                return None
            plan["reads"] |= inner["reads"]
        if not plan["reads"] <= defined:
            return None
        for key in ("f", "i"):
            plan[key] = self.nest_per_trip(region, key)
        return plan

    @staticmethod
    def nest_per_trip(region, key):
        """The entries one trip of the region pushes at most on tape ``key``, with its inner
        loops' totals (an int or an expression; 0 for none)."""
        out = region[key]
        for inner in region["inner"]:
            if inner[key]:
                out = inner[key] if isinstance(out, int) and out == 0 else out + inner[key]
        return out

    def nest_trips(self, loop):
        """``(max(trip count, 0), the variables it reads)``, the count (an int where the
        bounds are constants) evaluated from the bounds' leaves (recomputable integer scalars
        expanded), or None."""
        parts, reads = [], set()
        for op in (loop.start, loop.stop, loop.step):
            if isinstance(op, Const) and type(op.value) is int:
                parts.append(op.value)
            elif isinstance(op, Var):
                node = self.int_expr(op.name) if op.name in self.int_recompute else B.name(op.name)
                reads |= {n.id for n in gast.walk(node) if isinstance(n, gast.Name)}
                parts.append(X(node))
            else:
                return None
        if all(isinstance(p, int) for p in parts):
            return len(range(*parts)), reads
        start, stop, step = parts
        if isinstance(step, int) and step == 1:
            n = stop if isinstance(start, int) and start == 0 else stop - start
            return X(B.call("max", n, 0)), reads
        return X(B.call(self.helper("_range_len"), *parts)), reads

    def apply_nest(self, plan, reserve, per_trip, trips):
        """The loop's reservation with its nest plan: for a loop with inner loops, one before
        it for all the nest's trips (``trips``: the loop's own trip count), every reservation
        inside it dropped; else the one it has (``reserve``, before the loop).  Returns
        ``(reserve, per_trip)``; ``plan["drops"]`` are then the statements an enclosing nest
        drops."""
        region = plan["region"]
        if region["inner"]:
            for _key, _k, node, _before in region["holders"]:
                node._coarsen_drop = True
            for inner in region["inner"]:
                for node in inner["drops"]:
                    node._coarsen_drop = True
            reserve = []
            for tape, pos, key in ((FT, FP, "f"), (IT, IP, "i")):
                per = self.nest_per_trip(region, key)
                if not (isinstance(per, int) and per == 0):
                    node = B.const(per) if isinstance(per, int) else per.node
                    reserve.append(self.reserve_stmt(tape, pos, node, trips))
            per_trip = False
        plan["drops"] = list(reserve)
        return reserve, per_trip

    workspace = False
    bounds = None      # the BoundsPlan (coarsen.analysis.bounds); None: no index checks

    def workspace_check(self, tape, need):
        """Workspace mode (CUDA): tapes are fixed slices; on overflow flag it and stop."""
        zeros = [B.const(0.0) for _ in self.wrt]
        ret = B.return_(B.tuple_(0.0, gast.Tuple(elts=zeros, ctx=gast.Load()), B.tuple_(0, 0)))
        return B.if_(B.compare(need, ">", B.subscript(B.attr(f"{tape}.shape"), 0)),
                     [B.assign(B.subscript("_status", 0), 1), ret])

    def pop(self, name, whole=False):
        """``push`` undone: the value (or, for a shape-recorded array, a new array of the
        saved shape) back into ``name``."""
        t = self.types[name]
        if isinstance(t, Array) and name in self.shape_recorded and not whole:
            out = [B.assign(B.tuple_(name, IP), B.call(self.helper(R.pop_shape(t.ndim)), IT, IP))]
        elif isinstance(t, Array):
            fn = self.helper(R.pop_array(t.ndim))
            out = [B.assign(B.tuple_(name, FP, IP), B.call(fn, FT, FP, IT, IP))]
        if isinstance(t, Array):
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
        return self.counted_array_push(
            [B.assign(B.tuple_(FT, FP), B.call(self.helper("_push_array"), FT, FP, region))]) \
            + self.rereserve_after_array()

    def rereserve_after_array(self):
        """An array push may fill the room reserved ahead for the region's scalar pushes (it
        grows the tape for itself only): reserve that room again after it, per trip."""
        k = gast.Constant(value=0, kind=None)
        node = self.reserve_stmt(FT, FP, k)
        self.region["holders"].append(("f", k, node, self.region["f"]))
        self.region["nested"] = True
        self.region["dynamic"] = True
        return [node]

    def pop_region(self, array, index):
        region = B.subscript(array, self.index_node(index))
        nd = self.region_ndim(array, index)
        if nd == 0:
            return [B.augassign(FP, "-", 1), B.assign(region, B.subscript(FT, B.name(FP)))]
        return [B.assign(FP, B.call(self.helper(R.pop_into(nd)), FT, FP, region))]

    def region_ndim(self, array, index):
        t = self.types[array]
        nint = sum(1 for it in index if isinstance(it, (Var, Const)))
        nnew = sum(1 for it in index if it == NEWAXIS)
        return t.ndim - nint + nnew

    # ------------------------------------------------------------------ shapes
    def shape_of(self, operand, pre_fwd, pre_rev):
        """An expression for an array operand's shape valid in the reverse sweep at this
        statement; records the shape on the int tape when the variable may be overwritten.

        ``pre_fwd`` runs in order before the statement, ``pre_rev`` in order at the start of
        its adjoint: the tape is last in, first out, so this call's pops go *before* those of
        earlier calls for the same statement (``a + b`` with both shapes taped pushes ``a``'s
        then ``b``'s, and pops ``b``'s first)."""
        name = operand.name
        nd = self.types[name].ndim
        if intact(self.f, name) or self.taped(name):
            return B.attr(f"{name}.shape")
        self.uses_itape = True
        dims = []
        pops = []
        for d in range(nd):
            pre_fwd.extend(self.push_int(B.subscript(B.attr(f"{name}.shape"), d)))
        for d in reversed(range(nd)):
            v = self.fresh("_shape")
            self.extra_inits.append((v, Scalar("i64")))
            pops.append(B.augassign(IP, "-", 1))
            pops.append(B.assign(v, B.subscript(IT, B.name(IP))))
            dims.insert(0, v)
        pre_rev[0:0] = pops
        return B.tuple_(*dims)

