"""Run inside the torch-tb-profiler venv: dump the plugin's own numbers for one trace as JSON."""
import json
import math
import sys

from torch_tb_profiler.profiler.data import RunProfileData
from torch_tb_profiler.profiler.event_parser import ProfileRole
from torch_tb_profiler.profiler.memory_parser import MemoryMetrics

ROLES = {"kernel": ProfileRole.Kernel, "memcpy": ProfileRole.Memcpy, "memset": ProfileRole.Memset,
         "communication": ProfileRole.Communication, "runtime": ProfileRole.Runtime,
         "dataloader": ProfileRole.DataLoader, "cpu_exec": ProfileRole.CpuOp, "other": ProfileRole.Other,
         "total": ProfileRole.Total}


def num(x):
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def costs(c):
    return {k: num(c.costs[v]) for k, v in ROLES.items()}


def ops(agg_list, with_input):
    rows = []
    for a in agg_list:
        r = {"name": a.name, "calls": a.calls, "host_total_us": num(a.host_duration),
             "host_self_us": num(a.self_host_duration), "device_total_us": num(a.device_duration),
             "device_self_us": num(a.self_device_duration), "tc_eligible": bool(a.tc_eligible),
             "tc_self_us": num(a.tc_self_duration), "tc_total_us": num(a.tc_total_duration)}
        if with_input:
            r["input_shape"] = a.input_shape
        rows.append(r)
    return rows


def _memory_peak_times(snap, ref):
    """memory.peak_times: per device, the time (µs, as the trace writes it) of the first memory
    record, in the plugin's time order, whose Total Allocated is the device's peak."""
    peaks = snap.get_peak_memory()
    first = {}
    for r in sorted(snap.memory_records, key=lambda r: r.ts):
        key = (r.device_type, r.device_id)
        if key in peaks and key not in first and r.total_allocated == peaks[key]:
            first[key] = r.ts
    ref["memory"]["peak_times"] = [{"device_type": int(k[0]), "device": k[1], "peak_at_us": num(v)}
                                   for k, v in sorted(first.items())]


def main(path, out):
    data = RunProfileData.parse("worker0", "1", path, "/tmp")
    ref = {"tool": "torch-tb-profiler 0.4.3", "steps": [], "avg": costs(data.avg_costs)}
    for name, c in zip(data.steps_names, data.steps_costs):
        ref["steps"].append({"name": name, **costs(c)})
    g = data.gpu_metrics_parser
    ref["gpu"] = [{"device": d, "utilization": num(g.gpu_utilization[d]),
                   "sm_efficiency": num(g.avg_approximated_sm_efficiency_per_device[d]),
                   "occupancy": num(g.avg_occupancy_per_device[d]),
                   "tc_ratio": num(data.tc_ratio[d]) if data.tc_ratio is not None else None}
                  for d in sorted(g.gpu_ids)]
    ref["tc_used_ratio"] = num(data.tc_used_ratio)
    ref["tc_eligible_ops_kernel_ratio"] = num(data.tc_eligible_ops_kernel_ratio)
    ref["recommendations"] = data.recommendations
    ref["operators"] = ops(data.op_list_groupby_name, False)
    ref["operators_by_input"] = ops(data.op_list_groupby_name_input, True)
    ref["kernels"] = []
    if data.kernel_stat is not None:
        for name, r in data.kernel_stat.iterrows():
            ref["kernels"].append({"name": name, "tc_used": bool(r["tc_used"]), "calls": int(r["count"]),
                                   "total_us": num(r["sum"]), "mean_us": num(r["mean"]),
                                   "max_us": num(r["max"]), "min_us": num(r["min"]),
                                   "blocks_per_sm": num(r["blocks_per_sm"]), "occupancy": num(r["occupancy"])})
    ref["kernels_by_op"] = [{"name": k.name, "op": k.op_name, "calls": k.calls, "total_us": num(k.total_duration),
                             "blocks_per_sm": num(k.avg_blocks_per_sm), "occupancy": num(k.avg_occupancy),
                             "tc_used": bool(k.tc_used), "op_tc_eligible": bool(k.op_tc_eligible)}
                            for k in data.kernel_list_groupby_name_op or []]
    snap = data.memory_snapshot
    if snap:
        peaks = snap.get_peak_memory()
        ref["memory"] = {"peaks": [{"device_type": int(k[0]), "device": k[1], "peak_allocated": num(v)}
                                   for k, v in sorted(peaks.items())]}
        reserved = {}
        for r in snap.memory_records:
            if r.total_reserved == r.total_reserved:
                key = (int(r.device_type), r.device_id)
                reserved[key] = max(reserved.get(key, 0), r.total_reserved)
        ref["memory"]["peak_reserved"] = [{"device_type": k[0], "device": k[1], "peak_reserved": num(v)}
                                          for k, v in sorted(reserved.items())]
        stats = snap.get_memory_statistics(data.tid2tree)
        table = []
        for dev, per_op in sorted(stats.items()):
            for op, v in sorted(per_op.items()):
                table.append({"device": dev, "name": op, "calls": v[6],
                              "size_increase": v[MemoryMetrics.IncreaseSize],
                              "self_size_increase": v[MemoryMetrics.SelfIncreaseSize],
                              "allocation_count": v[MemoryMetrics.AllocationCount],
                              "self_allocation_count": v[MemoryMetrics.SelfAllocationCount],
                              "allocation_size": v[MemoryMetrics.AllocationSize],
                              "self_allocation_size": v[MemoryMetrics.SelfAllocationSize]})
        ref["memory"]["operators"] = table
        ref["memory"]["records"] = len(snap.memory_records)
        _memory_peak_times(snap, ref)
    with open(out, "w") as f:
        json.dump(ref, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
