"""``curate train``: fine-tune a model on a run's export and measure it before and after."""
