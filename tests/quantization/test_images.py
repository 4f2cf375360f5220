"""A folder of images as calibration data: the presets' arithmetic, the refusals (one line, exit 2,
nothing written), and the manifest saying what was done to the images."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from portable.errors import UsageError
from portable.quantization.images import load_image_folder

SPECS = [SimpleNamespace(name="x", shape=["batch", 3, 32, 32])]


def _image(path: Path, size: tuple[int, int], color: tuple[int, int, int] | int, mode: str = "RGB") -> Path:
    Image.new(mode, size, color).save(path)
    return path


def test_imagenet_resizes_crops_and_normalizes_and_gray_becomes_three_channels(tmp_path: Path):
    _image(tmp_path / "a.png", (64, 48), (255, 128, 0))
    _image(tmp_path / "b.png", (40, 90), 200, mode="L")
    arrays, info = load_image_folder(tmp_path, SPECS, "imagenet")
    x = arrays["x"]
    assert x.shape == (2, 3, 32, 32) and x.dtype == np.float32 and info["images"] == 2
    mean, std = np.array(info["mean"]), np.array(info["std"])
    np.testing.assert_allclose(x[0, :, 5, 5], (np.array([255, 128, 0]) / 255 - mean) / std, rtol=1e-5)
    np.testing.assert_allclose(x[1, :, 5, 5], (200 / 255 - mean) / std, rtol=1e-5)
    assert info["resize_short_side"] == 37 and info["center_crop"] == [32, 32]


def test_inception_maps_pixels_to_minus_one_one(tmp_path: Path):
    _image(tmp_path / "white.png", (32, 32), (255, 255, 255))
    _image(tmp_path / "black.png", (50, 32), (0, 0, 0))
    x = load_image_folder(tmp_path, SPECS, "inception")[0]["x"]
    assert {float(x[0].min()), float(x[0].max())} == {-1.0} and {float(x[1].max())} == {1.0}


@pytest.mark.parametrize("case", ["empty", "mixed-none", "not-an-image-model"])
def test_bad_folders_are_usage_errors_naming_the_file(tmp_path: Path, case: str):
    specs = SPECS
    if case == "mixed-none":
        _image(tmp_path / "ok.png", (32, 32), (1, 2, 3))
        _image(tmp_path / "odd.png", (33, 32), (1, 2, 3))
    elif case == "not-an-image-model":
        _image(tmp_path / "ok.png", (32, 32), (1, 2, 3))
        specs = [SimpleNamespace(name="ids", shape=["batch", 16])]
    with pytest.raises(UsageError) as error:
        load_image_folder(tmp_path, specs, "none")
    expected = {"empty": "no image in the folder", "mixed-none": "33x32 with --preprocess none",
                "not-an-image-model": "one input [batch, 3, H, W]"}[case]
    assert expected in error.value.message
    assert case != "mixed-none" or error.value.path.endswith("odd.png")


def _folder(tmp_path: Path, count: int) -> Path:
    folder = tmp_path / "photos"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(count):  # noise photos of two sizes: the presets resize and crop them alike
        pixels = rng.integers(0, 256, (40 + 8 * (i % 2), 36, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"{i:02d}.png")
    return folder


def test_quantize_takes_a_folder_and_the_manifest_keeps_the_preprocessing(cli, cnn: Path, tmp_path: Path):
    folder, out = _folder(tmp_path, 16), tmp_path / "o.onnx"
    result = cli("quantize", str(cnn), "-o", str(out), "--calibration", str(folder), "--preprocess", "imagenet",
                 "--min-sqnr", "0", "--no-latency", "--no-per-node", "--format", "json")
    assert result.exit_code == 0, result.output
    calibration = json.loads((tmp_path / "o.onnx.json").read_text())["quantization"]["calibration"]
    assert calibration["samples"] == 12 and "16 images, --preprocess imagenet" in calibration["source"]
    assert calibration["preprocess"]["mean"] == [0.485, 0.456, 0.406] and calibration["preprocess"]["images"] == 16


@pytest.mark.parametrize("args", [("--calibration", "FOLDER"), ("--calibration", "EMPTY", "--preprocess", "none"),
                                  ("--calibration", "NPZ", "--preprocess", "imagenet")])
def test_a_folder_without_preprocess_an_empty_one_or_preprocess_on_an_npz_is_exit_2(cli, cnn: Path, tmp_path: Path,
                                                                                   args: tuple[str, ...]):
    places = {"FOLDER": _folder(tmp_path, 2), "EMPTY": tmp_path / "empty", "NPZ": tmp_path / "s.npz"}
    places["EMPTY"].mkdir()
    np.savez(places["NPZ"], x=np.zeros((4, 3, 32, 32), np.float32))
    out = tmp_path / "o.onnx"
    result = cli("quantize", str(cnn), "-o", str(out), *(str(places.get(a, a)) for a in args))
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not out.exists()
