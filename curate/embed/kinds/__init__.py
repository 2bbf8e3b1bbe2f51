"""Teacher kinds, one module each: a module here registers its kind (``@TEACHERS.register``) and
the registry imports every module of this folder the first time a kind is looked up, so adding a
kind is adding a module (a plugin's kind comes through the ``curate.teachers`` entry points)."""
