"""Host-side checks of configuration values: the helpers every agent's ``check_config`` is written with.

Why they exist: an agent's numeric hyperparameters (learning rates, gamma, tau, ...) are pytree leaves of its
Config, so inside the compiled program they are traced arrays and a bad one (a negative learning rate, gamma = 2)
cannot raise there; it would only train to NaN or nonsense, possibly after a long compile. So the loop calls
``agent.check_config`` on the host with every member's concrete Config before compiling, and these helpers make
that a few readable lines per agent. Values may be Python numbers or numpy / jax scalars (0-d arrays): a sweep's
member configs hold either. Every failure is a ``ConfigError`` whose message is one line naming the field, the
bad value and what is allowed, e.g. ``critic_lr must be a finite number > 0, got -0.001``.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from jaxrl import ConfigError

INT32_MAX = 2**31 - 1
# jax.random.PRNGKey(seed) with x64 disabled (the default) keeps seed mod 2**32 and raises only outside int64:
# any seed outside [0, 2**32 - 1] silently gives the key of one inside it (e.g. -1 and 2**32 - 1, 2**32 and 0).
SEED_MIN, SEED_MAX = 0, 2**32 - 1


def show(value: Any) -> str:
    """The value as the user wrote it, on one line (0-d arrays print as their number, not as Array(...))."""
    text = str(value) if hasattr(value, "dtype") else repr(value)
    return " ".join(text.split())


def as_number(value: Any) -> float | None:
    """A real number (Python int / float or a numeric 0-d array) as a float; None for anything else (bools and
    strings included)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if getattr(value, "shape", None) == () and getattr(getattr(value, "dtype", None), "kind", None) in ("i", "u", "f"):
        return float(value)
    return None


def as_int(value: Any) -> int | None:
    """An integer (Python int, not a bool, or an integer 0-d array) as an int; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if getattr(value, "shape", None) == () and getattr(getattr(value, "dtype", None), "kind", None) in ("i", "u"):
        return int(value)
    return None


def require(cfg, name: str, ok: Callable[[float], bool], allowed: str) -> None:
    """``cfg.<name>`` must be a real number x with ``ok(x)``; ``allowed`` says which, e.g. 'a number in [0, 1)'."""
    value = getattr(cfg, name)
    x = as_number(value)
    if x is None or not ok(x):
        raise ConfigError(f"{name} must be {allowed}, got {show(value)}")


def positive(cfg, *names: str) -> None:
    """Finite and > 0 (learning rates, temperatures, scales)."""
    for name in names:
        require(cfg, name, lambda x: math.isfinite(x) and x > 0, "a finite number > 0")


def non_negative(cfg, *names: str) -> None:
    """Finite and >= 0 (noise scales, loss coefficients: zero switches a term off)."""
    for name in names:
        require(cfg, name, lambda x: math.isfinite(x) and x >= 0, "a finite number >= 0")


def unit_interval(cfg, *names: str) -> None:
    """In (0, 1] (discounts, Polyak rates)."""
    for name in names:
        require(cfg, name, lambda x: 0 < x <= 1, "a number in (0, 1]")


def finite_or_none(cfg, *names: str) -> None:
    """None (the agent's own rule, e.g. target entropy -|A|) or a finite number."""
    for name in names:
        if getattr(cfg, name) is not None:
            require(cfg, name, math.isfinite, "a finite number or None")


def positive_ints(cfg, *names: str) -> None:
    """An int > 0 (batch size, dims, counts), or for a field annotated as a tuple (layer widths) a tuple of them;
    bools and floats are not ints."""
    annotations = {f.name: str(f.type) for f in dataclasses.fields(cfg)} if dataclasses.is_dataclass(cfg) else {}
    # Counts reach the program as int32 (a scan length, a modulus of the update counter): a larger one overflows
    # somewhere in XLA's tracing, far from the field that caused it.
    ok = lambda v: 0 < (as_int(v) or 0) <= INT32_MAX  # noqa: E731
    for name in names:
        value = getattr(cfg, name)
        if "tuple" in annotations.get(name, "") or isinstance(value, (tuple, list)):
            if not isinstance(value, (tuple, list)) or not all(ok(v) for v in value):
                raise ConfigError(f"{name} must be a tuple of integers > 0 (and <= {INT32_MAX}), got {show(value)}")
        elif not ok(value):
            raise ConfigError(f"{name} must be an integer > 0 (and <= {INT32_MAX}), got {show(value)}")


def bounds_ordered(cfg, low_name: str, high_name: str) -> None:
    """Two finite numbers with low < high (log-std bounds, std bounds)."""
    low, high = getattr(cfg, low_name), getattr(cfg, high_name)
    a, b = as_number(low), as_number(high)
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b) and a < b):
        raise ConfigError(f"{low_name} < {high_name} must hold for two finite numbers, got {low_name}={show(low)} "
                          f"and {high_name}={show(high)}")


def check_seed(seed: Any, count: int = 1) -> None:
    """Seeds seed, ..., seed + count - 1 must each get their own PRNG key: integers in [0, 2**32 - 1]."""
    first, extra = as_int(seed), max(count, 1) - 1
    if first is None or not SEED_MIN <= first <= SEED_MAX - extra:
        span = f" for {extra + 1} seeds (seed..seed+{extra})" if extra else ""
        raise ConfigError(f"seed must be an integer in [{SEED_MIN}, {SEED_MAX - extra}]{span}, got {show(seed)} "
                          "(jax.random.PRNGKey keeps only seed mod 2**32)")


def optimizer_fields(cfg) -> None:
    """The optimiser fields ``jaxrl.optim.adam`` reads, where ``cfg`` has them."""
    from jaxrl.optim import LR_SCHEDULES

    for name in ("adam_b1", "adam_b2"):
        if hasattr(cfg, name):
            require(cfg, name, lambda x: 0 <= x < 1, "a number in [0, 1)")
    if hasattr(cfg, "adam_eps"):
        positive(cfg, "adam_eps")
    if hasattr(cfg, "weight_decay"):
        non_negative(cfg, "weight_decay")
    if getattr(cfg, "max_grad_norm", None) is not None:
        positive(cfg, "max_grad_norm")
    schedule = getattr(cfg, "lr_schedule", "constant")
    if schedule not in LR_SCHEDULES:
        raise ConfigError(f"lr_schedule must be one of {', '.join(LR_SCHEDULES)}, got {show(schedule)}")
