"""Conformance of `traceq model` with Extra-P on the same measurements.

    python benchmarks/extrap_compare.py [--reps 5] [--seed 0]

Extra-P (`extrap`, which pins numpy < 2 and pulls a Qt GUI) is installed once into its own
venv under benchmarks/.cache/extrap-venv, as bench.py does for HTA. For each case — a known
law f(p) or f(p, n), multiplicative noise of the given size, REPS repetitions per point —
the same measurements go to traceq (traceq.experiments.model.fit) and to Extra-P (its JSON
input format, read by JsonFileReader and modelled by ModelGenerator with the default
modeler, mean of the repetitions), and the script reports:

    same_terms      both chose the same set of exponents {param: (i, j)} per term
    law_terms       traceq chose the law's own exponents
    pred_diff_pct   |traceq − Extra-P| / Extra-P at held-out points (larger p), %
    err_traceq/err_extrap   |prediction − law| / law at those points, %

The wheel ships no example experiments (checked: no .txt/.json/.jsonl/.extra-p data files
in the extrap package), so only synthetic cases run. Results: benchmarks/extrap_results.json.
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))
CACHE = HERE / ".cache"
VENV = CACHE / "extrap-venv"
SPEC = "extrap==4.2.5"

P = [4, 8, 16, 32, 64]
P_OUT = [128, 256]
N = [10, 20, 40, 80, 160]

CASES = [  # name, params, law, law terms
    ("c+p", ["p"], lambda p: 2.0 + 0.5 * p, [{"p": (1, 0)}]),
    ("c+sqrt(p)", ["p"], lambda p: 1.0 + 0.8 * p ** 0.5, [{"p": (Fraction(1, 2), 0)}]),
    ("c+log2(p)", ["p"], lambda p: 3.0 + 2.0 * math.log2(p), [{"p": (0, 1)}]),
    ("c+p*log2(p)", ["p"], lambda p: 0.01 + 0.00128 * p * math.log2(p), [{"p": (1, 1)}]),
    ("c+p^1.5", ["p"], lambda p: 5.0 + 0.02 * p ** 1.5, [{"p": (Fraction(3, 2), 0)}]),
    ("c+p^2", ["p"], lambda p: 1.0 + 0.001 * p ** 2, [{"p": (2, 0)}]),
    ("c+p^(2/3)*log2(p)^2", ["p"], lambda p: 0.5 + 0.01 * p ** (2 / 3) * math.log2(p) ** 2,
     [{"p": (Fraction(2, 3), 2)}]),
    ("c+p*n", ["p", "n"], lambda p, n: 0.1 + 0.001 * p * n, [{"p": (1, 0), "n": (1, 0)}]),
    ("c+log2(p)+n", ["p", "n"], lambda p, n: 1.0 + 0.5 * math.log2(p) + 0.02 * n, [{"p": (0, 1)}, {"n": (1, 0)}]),
]
NOISE = [0.0, 0.01, 0.05]

WORKER = r'''
import json, sys
from extrap.fileio.file_reader.json_file_reader import JsonFileReader
from extrap.modelers.model_generator import ModelGenerator
from extrap.entities.functions import MultiParameterFunction

src, points = sys.argv[1], json.loads(sys.argv[2])
exp = JsonFileReader().read_experiment(src)
mg = ModelGenerator(exp, modeler="default")
mg.model_all()
(model,) = mg.models.values()
f = model.hypothesis.function

def simple(ct):
    i = j = 0
    for st in ct.simple_terms:
        if st.term_type == "polynomial":
            i = str(st.exponent)
        else:
            j = float(st.exponent)
    return [str(i), j]

terms = []
names = [p.name for p in exp.parameters]
for ct in f.compound_terms:
    if isinstance(f, MultiParameterFunction):
        terms.append({"coefficient": ct.coefficient,
                      "exponents": {names[k]: simple(t) for k, t in ct.parameter_term_pairs}})
    else:
        terms.append({"coefficient": ct.coefficient, "exponents": {names[0]: simple(ct)}})
preds = [float(f.evaluate(pt if len(pt) > 1 else pt[0])) for pt in points]
print(json.dumps({"function": f.to_string(*names), "constant": f.constant_coefficient, "terms": terms,
                  "predictions": preds, "smape": model.hypothesis.SMAPE}))
'''


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def ensure_extrap() -> tuple[Path | None, str]:
    from venvs import ensure_venv

    return ensure_venv(VENV, SPEC, "import extrap; print(extrap.__version__)", log)


def _key(terms: list[dict]) -> frozenset:
    """A set of terms, exponents as exact fractions: {(('n', 1, 0), ('p', 1, 0)), ...}."""
    out = set()
    for t in terms:
        ex = t["exponents"] if "exponents" in t else t
        out.add(tuple(sorted((p, Fraction(str(i)).limit_denominator(12), int(float(j))) for p, (i, j) in ex.items()
                             if Fraction(str(i)) or float(j))))
    return frozenset(x for x in out if x)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    py, version = ensure_extrap()
    if py is None:
        log(f"Extra-P unavailable: {version}")
        sys.exit(1)
    from traceq.experiments import model as pmnf

    rng = np.random.default_rng(args.seed)
    results = []
    tmp = Path(tempfile.mkdtemp())
    for name, params, law, law_terms in CASES:
        for noise in NOISE:
            xs = [[p] for p in P] if len(params) == 1 else [[p, n] for p in P for n in N]
            reps = [[law(*x) * (1 + noise * rng.standard_normal()) for _ in range(args.reps)] for x in xs]
            outs = [[p] for p in P_OUT] if len(params) == 1 else [[p, 40] for p in P_OUT]
            m = pmnf.fit(params, xs, reps)
            tq = [m.evaluate(dict(zip(params, o))) for o in outs]
            src = tmp / f"{name}-{noise}.json".replace("/", "_").replace("^", "").replace("*", "x")
            src.write_text(json.dumps(pmnf.extrap_json(params, xs, reps, "main", "time")))
            r = subprocess.run([str(py), "-c", WORKER, str(src), json.dumps(outs)], capture_output=True, text=True)
            if r.returncode != 0:
                log(f"{name} noise {noise}: Extra-P failed: {r.stderr[-300:]}")
                continue
            ex = json.loads(r.stdout)
            truth = [law(*o) for o in outs]
            tq_terms = [{p: (float(i), j) for p, (i, j) in t.items()} for t in m.terms]
            row = {
                "case": name, "noise": noise, "traceq": m.formula(), "extrap": ex["function"],
                "same_terms": _key([{"exponents": t} for t in tq_terms]) == _key(ex["terms"]),
                "law_terms_traceq": _key([{"exponents": t} for t in tq_terms]) == _key(
                    [{"exponents": {p: (float(i), j) for p, (i, j) in t.items()}} for t in law_terms]),
                "law_terms_extrap": _key(ex["terms"]) == _key(
                    [{"exponents": {p: (float(i), j) for p, (i, j) in t.items()}} for t in law_terms]),
                "pred_diff_pct": max(abs(a - b) / abs(b) * 100 for a, b in zip(tq, ex["predictions"])),
                "err_traceq_pct": max(abs(a - t) / t * 100 for a, t in zip(tq, truth)),
                "err_extrap_pct": max(abs(b - t) / t * 100 for b, t in zip(ex["predictions"], truth)),
            }
            results.append(row)
            log(f"{name:22} noise {noise:4}: same={row['same_terms']!s:5} law(tq)={row['law_terms_traceq']!s:5} "
                f"law(xp)={row['law_terms_extrap']!s:5} pred diff {row['pred_diff_pct']:7.2f} %  "
                f"err tq {row['err_traceq_pct']:6.2f} %  err xp {row['err_extrap_pct']:6.2f} %")
            log(f"    traceq: {row['traceq']}\n    extrap: {row['extrap']}")
    shutil.rmtree(tmp, ignore_errors=True)
    n = len(results)
    summary = {
        "extrap_version": version, "cases": n, "reps": args.reps, "seed": args.seed,
        "same_terms": sum(r["same_terms"] for r in results),
        "law_terms_traceq": sum(r["law_terms_traceq"] for r in results),
        "law_terms_extrap": sum(r["law_terms_extrap"] for r in results),
        "median_pred_diff_pct": float(np.median([r["pred_diff_pct"] for r in results])) if n else None,
        "max_pred_diff_pct": max((r["pred_diff_pct"] for r in results), default=None),
        "median_err_traceq_pct": float(np.median([r["err_traceq_pct"] for r in results])) if n else None,
        "median_err_extrap_pct": float(np.median([r["err_extrap_pct"] for r in results])) if n else None,
    }
    print(json.dumps(summary, indent=1))
    (HERE / "extrap_results.json").write_text(json.dumps({"summary": summary, "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
