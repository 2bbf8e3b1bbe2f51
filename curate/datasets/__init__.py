"""Readers for real retrieval datasets (BEIR folders, pair files)."""
