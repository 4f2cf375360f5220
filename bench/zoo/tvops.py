"""The zoo's name for :mod:`portable.torchvision_ops` (torchvision's ops beside the CPU torch), kept for the zoo's
models and the SPECs that load it by path."""

from portable.torchvision_ops import import_torchvision, nms_reference, register_torchvision_ops

__all__ = ["import_torchvision", "nms_reference", "register_torchvision_ops"]
