"""Batched gradients on a Dask cluster (coarsen.transforms.batching.dask): against the CPU batch, dask.array
inputs, determinism, a worker killed mid-run, bad inputs.

One in-process cluster (2 workers x 1 thread, module scope) serves most tests; the killed-worker
test starts its own 2-process cluster, whose workers rebuild the gradient from the shipped
source.  Under pytest-xdist each xdist worker that runs tests of this module starts its own
clusters (``xdist_group`` keeps them on one worker under ``--dist loadgroup``).
"""
import math
import os

import numpy as np
import pytest

import coarsen
from coarsen.transforms.batching import dask as dask_batch
from coarsen import examples as ex

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

pytestmark = pytest.mark.xdist_group("dask")

B = 100_000
TIMEOUT = 120          # seconds: a bound on each batch call (not a timed assertion)


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    old = os.environ.get("COARSEN_CACHE_DIR")
    path = tmp_path_factory.mktemp("coarsen_cache_dask")
    os.environ["COARSEN_CACHE_DIR"] = str(path)      # inherited by spawned worker processes
    yield path
    if old is None:
        os.environ.pop("COARSEN_CACHE_DIR", None)
    else:
        os.environ["COARSEN_CACHE_DIR"] = old


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster:
        with distributed.Client(cluster, set_as_default=False) as c:
            yield c


@pytest.fixture(scope="module")
def g_bs():
    return coarsen.differentiate(ex.black_scholes_call, wrt=("s", "sigma"))


@pytest.fixture(scope="module")
def spots():
    return np.random.default_rng(0).uniform(0.5, 1.5, B)


BS_AXES = (0, None, None, None, None)     # spot batched; strike, maturity, sigma, rate shared
BS_SHARED = (1.0, 0.75, 0.3, 0.01)


@pytest.fixture(scope="module")
def cpu_ref(g_bs, spots):
    return g_bs.batch(BS_AXES)(spots, *BS_SHARED)


def dask_batch_of(g, axes, client, **kw):
    bg = g.batch(axes, target="dask", client=client, **kw)
    bg.timeout = TIMEOUT
    return bg


def assert_matches(res, ref, *, exact_per_set=True):
    (v, (gs, gsig)), (rv, (rgs, rgsig)) = res, ref
    assert v.shape == rv.shape == (B,) and gs.shape == rgs.shape == (B,)
    assert v.dtype == rv.dtype and gs.dtype == rgs.dtype and isinstance(gsig, float)
    np.testing.assert_allclose(v, rv, rtol=1e-12, atol=0)
    np.testing.assert_allclose(gs, rgs, rtol=1e-12, atol=0)
    assert gsig > 0 and math.isclose(gsig, rgsig, rel_tol=1e-12, abs_tol=0)
    if exact_per_set:
        # per set, the same generated code as the CPU batch (same process, versions, CPU)
        assert np.array_equal(v, rv) and np.array_equal(gs, rgs)


def test_matches_cpu_batch_in_8_chunks(client, g_bs, spots, cpu_ref):
    bg = dask_batch_of(g_bs, BS_AXES, client, nchunks=8)
    res = bg(spots, *BS_SHARED)
    assert bg.last_chunks == [(c * B // 8, (c + 1) * B // 8) for c in range(8)]
    assert_matches(res, cpu_ref)
    # the default: one chunk per worker thread (2 here)
    bg2 = dask_batch_of(g_bs, BS_AXES, client)
    assert_matches(bg2(spots, *BS_SHARED), cpu_ref)
    assert len(bg2.last_chunks) == 2


def sq_dist(w, x, lam):
    s = 0.0
    for j in range(x.shape[0]):
        d = x[j] - w[j]
        s += d * d * math.exp(-lam * j)
    return s + lam * w[0] * w[0]


def test_arrays_shared_array_and_float32(client):
    rng = np.random.default_rng(1)
    w = rng.normal(size=4).astype(np.float32)
    xs = rng.normal(size=(1000, 4))
    lams = rng.uniform(0.1, 1.0, 1000)
    g = coarsen.differentiate(sq_dist)
    ref = g.batch((None, 0, 0))(w, xs, lams)
    v, (gw, gx, gl) = dask_batch_of(g, (None, 0, 0), client, nchunks=5)(w, xs, lams)
    assert gw.dtype == np.float32 and gw.shape == (4,) and gx.shape == (1000, 4)
    np.testing.assert_allclose(gw, ref[1][0], rtol=1e-6)       # float32 rounding
    assert np.array_equal(v, ref[0]) and np.array_equal(gx, ref[1][1])
    assert np.array_equal(gl, ref[1][2])
    # chunks=300: sets per chunk, the last one shorter
    bg = dask_batch_of(g, (None, 0, 0), client, chunks=300)
    gw2 = bg(w, xs, lams)[1][0]
    assert bg.last_chunks == [(0, 300), (300, 600), (600, 900), (900, 1000)]
    np.testing.assert_allclose(gw2, ref[1][0], rtol=1e-6)


_WEIGHTS = np.array([0.5, -1.0, 2.0, 0.25])


def weighted_tanh(x, c):
    s = 0.0
    for i in range(_WEIGHTS.shape[0]):
        s += _WEIGHTS[i] * np.tanh(c * x[i])
    return s


def test_module_level_arrays_travel_as_shared_arguments(client):
    g = coarsen.differentiate(weighted_tanh)
    xs = np.random.default_rng(5).normal(size=(300, 4))
    ref = g.batch((0, None))(xs, 0.7)
    v, (gx, gc) = dask_batch_of(g, (0, None), client, nchunks=3)(xs, 0.7)
    assert np.array_equal(v, ref[0]) and np.array_equal(gx, ref[1][0])
    assert math.isclose(gc, ref[1][1], rel_tol=1e-12)


def test_dask_array_inputs(client, g_bs, spots, cpu_ref):
    X = da.from_array(spots, chunks=B // 8)
    bg = dask_batch_of(g_bs, BS_AXES, client)
    res = bg(X, *BS_SHARED)
    assert bg.last_chunks == [(c * B // 8, (c + 1) * B // 8) for c in range(8)]
    assert_matches(res, cpu_ref)
    # the same boundaries from a NumPy input split into 8: bit-identical
    res_np = dask_batch_of(g_bs, BS_AXES, client, nchunks=8)(spots, *BS_SHARED)
    assert res[1][1] == res_np[1][1] and np.array_equal(res[0], res_np[0])
    # an explicit chunk count rechunks the dask array along axis 0
    res3 = dask_batch_of(g_bs, BS_AXES, client, nchunks=3)(X, *BS_SHARED)
    assert_matches(res3, cpu_ref)
    # a dask array from a computation, persisted first: its chunks are used and kept
    Y = (X * 1.0).persist()
    assert_matches(bg(Y, *BS_SHARED), cpu_ref)
    assert np.array_equal(Y.compute(), spots)


def test_two_dask_arrays_with_different_chunks(client):
    # r shared below 3: every set converges to 1 - 1/r, d/dr > 0 (a sum without cancellation)
    g = coarsen.differentiate(ex.logistic_map, wrt=("r", "x0"))
    rng = np.random.default_rng(2)
    x0 = rng.uniform(0.1, 0.9, 600)
    n = rng.integers(30, 60, 600)
    ref = g.batch((None, 0, 0))(2.7, x0, n)
    bg = dask_batch_of(g, (None, 0, 0), client)
    v, (gr, gx0) = bg(2.7, da.from_array(x0, chunks=100), da.from_array(n, chunks=250))
    assert bg.last_chunks == [(k * 100, (k + 1) * 100) for k in range(6)]
    assert np.array_equal(v, ref[0]) and np.array_equal(gx0, ref[1][1])
    assert gr > 0 and math.isclose(gr, ref[1][0], rel_tol=1e-12)


def test_deterministic(client, g_bs, spots, cpu_ref):
    bg = dask_batch_of(g_bs, BS_AXES, client, nchunks=8)
    a = bg(spots, *BS_SHARED)
    b = bg(spots, *BS_SHARED)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1][0], b[1][0])
    assert a[1][1] == b[1][1]
    for k in (1, 3, 13):
        other = dask_batch_of(g_bs, BS_AXES, client, nchunks=k)(spots, *BS_SHARED)
        assert_matches(other, a)
    assert_matches(dask_batch_of(g_bs, BS_AXES, client, chunks=(1, B - 2, 1))(spots, *BS_SHARED),
                   cpu_ref)
    # the pairwise tree: a fixed order, ((p0+p1)+(p2+p3))+p4
    parts = [0.1, 0.2, 0.3, 1e16, -1e16]
    assert dask_batch.tree_sum(parts) == ((0.1 + 0.2) + (0.3 + 1e16)) + -1e16


def test_bad_inputs(client, g_bs, spots):
    xs = np.random.default_rng(3).normal(size=(100, 4))
    g = coarsen.differentiate(sq_dist)
    bg = dask_batch_of(g, (None, 0, 0), client)
    with pytest.raises(coarsen.CoarsenError, match="axis 1") as err:
        bg(np.ones(4), da.from_array(xs, chunks=(50, 2)), np.ones(100))
    assert "rechunk({1: -1})" in str(err.value)
    with pytest.raises(coarsen.CoarsenError, match="shared"):
        bg(da.ones(4), xs, np.ones(100))
    unknown = da.from_array(np.ones(100))
    unknown = unknown[unknown > 0]
    with pytest.raises(coarsen.CoarsenError, match="unknown chunk sizes"):
        bg(np.ones(4), xs, unknown)
    with pytest.raises(coarsen.CoarsenError, match="different batch sizes"):
        bg(np.ones(4), da.from_array(xs, chunks=(50, 4)), np.ones(99))
    with pytest.raises(coarsen.CoarsenError, match="sums to"):
        dask_batch_of(g_bs, BS_AXES, client, chunks=(10, 10))(spots, *BS_SHARED)
    for kw in ({"nchunks": 0}, {"chunks": 2.5}, {"chunks": ()}, {"chunks": 2, "nchunks": 2}):
        with pytest.raises(coarsen.CoarsenError):
            g_bs.batch(BS_AXES, target="dask", client=client, **kw)
    with pytest.raises(coarsen.CoarsenError, match="target='dask' only"):
        g_bs.batch(BS_AXES, client=client)
    with pytest.raises(coarsen.CoarsenError, match="target='cpu'"):
        coarsen.differentiate(sq_dist, target="python").batch((None, 0, 0), target="dask",
                                                               client=client)
    with pytest.raises(coarsen.CoarsenError, match="in_axes"):
        g_bs.batch((0, None), target="dask", client=client)


def pick(x, i):
    return x[i] * x[i]


def test_an_exception_in_a_set_reaches_the_caller(client):
    g = coarsen.differentiate(pick, wrt="x")
    idx = np.array([0, 1, 2, 7, 1])
    with pytest.raises(IndexError):
        dask_batch_of(g, (None, 0), client, nchunks=2)(np.ones(3), idx)
    # a single wrt: the gradient alone, summed over the sets (1, 2, 3 pick x[0], x[1], x[2])
    gx = dask_batch_of(g, (None, 0), client, nchunks=2)(np.array([1.0, 2.0, 3.0]), idx[:3])[1]
    assert isinstance(gx, np.ndarray) and gx.dtype == np.float64
    assert np.array_equal(gx, [2.0, 4.0, 6.0])


def test_current_client_and_embedded_cluster(client, g_bs, spots, cpu_ref, monkeypatch):
    with client.as_current():
        bg = g_bs.batch(BS_AXES, target="dask", nchunks=4)
        assert bg.client is client
        assert_matches(bg(spots, *BS_SHARED), cpu_ref)
    # no client given and none current: an embedded cluster, kept until close()
    monkeypatch.setitem(dask_batch.LOCAL_CLUSTER, "processes", False)
    monkeypatch.setitem(dask_batch.LOCAL_CLUSTER, "n_workers", 1)
    with g_bs.batch(BS_AXES, target="dask", nchunks=4) as bg:
        own = bg.client
        assert own is not client and bg.client is own
        assert_matches(bg(spots, *BS_SHARED), cpu_ref)
    assert own.status == "closed"


def _killer_plugin(marker):
    """A worker plugin that ends its worker's process (``os._exit``) when the worker starts its
    second chunk task, once per cluster (the first to create ``marker``)."""
    class KillOnSecondChunk(distributed.WorkerPlugin):
        def setup(self, worker):
            self.started = 0

        def transition(self, key, start, finish, **kwargs):
            if finish != "executing" or not str(key).startswith("coarsen-chunk-"):
                return
            self.started += 1
            if self.started == 2:
                try:
                    os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                except FileExistsError:
                    return
                os._exit(1)

    return KillOnSecondChunk()


def logistic_loop(r, x0, n):
    x = x0
    for _ in range(n):
        x = r * x * (1.0 - x)
    return x


def test_killed_worker_is_retried(client, tmp_path):
    # a function of the test module: the workers never import it, they build the shipped source
    g = coarsen.differentiate(logistic_loop, wrt=("r", "x0"))
    rng = np.random.default_rng(4)
    x0 = rng.uniform(0.1, 0.9, 20_000)
    n = rng.integers(50, 200, 20_000)
    ref = g.batch((None, 0, 0))(2.7, x0, n)
    same_chunks = dask_batch_of(g, (None, 0, 0), client, nchunks=16)(2.7, x0, n)
    marker = str(tmp_path / "killed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster:
        with distributed.Client(cluster, set_as_default=False) as procs:
            procs.register_plugin(_killer_plugin(marker))
            v, (gr, gx0) = dask_batch_of(g, (None, 0, 0), procs, nchunks=16)(2.7, x0, n)
    assert os.path.exists(marker)            # a worker did die mid-run
    assert np.array_equal(v, ref[0]) and np.array_equal(gx0, ref[1][1])
    assert gr > 0 and math.isclose(gr, ref[1][0], rel_tol=1e-12)
    # the same chunks on another cluster, without a death: bit-identical
    assert np.array_equal(v, same_chunks[0]) and gr == same_chunks[1][0]
