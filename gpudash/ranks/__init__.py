"""The ranks of a data-parallel job: who they are, where they run, and which one the others wait for."""
