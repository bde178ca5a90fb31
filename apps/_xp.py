"""Array namespaces for the vectorized peer versions (``xp_objective(xp, ...)``).

``autograd.numpy`` and NumPy are used as they are.  PyTorch spells a few things differently
(``dim`` for ``axis``, ``max`` returning indices, ``cat`` for ``concatenate``), so
:class:`TorchNS` wraps the handful of functions the apps use behind NumPy's names.
"""
from __future__ import annotations


class TorchNS:
    """The NumPy-named subset of PyTorch that ``xp_objective`` implementations use (float64)."""

    def __init__(self):
        import torch

        self.torch = torch
        self.float64 = torch.float64
        for name in ("exp", "log", "log1p", "sqrt", "tanh", "sin", "cos", "abs", "maximum",
                     "minimum", "where", "stack", "outer", "cumsum"):
            setattr(self, name, getattr(torch, name))
        self.pi = 3.141592653589793

    def asarray(self, a):
        return self.torch.as_tensor(a, dtype=self.torch.float64)

    def sum(self, a, axis=None, keepdims=False):
        if axis is None:
            return self.torch.sum(a)
        return self.torch.sum(a, dim=axis, keepdim=keepdims)

    def mean(self, a, axis=None, keepdims=False):
        if axis is None:
            return self.torch.mean(a)
        return self.torch.mean(a, dim=axis, keepdim=keepdims)

    def max(self, a, axis=None, keepdims=False):
        if axis is None:
            return self.torch.amax(a)
        return self.torch.amax(a, dim=axis, keepdim=keepdims)

    def concatenate(self, seq, axis=0):
        return self.torch.cat(list(seq), dim=axis)

    def zeros(self, shape):
        return self.torch.zeros(shape, dtype=self.torch.float64)

    def arange(self, n):
        return self.torch.arange(n, dtype=self.torch.float64)

    def dot(self, a, b):
        return a @ b

    def tril_indices(self, d, k=0):
        import numpy as np

        return np.tril_indices(d, k)
