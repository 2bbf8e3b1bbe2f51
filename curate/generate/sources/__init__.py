"""generate's shipped input sources, one module each, found by this folder (``curate.generate.source``)."""
