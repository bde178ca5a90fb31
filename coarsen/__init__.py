"""coarsen: source-to-source automatic differentiation for plain Python/NumPy.

    g = coarsen.differentiate(f)          # gradient of a scalar function
    grads = g(*args); value, grads = g.value_and_grad(*args); print(g.source)

The framework bridges ``coarsen.torch``, ``coarsen.jax`` and ``coarsen.scipy`` are imported
on first use (``__getattr__``): ``import coarsen`` imports neither PyTorch nor JAX.
"""
from .transforms.version import __version__
from .errors import CoarsenError
from .frontend.custom import custom_jvp, custom_vjp
from .transforms.gradient import Gradient, differentiate, ir_text
from .transforms.jvp import Jvp, jvp
from .transforms.jacobian import Jacobian, jacobian
from .transforms.hessian import Hessian, Hvp, hessian, hvp

__all__ = ["CoarsenError", "Gradient", "Hessian", "Hvp", "Jacobian", "Jvp", "differentiate", "hessian", "hvp",
           "ir_text", "jacobian", "jvp", "__version__", "custom_jvp", "custom_vjp"]

#: the framework bridges, imported when first read as ``coarsen.torch`` etc.
BRIDGES = ("torch", "jax", "scipy")


def __getattr__(name):
    if name in BRIDGES:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
