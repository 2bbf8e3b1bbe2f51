"""``holdout``: a share of the user's documents set aside as a BEIR evaluation set."""
