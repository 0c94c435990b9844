"""The advice rules, one per module. Kernel-evidence rules take (scope, evidence); stall
rules also take the `Stalls` result. Each returns a Finding or None."""
from __future__ import annotations

from ...rules.host_api import MEMORY_CALLS, SYNC_CALLS
from .allocator import allocator_churn
from .channels_last import channels_last
from .data_loading import data_loading
from .exposed_communication import exposed_communication
from .fuse_elementwise import fuse_elementwise
from .idle_in_range import idle_in_range
from .mixed_precision import mixed_precision
from .warmup import warmup
from .fused_optimizer import fused_optimizer
from .host_compute import host_compute
from .launch import launch_overhead
from .pinned_memory import pinned_memory
from .sync import synchronization
from .zero_grad import zero_grad

KERNEL_RULES = (channels_last, zero_grad, fused_optimizer, pinned_memory, mixed_precision, fuse_elementwise)
STALL_RULES = (allocator_churn, synchronization, launch_overhead, data_loading, host_compute, exposed_communication,
               warmup, idle_in_range)
# findings a capture dominated by start-up must not get: start-up looks like both
NOT_WITH_WARMUP = ("launch_overhead", "allocator_churn")
# idle findings a scope whose GPU ran no work to judge must not get: the GPU was not starved of it
NOT_WITHOUT_GPU_WORK = ("host_bound", "launch_overhead", "remove_syncs", "allocator_churn", "idle_in_range",
                        "exposed_communication")
# the host calls (SQL conditions of stall_facts.host_calls) the stall rules cite
HOST_CALLS = (MEMORY_CALLS, SYNC_CALLS)
