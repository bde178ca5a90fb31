"""coarsen: source-to-source automatic differentiation for plain Python/NumPy.

    g = coarsen.differentiate(f)          # gradient of a scalar function
    grads = g(*args); value, grads = g.value_and_grad(*args); print(g.source)
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
