"""Near-duplicate detection for short texts with MinHash and LSH (datasketch).

Used to keep brainstormed task descriptions distinct. Task descriptions are short, so this
index compares 5-character shingles (``curate.dedup.shingles.char_shingles``), not the word
n-grams the batch MinHash of records uses.
"""

from __future__ import annotations

from datasketch import MinHash, MinHashLSH

from curate.dedup.shingles import char_shingles, normalize


class NearDupIndex:
    """Answers "is this text a near-duplicate of one already added?" in about constant time.

    threshold is the estimated Jaccard similarity of 5-character shingles above which two
    texts count as duplicates; 0.7 catches rewordings that keep most of a sentence while
    letting two tasks about the same domain with different query/document kinds through.
    """

    def __init__(self, threshold: float = 0.7, num_perm: int = 128, shingle_size: int = 5):
        self.threshold = threshold
        self.num_perm = num_perm
        self.shingle_size = shingle_size
        self._lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
        self._exact: set[str] = set()
        self._n = 0

    def _minhash(self, text: str) -> MinHash:
        m = MinHash(num_perm=self.num_perm)
        m.update_batch(list(char_shingles(text, self.shingle_size)))
        return m

    def add_if_new(self, text: str) -> bool:
        """Add ``text`` unless it near-duplicates an earlier one; return whether it was added."""
        norm = normalize(text)
        if not norm or norm in self._exact:
            return False
        m = self._minhash(text)
        if self._lsh.query(m):
            return False
        self._lsh.insert(str(self._n), m)
        self._exact.add(norm)
        self._n += 1
        return True

    def matches(self, text: str) -> bool:
        """Whether ``text`` near-duplicates (or equals) one already added; the index is left as it is."""
        norm = normalize(text)
        return bool(norm) and (norm in self._exact or bool(self._lsh.query(self._minhash(text))))

    def __len__(self) -> int:
        return self._n
