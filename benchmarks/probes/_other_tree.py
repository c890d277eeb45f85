"""Another source tree's jaxmbd importable beside this one's, as ``jaxmbd_main``: the A/B
probes time both in one process (``JAXMBD_OTHER``: that tree's root, default /work/main).
Import this module before jax: it turns jaxmbd's disk caches off, so each program compiles
in the process that times it."""

import os
import sys
import tempfile

os.environ.setdefault("JAXMBD_NO_COMPILATION_CACHE", "1")
_links = tempfile.mkdtemp()
os.symlink(
    os.path.join(os.environ.get("JAXMBD_OTHER", "/work/main"), "jaxmbd"),
    os.path.join(_links, "jaxmbd_main"),
)
sys.path.insert(0, _links)
