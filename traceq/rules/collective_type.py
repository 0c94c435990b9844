"""Collective types: which collective a communication kernel runs. One definition, the
ordered regex table RULES below (data, kept here rather than in a TOML file so that analyses,
which define the macro on every connection, never load tomllib: tests/test_startup_imports.py).

    collective_type(kernel, op=None, collective=None)   the type, or None
    macro()                                             the same as DuckDB macros,
        collective_type(identity, op, collective) and collective_name_type(name), that
        `traceq.queries.install_macros` defines on every analysis connection
        (queries/ranks_rank.sql keys collective instances by it)
"""
from __future__ import annotations

import re
from functools import lru_cache

TYPES = ("all_to_all", "reduce_scatter", "all_gather", "all_reduce", "broadcast", "reduce", "send_recv",
         "barrier", "dispatch", "combine")


# The table: (type, pattern), ordered, first matching rule wins.
#
# A rule names a `type` and a `pattern`, a case-insensitive regex searched in a name (written
# for both Python `re` and DuckDB's RE2: no look-arounds, no back-references). The table is read
# three times, in this order, and the first pass that finds a type gives it:
#   1. the launching op: the innermost host op or annotation named as a collective
#      (host_api.COMMUNICATION) around the launch call of the kernel: `nccl:all_to_all`,
#      `c10d::alltoall_base_`, `gloo:broadcast`, `hcom_allReduce_`;
#   2. the op's "Collective name" argument (PyTorch's record_param_comms, copied on the NCCL
#      kernels: gpu_ops.collective): `allreduce`, `all_to_allv`, `_reduce_scatter_base`;
#   3. the kernel's identity (traceq.kernels.identity): `ncclDevKernel_AllGather_RING_LL`,
#      `vllm::cross_device_reduce_1stage`, `deep_ep::internode_ll::dispatch`.
# So a PyTorch all_to_all that NCCL runs as `ncclDevKernel_SendRecv` is all_to_all, not
# send_recv. Meant for communication kernels (gpu_ops.category = 'communication'): a name no
# rule matches has no type (None / NULL).
#
# Types: all_to_all, reduce_scatter, all_gather, all_reduce, broadcast, reduce, send_recv,
# barrier, and the two directions of an expert-parallel all-to-all: dispatch (tokens to the
# experts' ranks) and combine (the experts' results back).
RULES: tuple[tuple[str, str], ...] = (
    # expert parallelism (DeepEP and its descendants): before all_to_all
    ('dispatch', r'(internode|intranode|internode_ll|elastic)::\w*dispatch|(^|::)ep_?dispatch'),
    ('combine', r'(internode|intranode|internode_ll|elastic)::\w*combine|(^|::)ep_?combine'),
    # collectives whose name holds another's: reduce_scatter and all_reduce before reduce
    ('all_to_all', r'all_?to_?all'),
    ('reduce_scatter', r'reduce_?scatter'),
    ('all_gather', r'all_?gather'),
    # custom all-reduce kernels of inference engines name no collective (vLLM/SGLang
    # cross_device_reduce_*, TensorRT-LLM / FlashInfer lamport one-shot, AMD quick reduce)
    ('all_reduce', r'all_?reduce|cross_device_reduce|lamport|quickreduce::'),
    ('broadcast', r'broadcast|bcast'),
    ('barrier', r'barrier'),
    ('send_recv', r'send_?recv|(^|[^a-z])i?(send|recv|receive)([^a-z]|$)'),
    ('reduce', r'(^|[^a-z])reduce([^a-z]|$)'),
)


def rules() -> tuple[tuple[str, str], ...]:
    """(type, pattern) per rule, in order."""
    return RULES


@lru_cache(maxsize=1)
def _compiled() -> tuple[tuple[str, re.Pattern], ...]:
    return tuple((t, re.compile(p, re.I)) for t, p in rules())


def _type_of(name: str | None) -> str | None:
    if not name:
        return None
    for t, rx in _compiled():
        if rx.search(name):
            return t
    return None


def collective_type(kernel: str | None, op: str | None = None, collective: str | None = None) -> str | None:
    """The collective type of a communication kernel: from the launching op's name, else the
    op's "Collective name" argument, else the kernel's identity; None when none says."""
    from ..kernels.identity import kernel_identity

    return _type_of(op) or _type_of(collective) or _type_of(kernel_identity(kernel) if kernel else None)


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def macro() -> str:
    """CREATE MACRO collective_type(identity, op, collective): the table as one CASE per pass
    (`identity` is gpu_ops.identity, already the kernel's identity)."""
    def case(arg: str) -> str:
        whens = " ".join(f"WHEN regexp_matches({arg}, {_quoted('(?i)' + p)}) THEN {_quoted(t)}" for t, p in rules())
        return f"CASE {whens} END"

    return (f"CREATE OR REPLACE MACRO collective_name_type(name) AS {case('name')};\n"
            "CREATE OR REPLACE MACRO collective_type(identity, op, collective) AS\n"
            "    coalesce(collective_name_type(op), collective_name_type(collective), collective_name_type(identity));\n")
