"""The Textual dashboard (``gpudash``, ``gpudash replay``). Never imports torch."""
