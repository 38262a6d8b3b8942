"""The Triton/PyTorch boundary: the only modules that import triton and torch.

Facts, compile, launch and stored binaries; every private Triton access in ``compat``; the
measurers behind the engine's seam (``inprocess``, ``isolated``, ``multi_device``, chosen
in ``measurers``); graph timing, capture checks and the torch.compile custom op.
"""
