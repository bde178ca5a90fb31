"""The Markdown report of a harness run.

Requires a result dict as built by :func:`apps.bench.runner.run` (``meta`` and ``cases``; a
partial run's cases are fine).  Guarantees:

* :func:`render_summary` is the headline table, coarse against fine-grained AD per app and size,
  with geomeans per size; :func:`render_markdown` is the whole report, with the summary first
  (``summary="first"``, the file) or last (``summary="last"``, what the terminal ends on), and
  the summary appears exactly once either way.
* Table cells never cut a message: a failed, unsupported or crashed tool shows its status and a
  footnote reference (``FAILED [^3]``), and the message, whole, is in the footnote under the
  first table that refers to it.  Identical messages of one tool share a footnote.
* Only the tools that ran have columns (``meta["tools"]``); peers skipped because they are not
  installed are listed with the command that installs them.
* :func:`render_compile_times` is the table of coarsen's transform time, the time from
  ``differentiate`` to the first gradient and Numba's compile time, per app and coarsen tool at
  its first use (the per-size preparation tables have the same columns for every size).
* :func:`render_benchmarks` is ``BENCHMARKS.md``: the report with the summary first, under a
  heading naming the command, the date, the machine and the mode.
* :func:`ratio` is median(tool) / median(base) from the same run, at the reduced size when the
  tool was measured there.
"""
from __future__ import annotations

import math

import apps


class Footnotes:
    """Numbered notes for table cells: ``ref(text)`` gives ``[^n]`` (one number per distinct
    text) and ``flush()`` the definitions not emitted yet."""

    def __init__(self):
        self._ids: dict[str, int] = {}
        self._pending: list[str] = []

    def ref(self, text: str) -> str:
        text = " ".join(text.split())
        if text not in self._ids:
            self._ids[text] = len(self._ids) + 1
            self._pending.append(text)
        return f"[^{self._ids[text]}]"

    def flush(self) -> list[str]:
        lines = [f"[^{self._ids[t]}]: {t}" for t in self._pending]
        self._pending = []
        return lines + [""] if lines else []


def fmt_time(s):
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def fmt_bytes(b):
    if b is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or unit == "GiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024.0


def status_cell(r, tool, notes: Footnotes):
    """The cell of a result that has no time: ``None`` for an ``ok`` result."""
    st = r.get("status")
    if st == "mismatch":
        return f"MISMATCH {r.get('err', float('nan')):.1e} vs {r.get('ref')}"
    if st == "missing":
        return "missing"
    if st in ("failed", "unsupported", "crashed", "too_slow"):
        msg = r.get("message", "")
        return st.upper() + (" " + notes.ref(f"{tool}: {msg}") if msg else "")
    return None


def ratio(case, tool, base):
    """median(tool) / median(base) in the same run (at the reduced size when marked)."""
    r = case["tools"].get(tool, {})
    if r.get("status") != "ok" or r.get("median_s") is None:
        return None
    if r.get("reduced_size"):
        b = r.get(f"{base}_median_s_at_reduced")
    else:
        b = case["tools"].get(base, {}).get("median_s")
    if not b:
        return None
    return r["median_s"] / b


def geomean(vals):
    vals = [v for v in vals if v is not None and v > 0]
    if not vals:
        return None
    return float(math.exp(sum(math.log(v) for v in vals) / len(vals)))


def _tool_median(case, tool):
    r = case["tools"].get(tool, {})
    if r.get("status") != "ok" or r.get("reduced_size"):
        return None
    return r.get("median_s")


def _dims(c):
    d = c.get("dims")
    if isinstance(d, (list, tuple)):
        return "(" + "x".join(str(v) for v in d) + ")"
    return f"({d})" if d is not None else ""


def render_summary(result, notes: Footnotes | None = None) -> str:
    """The headline table: coarse against fine-grained AD (the paper's claim) per app and size,
    with the hand-written gradient, ``g.tape_bytes`` and tracemalloc peaks; geomeans per size."""
    notes = notes if notes is not None else Footnotes()
    tools = result["meta"]["tools"]
    if not ("coarsen" in tools and "coarsen_fine" in tools):
        return ""
    lines = ["## Coarse vs fine-grained AD (summary)", "",
             "speedup = fine median / coarse median; tape = `g.tape_bytes` of one call; peak = "
             "tracemalloc peak of one call; hw = hand-written gradient.", ""]
    lines.append("| app | size | coarse | fine | speedup fine/coarse | coarse / hw "
                 "| tape coarse | tape fine | peak coarse | peak fine |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    per_size: dict = {}
    for c in result["cases"]:
        rc, rf = c["tools"].get("coarsen", {}), c["tools"].get("coarsen_fine", {})
        tc, tf = _tool_median(c, "coarsen"), _tool_median(c, "coarsen_fine")
        th = _tool_median(c, "handwritten")
        sp = tf / tc if tc and tf else None
        vh = tc / th if tc and th else None
        tbc, tbf = rc.get("tape_bytes"), rf.get("tape_bytes")
        both_ok = rc.get("status") == "ok" and rf.get("status") == "ok"
        pc, pf = rc.get("peak_bytes"), rf.get("peak_bytes")
        ps = per_size.setdefault(c["size"], {"speedup": [], "vs_hw": [], "tape": [], "peak": []})
        ps["speedup"].append(sp)
        ps["vs_hw"].append(vh)
        ps["tape"].append(tbf / tbc if tbc and tbf and both_ok else None)
        ps["peak"].append(pf / pc if pc and pf and both_ok else None)

        def cell(r, t, tool):
            st = status_cell(r, tool, notes) if r else "-"
            return st if st else fmt_time(t)

        def tape(b, r):
            if r.get("status") != "ok":
                return "-"
            return "0 B" if b == 0 else (fmt_bytes(b) if b is not None else "n/a")

        lines.append(
            f"| {c['app']} {_dims(c)} | {c['size']} | {cell(rc, tc, 'coarsen')} | "
            f"{cell(rf, tf, 'coarsen_fine')} | "
            f"{'-' if sp is None else f'{sp:.3g}x'} | {'-' if vh is None else f'{vh:.3g}'} | "
            f"{tape(tbc, rc)} | {tape(tbf, rf)} | "
            f"{fmt_bytes(pc) if pc is not None else '-'} | "
            f"{fmt_bytes(pf) if pf is not None else '-'} |")
    lines.append("")
    lines += notes.flush()
    for size, ps in per_size.items():
        def g(k, ps=ps):
            v = geomean(ps[k])
            n = len([x for x in ps[k] if x])
            return "-" if v is None else f"{v:.3g} (over {n} apps)"
        lines.append(f"- size {size}: geomean speedup fine/coarse {g('speedup')}; coarse / "
                     f"hand-written {g('vs_hw')}; tape fine/coarse {g('tape')} (apps where both "
                     f"tapes are non-empty); peak fine/coarse {g('peak')}")
    lines.append("")
    return "\n".join(lines)


def render_markdown(result, summary: str = "first", title: str | None = "# coarsen benchmark") -> str:
    """The whole report; ``summary`` is ``"first"`` or ``"last"`` (where the summary goes);
    ``title=None`` leaves out the heading."""
    if summary not in ("first", "last"):
        raise ValueError(f"summary must be 'first' or 'last', not {summary!r}")
    meta = result["meta"]
    notes = Footnotes()
    lines = [title, ""] if title else []
    lines.append(f"{meta['date']}; Python {meta['python']} on {meta['machine']} "
                 f"({meta['cpus']} CPUs); " + ", ".join(f"{k} {v}" for k, v in
                                                        meta["versions"].items() if v))
    lines.append("")
    if not meta.get("complete", True):
        lines += [f"Partial results: {len(result['cases'])} of {meta.get('cases_planned', '?')} "
                  f"(app, size) cases so far.", ""]
    lines.append(f"Protocol: untimed preparation; gradients checked against the hand-written "
                 f"one (else coarsen's) with |x-y|/max(1,|x|+|y|) <= {meta['tolerance']:g}; "
                 f"repeats doubled until a batch takes {meta['min_time_s']:g} s; up to "
                 f"{meta['samples']} interleaved round-robin samples; medians [min, max]. "
                 f"`@s` marks a peer measured at a smaller size (slower than "
                 f"{meta['slow_limit_s']:g} s per call), its ratios taken against the primal and "
                 f"hand-written gradient at that size. Memory: {meta['memory_method']}. "
                 f"coarsen's preparation is measured twice. In the crash probe's fresh process, "
                 f"which runs first: coarsen transform (symbolic work and code generation), "
                 f"differentiate to first result and compile (Numba's; see \"Transform and "
                 f"compile time\"). Then in this process: transform (`differentiate` plus "
                 f"`source_for`: SSA, analyses, AD, printing) and first call (compilation plus "
                 f"one run), usually loads of what the probe stored in the on-disk caches; a "
                 f"rerun shows cache loads everywhere unless run with `--cold`.")
    lines.append("")
    if summary == "first":
        text = render_summary(result, notes)
        if text:
            lines += [text, ""]
    lines += _size_sections(result, notes)
    from apps.bench.jacobians import render as render_jacobians
    lines += render_jacobians(result.get("jacobians", []))
    from apps.bench.hessians import render as render_hessians
    lines += render_hessians(result.get("hessians", []))
    from apps.bench.bridges import render as render_bridges
    lines += render_bridges(result.get("bridges"))
    from apps.bench.arrays import render_section as render_arrays
    lines += render_arrays(result.get("arrays"))
    lines += render_compile_times(result)
    lines += _peer_notes(result)
    if summary == "last":
        text = render_summary(result, notes)
        if text:
            lines += [text, ""]
    return "\n".join(lines)


def render_benchmarks(result, command: str) -> str:
    """``BENCHMARKS.md``: the whole report (summary first) under a heading that says which
    command wrote it, when, on what machine and in which mode."""
    meta = result["meta"]
    mode = "quick" if meta.get("quick") else "full"
    cpu = meta.get("cpu_model") or meta.get("processor") or meta.get("machine")
    head = ["# Benchmarks", "",
            f"Written by `{command}` on {meta['date']}, {mode} mode (sizes "
            f"{', '.join(meta.get('sizes', []))}; {meta['samples']} interleaved samples of "
            f"batches of at least {meta['min_time_s']:g} s"
            + ("; empty caches" if meta.get("cold_caches") else "") + f"), on {cpu} "
            f"({meta['cpus']} CPUs, {meta['machine']}), Python {meta['python']}. Rerunning the "
            f"harness rewrites this file; `results.json` in its output folder has everything "
            f"measured, and earlier measurements are in `CHANGELOG.md`. Times vary by 10 to 30 % "
            f"between runs on a shared machine: compare tools within one run.", ""]
    return "\n".join(head) + "\n" + render_markdown(result, title=None)


def _size_sections(result, notes):
    cases = result["cases"]
    tools = result["meta"]["tools"]
    lines = []
    for size in [s for s in apps.SIZES if any(c["size"] == s for c in cases)]:
        cs = [c for c in cases if c["size"] == size]
        for title, base in (("Gradient time / hand-written gradient time", "handwritten"),
                            ("Gradient time / Numba primal time", "primal")):
            lines += _ratio_table(f"## Size {size}: {title}", cs, tools, base, notes)
        lines += [f"## Size {size}: median time per call [min, max]", ""]
        lines.append("| app | " + " | ".join(tools) + " |")
        lines.append("|---" * (len(tools) + 1) + "|")
        for c in cs:
            row = [c["app"]]
            for t in tools:
                r = c["tools"].get(t, {})
                if r.get("median_s") is None:
                    row.append((status_cell(r, t, notes) or r.get("status", "-")) if r else "-")
                else:
                    mark = f" @{r['reduced_size']}" if r.get("reduced_size") else ""
                    row.append(f"{fmt_time(r['median_s'])} [{fmt_time(r['min_s'])}, "
                               f"{fmt_time(r['max_s'])}]{mark}")
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
        lines += notes.flush()
        lines += _prep_table(size, cs, tools)
    return lines


def _ratio_table(title, cs, tools, base, notes):
    lines = [title, ""] if title else []
    cols = [t for t in tools if t != base]
    lines.append("| app | " + " | ".join(cols) + " |")
    lines.append("|---" * (len(cols) + 1) + "|")
    per_tool = {t: [] for t in cols}
    for c in cs:
        row = [f"{c['app']} {_dims(c)}"]
        for t in cols:
            r = c["tools"].get(t)
            if r is None:
                row.append("-")
                continue
            s = status_cell(r, t, notes)
            if s:
                row.append(s)
                continue
            v = ratio(c, t, base)
            per_tool[t].append(v)
            mark = f" @{r['reduced_size']}" if r.get("reduced_size") else ""
            row.append("-" if v is None else f"{v:.3g}{mark}")
        lines.append("| " + " | ".join(row) + " |")
    geo = ["**geomean**"]
    for t in cols:
        g = geomean(per_tool[t])
        n_ok = len([v for v in per_tool[t] if v])
        geo.append("-" if g is None else
                   f"**{g:.3g}**" + ("" if n_ok == len(cs) else f" ({n_ok}/{len(cs)})"))
    lines.append("| " + " | ".join(geo) + " |")
    lines.append("")
    return lines + notes.flush()


def _prep_table(size, cs, tools):
    lines = [f"## Size {size}: preparation (untimed) and peak memory of one call", ""]
    lines.append("| app | tool | transform | first call (compile + run) | coarsen transform "
                 "| differentiate to first result | compile | caches | peak memory | tape |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for c in cs:
        for t in tools:
            r = c["tools"].get(t, {})
            if r.get("status") not in ("ok", "mismatch"):
                continue
            prep = r.get("prep", {})
            tr = prep.get("transform_s")
            trs = fmt_time(tr) if tr is not None else (
                f"(cached {fmt_time(prep['transform_s_cached'])})"
                if "transform_s_cached" in prep else "-")
            lines.append(f"| {c['app']} | {t} | {trs} | "
                         f"{fmt_time(prep.get('first_call_s'))} | "
                         f"{fmt_time(prep.get('coarsen_transform_s'))} | "
                         f"{fmt_time(prep.get('first_result_s'))} | "
                         f"{fmt_time(prep.get('compile_s'))} | {cache_cell(prep)} | "
                         f"{fmt_bytes(r.get('peak_bytes')) if 'peak_bytes' in r else '-'} | "
                         f"{fmt_bytes(r['tape_bytes']) if r.get('tape_bytes') else '-'} |")
    lines.append("")
    return lines


def cache_cell(prep):
    """Where coarsen's source and Numba's machine code came from: ``cold`` (neither cached),
    ``coarsen cache``, ``Numba cache``, ``both cached``; ``-`` for a tool that is not coarsen."""
    if "compile_measured_in" not in prep and "transform_cached" not in prep:
        return "-"
    src, mc = prep.get("transform_cached"), prep.get("compile_cached")
    if src is None and mc is None:
        return "?"
    if src and mc:
        return "both cached"
    if src:
        return "coarsen cache" + ("" if mc is False else ", Numba ?")
    if mc:
        return "Numba cache" + ("" if src is False else ", coarsen ?")
    return "cold" if src is False and mc is False else "?"


def _first_use(cases, app, tool):
    """The ``prep`` of ``tool`` on ``app`` at its first use: the smallest size where the probe
    measured it without any cache, else the smallest size that has the numbers."""
    found = []
    for c in cases:
        if c["app"] != app:
            continue
        prep = c["tools"].get(tool, {}).get("prep") or {}
        if prep.get("first_result_s") is not None or prep.get("coarsen_transform_s") is not None:
            found.append((apps.SIZES.index(c["size"]) if c["size"] in apps.SIZES else 99,
                          c["size"], prep))
    found.sort(key=lambda x: x[0])
    for _, size, prep in found:
        if cache_cell(prep) == "cold":
            return size, prep
    return (found[0][1], found[0][2]) if found else (None, None)


def render_compile_times(result) -> list[str]:
    """Per app and coarsen tool: coarsen's transformation (symbolic work and code generation),
    the time from ``differentiate`` to the first gradient, and Numba's compilation (the first
    call less the second), at the app's first use."""
    tools = [t for t in result["meta"]["tools"] if t.startswith("coarsen")]
    rows = []
    for app in dict.fromkeys(c["app"] for c in result["cases"]):
        for t in tools:
            size, prep = _first_use(result["cases"], app, t)
            if prep is None:
                continue
            rows.append(f"| {app} | {t} | {size} | {fmt_time(prep.get('coarsen_transform_s'))} | "
                        f"{fmt_time(prep.get('first_result_s'))} | "
                        f"{fmt_time(prep.get('compile_s'))} | {cache_cell(prep)} |")
    if not rows:
        return []
    cold = result["meta"].get("cold_caches")
    return ["## Transform and compile time (coarsen, first use per app)", "",
            "coarsen transform = the artifact's `transform_seconds` (symbolic work and code "
            "generation); differentiate to first result = from `coarsen.differentiate` to the "
            "first gradient in a fresh process (the crash probe's), Numba's compilation "
            "included; compile = that first call less the second (Numba's share). "
            + ("The run used empty caches (`--cold`)." if cold else
               "Cached entries are cache loads; `--cold` runs with empty caches."), "",
            "| app | tool | size | coarsen transform | differentiate to first result | compile "
            "| caches |", "|---|---|---|---|---|---|---|"] + rows + [""]


def _peer_notes(result):
    """Peers skipped before the run (not installed) and peers whose import failed in it."""
    lines = []
    skipped = result["meta"].get("skipped_peers") or []
    if skipped:
        lines += ["## Peers not installed (no column)", ""]
        for s in skipped:
            how = (" (or `pip install -e \".[bench]\"`)" if s.get("in_bench_extra")
                   else " (not in the `bench` extra; a CPU build is enough)")
            lines.append(f"- {s['tool']}: {s['reason']}; to add it: `{s['install']}`{how}")
        lines.append("")
    missing = {}
    for c in result["cases"]:
        for t, r in c["tools"].items():
            if r.get("status") == "missing":
                missing.setdefault(t, r.get("message", ""))
    if missing:
        lines += ["## Peers that failed to import", ""]
        lines += [f"- {t}: {m}" for t, m in missing.items()]
        lines.append("")
    return lines
