"""`--cache DIR`: records of dumps already analysed, keyed by the dump's content hash and
everything else that changes the answer (dumpkit version, signature rules, options), so a
nightly run over a growing folder analyses only the new dumps. One small JSON file per key
(plus the per-dump report, when one was written), written atomically: runs in parallel or
interrupted leave no half entry."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from typing import Optional, Set

from dumpkit.triage.analyse import Job
from dumpkit.triage.record import DumpRecord


def cache_key(sha256: str, job: Job) -> str:
    return hashlib.sha256(f"{sha256}\n{job.answer_key()}".encode("utf-8")).hexdigest()


class Cache:
    def __init__(self, folder: str):
        self.folder = folder
        os.makedirs(folder, exist_ok=True)
        self.damaged = 0  # entries found unreadable this run (removed; their dumps analysed again)
        self._folders: Set[str] = set()  # entry folders made (or found) this run

    def _entry(self, key: str) -> str:
        return os.path.join(self.folder, key[:2], key + ".json")

    def get(self, key: str, path: str, report_dir: Optional[str]) -> Optional[DumpRecord]:
        """The cached record, moved to `path`; None when absent, unreadable, or when its
        per-dump report is needed here and cannot be copied."""
        entry = self._entry(key)
        try:
            with open(entry, encoding="utf-8") as f:
                record = DumpRecord.from_dict(json.load(f))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):  # unreadable, truncated, not JSON, not UTF-8
            record = None
        if record is None:
            # removed, so that it is said once: the dump's new record replaces it, or,
            # when the analysis fails, the next run analyses it again without a word
            self.damaged += 1
            try:
                os.unlink(entry)
            except OSError:
                pass
            return None
        if record.report and report_dir is not None:
            saved = os.path.join(self.folder, key[:2], key + os.path.splitext(record.report)[1])
            target = os.path.join(os.path.dirname(report_dir), record.report)
            try:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                if not os.path.exists(target):
                    shutil.copyfile(saved, target)
            except OSError:
                return None
        return record.at(path, cached=True)

    def put(self, key: str, record: DumpRecord, report_dir: Optional[str]) -> None:
        """Keep an analysed record (failures are not kept: the next run tries again)."""
        if not record.ok:
            return
        folder = os.path.join(self.folder, key[:2])
        try:
            if folder not in self._folders:  # one of 256: made once a run, not asked per record
                os.makedirs(folder, exist_ok=True)
                self._folders.add(folder)
            if record.report and report_dir is not None:
                src = os.path.join(os.path.dirname(report_dir), record.report)
                shutil.copyfile(src, os.path.join(folder, key + os.path.splitext(record.report)[1]))
            fd, tmp = tempfile.mkstemp(prefix=".entry-", dir=folder)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(record.to_dict(), f)
            os.replace(tmp, self._entry(key))
        except OSError:
            # a cache that cannot be written costs time next run, never this run's result (a
            # folder removed while the run goes on is made again for the next record)
            self._folders.discard(folder)
