"""The user's own training job, run unmodified: ``gpudash -- python train.py``."""
