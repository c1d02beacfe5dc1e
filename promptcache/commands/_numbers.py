"""Number option types the commands share."""

from __future__ import annotations

import math
from typing import Any

import click


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that also refuses ``nan`` and ``inf``: ``float()`` takes them, a
    NaN passes the range check (it compares false), and a threshold or timeout given one would
    never fire, always fire, or fail later with a traceback instead of a usage error.

    Args:
        min, max, min_open: as ``click.FloatRange``'s.
        unit: what the usage error asks for (``"a number"``, ``"seconds"``): ``'nan' is not a
            finite number; give seconds > 0``.
    """

    def __init__(
        self,
        min: float | None = None,
        max: float | None = None,
        *,
        min_open: bool = False,
        unit: str = "a number",
    ) -> None:
        super().__init__(min=min, max=max, min_open=min_open)
        self.unit = unit

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The number ``value`` gives.

        Raises:
            click.BadParameter: not a number, outside the range, ``nan`` or an infinity.
        """
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number; give {self._wanted()}", param, ctx)
        return number

    def _wanted(self) -> str:
        if self.min is not None and self.max is not None:
            return f"{self.unit} from {self.min:g} to {self.max:g}"
        if self.min is not None:
            return f"{self.unit} {'>' if self.min_open else '>='} {self.min:g}"
        if self.max is not None:
            return f"{self.unit} <= {self.max:g}"
        return self.unit
