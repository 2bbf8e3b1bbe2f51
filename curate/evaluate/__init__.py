"""Retrieval evaluation of embedding models on BEIR folders (``curate eval``).

``metrics`` (trec_eval-style NDCG/Recall/MRR in numpy), ``retrieve`` (encode + exact
search), ``light`` (Linq's light retrieval set), ``store`` (light sets and full results
kept between runs), ``main`` (one evaluation, start to end), ``report`` (the printed
table), ``command`` (the click command).  Heavy libraries load only inside functions.
"""
