"""Readers of files that carry timings rather than event traces.

    log      traceq's own timer log (JSONL written by `traceq.timer`) -> `regions`
    deep500  Deep500 `print_all_time_stats` text -> `timer_stats`
    mila     mila training / milabench result files -> `metrics`
"""
