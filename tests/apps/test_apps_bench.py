"""The benchmark harness: it runs, checks gradients before timing, reports failures in the
table instead of crashing, writes its Markdown and JSON after every case, probes generated code
in a spawned child, and prints its summary once."""
from __future__ import annotations

import functools
import io
import json
import operator
import os
import pickle
import types

import numba
import numpy as np
import pytest

import apps
from apps import bench
from apps.bench import adapters, runner


def _cfg(tmp_path, **kw):
    base = dict(apps=["series"], sizes=["s"], tools=["primal", "handwritten"], out=tmp_path,
                min_time=0.001, samples=2, case_budget_s=0.5, slow_limit_s=5.0, plots=False,
                progress=False)
    base.update(kw)
    return bench.Config(**base)


def test_run_writes_reports(tmp_path):
    res = bench.run(_cfg(tmp_path, apps=["series", "kalman"]))
    data = json.loads((tmp_path / "results.json").read_text())
    assert [c["app"] for c in data["cases"]] == ["series", "kalman"]
    assert data["meta"]["complete"] is True
    for c in res["cases"]:
        hw = c["tools"]["handwritten"]
        assert hw["status"] == "ok" and hw["median_s"] > 0
        assert hw["min_s"] <= hw["median_s"] <= hw["max_s"] and hw["reps"] >= 1
        assert hw["peak_bytes"] is not None
        assert bench.ratio(c, "handwritten", "handwritten") == pytest.approx(1.0)
        assert bench.ratio(c, "handwritten", "primal") > 0
    md = (tmp_path / "results.md").read_text()
    assert "| series (7) |" in md and "geomean" in md and "Partial results" not in md
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def _fake_app(name="apps.fake", xp_objective=None):
    """A one-parameter app: f(x, n) = sum_{i<n} x^2 i."""
    def objective(x, n):
        s = 0.0
        for i in range(n):
            s += x * x * i
        return s

    sizes = {"s": 4, "m": 8, "l": 16}
    return types.SimpleNamespace(
        __name__=name, objective=objective, WRT=("x",), SIZES=sizes,
        make_inputs=lambda size, seed=0: (1.5, sizes[size]),
        primal_numba=numba.njit(objective),
        handwritten_grad=numba.njit(lambda x, n: (x * n * (n - 1),)),
        xp_objective=xp_objective, jax_objective=None)


def _stub_peer(monkeypatch, grad_of):
    """Make the ``autograd`` tool call ``grad_of(mod, args)`` instead of autograd."""
    monkeypatch.setattr(adapters, "autograd_fn",
                        lambda mod, args: (lambda: grad_of(mod, args)))


def test_mismatch_and_failure_are_reported_not_timed(tmp_path, monkeypatch):
    cfg = _cfg(tmp_path, tools=["primal", "handwritten", "autograd"])
    prog = bench.Progress(1, enabled=False)
    app = _fake_app()

    _stub_peer(monkeypatch, lambda mod, args: (6.0 * args[0],))     # not x n (n-1)
    res = bench.measure_group(app, "s", cfg.tools, cfg, prog, "fake")
    assert res["autograd"]["status"] == "mismatch" and "median_s" not in res["autograd"]
    assert res["autograd"]["ref"] == "handwritten"
    assert res["handwritten"]["status"] == "ok"

    def boom(mod, args):
        raise RuntimeError("boom\nsecond line")

    _stub_peer(monkeypatch, boom)
    res = bench.measure_group(app, "s", cfg.tools, cfg, prog, "fake")
    assert res["autograd"] == {"status": "failed", "message": "RuntimeError: boom"}
    assert res["primal"]["status"] == "ok"

    _stub_peer(monkeypatch, lambda mod, args: (args[0] * args[1] * (args[1] - 1),))
    res = bench.measure_group(app, "s", cfg.tools, cfg, prog, "fake")
    assert res["autograd"]["status"] == "ok" and res["autograd"]["median_s"] > 0


def test_a_peer_too_slow_at_a_size_is_stopped_and_measured_at_a_smaller_one(tmp_path, monkeypatch):
    """The prediction from the smaller size says fast (a call at "s" is quick), but a call at
    "m" would run for minutes: it is stopped at the limit and the peer is measured at "s"."""
    cfg = _cfg(tmp_path, sizes=["s", "m"], tools=["primal", "handwritten", "autograd"],
               slow_limit_s=0.02)
    app = _fake_app()
    calls = {"stopped": 0}

    def peer(mod, args):
        x, n = args
        if n == app.SIZES["m"]:
            k = 0
            try:
                while k < 10 ** 9:          # about a minute of Python, unless stopped
                    k += 1
            finally:
                calls["stopped"] += k < 10 ** 9
        return (x * n * (n - 1),)

    _stub_peer(monkeypatch, peer)
    monkeypatch.setattr(apps, "load", lambda name: app)
    prog = bench.Progress(2, enabled=False)
    cases = list(runner.run_app("fake", cfg, cfg.tools, prog))
    assert [c["size"] for c in cases] == ["s", "m"]
    at_m = cases[1]["tools"]["autograd"]
    assert calls["stopped"] == 1
    assert at_m["status"] == "ok" and at_m["reduced_size"] == "s", at_m
    assert cases[1]["tools"]["handwritten"]["status"] == "ok"
    assert "reduced_size" not in cases[1]["tools"]["handwritten"]
    # at the smallest size there is nothing to fall back to: no limit
    res = bench.measure_group(app, "m", cfg.tools[:2], cfg, prog, "fake", limited=())
    assert res["handwritten"]["status"] == "ok"


def test_peers_not_installed_get_no_column_and_an_install_hint(tmp_path, monkeypatch):
    def find_spec(name):
        return None if name in ("torch", "tangent") else object()

    keep, skipped = bench.available_tools(list(bench.ALL_TOOLS), find_spec=find_spec)
    assert "torch" not in keep and "tangent" not in keep and "jax" in keep
    assert [s.tool for s in skipped] == ["tangent", "torch"]
    assert skipped[1].install == "pip install torch" and not skipped[1].in_bench_extra
    assert skipped[0].install == "pip install tangent-ad" and skipped[0].in_bench_extra

    monkeypatch.setattr(runner, "available_tools",
                        functools.partial(bench.available_tools, find_spec=find_spec))
    res = bench.run(_cfg(tmp_path, tools=["primal", "handwritten", "torch"]))
    assert res["meta"]["tools"] == ["primal", "handwritten"]
    assert res["meta"]["requested_tools"] == ["primal", "handwritten", "torch"]
    assert "torch" not in res["cases"][0]["tools"]
    md = (tmp_path / "results.md").read_text()
    assert "torch |" not in md and "| torch" not in md
    assert "## Peers not installed (no column)" in md and "`pip install torch`" in md


def test_a_peer_that_fails_to_import_is_a_note(tmp_path, monkeypatch):
    def missing(mod, args):
        raise bench.Missing("jax not installed (test)")

    monkeypatch.setattr(adapters, "jax_grad_fn", missing)
    monkeypatch.setattr(runner, "available_tools",
                        functools.partial(bench.available_tools, find_spec=lambda n: object()))
    res = bench.run(_cfg(tmp_path, tools=["primal", "handwritten", "jax"]))
    assert res["cases"][0]["tools"]["jax"]["status"] == "missing"
    md = (tmp_path / "results.md").read_text()
    assert "Peers that failed to import" in md and "jax not installed (test)" in md


def test_results_are_written_after_each_app(tmp_path, monkeypatch):
    """A run stopped in the second app (here by KeyboardInterrupt, as a time limit would) keeps
    the first app's results, in both files, marked partial."""
    seen = {}

    def load(name):
        if name == "second":
            seen["json"] = json.loads((tmp_path / "results.json").read_text())
            seen["md"] = (tmp_path / "results.md").read_text()
            raise KeyboardInterrupt
        return _fake_app("apps." + name)

    monkeypatch.setattr(apps, "load", load)
    with pytest.raises(KeyboardInterrupt):
        bench.run(_cfg(tmp_path, apps=["first", "second"], sizes=["s", "m"]))
    assert [(c["app"], c["size"]) for c in seen["json"]["cases"]] == [("first", "s"),
                                                                       ("first", "m")]
    assert seen["json"]["meta"]["complete"] is False
    assert "Partial results: 2 of 4" in seen["md"] and "| first (4) |" in seen["md"]
    # what a stopped run leaves behind is the same, and no temporary files
    assert json.loads((tmp_path / "results.json").read_text()) == seen["json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json", "results.md"]


def test_interleaving_is_round_robin():
    calls = []
    fns = {n: (lambda n=n: calls.append(n)) for n in "abc"}
    times = bench.interleaved(fns, {"a": 1, "b": 1, "c": 1}, samples=3, budget_s=100)
    assert calls == list("abc" "bca" "cab")
    assert all(len(v) == 3 for v in times.values())


def test_adbench_measure():
    from apps._common import adbench_err
    assert adbench_err([1.0, 2.0], [1.0, 2.0]) == 0.0
    assert adbench_err(1e-9, 0.0) == pytest.approx(1e-9)
    assert adbench_err(1000.0, 1001.0) == pytest.approx(1 / 2001)
    assert adbench_err(np.ones(2), np.ones(3)) == float("inf")
    assert adbench_err([np.nan], [1.0]) == float("inf")


def test_cli_smoke(tmp_path, capsys):
    rc = bench.main(["--quick", "--apps", "series", "--sizes", "s", "--tools",
                     "primal,handwritten", "--out", str(tmp_path), "--min-time", "0.001",
                     "--samples", "2", "--no-progress", "--no-plots"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "Gradient time / hand-written gradient time" in out
    assert out.rstrip().splitlines()[-1].startswith("wrote ")


def test_cli_plots(tmp_path):
    pytest.importorskip("matplotlib")
    bench.main(["--apps", "series", "--sizes", "s", "--tools", "primal,handwritten", "--out",
                str(tmp_path), "--min-time", "0.001", "--samples", "2", "--no-progress"])
    assert (tmp_path / "ratio_vs_handwritten_s.png").stat().st_size > 1000


def _tool(med, tape=None, peak=None, status="ok", **kw):
    return {"status": status, "median_s": med, "min_s": med, "max_s": med,
            "tape_bytes": tape, "peak_bytes": peak, **kw}


def _result(cases, tools=("primal", "coarsen", "coarsen_fine", "handwritten"), **meta):
    base = {"tools": list(tools), "date": "today", "python": "3", "machine": "m", "cpus": 2,
            "versions": {}, "tolerance": 1e-8, "min_time_s": 0.05, "samples": 3,
            "slow_limit_s": 0.5, "memory_method": "tracemalloc", "skipped_peers": [],
            "complete": True}
    base.update(meta)
    return {"meta": base, "cases": cases}


def test_cli_prints_the_summary_once_and_last(tmp_path, capsys, monkeypatch):
    result = _result([{"app": "a", "size": "s", "dims": 3, "tools": {
        "primal": _tool(1e-4), "coarsen": _tool(1e-3, 0, 100),
        "coarsen_fine": _tool(2e-3, 8, 200), "handwritten": _tool(5e-4)}}],
        skipped_peers=[{"tool": "torch", "reason": "module 'torch' is not installed",
                        "install": "pip install torch", "in_bench_extra": False}])
    monkeypatch.setattr(bench.cli, "run", lambda cfg: result)
    bench.main(["--out", str(tmp_path), "--no-progress"])
    out = capsys.readouterr().out
    assert out.count("## Coarse vs fine-grained AD (summary)") == 1
    tail = out[out.index("## Coarse vs fine-grained AD (summary)"):]
    assert "## Size" not in tail  # nothing of the report after the summary
    assert "skipped (not installed): torch" in out and "`pip install torch`" in out
    md = bench.render_markdown(result)  # the file: summary first, once
    assert md.count("## Coarse vs fine-grained AD (summary)") == 1
    assert md.index("(summary)") < md.index("## Size s")


def test_benchmarks_md_goes_to_the_repository_only_for_a_full_default_run(tmp_path, capsys,
                                                                           monkeypatch):
    from pathlib import Path
    every = list(apps.APP_NAMES)
    assert bench.cli.benchmarks_path(None, Path("bench_out"), every) == bench.cli.REPO_BENCHMARKS
    assert bench.cli.REPO_BENCHMARKS.parent == Path(apps.__file__).resolve().parents[1]
    assert bench.cli.benchmarks_path(None, Path("bench_out"), ["gmm"]) == \
        Path("bench_out") / "BENCHMARKS.md"
    assert bench.cli.benchmarks_path(None, tmp_path, every) == tmp_path / "BENCHMARKS.md"
    assert bench.cli.benchmarks_path("none", Path("bench_out"), every) is None
    assert bench.cli.benchmarks_path("x.md", tmp_path, ["gmm"]) == Path("x.md")
    result = _result([{"app": "a", "size": "s", "dims": 3, "tools": {
        "primal": _tool(1e-4), "handwritten": _tool(5e-4)}}], tools=("primal", "handwritten"),
        quick=True, sizes=["s", "m"], cpu_model="Some CPU")
    monkeypatch.setattr(bench.cli, "run", lambda cfg: result)
    bench.main(["--quick", "--out", str(tmp_path), "--no-progress"])
    text = (tmp_path / "BENCHMARKS.md").read_text()
    head = text.split("\n\n")[1]
    assert text.startswith("# Benchmarks\n") and "`python3 -m apps.bench --quick --out " in head
    assert "on today, quick mode (sizes s, m;" in head and "Some CPU (2 CPUs, m)" in head
    assert "## Size s: Gradient time / hand-written gradient time" in text
    assert str(tmp_path / "BENCHMARKS.md") in capsys.readouterr().out


def test_long_failure_messages_go_to_footnotes():
    long = ("UnsupportedError: tangent cannot differentiate the subscript assignment "
            "on line 12 of this objective because it mutates an array in place, which its "
            "reverse mode does not model; rewrite the loop without writes")
    other = "RuntimeError: boom"
    result = _result([
        {"app": "a", "size": "s", "dims": 3, "tools": {
            "primal": _tool(1e-4), "handwritten": _tool(5e-4),
            "tangent": {"status": "unsupported", "message": long},
            "coarsen": {"status": "crashed", "message": "crashed with SIGSEGV in the compiled "
                        "gradient (probed in a child process)"},
            "coarsen_fine": _tool(2e-3)}},
        {"app": "b", "size": "s", "dims": 4, "tools": {
            "primal": _tool(1e-4), "handwritten": _tool(5e-4),
            "tangent": {"status": "unsupported", "message": long},
            "coarsen": _tool(1e-3), "coarsen_fine": {"status": "failed", "message": other}}}],
        tools=("primal", "coarsen", "coarsen_fine", "handwritten", "tangent"))
    md = bench.render_markdown(result)
    table_rows = [ln for ln in md.splitlines() if ln.startswith("|")]
    assert all("UnsupportedError" not in ln and "boom" not in ln for ln in table_rows)
    notes = [ln for ln in md.splitlines() if ln.startswith("[^")]
    assert len(notes) == 3  # one per distinct (tool, message); defined once each
    tangent_note = next(n for n in notes if "tangent:" in n)
    assert tangent_note.endswith("rewrite the loop without writes")  # whole, not cut
    ref = tangent_note.split(":")[0]
    assert sum(ln.count(f"UNSUPPORTED {ref}") for ln in table_rows) >= 4  # both apps, 2 tables
    assert any("CRASHED [^" in ln for ln in table_rows)
    # references are defined after the table that first uses them
    first_use = md.index(f"UNSUPPORTED {ref}")
    assert md.index(tangent_note) > first_use


def test_first_line_cuts_at_a_word_boundary():
    e = ValueError("word " * 100 + "\nsecond line")
    msg = bench.first_line(e, limit=42)
    assert len(msg) <= 42 and msg.endswith("\u2026") and msg[:-1].split()[-1] == "word"
    assert bench.first_line(ValueError("short\nmore")) == "short"


def test_probe_uses_spawn_and_never_forks(monkeypatch):
    import ctypes

    assert bench.START_METHOD == "spawn"
    assert bench.probe_context().get_start_method() == "spawn"

    def no_fork():
        raise AssertionError("the probe must not fork")

    monkeypatch.setattr(os, "fork", no_fork)
    msg = bench.probe_crash(functools.partial(ctypes.string_at, 0))
    assert msg is not None and "SIGSEGV" in msg
    assert bench.probe_crash(functools.partial(operator.add, 1, 1)) is None
    # exceptions are the parent's to report
    assert bench.probe_crash(functools.partial(operator.truediv, 1, 0)) is None


def test_probe_of_an_unpicklable_job_is_deprecated():
    if not hasattr(os, "fork"):
        pytest.skip("needs os.fork")
    with pytest.warns(DeprecationWarning, match="GradientProbe"):
        assert bench.probe_crash(lambda: 1 + 1) is None


def test_coarsen_is_probed_with_a_picklable_gradient_probe(monkeypatch):
    jobs = []

    def record(job, timeout_s=None):
        jobs.append(job)

    monkeypatch.setattr(adapters, "probe_crash", record)
    mod = apps.load("series")
    args = mod.make_inputs("s")
    bench.prepare("coarsen", mod, args)
    (job,) = jobs
    assert isinstance(job, bench.GradientProbe) and job.coarse is True
    assert job.fn is mod.objective and job.wrt == tuple(mod.WRT)
    assert pickle.loads(pickle.dumps(job)).fn is mod.objective

    monkeypatch.setattr(adapters, "probe_crash", lambda job, timeout_s=None: "crashed with X")
    with pytest.raises(bench.Crashed):
        bench.prepare("coarsen_fine", mod, args)


def test_progress_writes_plain_lines_off_a_terminal():
    buf = io.StringIO()
    prog = bench.Progress(2, stream=buf)
    assert not prog.uses_bar
    prog.show("a/s: prepare coarsen")
    prog.step()
    prog.show("b/s: prepare coarsen")
    prog.close()
    text = buf.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert len(lines) == 2 and lines[0].startswith("[0/2") and lines[1].startswith("[1/2")
    assert lines[1].endswith("b/s: prepare coarsen")

    silent = io.StringIO()
    off = bench.Progress(2, enabled=False, stream=silent)
    off.show("x")
    off.close()
    assert silent.getvalue() == ""


def test_progress_shows_a_bar_on_a_terminal():
    pytest.importorskip("tqdm")

    class Tty(io.StringIO):
        def isatty(self):
            return True

    buf = Tty()
    prog = bench.Progress(2, stream=buf)
    assert prog.uses_bar
    prog.show("a/s: prepare coarsen")
    prog.step()
    prog.close()
    assert "a/s: prepare coarsen" in buf.getvalue() and "1/2" in buf.getvalue()


def test_summary_table_coarse_vs_fine_with_tapes():
    result = _result([
        {"app": "a", "size": "m", "dims": 10, "tools": {
            "coarsen": _tool(1e-3, 0, 100), "coarsen_fine": _tool(4e-3, 800, 900),
            "handwritten": _tool(5e-4, None, 50)}},
        {"app": "b", "size": "m", "dims": 20, "tools": {
            "coarsen": _tool(2e-3, 100, 200), "coarsen_fine": _tool(2e-3, 400, 400),
            "handwritten": _tool(1e-3, None, 50)}},
        {"app": "c", "size": "m", "dims": 5, "tools": {
            "coarsen": {"status": "crashed", "message": "crashed with SIGSEGV"},
            "coarsen_fine": _tool(1e-3, 8, 8), "handwritten": _tool(1e-3, None, 8)}},
    ])
    md = bench.render_summary(result)
    assert "| a (10) | m | 1.00 ms | 4.00 ms | 4x | 2 | 0 B | 800 B |" in md
    assert "| c (5) | m | CRASHED [^1] |" in md and "[^1]: coarsen: crashed with SIGSEGV" in md
    # geomean speedup over a and b: sqrt(4 * 1) = 2; tape ratio only where both are non-empty
    assert "geomean speedup fine/coarse 2 (over 2 apps)" in md
    assert "tape fine/coarse 4 (over 1 apps)" in md


# ---------------------------------------------------------------- transform and compile times

COMPILE_KEYS = ("coarsen_transform_s", "first_result_s", "compile_s", "transform_cached",
                "compile_cached", "compile_measured_in")


def _check_compile_fields(prep, where):
    for k in COMPILE_KEYS:
        assert k in prep, k
    assert prep["compile_measured_in"] == where
    assert prep["compile_s"] >= 0.0
    assert prep["first_result_s"] is not None and prep["first_result_s"] >= prep["compile_s"]
    assert prep["coarsen_transform_s"] is not None and prep["coarsen_transform_s"] >= 0.0
    assert prep["transform_cached"] in (True, False)
    assert prep["compile_cached"] in (True, False, None)


def test_coarsen_transform_and_compile_times_come_from_the_probe():
    """The probe's fresh process times differentiate -> first gradient; the result has the
    transform and compile times (only their presence and sanity are checked, never values)."""
    mod = apps.load("series")
    p = bench.prepare("coarsen", mod, mod.make_inputs("s"))
    _check_compile_fields(p.info, "probe")
    # a compiled (cpu) gradient tells whether Numba loaded it from its cache
    assert p.info["compile_cached"] in (True, False)


def test_compile_times_fall_back_to_this_process(monkeypatch):
    monkeypatch.setattr(adapters, "probe_crash", lambda job, timeout_s=None: None)
    mod = apps.load("series")
    p = bench.prepare("coarsen_fine", mod, mod.make_inputs("s"))
    assert p.info["compile_measured_in"] == "parent"
    assert p.info["compile_s"] >= 0.0 and p.info["coarsen_transform_s"] >= 0.0
    assert p.info["transform_cached"] in (True, False)
    # the primal and the hand-written gradient have none of these
    assert not set(COMPILE_KEYS) & set(bench.prepare("primal", mod, mod.make_inputs("s")).info)


def test_gradient_probe_writes_its_timings(tmp_path):
    from apps.bench.probe import first_result_timings, numba_cache_hit

    mod = apps.load("series")
    path = tmp_path / "t.json"
    job = bench.GradientProbe(mod.objective, tuple(mod.WRT), coarse=True,
                              args=tuple(mod.make_inputs("s")), timings_path=str(path))
    job()  # in this process: the same code the child runs
    data = json.loads(path.read_text())
    for k in ("differentiate_s", "specialize_s", "first_call_s", "second_call_s"):
        assert data[k] >= 0.0
    assert data["first_result_s"] == pytest.approx(
        data["differentiate_s"] + data["specialize_s"] + data["first_call_s"])
    assert data["compile_s"] == pytest.approx(max(0.0, data["first_call_s"] -
                                                  data["second_call_s"]))
    # no artifact (an old coarsen): the times without the artifact's fields
    t = first_result_timings(None, 1.0, 2.0, 3.0, 0.5)
    assert t["first_result_s"] == 6.0 and t["compile_s"] == 2.5
    assert t["coarsen_transform_s"] is None and t["compile_cached"] is None
    assert numba_cache_hit(lambda: None) is None


def test_cold_caches_use_an_empty_cache_folder_and_restore():
    from coarsen.lowering.cache import CACHE_ENV

    before = os.environ.get(CACHE_ENV)
    with runner.cold_caches(False) as root:
        assert root is None and os.environ.get(CACHE_ENV) == before
    with runner.cold_caches(True) as root:
        assert os.environ[CACHE_ENV] == str(root) and root.is_dir()
        names = {p.name for p in root.iterdir()}
        assert "CACHEDIR.TAG" in names
        assert names <= {"CACHEDIR.TAG", "cost_weights.json"}   # nothing else cached yet
    assert os.environ.get(CACHE_ENV) == before and not root.exists()
    assert bench.parse_config(["--cold"]).cold is True
    assert bench.parse_config([]).cold is False


def test_report_has_transform_and_compile_times():
    cold = {"coarsen_transform_s": 0.05, "first_result_s": 6.0, "compile_s": 5.5,
            "transform_cached": False, "compile_cached": False, "compile_measured_in": "probe"}
    warm = dict(cold, transform_cached=True, compile_cached=True, first_result_s=0.3,
                compile_s=0.2)
    result = _result([
        {"app": "a", "size": "s", "dims": 3, "tools": {
            "primal": _tool(1e-4), "handwritten": _tool(5e-4),
            "coarsen": _tool(1e-3, prep=cold), "coarsen_fine": _tool(2e-3, prep=warm)}},
        {"app": "a", "size": "m", "dims": 30, "tools": {
            "primal": _tool(1e-3), "handwritten": _tool(5e-3),
            "coarsen": _tool(1e-2, prep=warm), "coarsen_fine": _tool(2e-2, prep=warm)}},
        {"app": "old", "size": "s", "dims": 3, "tools": {   # a result from before these fields
            "primal": _tool(1e-4), "handwritten": _tool(5e-4),
            "coarsen": _tool(1e-3, prep={"transform_s": 0.1, "first_call_s": 2.0})}}],
        cold_caches=True)
    lines = bench.render_compile_times(result)
    text = "\n".join(lines)
    assert "## Transform and compile time (coarsen, first use per app)" in text
    assert "| a | coarsen | s | 50.00 ms | 6.00 s | 5.50 s | cold |" in text
    assert "| a | coarsen_fine | s | 50.00 ms | 300.00 ms | 200.00 ms | both cached |" in text
    assert "| old |" not in text and "(`--cold`)" in text
    md = bench.render_markdown(result)
    assert md.count("## Transform and compile time") == 1
    assert "| coarsen transform | differentiate to first result | compile | caches |" in md
    assert "| a | coarsen | 1.00 ms | 1.00 ms | 50.00 ms | 6.00 s | 5.50 s | cold |" not in md
    assert "| 50.00 ms | 6.00 s | 5.50 s | cold |" in md   # in the size-s preparation table
    assert "| old | coarsen | 100.00 ms | 2.00 s | - | - | - | - |" in md
    # nothing of it without coarsen's tools
    assert bench.render_compile_times(_result([], tools=("primal", "handwritten"))) == []


def test_run_records_compile_times_in_results_json(tmp_path):
    res = bench.run(_cfg(tmp_path, tools=["primal", "handwritten", "coarsen"], memory=False))
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["meta"]["cold_caches"] is False
    prep = data["cases"][0]["tools"]["coarsen"]["prep"]
    _check_compile_fields(prep, "probe")
    assert res["cases"][0]["tools"]["coarsen"]["status"] == "ok"
    md = (tmp_path / "results.md").read_text()
    assert "| series | coarsen | s |" in md


def test_calibration_is_not_fooled_by_one_slow_call(monkeypatch):
    # coarsen compiles a kind's faster entries at its 64th call: a batch holding that call
    # reached the time limit at 64 repeats, and the samples were then batches of 64 cold calls
    from apps.bench import timing

    clock = {"t": 0.0, "calls": 0}

    def fn():
        clock["calls"] += 1
        clock["t"] += 1.0 if clock["calls"] == 64 else 1e-6

    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: clock["t"]))
    reps, per_call = timing.calibrate(fn, 0.5)
    assert reps >= 1 << 19, reps
    assert per_call == pytest.approx(1e-6)
