"""Training runs as directories and processes (the contract is ``docs/CONTRACTS.md``).

    layout.py    :class:`RunDir` (every path of a run directory, the complete-checkpoint rule),
                 tolerant readers, the runs root, lists of runs
    writer.py    :class:`RunWriter` (the training process writes status, metrics, probe, results)
    lock.py      :class:`DeviceLock` (one run per device, a first-come queue), :func:`devices`, who uses a device
    process.py   :func:`launch`, :func:`cancel`, :func:`resume`, :func:`wait`

No Streamlit here; ``bertcore`` never imports the UI. ``from bertcore import runs`` gives every
public name below.
"""

from .layout import (
                     CHECKPOINT_FILES,
                     CHECKPOINT_PREFIX,
                     FINAL_STATES,
                     STATES,
                     TASKS,
                     RunDir,
                     RunError,
                     RunInfo,
                                      append_jsonl,
                     checkpoint_step,
                     checkpoints,
                     iter_new_metrics,
                     last_checkpoint,
                     list_runs,
                     new_run_id,
                     now_iso,
                     pid_alive,
                     read_config,
                     read_json,
                     read_jsonl,
                     read_log,
                     read_metrics,
                     read_probe,
                     read_results,
                     read_status,
                     run_info,
                     runs_root,
                     task_of,
                     write_json,
)
from .lock import (
                     LOCK_DIR,
                     DeviceLock,
                     RunBusyError,
                     active_runs,
                     busy_message,
                     device_key,
                     device_user,
                     devices,
                     holder_path,
                     lock_holder,
                     lock_path,
                     lock_queue,
                     queue_dir,
                     queue_position,
                     resolve_device,
                     run_device,
                     waiting_for,
)
from .writer import RunWriter
from .process import cancel, launch, resume, train_command, wait

__all__ = [
    "CHECKPOINT_FILES", "CHECKPOINT_PREFIX", "FINAL_STATES", "STATES", "TASKS", "RunDir", "RunError", "RunInfo",
    "RunWriter", "append_jsonl", "checkpoint_step", "checkpoints", "iter_new_metrics", "last_checkpoint", "list_runs",
    "new_run_id", "now_iso", "pid_alive", "read_config", "read_json", "read_jsonl", "read_log", "read_metrics",
    "read_probe", "read_results", "read_status", "run_info", "runs_root", "task_of", "write_json", "LOCK_DIR",
    "DeviceLock", "RunBusyError", "active_runs", "busy_message", "device_key", "device_user", "devices",
    "holder_path", "lock_holder", "lock_path", "lock_queue", "queue_dir", "queue_position", "resolve_device",
    "run_device",
    "waiting_for", "cancel", "launch", "resume", "train_command", "wait",
]
