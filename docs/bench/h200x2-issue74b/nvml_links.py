"""Issue 74's link probe (session 18): what NVML says of the links between this machine's GPUs —
each GPU's NVLinks (state, version, the remote end, the speed field), the pair's P2P status over
NVLink and their topology's common ancestor, each GPU's PCIe link. Prints JSON."""

from __future__ import annotations

import json
from typing import Any

import pynvml as n


def tried(fn: Any, *args: Any) -> Any:
    try:
        value = fn(*args)
        if isinstance(value, bytes):
            return value.decode()
        return value
    except Exception as exc:  # noqa: BLE001 - a probe: say what failed
        return f"error: {exc}"


def main() -> None:
    n.nvmlInit()
    count = n.nvmlDeviceGetCount()
    handles = [n.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    out: dict[str, Any] = {"driver": tried(n.nvmlSystemGetDriverVersion), "gpus": []}
    for i, h in enumerate(handles):
        gpu: dict[str, Any] = {"index": i, "name": tried(n.nvmlDeviceGetName, h)}
        gpu["bus"] = tried(lambda: n.nvmlDeviceGetPciInfo(h).busId)
        links = []
        for link in range(getattr(n, "NVML_NVLINK_MAX_LINKS", 18)):
            state = tried(n.nvmlDeviceGetNvLinkState, h, link)
            if isinstance(state, str):
                links.append({"link": link, "state": state})
                break
            links.append({"link": link, "state": state, "version": tried(n.nvmlDeviceGetNvLinkVersion, h, link),
                          "remote": tried(lambda: n.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId)})
        gpu["nvlinks"] = links
        fields = {}
        for name in ("NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON", "NVML_FI_DEV_NVLINK_LINK_COUNT", "NVML_FI_DEV_NVLINK_GET_SPEED",
                     "NVML_FI_DEV_NVLINK_SPEED_MBPS_L0", "NVML_FI_DEV_NVLINK_GET_STATE", "NVML_FI_DEV_NVLINK_GET_VERSION"):
            fid = getattr(n, name, None)
            if fid is None:
                fields[name] = "absent"
                continue
            vals = tried(n.nvmlDeviceGetFieldValues, h, [fid])
            if isinstance(vals, str):
                fields[name] = vals
            else:
                v = vals[0]
                fields[name] = {"ret": v.nvmlReturn, "type": v.valueType, "ui": v.value.uiVal, "ull": v.value.ullVal}
        gpu["fields"] = fields
        gpu["pcie"] = {k: tried(getattr(n, f), h) for k, f in (
            ("gen", "nvmlDeviceGetCurrPcieLinkGeneration"), ("width", "nvmlDeviceGetCurrPcieLinkWidth"),
            ("max_gen", "nvmlDeviceGetMaxPcieLinkGeneration"), ("max_width", "nvmlDeviceGetMaxPcieLinkWidth"),
            ("max_speed", "nvmlDeviceGetPcieLinkMaxSpeed"), ("speed", "nvmlDeviceGetPcieSpeed"))}
        out["gpus"].append(gpu)
    pairs = []
    for i in range(count):
        for j in range(i + 1, count):
            pairs.append({"pair": [i, j],
                          "topology": tried(n.nvmlDeviceGetTopologyCommonAncestor, handles[i], handles[j]),
                          "p2p_nvlink": tried(n.nvmlDeviceGetP2PStatus, handles[i], handles[j], n.NVML_P2P_CAPS_INDEX_NVLINK),
                          "p2p_read": tried(n.nvmlDeviceGetP2PStatus, handles[i], handles[j], n.NVML_P2P_CAPS_INDEX_READ)})
    out["pairs"] = pairs
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
