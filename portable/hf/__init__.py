"""Hugging Face model folders as portable's models: ``portable export FOLDER``, ``compare --reference FOLDER``,
``precheck FOLDER``, and the tokenizer or image processor that travels with the exported file.

A package of the ground floor (``portable/``): it reads folders (JSON first, then transformers' Auto
classes) and hands a module and its inputs to the exporter; transformers and torch are imported inside the
functions (the ``hf`` extra: ``pip install 'portable-onnx[hf]'``). Modules: ``folder.py`` (find and check a
folder), ``tasks.py`` (the tasks by optimum's names), ``shapes.py`` (the static dims and their sources),
``sentence.py`` (a sentence-transformers pipeline), ``module.py`` (the exported module), ``load.py`` (all of it
together), ``assets.py`` (the files beside the model, and raw text and images as its inputs).
"""

from __future__ import annotations

from portable._lazy import lazy_getattr

__all__ = ["FolderModel", "inputs_for", "load_folder", "recorded"]

_LAZY = {
    "load_folder": "portable.hf.load",
    "FolderModel": "portable.hf.load",
    "inputs_for": "portable.hf.assets",
    "recorded": "portable.hf.assets",
}

__getattr__ = lazy_getattr(__name__, _LAZY)
