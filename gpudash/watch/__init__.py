"""``gpudash watch``: every GPU of the box and its processes, with no workload of gpudash's own."""
