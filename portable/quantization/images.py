"""A folder of images as calibration or held-out samples: read, resized, cropped and normalized by a
stated ``--preprocess``, for a model with one float image input ``[batch, 3, H, W]`` (RGB, NCHW).

Presets, as the model zoos that made the weights define them (so the file's preprocessing is said
once, in the manifest, not guessed):

- ``imagenet``: the short side resized to ``H / 0.875`` (256 for 224), a centre crop of ``H x W``,
  pixels in [0, 1], minus ImageNet's mean ``(0.485, 0.456, 0.406)``, over its std ``(0.229, 0.224,
  0.225)`` (torchvision's classification transforms);
- ``inception``: the same resize and crop, pixels mapped to [-1, 1] (mean 0.5, std 0.5: TF-slim's
  Inception and EfficientNet-Lite's own preprocessing);
- ``none``: pixels in [0, 1], no resize: every image must already be ``H x W``.

A model exported from a Hugging Face folder records its image processor (``NAME.hf/``, in the manifest):
without ``--preprocess``, that processor's own resize, crop, rescale, mean and std are used
(:func:`load_recorded_folder`), and the report says so.

Gray images are repeated on three channels and an alpha channel is dropped. Files are read in
sorted order, so the held-out split (the last quarter) is the same on every machine. Pillow reads
them (matplotlib's dependency, so present with the ``torch`` extra); resizing is Pillow's bicubic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from portable.errors import InputError, UsageError

__all__ = ["IMAGE_SUFFIXES", "PREPROCESS", "Preprocess", "image_files", "load_image_folder", "load_recorded_folder",
           "open_rgb"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")


@dataclass(frozen=True)
class Preprocess:
    """One preset: whether it resizes and crops, and the per-channel mean and std after [0, 1]."""

    name: str
    resize: bool
    mean: tuple[float, float, float]
    std: tuple[float, float, float]

    def to_dict(self, size: tuple[int, int]) -> dict[str, Any]:
        short = round(size[0] / 0.875) if self.resize else None
        return {"preprocess": self.name, "resize_short_side": short, "center_crop": list(size) if self.resize else None,
                "scale": "pixels / 255", "mean": list(self.mean), "std": list(self.std), "layout": "RGB, NCHW"}


PREPROCESS: dict[str, Preprocess] = {p.name: p for p in (
    Preprocess("imagenet", True, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    Preprocess("inception", True, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
    Preprocess("none", False, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)),
)}


def _image_input(specs: Sequence[Any], folder: Path) -> tuple[str, tuple[int, int]]:
    """The model's one float input shaped ``[batch, 3, H, W]``; a usage error for any other model."""
    shape = tuple(specs[0].shape) if len(specs) == 1 else ()
    if len(specs) != 1 or len(shape) != 4 or shape[1] != 3 or not all(isinstance(d, int) for d in shape[2:]):
        took = ", ".join(f"{s.name} {list(s.shape)}" for s in specs)
        raise UsageError(f"a folder of images calibrates a model with one input [batch, 3, H, W]; this one takes {took} "
                         "(give an .npz keyed by the input names)", path=str(folder))
    return specs[0].name, (int(shape[2]), int(shape[3]))


def image_files(folder: Path) -> list[Path]:
    """The folder's images, in sorted order (its subfolders too)."""
    return _files(folder)


def _files(folder: Path) -> list[Path]:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise UsageError(f"no image in the folder (looked for {', '.join(IMAGE_SUFFIXES)})", path=str(folder))
    return files


def open_rgb(path: Path) -> Any:
    """One image file as an RGB Pillow image (gray repeated, alpha dropped)."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            return image.convert("RGB")
    except Exception as exc:  # noqa: BLE001 - Pillow raises many kinds on a file that is not an image
        raise InputError(f"cannot read the image: {type(exc).__name__}: {exc}", path=str(path)) from None


def _pixels(path: Path, size: tuple[int, int], preset: Preprocess) -> np.ndarray:
    """One image as HWC float32 in [0, 1], resized and centre-cropped when the preset says so."""
    from PIL import Image

    rgb = open_rgb(path)
    if preset.resize:
        scale = round(size[0] / 0.875) / min(rgb.size)
        rgb = rgb.resize((max(size[1], round(rgb.width * scale)), max(size[0], round(rgb.height * scale))),
                         Image.Resampling.BICUBIC)
        left, top = (rgb.width - size[1]) // 2, (rgb.height - size[0]) // 2
        rgb = rgb.crop((left, top, left + size[1], top + size[0]))
    elif (rgb.height, rgb.width) != size:
        raise UsageError(f"image of {rgb.width}x{rgb.height} with --preprocess none: every image must be the model's "
                         f"{size[1]}x{size[0]} (or choose --preprocess imagenet|inception to resize and crop)",
                         path=str(path))
    return np.asarray(rgb, dtype=np.float32) / 255.0


def load_recorded_folder(folder: Path, specs: Sequence[Any], recorded: Any) -> tuple[dict[str, np.ndarray],
                                                                                      dict[str, Any]]:
    """The folder's images through the image processor the model's export recorded (``portable.hf.assets``):
    its resize, crop, rescale, mean and std, each reported with where it came from."""
    name, size = _image_input(specs, folder)
    files = _files(folder)
    images = recorded.pixels([open_rgb(f) for f in files], size)
    settings = dict(recorded.record["image_processor"])
    return {name: images}, {"preprocess": "recorded", "from": recorded.where, "images": len(files),
                            **settings, "output_size": list(size), "output_size_from": f"the file's input {name}"}


def load_image_folder(folder: Path, specs: Sequence[Any], preprocess: str) -> tuple[dict[str, np.ndarray],
                                                                                     dict[str, Any]]:
    """The folder's images as ``{input: [N, 3, H, W] float32}``, and what was done to them (for the manifest)."""
    name, size = _image_input(specs, folder)
    preset = PREPROCESS[preprocess]
    files = _files(folder)
    mean, std = np.asarray(preset.mean, np.float32), np.asarray(preset.std, np.float32)
    images = np.stack([(_pixels(f, size, preset) - mean) / std for f in files]).transpose(0, 3, 1, 2)
    return {name: np.ascontiguousarray(images, dtype=np.float32)}, {**preset.to_dict(size), "images": len(files)}
