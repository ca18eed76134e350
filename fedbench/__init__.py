"""fedbench: reproducible federated-learning benchmarks under statistical heterogeneity."""

__version__ = "0.1.0"
