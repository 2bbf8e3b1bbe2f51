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
plugin's, by its module or by its entry point naming an object) is one line naming both and their
packages (``curate`` for a shipped entry, a plugin's distribution name), never a silent
replacement; a plugin that raises or exits while it loads is one line naming it.

In most groups such a fault stops the command that loads the registry (a recipe may name any
step). In a group whose entries are each a command of their own (``curate.stages``), it costs
only that plugin's name: the rest load, a warning line says what was left out, and looking the
name up is the one-line error.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import sys
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from curate.core.errors import CurateError

T = TypeVar("T")

# Groups whose entries are each a command of their own (a stage is ``curate NAME``): one broken
# plugin there must not take the other commands down with it.
SEPARATE_GROUPS = frozenset({"curate.stages"})


class NameTaken(CurateError):
    """A name registered twice; ``key`` says which, so a separate group can refuse just that name."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


class Registry(Generic[T]):
    """Names to objects of one kind, filled from shipped modules and plugins' entry points."""

    def __init__(self, kind: str, group: str, builtin: tuple[str, ...] = (),
                 normalize: Callable[[str], str] | None = None, separate: bool | None = None):
        self.kind = kind  # what an entry is called in messages ("filter step", "export format")
        self.group = group  # the entry-point group plugins declare ("curate.filter_steps")
        self.builtin = builtin  # modules or packages whose import registers the shipped entries
        self._normalize = normalize or (lambda name: name)
        # a faulty plugin costs only its own name (a warning), not every lookup
        self.separate = group in SEPARATE_GROUPS if separate is None else separate
        self._entries: dict[str, T] = {}
        self._origins: dict[str, str] = {}  # name -> the package that registered it
        self._faults: dict[str, str] = {}  # name -> why it cannot be used (separate groups)
        self._hushed: set[str] = set()  # names whose fault their own command says: no warning
        self._loading: str | None = None  # the distribution whose entry point is being loaded
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
            self._taken(key, _describe(obj, self._loading or _package_of(obj)))
        self._entries[key] = obj
        self._origins.setdefault(key, self._loading or _package_of(obj))

    def _taken(self, key: str, newcomer: str) -> None:
        """Refuse ``newcomer`` (described) a name already registered, naming both."""
        raise NameTaken(key, f"{self.kind} {key!r} is registered twice: by "
                             f"{_describe(self._entries[key], self._origins.get(key))} and by {newcomer}; "
                             "a name can be taken once (rename one of them)")

    def origin(self, name: str) -> str | None:
        """The package that registered ``name``: ``curate`` for a shipped entry, else a plugin's
        distribution name (None: nothing under that name)."""
        self.load()
        return self._origins.get(self._normalize(name)) if self._normalize(name) in self._entries else None

    def fault(self, name: str) -> str | None:
        """Why the plugin called ``name`` was left out (a separate group), else None."""
        self.load()
        return self._faults.get(self._normalize(name))

    def hush(self, name: str) -> None:
        """No warning about ``name``'s fault: the caller is about to say it as its error."""
        self._hushed.add(self._normalize(name))

    def unregister(self, name: str) -> T | None:
        """Forget ``name`` (a test's temporary entry); the entry, or None when there was none."""
        self._origins.pop(self._normalize(name), None)
        return self._entries.pop(self._normalize(name), None)

    def get(self, name: str, where: str | None = None) -> T:
        """The entry called ``name``; an unknown one is one line naming the closest known name."""
        key = self._normalize(name)
        self.load()
        if key not in self._entries and key in self._faults:
            raise CurateError(self._faults[key])
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

        shipped = set(self._entries)  # a plugin's clash never costs a shipped entry its name
        for ep in entry_points(group=self.group):
            try:
                self._load_entry(ep)
            except CurateError as e:
                if not self.separate:
                    raise
                self._leave_out(ep, e, shipped)

    def _load_entry(self, ep: Any) -> None:
        """Load one entry point: its entry must end up under its name, registered by its package."""
        key, package = self._normalize(ep.name), _distribution(ep)
        where = f"{self.kind} plugin {ep.name!r} (package {package}, entry point {ep.value})"
        self._loading = package
        try:
            loaded = ep.load()
        except CurateError:  # it registered a name already taken: that line says so
            raise
        except SystemExit as e:  # exiting while imported would end curate with nothing said
            raise CurateError(f"{where}: exited while loading (exit status {e.code!r}); "
                              "a plugin must not call sys.exit") from None
        except Exception as e:  # a broken plugin is named, not a traceback
            raise CurateError(f"{where}: cannot be loaded: {type(e).__name__}: {_one_line(e)}") from None
        finally:
            self._loading = None
        if key not in self._entries and not _is_module(loaded):
            self._loading = package
            try:
                self._add(key, loaded)
            finally:
                self._loading = None
        if key not in self._entries:
            raise CurateError(f"{where} registered nothing under {ep.name!r}: its module must register it (see "
                              f"{self.group!r} in docs/extend.md), or the entry point must name the entry itself")
        if self._origins.get(key) != package and _top(_module_of(self._entries[key])) != _top(ep.value):
            newcomer = f"{ep.value} (package {package})" if _is_module(loaded) else _describe(loaded, package)
            self._taken(key, newcomer)  # its name is another package's entry

    def _leave_out(self, ep: Any, error: CurateError, shipped: set[str]) -> None:
        """A separate group's faulty plugin: its name (and a name it clashed on, unless a shipped
        entry holds it) is refused from now on, and a warning line says so."""
        why = str(error)
        names = {self._normalize(ep.name)}
        if isinstance(error, NameTaken):
            names.add(error.key)
        for key in names:
            self._faults.setdefault(key, why)
            if key not in shipped:  # two plugins on one name: neither wins
                self._entries.pop(key, None)
                self._origins.pop(key, None)
        if not names & self._hushed:
            warn_left_out(why)


def warn_left_out(why: str) -> None:
    """One warning line on stderr about a plugin left out, once per process (a registry may be
    read by several parts of one command, and the command line checks more of a stage)."""
    line = f"curate: warning: {why}; that plugin is left out"
    if line not in _WARNED:
        _WARNED.add(line)
        print(line, file=sys.stderr, flush=True)


_WARNED: set[str] = set()


def _describe(obj: Any, package: str | None = None) -> str:
    """Where an entry was defined, as ``module.name (package P)`` (a wrapper such as a filter
    step's ``Step`` or a ``Stage``: where its function was); ``package``: who registered it."""
    target = _defined(obj)
    module = _module_of(obj)
    return f"{module}.{getattr(target, '__qualname__', '?')} (package {package or _top(module)})"


def _defined(obj: Any) -> Any:
    """What an entry's definition is: the class or function itself, or the one a wrapper holds."""
    if isinstance(obj, type) or callable(obj) and hasattr(obj, "__qualname__"):
        return obj
    return getattr(obj, "fn", None) or getattr(obj, "build", None) or getattr(obj, "run", None) or type(obj)


def _module_of(obj: Any) -> str:
    return getattr(_defined(obj), "__module__", None) or "?"


def _top(dotted: str) -> str:
    """``a`` of ``a.b.c`` or ``a.b:obj``."""
    return dotted.split(":")[0].split(".")[0]


def _package_of(obj: Any) -> str:
    """The package an entry registered outside any entry point belongs to: its module's top name."""
    return _top(_module_of(obj))


def _distribution(ep: Any) -> str:
    """The distribution that declared ``ep`` (what ``pip install`` names), else its module's top name."""
    dist = getattr(ep, "dist", None)
    return getattr(dist, "name", None) or _top(ep.value)


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())


def _is_module(obj: Any) -> bool:
    return type(obj).__name__ == "module"


def _import_all(name: str) -> None:
    """Import ``name``; a package: every module in it too (so a new module needs no list)."""
    module = importlib.import_module(name)
    for info in pkgutil.iter_modules(getattr(module, "__path__", []) or [], prefix=f"{name}."):
        importlib.import_module(info.name)
