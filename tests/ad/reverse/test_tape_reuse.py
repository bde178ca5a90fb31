"""Tapes kept across calls (issue 12): a kind of arguments whose tapes grew past
``KEEP_TAPES_ABOVE`` entries runs the taped entry on tapes kept per thread.  Whatever the
order of sizes and threads, every call gives what a fresh gradient gives, bit for bit, and
``g.tape_bytes`` is what the last call's tapes held."""
import math
import threading

import numpy as np
import pytest

import coarsen
import coarsen.transforms.gradient


def walk(x, idx, n):
    """Float and int tapes: about three entries per trip (``j`` is carried from trip to
    trip, so its old values are taped)."""
    s = 0.0
    j = 0
    for k in range(n):
        j = (j + idx[k]) % 23
        s = s * 0.5 + math.sin(x[j] * s + 1.0)
    return s


def chain(x, n):
    """A float tape only, one entry per trip."""
    s = x
    for i in range(n):
        s = math.sin(s) * 1.1
    return s


def trips(x, n):
    """An int tape only: the trip counts of a while loop inside a loop."""
    s = 0.0
    for i in range(n):
        k = 0
        while k < i % 3:
            k += 1
        s = s + x * k
    return s


def quadratic(x, y):
    """No tape at all."""
    return x * x * y + 3.0 * y


def walk_args(n):
    x = np.linspace(-1.0, 2.0, 23)
    idx = (np.arange(n) * 7) % 23
    return x, idx, n


def same(p, q):
    """Bit for bit: values and every gradient."""
    (v1, g1), (v2, g2) = p, q
    assert v1 == v2
    for a, b in zip(g1, g2):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert type(a) is type(b)


def fresh(fn, args, **kw):
    return coarsen.differentiate(fn, **kw).value_and_grad(*args)


# big crosses KEEP_TAPES_ABOVE (2048 entries) at about three entries per trip
SIZES = [5, 1000, 3, 400, 1000, 0, 2, 1000]


@pytest.mark.parametrize("target", ["cpu", "python"])
@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
def test_sizes_up_and_down_give_what_a_fresh_gradient_gives(target, coarse):
    g = coarsen.differentiate(walk, coarsen=coarse, target=target)
    art = g.specialize(walk_args(3))
    assert art.taped_entry is not None and art.tapes == "fi"
    for n in SIZES:
        args = walk_args(n)
        got = g.value_and_grad(*args)
        ref_g = coarsen.differentiate(walk, coarsen=coarse, target=target)
        same(got, ref_g.value_and_grad(*args))
        # the last call's tapes, not what is kept
        assert g.tape_bytes == ref_g.tape_bytes
        np.testing.assert_array_equal(g(*args), ref_g(*args))
    # the big calls kept their tapes for this thread: at least what one of them used
    g(*walk_args(1000))
    big = g.tape_bytes
    assert big > 8 * coarsen.transforms.gradient.KEEP_TAPES_ABOVE
    g(*walk_args(2))
    assert g.tape_bytes < 100 < big <= g.kept_tape_bytes
    g.release_tapes()
    assert g.kept_tape_bytes < 2048
    same(g.value_and_grad(*walk_args(1000)), fresh(walk, walk_args(1000), coarsen=coarse,
                                                    target=target))


@pytest.mark.parametrize("fn,make,tapes", [
    (chain, lambda n: (0.3, n), "f"),
    (trips, lambda n: (0.7, n), "i"),
])
def test_one_tape_kinds(fn, make, tapes, monkeypatch):
    monkeypatch.setattr(coarsen.transforms.gradient, "KEEP_TAPES_ABOVE", 4)   # keep from small tapes on
    g = coarsen.differentiate(fn, coarsen=False)
    for n in (3, 50, 1, 70, 0, 50):
        args = make(n)
        same(g.value_and_grad(*args), fresh(fn, args, coarsen=False))
    assert g.last_specialization.tapes == tapes


def test_no_tape_no_taped_entry():
    g = coarsen.differentiate(quadratic)
    assert g(1.5, 2.0) == (6.0, 1.5 * 1.5 + 3.0)
    art = g.last_specialization
    assert art.taped_entry is None and art.tapes == ""
    assert "_taped" not in art.source and g.tape_bytes == 0
    assert g(0.5, 1.0) == (1.0, 3.25)


@pytest.mark.parametrize("target", ["cpu", "python"])
def test_two_threads_give_the_serial_answers(target, monkeypatch):
    # the python target switches threads inside a call: each thread must have its own tapes
    monkeypatch.setattr(coarsen.transforms.gradient, "KEEP_TAPES_ABOVE", 16)
    sizes = [[300, 2, 150, 300, 7, 300], [5, 300, 1, 200, 300, 3]]
    ref_g = coarsen.differentiate(walk, target=target)
    serial = [[ref_g.value_and_grad(*walk_args(n)) for n in ns] for ns in sizes]
    g = coarsen.differentiate(walk, target=target)
    g(*walk_args(4))
    results, kept = [[], []], [0, 0]
    start = threading.Barrier(2)

    def work(k):
        start.wait()
        for _ in range(3):
            for n in sizes[k]:
                results[k].append(g.value_and_grad(*walk_args(n)))
        kept[k] = g.kept_tape_bytes

    threads = [threading.Thread(target=work, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in (0, 1):
        assert kept[k] >= 8 * 3 * 300          # each thread ran on tapes of its own
        assert len(results[k]) == 3 * len(sizes[k])
        for got, want in zip(results[k], serial[k] * 3):
            same(got, want)


def scaled(w, x, scale):
    s = 0.0
    for i in range(x.shape[0]):
        s += math.sin(w[i] * x[i] * scale)
    w[0] = 0.0
    return s


def test_fast_path_keeps_casts_single_results_and_aliasing(monkeypatch):
    monkeypatch.setattr(coarsen.transforms.gradient, "KEEP_TAPES_ABOVE", 2)
    x = np.linspace(0.1, 1.0, 40)
    g = coarsen.differentiate(scaled, wrt="w")
    for dtype in (np.float64, np.float32, np.float64, np.float32):
        w = np.linspace(0.5, 1.5, 40).astype(dtype)
        for _ in range(2):
            grad = g(w, x, 2.0)
            assert isinstance(grad, np.ndarray) and grad.dtype == dtype
            np.testing.assert_array_equal(grad, fresh(scaled, (w, x, 2.0), wrt="w")[1])
        assert w[0] == 0.5                          # the caller's array is never modified
    # the function writes w: overlapping arguments are refused on every call, not only the first
    w = np.linspace(0.5, 1.5, 40)
    g(w, x, 2.0)
    for _ in range(2):
        with pytest.raises(coarsen.CoarsenError, match="overlap in memory"):
            g(w, w, 2.0)
    # a NumPy scalar and an int where a float was: converted, then their own fast path
    v1, r1 = g.value_and_grad(w, x, np.float64(2.0))
    v2, r2 = g.value_and_grad(w, x, 2)
    assert type(v1) is float and v1 == v2
    np.testing.assert_array_equal(r1, r2)
    # a non-native byte order is its own kind of arguments, converted
    big_endian = w.astype(">f8")
    np.testing.assert_array_equal(g(big_endian, x, 2.0), g(w, x, 2.0))


def test_single_and_tuple_results_on_the_fast_path():
    for _ in range(3):
        g1 = coarsen.differentiate(chain, wrt="x")
        assert type(g1(0.3, 5)) is float
        g2 = coarsen.differentiate(chain, wrt=("x",))
        assert type(g2(0.3, 5)) is tuple and g2(0.3, 5) == (g1(0.3, 5),)
        assert g2(0.3, n=5) == g2(x=0.3, n=5) == g2(0.3, 5)


def test_tape_bytes_before_and_after_calls(capsys):
    g = coarsen.differentiate(chain, coarsen=False)
    assert g.tape_bytes is None
    g(0.3, 10)
    assert g.tape_bytes == 8 * 10
    g.report()
    assert "tape of the last call: 80 bytes" in capsys.readouterr().out
