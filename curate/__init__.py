"""curate: training data for text-embedding models, from LLMs and real retrieval data."""

__version__ = "0.1.0"
