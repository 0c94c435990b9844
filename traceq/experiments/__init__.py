"""Many runs: runs with parameters, per-run metrics, `compare`, `model` and `check`.

    params   parameters from file names (Extra-Deep pattern, user regex) and experiment trees
    stats    robust statistics shared by the commands (IQR filter, trimmed mean, sd %)
    metrics  per-run metrics (queries/run_metrics*.sql and the imported `metrics` table)
    compare  metric x run with spread over repetitions and change against a baseline
    model    Extra-P performance model normal form, hypothesis search with cross-validation
    check    the mila-style statistical gate against targets (TOML), JUnit XML
"""
