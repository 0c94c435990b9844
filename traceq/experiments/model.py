"""Performance models in Extra-P's performance model normal form (PMNF).

    f(x_1..x_m) = c0 + Σ_k c_k · Π_l x_l^{i_kl} · log2(x_l)^{j_kl}

Single parameter (Extra-P's Basic modeler): every hypothesis c0 + c1·x^i·log2(x)^j with (i, j)
one of Extra-P's default building blocks (BUILDING_BLOCKS: 42 pairs from i in POLY_EXPONENTS,
j in LOG_EXPONENTS), plus the constant c0, is fitted
by linear least squares to the mean over repetitions at each measurement point. The chosen
hypothesis has the smallest SMAPE of leave-one-out cross-validation (each point predicted by
the hypothesis fitted without it); ties go to the simpler one (fewer terms, then smaller
exponents).

Several parameters (Extra-P's multi-parameter modeler): the best single-parameter term of
each parameter is found on the measurement line of that parameter (the other parameters held
at the values with most points, the largest of those); the hypotheses are then every sum of products of those terms
that uses each non-constant parameter (for two: f1·f2, f1+f2, f1·f2+f1, f1·f2+f2,
f1·f2+f1+f2), fitted on all points and selected by the same cross-validated SMAPE.

Quality: SMAPE (%, of the fit, not cross-validated), adjusted R² with k = number of terms;
adjusted R² is undefined (None, the reason in `notes`) when the data are constant (nothing
to explain: R² = 1 − 0/0) or when there are no more points than terms + 1.
Uncertainty of a prediction: relative σ = sqrt(rms(LOO relative error)² + median CV of the
repetitions²); low/high = value·(1 ∓ 2σ) (about a 95 % band if errors are normal).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

POLY_EXPONENTS = [Fraction(0), Fraction(1, 4), Fraction(1, 3), Fraction(1, 2), Fraction(2, 3), Fraction(3, 4),
                  Fraction(4, 5), Fraction(1), Fraction(5, 4), Fraction(4, 3), Fraction(3, 2), Fraction(5, 3),
                  Fraction(7, 4), Fraction(2), Fraction(9, 4), Fraction(7, 3), Fraction(5, 2), Fraction(8, 3),
                  Fraction(11, 4), Fraction(3)]
LOG_EXPONENTS = [0, 1, 2]
# The (i, j) pairs of Extra-P's default single-parameter building blocks (4.x, log terms
# allowed): a curated subset of POLY_EXPONENTS x LOG_EXPONENTS, e.g. p^(7/4)·log2(p) is not
# one. Searching exactly these makes traceq choose what Extra-P chooses on the same data.
BUILDING_BLOCKS = [(Fraction(n, d), j) for n, d, j in [
    (0, 1, 1), (0, 1, 2), (1, 4, 0), (1, 3, 0), (1, 4, 1), (1, 3, 1), (1, 4, 2), (1, 3, 2), (1, 2, 0), (1, 2, 1),
    (1, 2, 2), (2, 3, 0), (3, 4, 0), (2, 3, 1), (3, 4, 1), (4, 5, 0), (2, 3, 2), (3, 4, 2), (1, 1, 0), (1, 1, 1),
    (1, 1, 2), (5, 4, 0), (5, 4, 1), (4, 3, 0), (4, 3, 1), (3, 2, 0), (3, 2, 1), (3, 2, 2), (5, 3, 0), (7, 4, 0),
    (2, 1, 0), (2, 1, 1), (2, 1, 2), (9, 4, 0), (7, 3, 0), (5, 2, 0), (5, 2, 1), (5, 2, 2), (8, 3, 0), (11, 4, 0),
    (3, 1, 0), (3, 1, 1)]]
MIN_POINTS_PER_PARAM = 5

# A term: {param index: (i, j)}; a hypothesis: a tuple of terms (the constant is implicit).
Term = dict


@dataclass
class Model:
    params: list[str]
    terms: list[dict]                 # [{param name: (i, j)}]
    constant: float
    coefficients: list[float]
    smape_pct: float                  # of the fit on the points
    cv_smape_pct: float               # leave-one-out cross-validated
    r2_adj: float | None              # None when undefined (the reason is in notes)
    points: int
    rel_sigma: float                  # relative uncertainty of one prediction (see module doc)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)   # why a statistic is undefined

    def evaluate(self, point: dict[str, float]) -> float:
        x = np.array([[float(point[p]) for p in self.params]])
        cols = _design(x, [{self.params.index(k): v for k, v in t.items()} for t in self.terms])
        return float((cols @ np.array([self.constant, *self.coefficients]))[0])

    def predict(self, point: dict[str, float]) -> dict:
        v = self.evaluate(point)
        band = 2 * self.rel_sigma * abs(v)
        return {**{p: point[p] for p in self.params}, "value": v, "low": v - band, "high": v + band}

    def formula(self) -> str:
        out = _num(self.constant)
        for c, t in zip(self.coefficients, self.terms):
            sign = " − " if c < 0 else " + "
            out += sign + _num(abs(c)) + "·" + "·".join(_factor(p, *t[p]) for p in self.params if p in t)
        return out

    def to_json(self, metric: str, predictions: list[dict]) -> dict:
        return {
            "param": list(self.params), "metric": metric, "model": self.formula(), "constant": self.constant,
            "terms": [{"coefficient": c, "exponents": {p: [float(i), int(j)] for p, (i, j) in t.items()}}
                      for c, t in zip(self.coefficients, self.terms)],
            "smape_pct": self.smape_pct, "r2_adj": self.r2_adj, "points": self.points,
            "predictions": predictions, "notes": list(self.notes),
        }


def _num(x: float) -> str:
    return f"{x:.4g}"


def _exp(e: Fraction) -> str:
    if e.denominator == 1:
        return str(e.numerator)
    if e.denominator in (2, 4, 5):
        return f"{float(e):g}"
    return f"({e.numerator}/{e.denominator})"


def _factor(name: str, i, j) -> str:
    parts = []
    i = Fraction(i).limit_denominator(12)
    if i:
        parts.append(name if i == 1 else f"{name}^{_exp(i)}")
    if j:
        parts.append(f"log2({name})" if j == 1 else f"log2({name})^{j}")
    return "·".join(parts) or "1"


def _design(x: np.ndarray, hyp) -> np.ndarray:
    cols = [np.ones(len(x))]
    for term in hyp:
        col = np.ones(len(x))
        for k, (i, j) in term.items():
            col = col * x[:, k] ** float(i) * np.log2(x[:, k]) ** j
        cols.append(col)
    return np.column_stack(cols)


def _smape(pred: np.ndarray, y: np.ndarray) -> float:
    den = (np.abs(pred) + np.abs(y)) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(den > 0, np.abs(pred - y) / den, 0.0)
    return float(100 * r.mean())


def _fit(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.linalg.lstsq(a, y, rcond=None)[0]


def _loo(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Leave-one-out predictions of each point."""
    n = len(y)
    pred = np.empty(n)
    for k in range(n):
        keep = np.arange(n) != k
        pred[k] = a[k] @ _fit(a[keep], y[keep])
    return pred


def _score(x: np.ndarray, y: np.ndarray, hyp) -> tuple[float, np.ndarray, np.ndarray]:
    a = _design(x, hyp)
    if len(y) <= a.shape[1]:
        return math.inf, a, np.array([])
    loo = _loo(a, y)
    return _smape(loo, y), a, loo


def _complexity(hyp) -> tuple:
    return (len(hyp), sum(float(i) + j for t in hyp for (i, j) in t.values()))


def _select(x: np.ndarray, y: np.ndarray, hypotheses) -> tuple:
    best = None
    for hyp in hypotheses:
        cv, a, loo = _score(x, y, hyp)
        key = (round(cv, 9), _complexity(hyp))
        if best is None or key < best[0]:
            best = (key, hyp, cv, a, loo)
    return best


def single_hypotheses(k: int = 0):
    yield ()
    for i, j in BUILDING_BLOCKS:
        yield ({k: (i, j)},)


def best_single_term(x: np.ndarray, y: np.ndarray) -> dict | None:
    """The best single-parameter term {0: (i, j)} for one parameter (None: constant)."""
    _, hyp, *_ = _select(x.reshape(-1, 1), y, single_hypotheses(0))
    return hyp[0] if hyp else None


def multi_hypotheses(terms: dict[int, tuple]):
    """Sums of products of the single-parameter terms that use every parameter."""
    ks = sorted(terms)
    if not ks:
        yield ()
        return
    products = []
    for r in range(1, len(ks) + 1):
        for combo in itertools.combinations(ks, r):
            products.append({k: terms[k] for k in combo})
    for r in range(1, len(products) + 1):
        for hyp in itertools.combinations(products, r):
            used = set().union(*(t.keys() for t in hyp))
            if used == set(ks):
                yield hyp


def _line(xs: np.ndarray, k: int) -> np.ndarray:
    """Indices of the points on the measurement line of parameter k: the other parameters at
    the combination with the most distinct values of k (ties: the largest values, where a
    parameter's own term stands out most against the constant)."""
    others = [c for c in range(xs.shape[1]) if c != k]
    if not others:
        return np.arange(len(xs))
    groups: dict[tuple, list[int]] = {}
    for idx, row in enumerate(xs):
        groups.setdefault(tuple(row[others]), []).append(idx)
    key = max(groups, key=lambda g: (len({xs[i, k] for i in groups[g]}), list(g)))
    return np.array(groups[key])


def fit(params: list[str], xs, reps: list[list[float]]) -> Model:
    """Fit a model. `xs`: one row of parameter values per measurement point; `reps`: the
    repeated measurements at each point (the model is fitted to their means)."""
    xs = np.asarray(xs, dtype=float).reshape(len(reps), len(params))
    if np.any(xs <= 0):
        from ..errors import TraceqError
        raise TraceqError("model: parameter values must be > 0 (log2 and powers of them are taken)")
    y = np.array([float(np.mean(r)) for r in reps])
    warnings = []
    for k, p in enumerate(params):
        n = len(np.unique(xs[:, k]))
        if n < MIN_POINTS_PER_PARAM:
            warnings.append(f"only {n} values of {p} (Extra-P needs at least {MIN_POINTS_PER_PARAM} per "
                            "parameter for a reliable model)")
    cvs = np.array([np.std(r, ddof=1) / abs(np.mean(r)) for r in reps if len(r) > 1 and np.mean(r)])
    rep_cv = float(np.median(cvs)) if cvs.size else 0.0
    if cvs.size >= 3:
        noisy = [i for i, r in enumerate(reps) if len(r) > 1 and np.mean(r)
                 and np.std(r, ddof=1) / abs(np.mean(r)) > max(3 * rep_cv, 0.05)]
        for i in noisy:
            point = ", ".join(f"{p}={xs[i, k]:g}" for k, p in enumerate(params))
            warnings.append(f"repetitions at {point} disagree beyond the usual spread "
                            f"(CV {100 * np.std(reps[i], ddof=1) / abs(np.mean(reps[i])):.1f} % vs median "
                            f"{100 * rep_cv:.1f} %)")
    if len(params) == 1:
        hyps = list(single_hypotheses(0))
    else:
        singles = {}
        for k in range(len(params)):
            idx = _line(xs, k)
            term = best_single_term(xs[idx, k], y[idx]) if len(idx) >= 3 else None
            if term is not None:
                singles[k] = term[0]
        hyps = list(multi_hypotheses(singles))
    _, hyp, cv, a, loo = _select(xs, y, hyps)
    if not math.isfinite(cv):
        from ..errors import TraceqError
        raise TraceqError(f"model: {len(y)} measurement point(s) are too few to fit and cross-validate a model "
                          "(need at least 3)")
    coef = _fit(a, y)
    pred = a @ coef
    ss_res = float(((y - pred) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    n, kterms = len(y), len(hyp)
    notes = []
    if ss_tot <= 1e-24 * max(1.0, float((y ** 2).sum())):
        r2_adj = None
        notes.append("adj. R²: undefined, the values are constant (no variance to explain)")
    elif n - kterms - 1 <= 0:
        r2_adj = None
        notes.append(f"adj. R²: undefined, {n} points for {kterms} term(s) and a constant")
    else:
        r2_adj = float(1 - (ss_res / ss_tot) * (n - 1) / (n - kterms - 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(y != 0, (loo - y) / y, 0.0)
    rel_sigma = math.sqrt(float(np.mean(rel ** 2)) + rep_cv ** 2)
    terms = [{params[k]: (Fraction(i), j) for k, (i, j) in t.items()} for t in hyp]
    return Model(list(params), terms, float(coef[0]), [float(c) for c in coef[1:]], _smape(pred, y), cv,
                 r2_adj, n, rel_sigma, warnings, notes)


def extrap_json(params: list[str], xs, reps, callpath: str, metric: str) -> dict:
    """The measurements in Extra-P's (newer) JSON input format."""
    return {"parameters": list(params),
            "measurements": {callpath: {metric: [
                {"point": [float(v) for v in row], "values": [float(v) for v in r]}
                for row, r in zip(np.asarray(xs, dtype=float).reshape(len(reps), len(params)), reps)]}}}
