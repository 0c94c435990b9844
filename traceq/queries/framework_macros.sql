-- framework_macros: the names that show a PyTorch program (queries/framework.sql and
-- queries/advice_run.sql apply them; traceq/advice speaks PyTorch only where they match).
--
-- pytorch_name(name) -> BOOLEAN: a host op (cpu op, Python function) or region (user
--   annotation, NVTX range from torch.autograd.profiler.emit_nvtx, DataLoader span) named
--   like PyTorch's own: aten::*, autograd::*, ProfilerStep#*, Optimizer.*, nn.Module: *,
--   enumerate(DataLoader)*, torch/*.py(...) Python frames.
-- PyTorch's kernels are told by their library instead (gpu_ops.library = 'ATen':
--   at::native::*, at_cuda_detail::*, c10::*, torch::*, see traceq/kernels/identity.py).
CREATE OR REPLACE TEMP MACRO pytorch_name(name) AS
    starts_with(name, 'aten::') OR starts_with(name, 'autograd::') OR starts_with(name, 'ProfilerStep#')
    OR starts_with(name, 'Optimizer.') OR starts_with(name, 'nn.Module: ')
    OR starts_with(name, 'enumerate(DataLoader)') OR starts_with(name, 'torch/');
