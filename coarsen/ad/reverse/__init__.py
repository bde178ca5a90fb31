"""Reverse mode, split by job (see ``driver`` for the whole pass): ``emitter`` (shared state),
``tapes``, ``adjoints`` (assignments, stores, VJPs), ``steps`` (segment steps), ``control``
(control-flow reversal), ``cleanup``; the to-be-recorded analysis is
``coarsen.analysis.recording``."""
from .driver import differentiate_ir
from .emitter import Emitter

__all__ = ["Emitter", "differentiate_ir"]
