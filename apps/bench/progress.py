"""Progress of a harness run, on stderr.

Requires nothing; uses ``tqdm`` when it is installed (the ``bench`` extra installs it).
Guarantees: on a terminal (``stream.isatty()``) with tqdm, one live bar; otherwise plain,
complete lines (``[done/total  elapsed] message``), one per message, with no carriage returns,
so a log file reads cleanly.  Disabled, it writes nothing.
"""
from __future__ import annotations

import sys
import time


def _tqdm():
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


class Progress:
    """``show(msg)`` reports what the run is doing, ``step()`` finishes one (app, size) case,
    ``close()`` ends the display.  ``bar=None`` picks the bar on a terminal when tqdm is there."""

    def __init__(self, total, enabled=True, stream=None, bar=None):
        self.total, self.done = total, 0
        self.enabled = enabled and total > 0
        self.stream = stream if stream is not None else sys.stderr
        self.t0 = time.perf_counter()
        tqdm = _tqdm()
        if bar is None:
            isatty = getattr(self.stream, "isatty", None)
            bar = bool(isatty and isatty()) and tqdm is not None
        self._bar = None
        if self.enabled and bar and tqdm is not None:
            self._bar = tqdm(total=total, file=self.stream, unit="case", dynamic_ncols=True,
                             bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}]")

    @property
    def uses_bar(self) -> bool:
        return self._bar is not None

    def show(self, msg):
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.set_description_str(msg, refresh=True)
            return
        elapsed = time.perf_counter() - self.t0
        self.stream.write(f"[{self.done}/{self.total} {elapsed:7.1f}s] {msg}\n")
        self.stream.flush()

    def step(self):
        self.done += 1
        if self._bar is not None:
            self._bar.update(1)

    def close(self):
        if self._bar is not None:
            self._bar.set_description_str("done", refresh=False)
            self._bar.close()
            self._bar = None
