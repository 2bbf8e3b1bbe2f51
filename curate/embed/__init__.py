"""Embeddings: an on-disk vector cache, the teacher model that fills it, and exact search.

``EmbeddingCache`` (``curate.embed.cache``) stores one float32 vector per (model id, prompt,
text); ``Teacher`` (``curate.embed.teacher``) encodes only what the cache lacks;
``top_k`` (``curate.embed.search``) finds each query's best documents by inner product.
The heavy libraries (torch, sentence-transformers, faiss) load only when used.
"""

from curate.embed.cache import EmbeddingCache, default_cache_dir

__all__ = ["EmbeddingCache", "default_cache_dir"]
