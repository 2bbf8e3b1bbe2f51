"""Hard-negative mining over real corpora (``curate mine``).

Modules, one job each:

* ``inputs``: BEIR folders, (query, positive) pairs, curate records and Hugging Face datasets
  become one list of ``MineItem`` over one text-deduplicated ``Corpus``;
* ``methods``: which candidates a method rejects (thresholds, rank windows, a score floor);
* ``sampling``: which of the valid candidates become the negatives (top, uniform, softmax);
* ``index``: exact or approximate FAISS search, on the GPU when FAISS sees one;
* ``miner``: the single per-query loop, searching deeper only for queries that need it;
* ``ensemble``: several teachers, per query (cross) or interleaved (intra);
* ``report``: counts, false-negative rates against held-out qrels, histograms;
* ``main``: the command.
"""
