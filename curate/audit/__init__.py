"""The shortcut audit: can a model tell the texts of a dataset apart by how they were written?

``origin`` reads where each text came from (an LLM or a corpus), ``probe`` fits the
cross-validated classifier, ``cues`` names plain cues (length, a recurring opening or
closing), and ``compare`` decides the comparisons and builds the audit section that
``curate export`` writes to its report and card. The filter step ``shortcut``
(``curate.filter.steps.shortcut``) uses the same probe to drop the negatives it finds easiest.
"""

from curate.audit.compare import AuditOptions, run_audit, summary_lines

__all__ = ["AuditOptions", "run_audit", "summary_lines"]
