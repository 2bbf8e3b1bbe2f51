"""``curate export``: records in, training-ordered rows out, laid out by format writers.

The core (inputs, decontamination, splits, levels, curriculum, batching, instructions)
builds one ordered list of ``ExportRow``; ``formats/`` only writes that list to disk.
"""
