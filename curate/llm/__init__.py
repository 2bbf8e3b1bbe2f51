"""Talking to LLMs: one OpenAI-compatible client, the embedded CPU server, and vLLM launching."""
