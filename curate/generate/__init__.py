"""Stage 1: brainstorm tasks and generate multi-granularity (MGH) examples with an LLM."""
