"""Progress display: a tqdm bar when tqdm is installed, else one line rewritten on standard error."""

from __future__ import annotations

import sys
import time
from typing import Any, Optional


class Progress:
    """Counts finished simulations out of ``total``; call it as ``progress(done, total)`` or use :meth:`advance`.

    Shown with tqdm when it is importable, otherwise as ``<desc>: done/total`` on standard error (at most ten
    updates a second, and the last one). Disabled, it does nothing.
    """

    def __init__(self, total: int, desc: str, enabled: bool = True) -> None:
        self.total = total
        self.desc = desc
        self.enabled = enabled and total > 0
        self.done = 0
        self._bar: Any = None
        self._last = 0.0
        if not self.enabled:
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:
            tqdm = None
        if tqdm is not None:
            self._bar = tqdm(total=total, desc=desc, unit="sim", file=sys.stderr)

    def __call__(self, done: int, total: Optional[int] = None) -> None:
        """Records that ``done`` simulations have finished."""
        self.advance(done - self.done)

    def advance(self, n: int) -> None:
        """Records ``n`` more finished simulations."""
        if n <= 0 or not self.enabled:
            self.done += max(n, 0)
            return
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.monotonic()
        if now - self._last >= 0.1 or self.done >= self.total:
            self._last = now
            sys.stderr.write(f"\r{self.desc}: {self.done}/{self.total} simulations")
            sys.stderr.flush()

    def close(self) -> None:
        """Ends the display."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
        else:
            sys.stderr.write("\n")
            sys.stderr.flush()
        self.enabled = False

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
