"""The names of the per-client metrics an evaluation records: what the engine writes to
metrics.jsonl and what grids and report builders may ask for (below both, so neither imports the
other for them)."""

from fedbench.objectives import KS

MEAN_KEYS = ("loss", *(f"top{k}" for k in KS))  # per-client means of per-unit values
METRICS = (*MEAN_KEYS, "ece", "mce")  # what every evaluation reports per client
# Reported only where defined: auroc for binary models (2 logits: positive class = label 1;
# one logit under bce_logit: the logit; NaN for a client whose split holds one class).
# Multiclass AUROC is not computed: the AAggFF release's only AUROC columns are binary (its
# multiclass path would need probabilities, spec §10.5).
OPTIONAL_METRICS = ("auroc",)
CLIENT_METRICS = (*METRICS, *OPTIONAL_METRICS)  # the optional ones only where defined
