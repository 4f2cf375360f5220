"""The device-memory probe of ONNX Runtime on a GPU, with a fake NVML reader."""

from __future__ import annotations

from portable.runners.memory import DeviceMemoryGrowth


def reader(values: list[tuple[int | None, int]]):  # type: ignore[no-untyped-def]
    it = iter(values)
    return lambda: next(it)


def test_growth_of_this_process_when_nvml_lists_it() -> None:
    probe = DeviceMemoryGrowth(reader([(1000, 5000), (1700, 9000)]))
    probe.start()
    assert probe.peak() == 700 and probe.kind == "nvml_process_used_growth"


def test_growth_of_the_device_when_the_process_is_not_listed() -> None:
    probe = DeviceMemoryGrowth(reader([(None, 5000), (1700, 9000)]))
    probe.start()
    assert probe.peak() == 4000 and probe.kind == "nvml_device_used_growth"


def test_growth_is_never_negative() -> None:
    probe = DeviceMemoryGrowth(reader([(1000, 5000), (900, 4000)]))
    probe.start()
    assert probe.peak() == 0
