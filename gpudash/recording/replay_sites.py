"""A replay's sync tables: the recording's JSON holds each configuration's (``sync_sites``), and
the replay hands each out once, right after its configuration's first sample, so the dashboard's
``y`` shows the table of the configuration being replayed."""

from __future__ import annotations

from typing import Any

from gpudash.boot.gpudash_boot.sync_table import SyncTable
from gpudash.core.protocol import Message, Sample, SyncSites, config_key

Key = tuple[str, str, int, str]  # (workload, variant, batch size, knobs)


class RecordedSites:
    """The tables of a recording's metadata, by configuration (entries that do not read are left out)."""

    def __init__(self, metadata: dict[str, Any]) -> None:
        self._tables: dict[Key, tuple[SyncTable, str]] = {}
        entries = metadata.get("sync_sites")
        for entry in entries.values() if isinstance(entries, dict) else ():
            try:
                key = (str(entry["workload"]), str(entry["variant"]), int(entry["batch_size"]), str(entry["knobs"]))
                self._tables[key] = (SyncTable.from_dict(entry), str(entry.get("not_counted") or ""))
            except (KeyError, TypeError, ValueError, AttributeError):
                continue

    def after_samples(self, batch: list[Message]) -> list[Message]:
        """``batch`` with each configuration's table after its first sample (once per configuration)."""
        if not self._tables:
            return batch
        out: list[Message] = []
        for msg in batch:
            out.append(msg)
            if isinstance(msg, Sample):
                found = self._tables.pop(config_key(msg), None)
                if found is not None:
                    table, not_counted = found
                    out.append(
                        SyncSites(msg.time_s, msg.workload, msg.variant, msg.batch_size, msg.knobs, table, not_counted)
                    )
        return out
