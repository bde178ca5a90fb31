"""build(): real files in the cache dir, linecache/tracebacks, hash verification, dir safety."""

import inspect
import linecache
import os
import stat
import sys
import traceback

import numpy as np
import pytest

from coarsen.lowering import CacheSecurityError, LoweringError, build, cache_dir, module_path
from coarsen.lowering.cache import sha256_hex

SOURCE = '''\
import math
import numpy as np


def scale(x, k):
    y = x * k
    return y


def boom(x):
    a = x + 1.0
    return a / x
'''


def test_build_writes_named_file_and_imports(own_cache):
    mod = build(SOURCE, name="demo", target="python")
    path = own_cache / f"demo_{sha256_hex(SOURCE)[:20]}.py"
    assert mod.__file__ == str(path) == str(module_path(SOURCE, name="demo"))
    assert path.read_text() == SOURCE
    assert mod.__name__ == f"_coarsen_gen_demo_{sha256_hex(SOURCE)[:20]}"
    assert sys.modules[mod.__name__] is mod
    assert mod.__coarsen_sha256__ == sha256_hex(SOURCE)
    assert mod.scale(1.5, 3.0) == 4.5
    # Same source, same process: the same module object, not a re-execution.
    assert build(SOURCE, name="demo", target="python") is mod
    assert (own_cache / "CACHEDIR.TAG").read_text().startswith(
        "Signature: 8a477f597d28d172789f06886806bc55"
    )
    # No temporary files left behind.
    assert not [p for p in os.listdir(own_cache) if p.endswith(".tmp")]


def test_traceback_and_getsource_point_into_generated_file(own_cache):
    mod = build(SOURCE, name="tb", target="python")
    assert inspect.getsource(mod.boom) == "def boom(x):\n    a = x + 1.0\n    return a / x\n"
    with pytest.raises(ZeroDivisionError) as info:
        mod.boom(0.0)
    frame = traceback.extract_tb(info.value.__traceback__)[-1]
    assert frame.filename == mod.__file__
    assert frame.lineno == 12
    assert frame.line == "return a / x"
    # Defensive linecache registration: the lines survive the file's deletion.
    os.remove(mod.__file__)
    linecache.checkcache(mod.__file__)
    assert linecache.getline(mod.__file__, 11).strip() == "a = x + 1.0"
    with pytest.raises(ZeroDivisionError) as info:
        mod.boom(0.0)
    assert "return a / x" in "".join(traceback.format_tb(info.value.__traceback__))
    # build() restores the missing file.
    build(SOURCE, name="tb", target="python")
    assert open(mod.__file__).read() == SOURCE


@pytest.mark.parametrize("damage", ["payload", "truncate"])
def test_tampered_file_is_never_executed(own_cache, damage, tmp_path):
    marker = tmp_path / "executed"
    path = module_path(SOURCE, name="tamper")
    build(SOURCE, name="tamper", target="python")
    if damage == "payload":
        path.write_text(f"open({str(marker)!r}, 'w').write('pwned')\n" + SOURCE)
    else:
        path.write_text(SOURCE[: len(SOURCE) // 2])
    # Forget the in-memory module, as a new process would.
    sys.modules.pop(f"_coarsen_gen_tamper_{sha256_hex(SOURCE)[:20]}")
    mod = build(SOURCE, name="tamper", target="python")
    assert not marker.exists()
    assert path.read_text() == SOURCE  # rewritten from the trusted source
    assert mod.scale(2.0, 0.25) == 0.5


def test_cpu_build_caches_machine_code_beside_file(own_cache):
    src = SOURCE.replace("import numpy as np\n", "import numpy as np\nimport numba\n").replace(
        "\ndef scale", "\n@numba.njit(cache=True, error_model='numpy')\ndef scale"
    )
    mod = build(src, name="cpu_demo", target="cpu")
    x = np.arange(4.0)
    assert np.array_equal(mod.scale(x, 2.0), x * 2.0)
    cached = os.listdir(own_cache / "__pycache__")
    stem = f"cpu_demo_{sha256_hex(src)[:20]}"
    assert any(name.startswith(stem) and name.endswith(".nbi") for name in cached)
    assert any(name.startswith(stem) and name.endswith(".nbc") for name in cached)


def test_bad_arguments(own_cache):
    with pytest.raises(LoweringError):
        build(SOURCE, name="not an identifier", target="python")
    with pytest.raises(LoweringError, match="unknown target"):
        build(SOURCE, name="x", target="cuda")


def test_default_cache_dir_is_private(monkeypatch, tmp_path):
    monkeypatch.delenv("COARSEN_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    root = cache_dir()
    assert root.parent == tmp_path / "xdg" / "coarsen"
    assert root.name.endswith(f"-py{sys.version_info.major}{sys.version_info.minor}")
    for d in (root, root.parent):
        assert stat.S_IMODE(os.stat(d).st_mode) & 0o077 == 0


def test_refuses_world_writable_dir(own_cache):
    cache_dir()
    os.chmod(own_cache, 0o777)
    try:
        with pytest.raises(CacheSecurityError, match="writable by group or others"):
            build(SOURCE, name="unsafe", target="python")
    finally:
        os.chmod(own_cache, 0o700)
    assert not module_path(SOURCE, name="unsafe").exists()


def test_refuses_dir_owned_by_someone_else(own_cache, monkeypatch):
    cache_dir()
    monkeypatch.setattr(os, "getuid", lambda: os.stat(own_cache).st_uid + 1)
    with pytest.raises(CacheSecurityError, match="not by the current user"):
        build(SOURCE, name="foreign", target="python")


def test_refuses_foreign_nonempty_dir(tmp_path, monkeypatch):
    foreign = tmp_path / "home_like"
    foreign.mkdir(mode=0o700)
    (foreign / "precious.txt").write_text("keep me")
    monkeypatch.setenv("COARSEN_CACHE_DIR", str(foreign))
    with pytest.raises(CacheSecurityError, match="CACHEDIR.TAG"):
        build(SOURCE, name="foreign", target="python")
    assert os.listdir(foreign) == ["precious.txt"]
