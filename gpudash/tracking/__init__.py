"""``gpudash.track()``: a recording of the user's own training loop, in gpudash's CSV format.

``context`` resolves where and how to record (the device, the rank, the file); ``timing`` times
the steps across two threads; ``writer`` is the background thread that turns them, and NVML's
samples, into rows; ``tracker`` is the public object. ``docs/track.md`` is the manual.
"""
