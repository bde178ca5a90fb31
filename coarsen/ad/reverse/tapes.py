"""Tapes of the reverse pass: typed float and int buffers, pushes and pops, and capacity
reserved ahead per straight-line region.

Requires: an emitter with ``types``, ``f`` (activity facts), ``helper``, ``index_node``,
``fresh``, ``taped``, ``extra_inits``, ``workspace`` and ``wrt`` (``coarsen.ad.reverse.emitter``).
Guarantees: ``push``/``pop`` save and restore a variable (arrays with their shape), ``push_region``/
``pop_region`` the part of an array a store overwrites; scalar pushes are plain stores into room
reserved before a range loop for all its trips (per trip in a ``while`` loop, at entry for the
rest; re-reserved after nested loops and array pushes, which may use it up); in workspace mode
(CUDA) an overflow sets ``_status[0]`` and returns zeros instead of growing.
"""
from __future__ import annotations

import gast

from ...analysis.activity import intact
from ...ir.nodes import NEWAXIS, Array, Const, Scalar, Var
from .. import build as B
from .. import runtime as R
from ..build import X

FT, FP, IT, IP = "_ftape", "_fpos", "_itape", "_ipos"


class TapeMixin:
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
        self.left_counts = (region["f"], region["i"])     # for coarsen.ad.reverse.checkpoint
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

    def workspace_check(self, tape, need):
        """Workspace mode (CUDA): tapes are fixed slices; on overflow flag it and stop."""
        zeros = [B.const(0.0) for _ in self.wrt]
        ret = B.return_(B.tuple_(0.0, gast.Tuple(elts=zeros, ctx=gast.Load()), B.tuple_(0, 0)))
        return B.if_(B.compare(need, ">", B.subscript(B.attr(f"{tape}.shape"), 0)),
                     [B.assign(B.subscript("_status", 0), 1), ret])

    def pop(self, name):
        t = self.types[name]
        if isinstance(t, Array):
            fn = self.helper(R.pop_array(t.ndim))
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
        return [B.assign(FP, B.call(self.helper(R.pop_into(nd)), FT, FP, region))]

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

