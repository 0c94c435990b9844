"""bench.py's output: one table per part, then the goals table (goal, target, measured,
met?). `report(res)` also stores the HTA ratios and the goals in `res` (results.json)."""
from __future__ import annotations

from bench_measure import fmt, met, print_table

INGEST_SCALES = (1, 8, 16, 32)
HTA_KEYS = ("json", "gz", "rep8")

# the goals (issue 11; DESIGN §7 for the analyses and the report)
GOAL_HTA_1X = 6.0
GOAL_HTA_8X = 20.0
GOAL_RSS_MB = 500.0
GOAL_LINEAR = 1.1        # growth exponent <= 1 (linear), +0.1 for timing noise
GOAL_RSS_EXP = 0.1       # "independent of size": 32x peak RSS <= 1.41x the 1x peak
GOAL_DIR_UTIL = 0.8      # a directory of ranks keeps all cores busy
GOAL_FILE_CORES = 1.2    # one large file uses more than one core
GOAL_NSYS_ROWS_S = 2e6
GOAL_HELP_S = 0.15
GOAL_SMALL_S = 0.4
GOAL_ANALYSIS_S = 1.0
GOAL_REPORT_S, GOAL_REPORT_MB = 10.0, 20.0

LABELS = {"json": "1x original .json", "gz": "1x original .json.gz"}


def label(key: str) -> str:
    return LABELS.get(key) or (f"{key[3:]}x replica" if key.startswith("rep") else key)




def _ratios(res: dict) -> None:
    hta, ing = res.get("hta") or {}, res.get("ingest") or {}
    for k in HTA_KEYS:
        h, t = hta.get(k) or {}, ing.get(k) or {}
        if h.get("wall_s") and t.get("wall_s"):
            t["hta_ratio_wall"] = h["wall_s"] / t["wall_s"]
            t["hta_ratio_cpu"] = h["cpu_s"] / t["cpu_s"] if t.get("cpu_s") else None


def _hta_table(res: dict) -> None:
    hta, ing = res.get("hta") or {}, res.get("ingest") or {}
    if not (hta or any(k in ing for k in HTA_KEYS)):
        return
    rows = []
    for k in HTA_KEYS:
        h, t = hta.get(k) or {}, ing.get(k) or {}
        goal = GOAL_HTA_8X if k == "rep8" else GOAL_HTA_1X
        rows.append([label(k), fmt((t or h).get("json_mb") or res["inputs"][k]["json_mb"], nd=0),
                     fmt(h.get("wall_s")), fmt(h.get("cpu_s")), fmt(h.get("peak_rss_mb"), nd=0),
                     fmt(t.get("wall_s")), fmt(t.get("cpu_s")), fmt(t.get("peak_rss_mb"), nd=0),
                     fmt(t.get("hta_ratio_wall"), "x", 1), fmt(t.get("hta_ratio_cpu"), "x", 1),
                     f">= {goal:.0f}x {met(t.get('hta_ratio_wall'), goal, 'ge')}"])
    print_table(f"1. Kineto ingest vs HTA {res.get('hta_version') or ''} load, whole process, "
                f"{res['statistic']} of the repeats (HTA measured in this run)",
                ["input", "JSON MB", "HTA s", "HTA cpu s", "HTA MB", "traceq s", "traceq cpu s",
                 "traceq MB", "HTA/traceq", "(cpu)", "goal"], rows)
    if (res.get("hta") or {}).get("error"):
        print(f"  HTA unavailable: {res['hta']['error']}")


def _growth_table(res: dict) -> None:
    ing = res.get("ingest") or {}
    reps = sorted((k for k in ing if k.startswith("rep")), key=lambda s: int(s[3:]))
    if not reps:
        return
    rows = []
    for k in reps:
        t = ing[k]
        rows.append([label(k), fmt(t.get("json_mb"), nd=0), fmt(t.get("wall_s")),
                     fmt(t.get("cpu_s")), fmt(t.get("peak_rss_mb"), nd=0),
                     f"<= {GOAL_RSS_MB:.0f} {met(t.get('peak_rss_mb'), GOAL_RSS_MB)}",
                     "ok" if t.get("ok") else "ERROR " + t.get("error", "")[-200:].strip()])
    g = res.get("ingest_growth") or {}
    print_table("2. traceq ingest at growing size: wall, CPU, peak RSS (1 MB = 10^6 bytes)",
                ["input", "JSON MB", "wall s", "cpu s", "peak MB", "RSS goal", "status"], rows)
    if g:
        print(f"  growth exponents {g['scales'][0]}x->{g['scales'][-1]}x (log-log slope): "
              f"time {fmt(g.get('wall_exponent'))} (cpu {fmt(g.get('cpu_exponent'))}), "
              f"peak RSS {fmt(g.get('rss_exponent'))}")


def _decode_table(res: dict) -> None:
    dec = res.get("decode") or {}
    if not dec:
        return
    rows = []
    for k, d in dec.items():
        t = (res.get("ingest") or {}).get(k) or {}
        for mode in ("generic", "typed"):
            m = d.get(mode) or {}
            rows.append([label(k), mode, fmt(m.get("decode_s"), nd=3),
                         fmt(m.get("mb_per_s"), nd=0), fmt(m.get("peak_rss_mb"), nd=0),
                         fmt(t.get("wall_s")), fmt(m.get("traceq_wall_multiple"), "x", 1),
                         fmt(m.get("traceq_cpu_multiple"), "x", 1)])
    print_table("3. The limit: msgspec decode of the same bytes, one core, timed inside a fresh "
                "process (generic = msgspec.json.decode, typed = structs of traceq's fields)",
                ["input", "decode", "decode s", "MB/s", "peak MB", "traceq s",
                 "traceq/decode (wall)", "(cpu)"], rows)


def _cores_table(res: dict) -> None:
    c = res.get("cores") or {}
    if not c:
        return
    rows = []
    d = c.get("rank_dir") or {}
    if d:
        rows.append([f"directory of {d.get('files')} rank files (1x each)",
                     fmt(d.get("json_mb"), nd=0), fmt(d.get("wall_s")), fmt(d.get("cpu_s")),
                     fmt(d.get("cores_used")), fmt(100 * d["utilisation"], " %", 0)
                     if d.get("utilisation") is not None else "n/a",
                     fmt(d.get("peak_rss_mb"), nd=0),
                     f"{fmt(d.get('speedup_vs_serial'), 'x', 2)} vs {d.get('files')} x 1x file"])
    for k, v in c.items():
        if k.startswith("one_file_"):
            rows.append([f"one file, {k[9:]}", fmt(v.get("json_mb"), nd=0), fmt(v.get("wall_s")),
                         fmt(v.get("cpu_s")), fmt(v.get("cores_used")),
                         fmt(100 * v["utilisation"], " %", 0)
                         if v.get("utilisation") is not None else "n/a", "", ""])
    print_table(f"4. Cores: CPU (user+sys of the process tree) / wall / {c.get('cpus')} cores",
                ["input", "JSON MB", "wall s", "cpu s", "cores used", "utilisation", "peak MB",
                 "speed-up"], rows)


def _nsys_line(res: dict) -> None:
    n = res.get("nsys")
    if not n:
        return
    if n.get("error") and not n.get("input"):
        print(f"\n5. nsys ingest: {n['error']}")
        return
    print(f"\n5. nsys ingest: {n['input']['total_rows']:,} activity rows in the export "
          f"({n['input']['bytes'] / 1e6:.0f} MB), wall {fmt(n.get('wall_s'))} s "
          f"(cpu {fmt(n.get('cpu_s'))} s), peak {fmt(n.get('peak_rss_mb'), nd=0)} MB; "
          f"rows in the store {n.get('rows_ingested')}: {fmt(n.get('rows_per_s'), nd=0)} rows/s "
          f"(goal >= {GOAL_NSYS_ROWS_S / 1e6:.0f} M: "
          f"{met(n.get('rows_per_s'), GOAL_NSYS_ROWS_S, 'ge')})")
    lim = n.get("limit") or {}
    if lim.get("read_s"):
        print(f"   the limit: the SQLite reads alone (ADBC into Arrow, the same chunks on {lim.get('threads')} "
              f"threads, no translation or Parquet, timed inside the process) {fmt(lim['read_s'])} s = "
              f"{fmt(lim.get('rows_per_s'), nd=0)} rows/s, plus {fmt(lim.get('import_s'))} s of imports; "
              f"traceq's whole process is {fmt(lim.get('traceq_wall_multiple'), 'x')} of the reads")
    g = res.get("nsys_growth") or {}
    if g.get("sizes"):
        sizes = " / ".join(f"{d['rows'] / 1e6:.1f} M rows {d['peak_rss_mb']:.0f} MB ({d['wall_s']:.2f} s)"
                           for d in g["sizes"])
        print(f"   peak RSS as the export grows: {sizes}; growth exponent {fmt(g.get('rss_exponent'))} "
              f"(time {fmt(g.get('wall_exponent'))})" + (f"; ERROR {g['error']}" if g.get("error") else ""))


def _startup_table(res: dict) -> None:
    st = res.get("startup") or {}
    if not st:
        return
    rows = [["traceq --help", fmt(st.get("help_s"), nd=3),
             f"< {GOAL_HELP_S} {met(st.get('help_s'), GOAL_HELP_S)}"]]
    for name, v in (st.get("small") or {}).items():
        rows.append([f"traceq {name} (small run)", fmt(v, nd=3),
                     f"< {GOAL_SMALL_S} {met(v, GOAL_SMALL_S)}"])
    rows.append(["median of the analyses", fmt(st.get("small_median_s"), nd=3),
                 f"< {GOAL_SMALL_S} {met(st.get('small_median_s'), GOAL_SMALL_S)}"])
    for name, err in (st.get("errors") or {}).items():
        rows.append([f"traceq {name}", "ERROR", err.strip().splitlines()[-1][:80] if err else ""])
    print_table(f"6. Start-up, whole process, median wall s ({st.get('source')}; "
                f"small run: {st.get('small_run', 'the 1x original')})",
                ["command", "wall s", "goal"], rows)


def _analyses_table(res: dict) -> None:
    an = res.get("analyses") or {}
    scales = an.get("scales") or []
    if not an.get("commands"):
        return
    rows = []
    for name in an["commands"]:
        d = an.get(name) or {}
        cells = [fmt((d.get(n) or {}).get("time_s"), nd=3) if (d.get(n) or {}).get("ok")
                 else ("ERR" if d.get(n) else "-") for n in scales]
        t8 = (d.get(8) or {}).get("time_s")
        goal = GOAL_REPORT_S if name == "report" else GOAL_ANALYSIS_S
        rows.append([name, "CLI"] + cells + [fmt(d.get("exponent")), f"< {goal:g} s "
                                             f"{met(t8, goal)}"])
        if any((d.get(n) or {}).get("cold_time_s") is not None for n in scales):
            ccells = [fmt((d.get(n) or {}).get("cold_time_s"), nd=3) for n in scales]
            c8 = (d.get(8) or {}).get("cold_time_s")
            rows.append(["", "CLI, cold"] + ccells + ["", f"< {goal:g} s {met(c8, goal)}"])
        if any((d.get(n) or {}).get("api") for n in scales):
            acells = [fmt(((d.get(n) or {}).get("api") or {}).get("api_s"), nd=3)
                      for n in scales]
            a8 = ((d.get(8) or {}).get("api") or {}).get("api_s")
            rows.append(["", "API"] + acells + [fmt(d.get("api_exponent")),
                                                f"< {goal:g} s {met(a8, goal)}"])
    print_table("7. Analyses after ingest, s. CLI = whole-process wall minus `traceq --help` "
                f"({fmt(an.get('subtracted_startup_s'), nd=3)} s); CLI, cold = the first analysis after "
                "ingest, before the run's findings are kept beside the store (the repeats read them); "
                "API = the Python call alone, libraries imported",
                ["command", "how"] + [f"{n}x" for n in scales] + ["exponent", "at 8x"], rows)
    rep = (an.get("report") or {}).get(8) or {}
    if rep.get("bytes"):
        print(f"  report of the 8x run: HTML {rep['bytes'] / 1e6:.1f} MB "
              f"(< {GOAL_REPORT_MB:g} MB {met(rep['bytes'] / 1e6, GOAL_REPORT_MB)})")


def goals(res: dict) -> list[dict]:
    """Every goal, its target, the measured value and whether it is met (None: not measured)."""
    out = []

    def add(goal, target, value, measured, ok):
        out.append({"goal": goal, "target": target, "value": value,
                    "measured": measured if value is not None else "not measured",
                    "met": None if value is None else bool(ok)})

    ing = res.get("ingest") or {}
    for k in HTA_KEYS:
        g = GOAL_HTA_8X if k == "rep8" else GOAL_HTA_1X
        t = ing.get(k) or {}
        h = (res.get("hta") or {}).get(k) or {}
        r = t.get("hta_ratio_wall")
        add(f"Kineto ingest vs HTA load, {label(k)}", f">= {g:g}x", r,
            f"{fmt(r, 'x', 1)} ({fmt(h.get('wall_s'))} s / {fmt(t.get('wall_s'))} s)",
            r is not None and r >= g)
    for n in INGEST_SCALES:
        t = ing.get(f"rep{n}") or {}
        v = t.get("peak_rss_mb") if t.get("ok") else None
        size = f" ({t['json_mb']:.0f} MB JSON)" if t.get("json_mb") else ""
        add(f"peak RSS of ingest, {n}x{size}",
            f"<= {GOAL_RSS_MB:g} MB", v, f"{fmt(v, ' MB', 0)}", v is not None and v <= GOAL_RSS_MB)
    g = res.get("ingest_growth") or {}
    span = f"{g['scales'][0]}x->{g['scales'][-1]}x" if g else "1x->32x"
    v = g.get("rss_exponent")
    add(f"peak RSS growth exponent {span}", f"<= {GOAL_RSS_EXP:g} (size-independent)", v,
        fmt(v), v is not None and v <= GOAL_RSS_EXP)
    v = g.get("wall_exponent")
    add(f"ingest time growth exponent {span}", f"<= 1 (+{GOAL_LINEAR - 1:.1f} noise)", v,
        fmt(v), v is not None and v <= GOAL_LINEAR)
    for k, d in (res.get("decode") or {}).items():
        m = (d.get("generic") or {}).get("traceq_wall_multiple")
        mt = (d.get("typed") or {}).get("traceq_wall_multiple")
        out.append({"goal": f"traceq ingest / msgspec decode, {label(k)}", "target": "reported",
                    "value": m, "measured": f"{fmt(m, 'x', 1)} of generic, {fmt(mt, 'x', 1)} of typed",
                    "met": None})
    c = res.get("cores") or {}
    d = c.get("rank_dir") or {}
    v = d.get("utilisation")
    add(f"directory of {d.get('files', 8)} rank files: CPU utilisation",
        f">= {GOAL_DIR_UTIL:.0%} of {c.get('cpus', 'all')} cores", v,
        f"{fmt(100 * v if v is not None else None, ' %', 0)} ({fmt(d.get('cores_used'))} cores, "
        f"{fmt(d.get('speedup_vs_serial'), 'x')} vs serial)", v is not None and v >= GOAL_DIR_UTIL)
    f8 = c.get("one_file_8x") or {}
    v = f8.get("cores_used")
    add("one 8x file: cores used (CPU / wall)", f">= {GOAL_FILE_CORES:g} cores", v,
        f"{fmt(v)} cores", v is not None and v >= GOAL_FILE_CORES)
    n = res.get("nsys") or {}
    v = n.get("rows_per_s")
    add("nsys ingest", f">= {GOAL_NSYS_ROWS_S / 1e6:g} M rows/s", v, f"{fmt(v / 1e6 if v else None, ' M rows/s')}",
        v is not None and v >= GOAL_NSYS_ROWS_S)
    lim = n.get("limit") or {}
    v = lim.get("traceq_wall_multiple")
    out.append({"goal": "nsys ingest / the SQLite reads alone", "target": "reported", "value": v,
                "measured": f"{fmt(v, 'x')} (reads {fmt(lim.get('read_s'), ' s')}, "
                            f"{fmt((lim.get('rows_per_s') or 0) / 1e6 or None, ' M rows/s')})", "met": None})
    g = res.get("nsys_growth") or {}
    if g.get("sizes"):
        v = g.get("rss_exponent")
        out.append({"goal": "nsys ingest: peak RSS as the export grows", "target": "reported", "value": v,
                     "measured": " / ".join(f"{d['peak_rss_mb']:.0f}" for d in g["sizes"]) + " MB at "
                                 + " / ".join(f"{d['rows'] / 1e6:.1f}" for d in g["sizes"])
                                 + f" M rows (exponent {fmt(v)})", "met": None})
    st = res.get("startup") or {}
    v = st.get("help_s")
    add("traceq --help, whole process", f"< {GOAL_HELP_S} s", v, fmt(v, " s", 3),
        v is not None and v < GOAL_HELP_S)
    v = st.get("small_median_s")
    worst = max((st.get("small") or {}).items(), key=lambda kv: kv[1], default=(None, None))
    add("analysis on a small run, whole process (median over commands)",
        f"< {GOAL_SMALL_S} s", v, f"{fmt(v, ' s', 3)} (slowest: {worst[0]} {fmt(worst[1], ' s', 3)})",
        v is not None and v < GOAL_SMALL_S)
    an = res.get("analyses") or {}
    cmds = [c for c in an.get("commands") or [] if c != "report"]
    at8 = {c: ((an.get(c) or {}).get(8) or {}).get("time_s") for c in cmds}
    if cmds and all(v is not None for v in at8.values()):
        worst = max(at8, key=at8.get)
        add("every analysis on the 8x run after ingest (CLI wall - start-up)",
            f"< {GOAL_ANALYSIS_S:g} s each", at8[worst],
            f"slowest {worst} {at8[worst]:.3f} s", at8[worst] < GOAL_ANALYSIS_S)
    else:
        add("every analysis on the 8x run after ingest", f"< {GOAL_ANALYSIS_S:g} s each",
            None, "", False)
    cold8 = {c: ((an.get(c) or {}).get(8) or {}).get("cold_time_s") for c in cmds}
    cold8 = {c: v for c, v in cold8.items() if v is not None}
    if cold8:
        worst = max(cold8, key=cold8.get)
        add("the first analysis on the 8x run after ingest, cold (computes and keeps the run's findings)",
            f"< {GOAL_ANALYSIS_S:g} s each", cold8[worst], f"slowest {worst} {cold8[worst]:.3f} s",
            cold8[worst] < GOAL_ANALYSIS_S)
    exps = {c: (an.get(c) or {}).get("api_exponent", (an.get(c) or {}).get("exponent"))
            for c in cmds}
    if cmds and all(v is not None for v in exps.values()):
        worst = max(exps, key=exps.get)
        sc = an.get("scales") or []
        add(f"analysis growth exponent {sc[0]}x->{sc[-1]}x (API where it exists)",
            f"<= 1 (+{GOAL_LINEAR - 1:.1f} noise)", exps[worst],
            f"largest: {worst} {exps[worst]:.2f}", exps[worst] <= GOAL_LINEAR)
    else:
        add("analysis growth exponent", "<= 1", None, "", False)
    rep = (an.get("report") or {}).get(8) or {}
    v = rep.get("wall_s") if rep.get("ok") else None
    mb = (rep.get("bytes") or 0) / 1e6
    add("traceq report of the 8x run, whole process", f"< {GOAL_REPORT_S:g} s and "
        f"< {GOAL_REPORT_MB:g} MB", v, f"{fmt(v, ' s')}, {mb:.1f} MB",
        v is not None and v < GOAL_REPORT_S and mb < GOAL_REPORT_MB)
    return out


def report(res: dict) -> None:
    _ratios(res)
    m = res["machine"]
    print(f"\ntraceq benchmark, commit {res['git']['commit'][:12]}"
          f"{' (dirty)' if res['git']['dirty'] else ''}, {res['started']}; {m['cpus']} CPUs "
          f"({m['cpu_model']}), {m['mem_total_gb']} GB; load average at start "
          f"{res['load_avg_start']}, at end {res['load_avg_end']} (shared machine: other work "
          f"runs beside it); headline = {res['statistic']} of the repeats"
          + ("; QUICK run" if res.get("quick") else ""))
    busy = max(res["load_avg_start"][0], res["load_avg_end"][0])
    if busy > (m["cpus"] or 1):
        print(f"WARNING: the machine was busy (1-min load average up to {busy:.1f} on "
              f"{m['cpus']} CPUs): wall times, ratios of walls and core utilisation are "
              "distorted; the CPU-time columns are the steadier view")
    _hta_table(res)
    _growth_table(res)
    _decode_table(res)
    _cores_table(res)
    _nsys_line(res)
    _startup_table(res)
    _analyses_table(res)
    res["goals"] = gs = goals(res)
    rows = [[g["goal"], g["target"], g["measured"],
             {True: "met", False: "NOT met", None: "-"}[g["met"]]] for g in gs]
    print_table("Goals (issue 11; DESIGN §7)", ["goal", "target", "measured", "met?"], rows)


def markdown(res: dict) -> str:
    """The goals table in Markdown (for docs/performance.md)."""
    _ratios(res)
    lines = ["| goal | target | measured | met? |", "|---|---|---|---|"]
    for g in goals(res):
        lines.append(f"| {g['goal']} | {g['target']} | {g['measured']} | "
                     f"{ {True: 'met', False: '**not met**', None: '-'}[g['met']]} |")
    return "\n".join(lines)


def _int_keys(o):
    """results.json has the scales as string keys; the tables index them by int."""
    if isinstance(o, dict):
        return {(int(k) if isinstance(k, str) and k.isdigit() else k): _int_keys(v)
                for k, v in o.items()}
    if isinstance(o, list):
        return [_int_keys(v) for v in o]
    return o


if __name__ == "__main__":  # the tables (or --markdown: the goals) of a saved run
    import argparse
    import json
    from pathlib import Path

    ap = argparse.ArgumentParser(description="print the tables of a saved benchmark run")
    ap.add_argument("results", nargs="?", type=Path,
                    default=Path(__file__).resolve().parent / "results.json")
    ap.add_argument("--markdown", action="store_true", help="only the goals, as Markdown")
    a = ap.parse_args()
    saved = _int_keys(json.loads(a.results.read_text()))
    print(markdown(saved) if a.markdown else "", end="\n" if a.markdown else "")
    if not a.markdown:
        report(saved)
