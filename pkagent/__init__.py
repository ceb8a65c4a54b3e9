"""pkagent: LLM agents that write multi-GPU kernels, and the checker that scores them."""

__version__ = "0.1.0"
