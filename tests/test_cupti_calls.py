"""A GPU-only window's CUDA calls left unrecorded on a torch before 2.12
(``gpudash_boot/cupti_calls.py``): the process's own libcupti found from its memory map, never a
second copy loaded, and where CUPTI cannot be told (no libcupti, no GPU) the window is told why in a
line, which its figures then carry. On a GPU: ``tests/test_window_kinds_gpu.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudash.boot.gpudash_boot import cupti_calls

LINE = "7f3a1c000000-7f3a1c200000 r-xp 00000000 103:02 4194 {path}\n"


def maps_listing(tmp_path: Path, *paths: str) -> str:
    maps = tmp_path / "maps"
    maps.write_text("".join(LINE.format(path=p) for p in paths) + "7ffd0000-7ffd1000 rw-p 00000000 00:00 0 [stack]\n")
    return str(maps)


def test_the_loaded_libcupti_is_read_from_the_memory_map_spaces_and_all(tmp_path: Path) -> None:
    cupti = "/opt/my env/site-packages/nvidia/cu13/lib/libcupti.so.13"
    maps = maps_listing(tmp_path, "/usr/lib/libc.so.6", cupti, "/opt/lib/libnotcupti_dir/libz.so")
    assert cupti_calls.loaded_libcupti(maps) == cupti
    assert cupti_calls.loaded_libcupti(maps_listing(tmp_path, "/usr/lib/libc.so.6")) is None
    assert cupti_calls.loaded_libcupti(str(tmp_path / "no-such-maps")) is None


def test_without_a_libcupti_loaded_the_window_is_told_why(tmp_path: Path) -> None:
    assert cupti_calls.calls_unrecorded(maps_listing(tmp_path, "/usr/lib/libc.so.6")) == (
        "no libcupti loaded in the job's process"
    )


def test_a_libcupti_the_process_has_not_loaded_is_never_loaded_now(tmp_path: Path) -> None:
    """A map naming a library the process does not hold (a stale line, another copy): answered with
    why, and nothing loaded (RTLD_NOLOAD)."""
    stray = tmp_path / "libcupti.so.13"
    stray.write_bytes(b"not a library")
    why = cupti_calls.calls_unrecorded(maps_listing(tmp_path, str(stray)))
    assert why is not None and why.startswith("libcupti.so.13: ")
    assert cupti_calls.loaded_libcupti() is None or str(stray) not in Path("/proc/self/maps").read_text()


def test_torchs_own_cupti_without_a_gpu_answers_with_its_error_codes() -> None:
    """torch's CUDA build loads libcupti at import: asked to stop recording calls on a machine
    without a GPU, CUPTI answers an error, which the window is told as it is."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: tests/test_window_kinds_gpu.py")
    if cupti_calls.loaded_libcupti() is None:
        pytest.skip(f"this torch ({torch.__version__}) loads no libcupti")
    why = cupti_calls.calls_unrecorded()
    assert why is not None and why.startswith("cuptiActivityDisable answered [")
