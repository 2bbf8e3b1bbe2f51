"""The shipped mining methods, one module each: a module registers its preset (``@preset``) and the
registry imports every module of this folder when a method is looked up, so a new method is a new
module (a plugin's comes through the ``curate.presets`` entry points, a user's file through
``--preset-module``)."""
