"""Evaluation metrics (METHOD.md 8). Errors are unresolved trials and stay in the denominator.

>>> pass_at_k(n=4, c=1, k=4)   # {resolved, fail, error, fail}: pass@4 = 1
1.0
>>> pass_at_k(n=4, c=1, k=1)   # ... and trial success 1/4
0.25
"""

from __future__ import annotations

from math import comb

__all__ = ["pass_at_k"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task from n trials of which c resolved: 1 - C(n-c, k) / C(n, k).

    The probability that k trials drawn without replacement from the n hold at least one success.
    pass@1 = c / n (trial success); pass@n = 1 iff c >= 1. Count errored trials in n, not in c.
    """
    for name, value in (("n", n), ("c", c), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {value!r}")
    if not (n >= 1 and 0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need n >= 1, 0 <= c <= n, 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    # Exact integers, one correctly rounded division: no cancellation for large n.
    return (comb(n, k) - comb(n - c, k)) / comb(n, k)
