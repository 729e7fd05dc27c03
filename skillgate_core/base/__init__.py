"""The ground floor: no domain knowledge, only what any stage or tool of the library stands on.

- `config`, `config_ranges`, `dataclass_json`: frozen configs from TOML/JSON (three strictness levels),
  their digests, the declared range of every field; `suggestions`: "did you mean" beside a bad name.
- `paths`: the state directory (SKILLGATE_HOME) and what lives where in it.
- `digests`: sha256 of files and trees; `atomic`: publishing a file, a JSON record or a folder whole.
- `file_locks`, `processes`: flock between processes; process identity (host, pid, start stamp).
- `parquet_rows`: rows -> parquet with a fixed schema; `safe_paths`: outside names kept inside a folder.
- `stage_output`, `stage_events`: what a stage returns and the events it reports while it runs.
- `interrupts`: a requested stop (Ctrl-C, SIGTERM) told apart from a failure.
- `library_noise`: library chatter dropped at the entry points.
- `plain_trees`: folders of regular files only, read without ever following a symbolic link.
- `run_paths`: which paths a run parameter may name (the state dir, the worker's folders, the catalog).

Modules, lowest first (pyproject's import-linter contract holds it): config_ranges | suggestions |
processes; dataclass_json; the rest; run_paths. Nothing here imports another skillgate_core package.
"""
