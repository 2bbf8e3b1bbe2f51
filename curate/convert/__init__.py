"""Turn labelled non-retrieval data into (query, positive, negatives) records (NV-Embed 4.2).

* ``labeled``: classification and clustering examples (a cluster id is a label): the query is
  an example, the positive another example with its label, the negatives examples of other
  labels (random, or the teacher's hardest).
* ``sts``: sentence pairs scored at or above a threshold become two records, one each way,
  with negatives mined from the other sentences (never the partner).
* ``readers``: the JSONL inputs, with errors that name file and line.
* ``nearest``: exact nearest-neighbour picks with per-query exclusions.
* ``main``: what ``curate convert`` runs.
"""
