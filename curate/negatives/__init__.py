"""Hard negatives: one nearest-neighbour search (``search``) and one positive-aware selection
(``select``) with the named mining presets (``presets``), shared by mine, convert and filter."""
