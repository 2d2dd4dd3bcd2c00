"""Hostile results bundles for ``tests/test_submit_unpack.py``.

:mod:`.generate` derives them from one valid bundle (and its signing key): path
tricks in the manifest and in the archive, links and special files, archive
bombs, corrupt and truncated streams, oversized headers, JSON of the wrong
type, and a few harmless rewrites that must still verify. No module here is
named ``test_*``, so pytest imports it only through the tests that use it.
"""

from .generate import CASES, Case, Source, load_source

__all__ = ["CASES", "Case", "Source", "load_source"]
