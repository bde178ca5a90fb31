"""Command line: ``python -m coarsen export ...`` and ``python -m coarsen demo``.

    python -m coarsen export module:function --signature "float64[:], int64" -o out.py
                             [--wrt x,w] [--target cpu|python] [--fine]
    python -m coarsen demo [--fine]
    python -m coarsen cache info|clear|prune --max-bytes N

``export`` imports ``module`` (a dotted module name importable from the current directory, or
a path to a ``.py`` file) and writes the gradient of ``function`` as a standalone module (see
``coarsen.transforms.export``). ``--wrt``: parameter names or positions separated by commas; one name gives
a single gradient out (like ``differentiate(f, wrt="x")``), several names, or one name followed
by a comma, give a tuple; without ``--wrt`` every float parameter, a tuple.

``demo`` differentiates ``coarsen.examples.damped_pendulum`` (a loop), prints its gradient next
to central finite differences, then the generated source.

``cache`` shows, empties or prunes (least recently used first) the on-disk cache
(``coarsen.lowering.cache_admin``).

Exit status: 0 on success, 1 on a ``CoarsenError`` (message on stderr), 2 on usage errors.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys


def _load_function(spec):
    if ":" not in spec:
        raise SystemExit(f"coarsen export: expected module:function, got {spec!r}")
    modname, _, qual = spec.rpartition(":")
    if modname.endswith(".py") or os.sep in modname:
        path = os.path.abspath(modname)
        name = os.path.splitext(os.path.basename(path))[0]
        mspec = importlib.util.spec_from_file_location(name, path)
        if mspec is None:
            raise SystemExit(f"coarsen export: cannot load {modname!r}")
        module = importlib.util.module_from_spec(mspec)
        sys.modules[name] = module
        mspec.loader.exec_module(module)
    else:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        module = importlib.import_module(modname)
    obj = module
    for part in qual.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SystemExit(f"coarsen export: module {modname!r} has no {qual!r}") from None
    return obj


def _parse_wrt(text):
    if text is None:
        return None
    items = [t.strip() for t in text.split(",")]
    tuple_out = len(items) > 1
    items = [int(t) if t.isdigit() else t for t in items if t]
    if not items:
        raise SystemExit("coarsen export: --wrt names no parameter")
    return tuple(items) if tuple_out else items[0]


def _cmd_export(args):
    import coarsen
    fn = _load_function(args.function)
    g = coarsen.differentiate(fn, wrt=_parse_wrt(args.wrt), coarsen=not args.fine, target=args.target)
    path = g.export(args.output, signature=args.signature)
    print(f"wrote {path}: value_and_grad_{g.fn.__name__} and grad_{g.fn.__name__} "
          f"({'fine-grained' if args.fine else 'coarse'} AD, target {args.target})")
    return 0


def _cmd_demo(args):
    import coarsen
    from coarsen import examples

    fn = examples.damped_pendulum
    x = [0.5, 0.1, 0.3, 0.05, 40]
    names = ["theta0", "omega0", "damping", "dt", "n"]
    g = coarsen.differentiate(fn, coarsen=not args.fine)
    value, grads = g.value_and_grad(*x)
    print(f"coarsen {coarsen.__version__} demo: {fn.__module__}.{fn.__name__} "
          f"({'fine-grained' if args.fine else 'coarse'} AD)")
    print(f"  {fn.__name__}({', '.join(f'{n}={v}' for n, v in zip(names, x))}) = {value!r}")
    print(f"  {'parameter':<10} {'coarsen':>22} {'central difference':>22} {'rel. diff':>10}")
    for k, (name, gk) in enumerate(zip(names, grads)):
        h = 1e-6 * max(1.0, abs(x[k]))
        up, dn = list(x), list(x)
        up[k] += h
        dn[k] -= h
        fd = (fn(*up) - fn(*dn)) / (2 * h)
        rel = abs(gk - fd) / max(abs(fd), 1e-12)
        print(f"  {name:<10} {gk:>22.15g} {fd:>22.15g} {rel:>10.1e}")
    print()
    print("generated source:")
    print(g.source)
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["cache"]:
        from .lowering.cache_admin import main as cache_main
        return cache_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m coarsen",
                                     description="coarsen: source-to-source reverse-mode AD for "
                                                 "plain Python/NumPy, lowered to Numba")
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="write a function's gradient as a standalone module")
    ex.add_argument("function", help="module:function (or path/to/file.py:function)")
    ex.add_argument("--signature", required=True,
                    help='argument types in Numba notation, e.g. "float64[:], float64[:, :], int64"')
    ex.add_argument("-o", "--output", required=True, help="the file to write")
    ex.add_argument("--wrt", default=None,
                    help="parameters to differentiate, comma-separated names or positions "
                         "(one name: a single gradient out; 'x,' or several: a tuple)")
    ex.add_argument("--target", choices=("cpu", "python"), default="cpu")
    ex.add_argument("--fine", action="store_true", help="fine-grained AD (coarsen=False)")
    ex.set_defaults(run=_cmd_export)
    demo = sub.add_parser("demo", help="differentiate an example loop and compare with finite differences")
    demo.add_argument("--fine", action="store_true", help="fine-grained AD (coarsen=False)")
    demo.set_defaults(run=_cmd_demo)
    sub.add_parser("cache", help="show, clear or prune the on-disk cache: cache info|clear|prune "
                                 "--max-bytes N (handled above, by coarsen.lowering.cache_admin)")
    args = parser.parse_args(argv)
    from coarsen.errors import CoarsenError
    try:
        return args.run(args)
    except CoarsenError as exc:
        print(exc, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
