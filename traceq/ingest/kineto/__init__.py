"""Kineto / PyTorch-profiler Chrome traces (`*.json`, `*.json.gz`) -> canonical tables.

The format's quirks handled here: an object with `traceEvents` or a bare array of events;
capitalised categories of older PyTorch (`Kernel`, `Runtime`, `Operator`, ...); `ts`/`dur`
as int, float or numeric string µs, relative to `baseTimeNanoseconds` in newer traces;
string pids/tids (`"stream 7"`, `"1890023232"`, ROCm hex `"0x0"`); `External id` /
`external id`; `B`/`E` pairs; spans still open at capture end (`args.finished == "false"`);
files cut mid-event by a crashed writer (every complete event is kept, with a warning).

Two halves meet at the raw event relation (`raw`): decoding writes every event of the file
as Parquet raw parts in a scratch folder, and translation (`translate`) reads them back chunk
by chunk and writes the canonical tables into the store's staging folder, so memory stays
bounded whatever the trace size.

    reader     the entry point `reader.read(path, scratch)`: decode, then translate when staged
    text       the file's JSON text as a memory map (a .gz inflated into scratch first)
    events     the msgspec model of the document and its events
    rows       events -> raw rows; `RawWriter`, the raw parts writer both decoders share
    decode     the fast decoder: plain, well-typed traces split and decoded by forked processes
    windows    the robust decoder, window by window over the mapped text
    recover    the robust decoder's whole-document path: odd types, malformed and truncated files
    raw        the raw relation: its schema, the facts saved beside it (`SpanFacts`)
    tables     raw rows -> the rows of gpu_ops, host_ops and regions
    translate  the passes over the raw parts that write the tables
"""
