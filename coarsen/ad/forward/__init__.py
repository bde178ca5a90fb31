"""Forward mode (JVP): the primal and its tangents in one pass, no tape (``driver.jvp_ir``)."""
from .driver import jvp_ir

__all__ = ["jvp_ir"]
