"""heads: a benchmark suite and replication harness for attention-head pruning."""

__version__ = "0.1.0"
