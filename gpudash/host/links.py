"""The link between the GPUs a run watches, and its peak — what a collective's bus bandwidth is
weighed against (nccl-tests' convention: a GPU's bandwidth one way). Read once from NVML.

NVLink where NVML says the two GPUs reach each other over it (``nvmlDeviceGetP2PStatus`` with the
NVLink index): the GPU's active links times each one's speed (the ``NVLINK_GET_SPEED`` field, MB/s
one way: 18 × 26.6 GB/s = 478 GB/s on an H200 SXM). Otherwise PCIe: the slower GPU's current
generation and width (a Gen5 x16 link carries 63 GB/s one way). Of several GPUs, the slowest pair's
link: a ring's collective runs at its slowest hop. All of a GPU's active links count, as they do
through NVSwitch; on a mesh without one (a 4-GPU HGX A100) a pair has only its own links, and the
figure is then the GPU's, above the pair's. Torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# GB/s one way per lane, by PCIe generation (after line coding: 8b/10b to Gen2, 128b/130b from Gen3)
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
MAX_LINKS = 18  # NVLinks a GPU has at the most (pynvml's NVML_NVLINK_MAX_LINKS where it is older)
ULL = 3  # nvml.h's NVML_VALUE_TYPE_UNSIGNED_LONG_LONG (a field's value in ``ullVal``; else ``uiVal``)
NVLINK_SPEED_FIELD = 164  # nvml.h's NVML_FI_DEV_NVLINK_GET_SPEED, where pynvml lacks the name
P2P_NVLINK_INDEX = 2  # nvml.h's NVML_P2P_CAPS_INDEX_NVLINK
P2P_OK = 0  # NVML_P2P_STATUS_OK


@dataclass(frozen=True)
class Link:
    """The link between a run's GPUs: its kind ("NVLink", "PCIe"), its peak one way (GB/s) and how
    it was made up ("18 links × 26.6 GB/s", "Gen5 x16")."""

    kind: str
    gbps: float
    made_of: str

    def words(self) -> str:
        return f"{self.kind} ({self.made_of}) {self.gbps:,.0f} GB/s"


def link_between(nvml: Any, handles: Sequence[Any]) -> Link | None:
    """The slowest link between any two of ``handles`` (None: fewer than two, or NVML does not say)."""
    found = [link for i, a in enumerate(handles) for b in handles[i + 1 :] if (link := _pair(nvml, a, b)) is not None]
    return min(found, key=lambda link: link.gbps) if found else None


def _pair(nvml: Any, a: Any, b: Any) -> Link | None:
    try:
        index = int(getattr(nvml, "NVML_P2P_CAPS_INDEX_NVLINK", P2P_NVLINK_INDEX))
        over_nvlink = int(nvml.nvmlDeviceGetP2PStatus(a, b, index)) == P2P_OK
    except Exception:  # noqa: BLE001 - no answer: not NVLink
        over_nvlink = False
    if over_nvlink and (link := nvlink(nvml, a)) is not None:
        return link
    return min(filter(None, (pcie(nvml, a), pcie(nvml, b))), key=lambda link: link.gbps, default=None)


def nvlink(nvml: Any, handle: Any) -> Link | None:
    """The GPU's active NVLinks times their speed; None where NVML does not give both."""
    links = 0
    for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", MAX_LINKS))):
        try:
            if int(nvml.nvmlDeviceGetNvLinkState(handle, link)) == 1:
                links += 1
        except Exception:  # noqa: BLE001 - past the GPU's links, or not supported
            break
    field = int(getattr(nvml, "NVML_FI_DEV_NVLINK_GET_SPEED", NVLINK_SPEED_FIELD))
    try:
        value = nvml.nvmlDeviceGetFieldValues(handle, [field])[0]
        wide = int(value.valueType) == int(getattr(nvml, "NVML_VALUE_TYPE_UNSIGNED_LONG_LONG", ULL))
        mbps = float(value.value.ullVal if wide else value.value.uiVal)
        ok = int(value.nvmlReturn) == 0
    except Exception:  # noqa: BLE001 - an older driver
        return None
    if not links or not ok or mbps <= 0:
        return None
    return Link("NVLink", links * mbps / 1e3, f"{links} links × {mbps / 1e3:.3g} GB/s")


def pcie(nvml: Any, handle: Any) -> Link | None:
    """The GPU's PCIe link at its current generation and width; None where NVML does not say."""
    try:
        gen = int(nvml.nvmlDeviceGetCurrPcieLinkGeneration(handle))
        width = int(nvml.nvmlDeviceGetCurrPcieLinkWidth(handle))
    except Exception:  # noqa: BLE001
        return None
    lane = PCIE_LANE_GBPS.get(gen)
    if lane is None or width <= 0:
        return None
    return Link("PCIe", lane * width, f"Gen{gen} x{width}")
