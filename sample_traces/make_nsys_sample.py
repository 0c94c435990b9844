"""Write `nsys_sample.sqlite`: a tiny Nsight Systems export in the schema 3.x layout.

    python sample_traces/make_nsys_sample.py [OUT.sqlite]

The tables and columns are those of a real `nsys export --type sqlite` (3.16, taken from
`../shared/traces/nsys/llama3-inference/demo.sqlite`); only the rows are made up. The run is
three training steps of one process on one GPU (stream 7):

    epoch                              NVTX start/end range around everything
      step                             NVTX push/pop range, once per step
        load_batch  (domain sample.io) pageable and pinned H2D copies (cudaMemcpyAsync)
        forward                        nchwToNhwc, conv, nhwcToNchw, gemm, add
        backward                       FillFunctor zero kernel, cudaMemsetAsync, add
        optimizer                      fused Adam (multi_tensor_apply_kernel)
      loss copy (cudaMemcpy DtoH) and cudaStreamSynchronize at the end of each step
    prefetch                           NVTX range on a second thread, once per step

Every GPU op's duration is in DURATIONS_NS below, so the per-name statistics can be worked
out by hand: for example `conv` runs 40_000, 50_000, 60_000 ns -> count 3, total 150_000,
mean = median = 50_000, min 40_000, max 60_000, sample stddev 10_000. Output is
deterministic: the same rows, in the same order, on every run.
"""
from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

STEPS = 3

# Durations of the GPU ops in ns, in launch order (one per step; `add` runs twice per step).
DURATIONS_NS = {
    "h2d_pageable": [390_000, 400_000, 410_000],   # [CUDA memcpy Host-to-Device], Pageable -> Device
    "h2d_pinned":   [150_000, 160_000, 170_000],   # [CUDA memcpy Host-to-Device], Pinned -> Device
    "nchw_to_nhwc": [12_000, 14_000, 16_000],
    "conv":         [40_000, 50_000, 60_000],
    "nhwc_to_nchw": [8_000, 9_000, 10_000],
    "gemm":         [30_000, 31_000, 32_000],
    "add":          [8_000, 2_000, 6_000, 4_000, 5_000, 5_000],
    "zero_fill":    [1_500, 2_000, 2_500],
    "grad_memset":  [1_000, 1_200, 1_400],         # [CUDA memset]
    "adam":         [20_000, 21_000, 22_000],
    "loss_d2h":     [1_800, 2_000, 2_200],         # [CUDA memcpy Device-to-Host], Device -> Pageable
}

# Kernels: key -> (demangled name, short name, grid xyz, block xyz, registers per thread).
KERNELS = {
    "nchw_to_nhwc": ("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>"
                     "(cudnn::ops::nchw2nhwc_params_t<float>, const float *, float *)",
                     "nchwToNhwcKernel", (256, 1, 1), (256, 1, 1), 32),
    "conv": ("void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>"
             "(int, int, int, const float *, int, float *, const float *, kernel_conv_params, unsigned long long, "
             "int, float, float, int, const float *, const float *, bool, int, int)",
             "implicit_convolve_sgemm", (196, 1, 4), (128, 1, 1), 126),
    "nhwc_to_nchw": ("void cudnn::ops::nhwcToNchwKernel<float, float, float, true, false, (cudnnKernelDataType_t)0>"
                     "(cudnn::ops::nhwc2nchw_params_t<float>, const float *, float *)",
                     "nhwcToNchwKernel", (256, 1, 1), (256, 1, 1), 32),
    "gemm": ("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn", (8, 16, 1), (128, 1, 1), 122),
    "add": ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "at::detail::Array<char *, 3>>(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char *, 3>)",
            "vectorized_elementwise_kernel", (1024, 1, 1), (128, 1, 1), 26),
    "zero_fill": ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
                  "at::detail::Array<char *, 1>>(int, at::native::FillFunctor<float>, at::detail::Array<char *, 1>)",
                  "vectorized_elementwise_kernel", (512, 1, 1), (128, 1, 1), 16),
    "adam": ("void at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::TensorListMetadata<4>, "
             "at::native::<unnamed>::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double *, "
             "double, double, double, double, double, bool, float *, float *>(T1, T2, T3...)",
             "multi_tensor_apply_kernel", (320, 1, 1), (512, 1, 1), 72),
}

# Memory ops: key -> (API, bytes, copyKind, srcKind, dstKind); memset has no kinds.
MEMOPS = {
    "h2d_pageable": ("cudaMemcpyAsync_v3020", 4 << 20, 1, 0, 2),
    "h2d_pinned": ("cudaMemcpyAsync_v3020", 4 << 20, 1, 1, 2),
    "loss_d2h": ("cudaMemcpy_v3020", 4, 2, 2, 0),
    "grad_memset": ("cudaMemsetAsync_v3020", 1 << 20, None, None, None),
}

# One step: (NVTX range, its domain or None, GPU ops launched inside it, in order).
STEP_PROGRAM = [
    ("load_batch", "sample.io", ["h2d_pageable", "h2d_pinned"]),
    ("forward", None, ["nchw_to_nhwc", "conv", "nhwc_to_nchw", "gemm", "add"]),
    ("backward", None, ["zero_fill", "grad_memset", "add"]),
    ("optimizer", None, ["adam"]),
]

# Host timing (ns): API call lengths, the gap between calls, the idle time between steps.
API_NS = {"cudaLaunchKernel_v7000": 5_000, "cudaMemcpyAsync_v3020": 8_000, "cudaMemsetAsync_v3020": 4_000}
GAP_NS = 1_000
STEP_GAP_NS = 100_000
PREFETCH_NS = 300_000

PID, MAIN_TID, WORKER_TID = 4242, 4242, 4250
HW_VM = 1 << 48                                     # the VM id bits of a real globalTid
GLOBAL_PID = HW_VM | PID << 24
MAIN = GLOBAL_PID | MAIN_TID
WORKER = GLOBAL_PID | WORKER_TID
DEVICE, CONTEXT, STREAM = 0, 1, 7

SCHEMA = {
    "StringIds": "id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL",
    "META_DATA_EXPORT": "name TEXT NOT NULL, value TEXT",
    "ANALYSIS_DETAILS": "globalVid INTEGER NOT NULL, duration INTEGER NOT NULL, startTime INTEGER NOT NULL, "
                        "stopTime INTEGER NOT NULL",
    "TARGET_INFO_GPU": "vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT, isDiscrete INTEGER, "
                       "l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER, "
                       "smCount INTEGER, pwGpuId INTEGER, uuid TEXT, luid INTEGER, chipName TEXT, cuDevice INTEGER, "
                       "ctxswDevPath TEXT, ctrlDevPath TEXT, revision INTEGER, nodeMask INTEGER, "
                       "constantMemory INTEGER, maxIPC INTEGER, maxRegistersPerBlock INTEGER, "
                       "maxShmemPerBlock INTEGER, maxShmemPerBlockOptin INTEGER, maxShmemPerSm INTEGER, "
                       "maxRegistersPerSm INTEGER, threadsPerWarp INTEGER, asyncEngines INTEGER, "
                       "maxWarpsPerSm INTEGER, maxBlocksPerSm INTEGER, maxThreadsPerBlock INTEGER, "
                       "maxBlockDimX INTEGER, maxBlockDimY INTEGER, maxBlockDimZ INTEGER, maxGridDimX INTEGER, "
                       "maxGridDimY INTEGER, maxGridDimZ INTEGER, computeMajor INTEGER, computeMinor INTEGER, "
                       "smMajor INTEGER, smMinor INTEGER",
    "TARGET_INFO_SESSION_START_TIME": "utcEpochNs INTEGER, utcTime TEXT, localTime TEXT",
    "TARGET_INFO_SYSTEM_ENV": "globalVid INTEGER, devStateName TEXT NOT NULL, name TEXT NOT NULL, "
                              "nameEnum INTEGER NOT NULL, value TEXT NOT NULL",
    "ENUM_NSYS_EVENT_CLASS": "id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT",
    "ENUM_CUDA_MEMCPY_OPER": "id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT",
    "ENUM_CUDA_MEM_KIND": "id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT",
    "ENUM_CUPTI_SYNC_TYPE": "id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT",
    "PROCESSES": "globalPid INTEGER, pid INTEGER, name TEXT",
    "ThreadNames": "nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER",
    "CUPTI_ACTIVITY_KIND_KERNEL": "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
                                  "contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, "
                                  "correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL, "
                                  "shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, "
                                  "cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, "
                                  "gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, "
                                  "blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, "
                                  "staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, "
                                  "localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, "
                                  "gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER, "
                                  "sharedMemoryLimitConfig INTEGER",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
                                  "contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, "
                                  "correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, "
                                  "copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, "
                                  "dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, "
                                  "dstContextId INTEGER, migrationCause INTEGER, graphNodeId INTEGER, "
                                  "virtualAddress INTEGER",
    "CUPTI_ACTIVITY_KIND_MEMSET": "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
                                  "contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, "
                                  "correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL, "
                                  "bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, "
                                   "globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, "
                                   "returnValue INTEGER NOT NULL, callchainId INTEGER",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
                                           "contextId INTEGER NOT NULL, greenContextId INTEGER, "
                                           "streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
                                           "syncType INTEGER NOT NULL, eventId INTEGER NOT NULL",
    "NVTX_EVENTS": "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, "
                   "category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, "
                   "textId INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, "
                   "uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT, "
                   "binaryData TEXT",
}

ENUMS = {
    "ENUM_NSYS_EVENT_CLASS": [(0, "TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA runtime"),
                              (1, "TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA driver")],
    "ENUM_CUDA_MEMCPY_OPER": [(i, "CUDA_MEMCPY_KIND_" + n, label) for i, (n, label) in enumerate([
        ("UNKNOWN", "Unknown"), ("HTOD", "Host-to-Device"), ("DTOH", "Device-to-Host"), ("HTOA", "Host-to-Array"),
        ("ATOH", "Array-to-Host"), ("ATOA", "Array-to-Array"), ("ATOD", "Array-to-Device"),
        ("DTOA", "Device-to-Array"), ("DTOD", "Device-to-Device"), ("HTOH", "Host-to-Host"),
        ("PTOP", "Peer-to-Peer"), ("UVM_HTOD", "Unified Host-to-Device"), ("UVM_DTOH", "Unified Device-to-Host"),
        ("UVM_DTOD", "Unified Device-to-Device")])],
    "ENUM_CUDA_MEM_KIND": [(i, "CUDA_MEMOPR_MEMORY_KIND_" + n, label) for i, (n, label) in enumerate([
        ("PAGEABLE", "Pageable"), ("PINNED", "Pinned"), ("DEVICE", "Device"), ("ARRAY", "Array"),
        ("MANAGED", "Managed"), ("DEVICE_STATIC", "Device Static"), ("MANAGED_STATIC", "Managed Static"),
        ("UNKNOWN", "Unknown")])],
    "ENUM_CUPTI_SYNC_TYPE": [(i, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_" + n, label) for i, (n, label) in enumerate([
        ("UNKNOWN", "Unknown"), ("EVENT_SYNCHRONIZE", "Event sync"), ("STREAM_WAIT_EVENT", "Stream wait sync"),
        ("STREAM_SYNCHRONIZE", "Stream sync"), ("CONTEXT_SYNCHRONIZE", "Context sync")])],
}

PUSH_POP, START_END, DOMAIN_CREATE = 59, 60, 75


class Recorder:
    """Lays the program out in time and collects the rows of each table."""

    def __init__(self):
        self.rows: dict[str, list[tuple]] = {t: [] for t in SCHEMA}
        self.strings: dict[str, int] = {}
        self.durations = {key: iter(d) for key, d in DURATIONS_NS.items()}
        self.correlation = 100
        self.now = 1_000_000          # host clock
        self.gpu_free = 0             # when stream 7 finishes its queued work

    def string(self, value: str) -> int:
        if value not in self.strings:
            self.strings[value] = len(self.strings) + 1
            self.rows["StringIds"].append((self.strings[value], value))
        return self.strings[value]

    def api(self, name: str, duration: int, event_class: int = 0, thread: int = MAIN) -> tuple[int, int, int]:
        """A runtime/driver call starting now; returns (start, end, correlation id)."""
        self.correlation += 1
        start, end = self.now, self.now + duration
        self.rows["CUPTI_ACTIVITY_KIND_RUNTIME"].append(
            (start, end, event_class, thread, self.correlation, self.string(name), 0, None))
        self.now = end + GAP_NS
        return start, end, self.correlation

    def gpu_op(self, key: str) -> None:
        """Launch the next instance of `key` on stream 7."""
        duration = next(self.durations[key])
        api_name = "cudaLaunchKernel_v7000" if key in KERNELS else MEMOPS[key][0]
        if api_name == "cudaMemcpy_v3020":      # blocking: returns 1 us after the copy ran
            start = max(self.gpu_free, self.now + 2_000)
            _, _, corr = self.api(api_name, start + duration + 1_000 - self.now)
        else:                                   # asynchronous: runs once the call returned
            _, api_end, corr = self.api(api_name, API_NS[api_name])
            start = max(self.gpu_free, api_end)
        end = start + duration
        self.gpu_free = end
        common = (start, end, DEVICE, CONTEXT, None, STREAM, corr, GLOBAL_PID)
        if key in KERNELS:
            name, short, grid, block, regs = KERNELS[key]
            self.rows["CUPTI_ACTIVITY_KIND_KERNEL"].append(
                common + (self.string(name), self.string(short), None, 0, 0, regs, *grid, *block,
                          0, 0, 0, 0, corr, 0, None, 0))
            return
        _, nbytes, copy_kind, src, dst = MEMOPS[key]
        if copy_kind is None:
            self.rows["CUPTI_ACTIVITY_KIND_MEMSET"].append(common + (0, nbytes, None, 2))
        else:
            self.rows["CUPTI_ACTIVITY_KIND_MEMCPY"].append(
                common + (nbytes, copy_kind, None, src, dst, DEVICE, CONTEXT, DEVICE, CONTEXT, None, None, None))

    def stream_synchronize(self) -> None:
        api_start = self.now
        _, api_end, corr = self.api("cudaStreamSynchronize_v3020", max(1_000, self.gpu_free + 1_000 - api_start))
        self.rows["CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"].append(
            (api_start, api_end, DEVICE, CONTEXT, None, STREAM, corr, GLOBAL_PID, 3, 0))

    def nvtx(self, start: int, end: int, name: str, event_type: int = PUSH_POP, domain: int = 0,
             thread: int = MAIN, registered: bool = False) -> None:
        text, text_id = (None, self.string(name)) if registered else (name, None)
        self.rows["NVTX_EVENTS"].append((start, end, event_type, None, None, None, text, thread, None, text_id,
                                         domain, None, None, None, None, None, None, None, None, None))


def record() -> Recorder:
    r = Recorder()
    r.api("cuModuleGetLoadingMode", 1_500, event_class=1)
    r.api("cudaGetDeviceProperties_v2_v12000", 20_000)
    epoch_start = r.now
    r.nvtx(r.now, None, "sample.io", DOMAIN_CREATE, domain=1)
    r.now += 10_000
    for _ in range(STEPS):
        step_start = r.now
        r.nvtx(step_start + 10_000, step_start + 10_000 + PREFETCH_NS, "prefetch", thread=WORKER)
        r.now += 500
        for range_name, domain, ops in STEP_PROGRAM:
            range_start = r.now
            r.now += 500
            for key in ops:
                r.gpu_op(key)
            r.nvtx(range_start, r.now, range_name, domain=1 if domain else 0, registered=bool(domain))
            r.now += 500
        r.gpu_op("loss_d2h")
        r.stream_synchronize()
        r.nvtx(step_start, r.now, "step")
        r.now += STEP_GAP_NS
    r.nvtx(epoch_start, r.now, "epoch", START_END)
    # nsys writes rows sorted by start time within each table.
    r.rows["NVTX_EVENTS"].sort(key=lambda row: (row[0], -(row[1] or 0)))
    r.rows["CUPTI_ACTIVITY_KIND_RUNTIME"].sort(key=lambda row: row[0])
    for thread, name in ((MAIN, "python"), (WORKER, "pt_data_worker")):
        r.rows["ThreadNames"].append((r.string(name), 20, thread))
    r.rows["PROCESSES"].append((GLOBAL_PID, PID, "python"))
    r.rows["ANALYSIS_DETAILS"].append((HW_VM, r.now, 0, r.now))
    return r


def write(out: Path) -> None:
    r = record()
    r.rows["META_DATA_EXPORT"] = [
        ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"), ("EXPORT_PRODUCT_VERSION", "2024.6.2.225"),
        ("EXPORT_SCHEMA_VERSION", "3.16.1"), ("EXPORT_SCHEMA_VERSION_MAJOR", "3"),
        ("EXPORT_SCHEMA_VERSION_MINOR", "16"), ("EXPORT_SCHEMA_VERSION_MICRO", "1"),
        ("EXPORT_PARAM_INPUT_FILE", "nsys_sample.nsys-rep"),
    ]
    r.rows["TARGET_INFO_GPU"] = [(HW_VM, DEVICE, "NVIDIA A100-SXM4-80GB", "0000:07:00.0", 1, 41943040, 85899345920,
                                  2039000000000, 1410000000, 108) + (None,) * 31]
    r.rows["TARGET_INFO_SESSION_START_TIME"] = [
        (1_700_000_000_000_000_000, "2023-11-14T22:13:20", "2023-11-14T22:13:20")]
    r.rows["TARGET_INFO_SYSTEM_ENV"] = [
        (HW_VM, "Local (CLI)", "Hostname", 619, "sample-host"),
        (HW_VM, "Local (CLI)", "DeviceEnvironment", 610, "HOME=/home/sample;SLURM_PROCID=0;LANG=C.UTF-8"),
    ]
    for table, rows in ENUMS.items():
        r.rows[table] = rows
    out.unlink(missing_ok=True)
    con = sqlite3.connect(out)
    with con:
        for table, columns in SCHEMA.items():
            con.execute(f"CREATE TABLE {table} ({columns})")
            rows = r.rows[table]
            if rows:
                con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    con.execute("VACUUM")
    con.close()


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("nsys_sample.sqlite"))
