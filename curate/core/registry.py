"""One way to name an extension: filter steps, export formats, mining presets, LLM backends
and teacher kinds are each a ``Registry``.

A shipped entry registers itself where it is defined (``@STEPS.register("name")``); the
registry imports its ``builtin`` modules (a package: every module in it) the first time it is
asked, so no hand-kept list of imports exists. A plugin package adds one by declaring an entry
point in the registry's group, for example in its ``pyproject.toml``::

    [project.entry-points."curate.filter_steps"]
    shout = "my_plugin.shout"            # a module whose decorator registers the step
    loud = "my_plugin.other:loud_step"   # or the object itself, registered under "loud"

Looking up an unknown name is one line with the closest known name ("did you mean"). A name is
taken once: registering another object under a name already taken (a shipped entry's or another
plugin's) is one line naming both modules, never a silent replacement; a plugin that raises or
exits while it loads is one line naming it.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from curate.core.errors import CurateError

T = TypeVar("T")


class Registry(Generic[T]):
    """Names to objects of one kind, filled from shipped modules and plugins' entry points."""

    def __init__(self, kind: str, group: str, builtin: tuple[str, ...] = (),
                 normalize: Callable[[str], str] | None = None):
        self.kind = kind  # what an entry is called in messages ("filter step", "export format")
        self.group = group  # the entry-point group plugins declare ("curate.filter_steps")
        self.builtin = builtin  # modules or packages whose import registers the shipped entries
        self._normalize = normalize or (lambda name: name)
        self._entries: dict[str, T] = {}
        self._loaded = False

    def register(self, name: str, obj: T | None = None):
        """``REG.register("name", obj)``, or as a decorator: ``@REG.register("name")``."""
        key = self._normalize(name)
        if obj is not None:
            self._add(key, obj)
            return obj

        def deco(target: T) -> T:
            self._add(key, target)
            return target

        return deco

    def _add(self, key: str, obj: T) -> None:
        old = self._entries.get(key)
        if old is not None and old is not obj and old != obj:
            raise CurateError(f"{self.kind} {key!r} is registered twice: by {_describe(old)} and by "
                              f"{_describe(obj)}; a name can be taken once (rename one of them)")
        self._entries[key] = obj

    def unregister(self, name: str) -> T | None:
        """Forget ``name`` (a test's temporary entry); the entry, or None when there was none."""
        return self._entries.pop(self._normalize(name), None)

    def get(self, name: str, where: str | None = None) -> T:
        """The entry called ``name``; an unknown one is one line naming the closest known name."""
        key = self._normalize(name)
        self.load()
        if key not in self._entries:
            prefix = f"{where}: " if where else ""
            raise CurateError(f"{prefix}unknown {self.kind} {name!r}{self.hint(name)}; "
                              f"known: {', '.join(self.names()) or 'none'}")
        return self._entries[key]

    def hint(self, name: str) -> str:
        """`` (did you mean NAME?)`` with the closest known name, or "" when none is close."""
        near = difflib.get_close_matches(self._normalize(name), self.names(), n=1)
        return f" (did you mean {near[0]}?)" if near else ""

    def names(self) -> list[str]:
        self.load()
        return sorted(self._entries)

    def items(self) -> list[tuple[str, T]]:
        self.load()
        return sorted(self._entries.items())

    def __contains__(self, name: object) -> bool:
        self.load()
        return isinstance(name, str) and self._normalize(name) in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def load(self) -> None:
        """Import the shipped modules, then every plugin's entry points (once)."""
        if self._loaded:
            return
        self._loaded = True  # before the imports: a shipped module may ask while it registers
        try:
            for module in self.builtin:
                _import_all(module)
        except BaseException:
            self._loaded = False  # the next lookup tries again and fails the same way
            raise
        from importlib.metadata import entry_points

        for ep in entry_points(group=self.group):
            key = self._normalize(ep.name)
            try:
                loaded = ep.load()
            except CurateError:  # it registered a name already taken: that line says so
                raise
            except SystemExit as e:  # exiting while imported would end curate with nothing said
                raise CurateError(f"{self.kind} plugin {ep.name!r} ({ep.value}): exited while loading "
                                  f"(exit status {e.code!r}); a plugin must not call sys.exit") from None
            except Exception as e:  # a broken plugin is named, not a traceback
                raise CurateError(f"{self.kind} plugin {ep.name!r} ({ep.value}): cannot be loaded: "
                                  f"{type(e).__name__}: {e}") from None
            if key not in self._entries and not _is_module(loaded):
                self._add(key, loaded)
            if key not in self._entries:
                raise CurateError(f"{self.kind} plugin {ep.name!r} ({ep.value}) registered nothing under "
                                  f"{ep.name!r}: its module must register it (see {self.group!r} in "
                                  "docs/extend.md), or the entry point must name the entry itself")


def _describe(obj: Any) -> str:
    """Where an entry was defined, as ``module.name (package P)`` (a wrapper such as a filter
    step's ``Step``: where its function was)."""
    target = obj if isinstance(obj, type) or callable(obj) and hasattr(obj, "__qualname__") else \
        getattr(obj, "fn", None) or getattr(obj, "build", None) or type(obj)
    module = getattr(target, "__module__", None) or "?"
    return f"{module}.{getattr(target, '__qualname__', '?')} (package {module.split('.')[0]})"


def _is_module(obj: Any) -> bool:
    return type(obj).__name__ == "module"


def _import_all(name: str) -> None:
    """Import ``name``; a package: every module in it too (so a new module needs no list)."""
    module = importlib.import_module(name)
    for info in pkgutil.iter_modules(getattr(module, "__path__", []) or [], prefix=f"{name}."):
        importlib.import_module(info.name)
