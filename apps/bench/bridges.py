"""The harness's bridges section (issue 43): what ``coarsen.torch``, ``coarsen.jax`` and
``coarsen.scipy`` cost over the coarsen call they wrap, and a training step of a model whose
loss runs an ODE integrator with a ``while`` stopping rule, coarsen inside the framework against
the same model written in it.

* Overhead: :func:`small` (five terms, about a microsecond per gradient) through each bridge,
  timed interleaved with ``g.value_and_grad`` on the same NumPy values and with the
  framework's floor (the same kind of call computing nothing: an empty
  ``torch.autograd.Function``; a jit-ed ``custom_vjp`` over a ``pure_callback`` returning
  zeros), medians; the overhead is bridge minus coarsen, the bridge's own share that minus
  the floor.  Rows: PyTorch ``F(x, a)`` (the forward pass, which runs the
  gradient) and ``F(x, a).backward()``; JAX ``jit(value_and_grad(F))`` (and eager ``F``, for
  reference); SciPy ``fun(x)`` then ``jac(x)`` at a new ``x`` (one coarsen call).
* Training step: a batch of ``B`` examples, features ``(B, 3)``, a linear layer giving each
  example's rate ``k``; the loss integrates ``y' = -k y + sin(t)`` by Euler steps of ``h``
  while ``t < t_end``, and takes the mean squared error of ``y(t_end)`` against targets.
  coarsen: :func:`ode_batch_loss` (loops over the batch and the while rule) through the
  bridge, one coarsen call per step.  PyTorch native: the same loop on ``(B,)`` tensors,
  autograd op by op.  JAX native: ``lax.while_loop`` cannot be reverse-differentiated, so the
  JAX model runs ``lax.fori_loop`` with the trip count the while rule takes (counted on the
  host; a static bound lowers to ``scan``, which JAX differentiates); the same values.  Each
  variant's loss is checked against the NumPy loss before it is timed.  PyTorch steps include
  ``zero_grad``, ``backward`` and an SGD step; JAX steps are ``jit``-ed ``value_and_grad``
  with the SGD update.

Requires: the frameworks it times; a missing one (PyTorch is not in the ``bench`` extra) leaves
its rows out and the section says so in a line.
Guarantees: :func:`measure_bridges` returns a JSON-able dict (``overhead`` and ``training``
rows, ``skipped`` frameworks with the reason) and never raises for a framework (a failure is
its row's ``status``); :func:`render` gives the report's section.
"""
from __future__ import annotations

import importlib
import math

import numpy as np

from apps.bench.report import fmt_time
from apps.bench.timing import calibrate, interleaved
from apps.bench.tools import failure_message

#: the training step's batch, horizon and step
B, T_END, H = 32, 1.0, 0.02
#: how to add a missing framework
INSTALL = {"torch": "pip install torch==2.13.0 (a CPU build is enough)",
           "jax": "pip install jax"}


def small(x, a):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + a * math.sin(x[i]) * x[i] ** 2
    return s


def ode_batch_loss(k, y0, target, t_end, h):
    """Per example, Euler steps of ``y' = -k y + sin(t)`` while ``t < t_end``; the mean
    squared error of the final ``y`` (coarsen's input language)."""
    total = 0.0
    for b in range(k.shape[0]):
        y = y0[b]
        t = 0.0
        while t < t_end:
            y = y + h * (-k[b] * y + math.sin(t))
            t = t + h
        total = total + (y - target[b]) ** 2
    return total / k.shape[0]


def trips(t_end, h):
    """The trips the while rule takes (the same float sums as the loop)."""
    t, n = 0.0, 0
    while t < t_end:
        t, n = t + h, n + 1
    return n


def training_data(seed=0):
    r = np.random.default_rng(seed)
    feats = r.random((B, 3))
    w, b = np.array([0.6, -0.4, 0.3]), 0.2
    y0 = np.linspace(0.5, 1.5, B)
    target = 0.8 * y0 * np.exp(-(feats @ w + b))
    return feats, w, b, y0, target


def _missing(name):
    try:
        importlib.import_module(name)
        return None
    except ImportError as e:
        return f"{failure_message(e)}; {INSTALL[name]}"


def _time(fns, cfg):
    """Interleaved medians (and min, max) of ``{name: fn}``, seconds per call."""
    reps = {t: calibrate(f, cfg.min_time)[0] for t, f in fns.items()}
    times = interleaved(fns, reps, cfg.samples, cfg.case_budget_s)
    out = {}
    for t, ts in times.items():
        ts = sorted(ts)
        out[t] = {"median_s": ts[len(ts) // 2], "min_s": ts[0], "max_s": ts[-1],
                  "samples": len(ts)}
    return out


# ---------------------------------------------------------------------- overhead
def _torch_floor(torch):
    """The framework's own cost: a ``torch.autograd.Function`` that computes nothing."""
    class Nothing(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, a):
            ctx.grads = (torch.ones_like(x), torch.ones_like(a))
            return torch.zeros((), dtype=torch.float64)

        @staticmethod
        def backward(ctx, gy):
            return gy * ctx.grads[0], gy * ctx.grads[1]
    return Nothing.apply


def _torch_overhead(g, x, a):
    import torch
    import coarsen
    F = coarsen.torch.function(small, wrt=("x", "a"))
    xt = torch.from_numpy(x.copy()).requires_grad_()
    at = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    assert F(xt, at).item() == g.value_and_grad(x, a)[0]
    nothing = _torch_floor(torch)
    return {"torch: F(x, a)": (lambda: F(xt, at), lambda: nothing(xt, at)),
            "torch: F(x, a).backward()": (lambda: F(xt, at).backward(),
                                          lambda: nothing(xt, at).backward())}


def _jax_floor(jax, x, a):
    """The framework's own cost: ``custom_vjp`` over a ``pure_callback`` that computes
    nothing, jit-ed (its value alone, and under ``value_and_grad``)."""
    jnp = jax.numpy

    def host(x, a):
        return np.zeros(()), (np.ones(x.shape), np.ones(()))

    def call(x, a):
        out = (jax.ShapeDtypeStruct((), jnp.float64),
               (jax.ShapeDtypeStruct(x.shape, jnp.float64), jax.ShapeDtypeStruct((), jnp.float64)))
        return jax.pure_callback(host, out, x, a, vmap_method="expand_dims")

    @jax.custom_vjp
    def f(x, a):
        return call(x, a)[0]

    f.defvjp(lambda x, a: call(x, a), lambda r, gy: (gy * r[0], gy * r[1]))
    return jax.jit(jax.value_and_grad(f, argnums=(0, 1))), jax.jit(f)


def _jax_overhead(g, x, a):
    import jax
    import coarsen
    jax.config.update("jax_enable_x64", True)
    F = coarsen.jax.function(small, wrt=("x", "a"))
    vg = jax.jit(jax.value_and_grad(F, argnums=(0, 1)))
    xj, aj = jax.numpy.asarray(x), jax.numpy.asarray(a)
    assert float(vg(xj, aj)[0]) == g.value_and_grad(x, a)[0]
    floor_vg, floor_f = _jax_floor(jax, x, a)
    ready = jax.block_until_ready
    return {"jax: jit(value_and_grad(F))": (lambda: ready(vg(xj, aj)),
                                            lambda: ready(floor_vg(xj, aj))),
            "jax: F(x, a), eager": (lambda: ready(F(xj, aj)), lambda: ready(floor_f(xj, aj)))}


def _scipy_overhead(g, x, a):
    import coarsen
    obj = coarsen.scipy.objective(small, args=(a,))
    xs = [x, x + 0.5]
    state = [0]

    def run():
        state[0] ^= 1
        z = xs[state[0]]
        obj.fun(z)
        obj.jac(z)
    return {"scipy: fun(x), jac(x)": (run, None)}


def measure_overhead(cfg, skipped):
    """Rows: per bridge call, its median, the wrapped call's, the framework's floor (the same
    kind of call computing nothing) and the bridge's own overhead (bridge - coarsen - floor)."""
    import coarsen
    g = coarsen.differentiate(small, wrt=("x", "a"))
    x, a = np.linspace(0.1, 1.0, 5), 1.3
    base = lambda: g.value_and_grad(x, a)       # noqa: E731
    base()
    rows = []
    for name, make in (("torch", _torch_overhead), ("jax", _jax_overhead),
                       ("scipy", _scipy_overhead)):
        if name in skipped:
            continue
        try:
            calls = make(g, x, a)
            fns = {"coarsen": base}
            for call, (fn, floor) in calls.items():
                fns[call] = fn
                if floor is not None:
                    floor()
                    fns[call + " floor"] = floor
        except Exception as e:          # a framework's failure is its row's status
            rows.append({"call": name, "status": "failed", "message": failure_message(e)})
            continue
        times = _time(fns, cfg)
        for call in calls:
            floor = times.get(call + " floor")
            over = times[call]["median_s"] - times["coarsen"]["median_s"]
            rows.append({"call": call, "status": "ok", "bridge": times[call],
                         "coarsen": times["coarsen"], "floor": floor, "overhead_s": over,
                         "own_s": over - (floor["median_s"] if floor else 0.0)})
    return rows


# ---------------------------------------------------------------------- training step
def _torch_steps(data):
    import torch
    import coarsen
    feats, w, b, y0, target = data

    def native_loss(k, y0t, tt):
        y, t = y0t, 0.0
        while t < T_END:                    # PyTorch records each trip's operations
            y = y + H * (-k * y + math.sin(t))
            t = t + H
        return ((y - tt) ** 2).mean()

    F = coarsen.torch.function(ode_batch_loss, wrt="k")
    X = torch.from_numpy(feats)
    y0t, tt = torch.from_numpy(y0), torch.from_numpy(target)
    ref = ode_batch_loss(feats @ w + b, y0, target, T_END, H)
    steps = {}
    for tool, loss_of in (("coarsen", lambda k: F(k, y0, target, T_END, H)),
                          ("native", lambda k: native_loss(k, y0t, tt))):
        model = torch.nn.Linear(3, 1).double()
        with torch.no_grad():
            model.weight.copy_(torch.from_numpy(w)[None])
            model.bias.fill_(b)
        value = loss_of(model(X).squeeze(1)).item()
        if abs(value - ref) > 1e-12 * max(1.0, abs(ref)):
            raise AssertionError(f"torch {tool}: loss {value} != {ref}")
        opt = torch.optim.SGD(model.parameters(), lr=1e-6)

        def step(model=model, opt=opt, loss_of=loss_of):
            opt.zero_grad(set_to_none=True)
            loss = loss_of(model(X).squeeze(1))
            loss.backward()
            opt.step()
        steps[tool] = step
    return steps


def _jax_steps(data):
    import jax
    import jax.numpy as jnp
    import coarsen
    jax.config.update("jax_enable_x64", True)
    feats, w, b, y0, target = data
    n = trips(T_END, H)
    F = coarsen.jax.function(ode_batch_loss, wrt="k")
    X, y0j, tj = jnp.asarray(feats), jnp.asarray(y0), jnp.asarray(target)

    def native(k):
        def body(i, carry):
            y, t = carry
            return y + H * (-k * y + jnp.sin(t)), t + H
        y, _ = jax.lax.fori_loop(0, n, body, (y0j, 0.0))
        return jnp.mean((y - tj) ** 2)

    ref = ode_batch_loss(feats @ w + b, y0, target, T_END, H)
    params = (jnp.asarray(w), jnp.asarray(b))
    steps = {}
    for tool, loss_of in (("coarsen", lambda k: F(k, y0, target, T_END, H)), ("native", native)):
        def loss(p, loss_of=loss_of):
            return loss_of(X @ p[0] + p[1])

        @jax.jit
        def step(p, loss=loss):
            value, grad = jax.value_and_grad(loss)(p)
            return value, jax.tree_util.tree_map(lambda q, d: q - 1e-6 * d, p, grad)
        value = float(step(params)[0])
        if abs(value - ref) > 1e-12 * max(1.0, abs(ref)):
            raise AssertionError(f"jax {tool}: loss {value} != {ref}")
        steps[tool] = lambda step=step: jax.block_until_ready(step(params))
    return steps


def measure_training(cfg, skipped):
    """Rows: per framework, coarsen's step and the native step (medians [min, max])."""
    rows = []
    data = training_data(cfg.seed)
    for name, make in (("torch", _torch_steps), ("jax", _jax_steps)):
        if name in skipped:
            continue
        try:
            times = _time(make(data), cfg)
        except Exception as e:          # a framework's failure is its row's status
            rows.append({"framework": name, "status": "failed", "message": failure_message(e)})
            continue
        rows.append({"framework": name, "status": "ok", "tools": times,
                     "ratio": times["native"]["median_s"] / times["coarsen"]["median_s"]})
    return rows


def measure_bridges(cfg):
    """The section's results (see the module docstring)."""
    skipped = {}
    for name in ("torch", "jax"):
        why = _missing(name)
        if why is not None:
            skipped[name] = why
    return {"overhead": measure_overhead(cfg, skipped),
            "training": measure_training(cfg, skipped), "skipped": skipped,
            "batch": B, "trips": trips(T_END, H)}


# ---------------------------------------------------------------------- report
def _cell(x):
    return f"{fmt_time(x['median_s'])} [{fmt_time(x['min_s'])}, {fmt_time(x['max_s'])}]"


def render(result):
    """The report's section (markdown lines); nothing without results."""
    if not result:
        return []
    lines = ["## Bridges: coarsen inside PyTorch, JAX and SciPy", ""]
    for name, why in sorted(result.get("skipped", {}).items()):
        lines.append(f"{name} is not installed: its rows are skipped ({why}).")
    if result.get("skipped"):
        lines.append("")
    lines += ["Overhead per call over the coarsen call each bridge wraps (`g.value_and_grad` of a "
              "five-term loop, NumPy values), and the framework's floor: the same kind of call "
              "computing nothing (PyTorch: an empty `autograd.Function`; JAX: `custom_vjp` over a "
              "`pure_callback` that returns zeros, jit-ed). Medians of interleaved samples "
              "[min, max]; overhead = bridge - coarsen, own = overhead - floor.", "",
              "| call | bridge | coarsen | floor | overhead | own |", "|---|---|---|---|---|---|"]
    for r in result.get("overhead", []):
        if r["status"] != "ok":
            lines.append(f"| {r['call']} | {r['status']}: {r.get('message', '')} | - | - | - | - |")
            continue
        floor = _cell(r["floor"]) if r.get("floor") else "-"
        lines.append(f"| {r['call']} | {_cell(r['bridge'])} | {_cell(r['coarsen'])} | {floor} | "
                     f"{r['overhead_s'] * 1e6:.1f} us | {r['own_s'] * 1e6:.1f} us |")
    lines += ["", f"One training step (linear layer, {result.get('batch')} examples, an Euler "
              f"ODE integrator stopped by `while t < t_end`: {result.get('trips')} steps): coarsen "
              "through the bridge against the model written in the framework (PyTorch: the "
              "same `while` loop on tensors, recorded op by op; JAX: `fori_loop` with the while rule's trip count, since "
              "JAX cannot reverse-differentiate `while_loop`).", "",
              "| framework | coarsen | native | native / coarsen |", "|---|---|---|---|"]
    for r in result.get("training", []):
        if r["status"] != "ok":
            lines.append(f"| {r['framework']} | {r['status']}: {r.get('message', '')} | - | - |")
            continue
        t = r["tools"]
        lines.append(f"| {r['framework']} | {_cell(t['coarsen'])} | {_cell(t['native'])} | "
                     f"{r['ratio']:.1f}x |")
    return lines + [""]
