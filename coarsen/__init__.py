"""coarsen: source-to-source automatic differentiation for plain Python/NumPy.

    g = coarsen.differentiate(f)          # gradient of a scalar function
    grads = g(*args); value, grads = g.value_and_grad(*args); print(g.source)
"""
__version__ = "0.1.0"

from .errors import CoarsenError  # noqa: E402
from .api import Gradient, differentiate, ir_text  # noqa: E402
from .forward_api import Jvp, jvp  # noqa: E402
from .jacobian_api import Jacobian, jacobian  # noqa: E402
from .hessian_api import Hessian, Hvp, hessian, hvp  # noqa: E402

__all__ = ["CoarsenError", "Gradient", "Hessian", "Hvp", "Jacobian", "Jvp", "differentiate", "hessian", "hvp",
           "ir_text", "jacobian", "jvp", "__version__"]
from .custom import custom_jvp, custom_vjp  # noqa: E402
__all__ += ["custom_jvp", "custom_vjp"]
