"""Metrics: per-client classification metrics and the distribution pack over clients."""

from fedbench.metrics.classification import classification_counts, topk_correct
from fedbench.metrics.distribution import PACK_STATS, distribution_pack, gini

__all__ = ["PACK_STATS", "classification_counts", "distribution_pack", "gini", "topk_correct"]
