"""Embeddings: an on-disk vector cache and the teacher model that fills it.

``EmbeddingCache`` (``curate.embed.cache``) stores one float32 vector per (model id, prompt,
text); ``Teacher`` (``curate.embed.teacher``) encodes only what the cache lacks (search is
``curate.negatives.search``).
The heavy libraries (torch, sentence-transformers, faiss) load only when used.
"""

from curate.embed.cache import EmbeddingCache, default_cache_dir

__all__ = ["EmbeddingCache", "default_cache_dir"]
