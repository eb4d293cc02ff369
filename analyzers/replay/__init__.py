"""Replay: a recorded workload's file-level calls as a script the Mobibench-compatible generator replays on any
stack (reference-impl/mobibench/mb_rs_*.c), and how faithfully a replay reproduced its recording.

  from_syscalls.py   which system calls of a run are replayed, under which name, on which mapped path
  phone.py           the same from a phone's file events (android_fs, the sync_file events)
  paths.py           every path under the replay's root, never outside it
  handles.py         the open file description each call uses
  initial_state.py   the directories and files that existed, and their sizes
  dependencies.py    the waits between threads the trace showed
  workload.py        the calls, threads and think times together
  script.py          the generator's script
  fidelity.py        the recording's figures, the replay's, and the result table replay_fidelity
"""
