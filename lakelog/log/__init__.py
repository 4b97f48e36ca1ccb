"""The ``_delta_log`` directory and what it holds: commit files, checkpoints, ``_last_checkpoint``, their replay
into a snapshot, commit times, history and cleanup.
"""
