"""Reference engine: a small tensor-parallel speculative-decoding server in PyTorch.

It speaks SGLang's HTTP API so that the whole specsweep pipeline runs for real
on a CPU (and on GPUs), and so that changing the all-reduce backend changes
the measured numbers. Entry point: ``python -m specsweep.refengine``.
"""

__version__ = "0.1.0"
