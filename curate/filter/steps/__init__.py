"""The shipped filter steps, one module each (the three LLM judges share ``judges``).

Nothing here lists them: ``curate.filter.base.STEPS`` imports every module of this package the
first time a step is looked up, and each module registers its step with ``@register``. A new
shipped step is a new module here; a step of your own is a plugin (docs/extend.md).
"""
