"""``curate ablate``: which data recipe trains the better student, measured by training it."""
