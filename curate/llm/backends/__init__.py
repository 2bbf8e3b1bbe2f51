"""LLM backends, one module each, found by this folder: a module registers the URL schemes its
backend serves (``register_backend``); a plugin's comes through the ``curate.backends`` entry points."""
