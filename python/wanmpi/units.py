"""Parsing of the quantities a topology file holds: rates, sizes, durations, loss.

Every parser takes the raw TOML value and returns an int in base units
(bits/s, bytes, microseconds) or a float (loss probability), or raises
UnitError with a message that says what was wrong. Callers add the file and
key to the message.

Units (case-insensitive, optional space, optional "/s" on rates):
  rates:     bit, kbit, mbit, gbit, tbit          (decimal: 1 kbit = 1000 bit/s)
  sizes:     B, KB, MB, GB (decimal), KiB, MiB, GiB (binary)
  durations: ns, us, ms, s
  loss:      a number in [0, 1], or a string "0.1%"
"bps"-style units are refused because tc reads them as bytes/s and people read
them as bits/s.
"""
from __future__ import annotations

import re

RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
SIZE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9,
              "kib": 2**10, "mib": 2**20, "gib": 2**30}
DURATION_UNITS_US = {"ns": 1e-3, "us": 1, "ms": 10**3, "s": 10**6}

_QUANTITY = re.compile(r"^\s*([+-]?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)\s*([A-Za-z/%]*)\s*$")


class UnitError(ValueError):
    """A quantity that could not be read; the message names the problem."""


def _split(value: object, what: str) -> tuple[float, str]:
    if isinstance(value, bool):
        raise UnitError(f"expected a {what}, got a boolean")
    if isinstance(value, (int, float)):
        return float(value), ""
    if not isinstance(value, str):
        raise UnitError(f"expected a {what} such as {EXAMPLES[what]}, got {type(value).__name__}")
    m = _QUANTITY.match(value)
    if not m:
        raise UnitError(f"cannot read {value!r} as a {what} (example: {EXAMPLES[what]})")
    return float(m.group(1)), m.group(2)


EXAMPLES = {"rate": "'100Mbit'", "size": "'64KB'", "duration": "'10ms'", "loss": "0.001 or '0.1%'"}


def _scaled(number: float, unit: str, table: dict, what: str, original: object) -> float:
    key = unit.lower()
    if what == "rate" and key.endswith("/s"):
        key = key[:-2]
    if key not in table:
        if what == "rate" and key.endswith("bps"):
            raise UnitError(f"ambiguous unit {unit!r} in {original!r}: write bits per second "
                            f"as 'kbit', 'Mbit' or 'Gbit'")
        if not unit:
            raise UnitError(f"{original!r} has no unit; write e.g. {EXAMPLES[what]} "
                            f"(units: {', '.join(table)})")
        raise UnitError(f"unknown unit {unit!r} in {original!r} (units: {', '.join(table)})")
    return number * table[key]


def parse_rate(value: object) -> int:
    """Return a positive rate in bits/s."""
    number, unit = _split(value, "rate")
    bits = _scaled(number, unit, RATE_UNITS, "rate", value)
    if bits < 0:
        raise UnitError(f"negative rate {value!r}")
    if bits < 1000:
        raise UnitError(f"rate {value!r} is below 1 kbit/s")
    return int(round(bits))


def parse_size(value: object) -> int:
    """Return a size in bytes (>= 0)."""
    number, unit = _split(value, "size")
    if unit == "" and isinstance(value, (int, float)):
        unit = "B"
    size = _scaled(number, unit, SIZE_UNITS, "size", value)
    if size < 0:
        raise UnitError(f"negative size {value!r}")
    return int(round(size))


def parse_duration_us(value: object) -> int:
    """Return a duration in microseconds (>= 0). A bare 0 needs no unit."""
    number, unit = _split(value, "duration")
    if unit == "" and number == 0:
        return 0
    us = _scaled(number, unit, DURATION_UNITS_US, "duration", value)
    if us < 0:
        raise UnitError(f"negative duration {value!r}")
    return int(round(us))


def parse_loss(value: object) -> float:
    """Return a loss probability in [0, 1]."""
    number, unit = _split(value, "loss")
    if unit == "%":
        number /= 100.0
    elif unit:
        raise UnitError(f"unknown unit {unit!r} in loss {value!r} (write 0.001 or '0.1%')")
    if not 0.0 <= number <= 1.0:
        raise UnitError(f"loss {value!r} is outside [0, 1]")
    return number


def format_rate(bits: float) -> str:
    for unit, scale in (("Gbit", 1e9), ("Mbit", 1e6), ("kbit", 1e3)):
        if bits >= scale:
            return f"{bits / scale:g}{unit}"
    return f"{bits:g}bit"


def format_size(size: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if size >= scale:
            return f"{size / scale:g}{unit}"
    return f"{size:g}B"


def format_duration_us(us: float) -> str:
    if us >= 1000:
        return f"{us / 1000:g}ms"
    return f"{us:g}us"
