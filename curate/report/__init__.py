"""``curate report RUN``: one self-contained HTML page that shows a run's data to a person.

People who curate training data look at it: which records were dropped and why, what a query's
negatives look like beside its positive, how the teacher's scores spread. The run folders hold
every fact (reports, drop records, the records themselves); this package reads them
(``collect``), samples the records a browser can hold (``sample``) and writes the page
(``page``), which opens from disk with nothing fetched from a network.
"""

from curate.report.page import REPORT_HTML, write_report

__all__ = ["REPORT_HTML", "write_report"]
