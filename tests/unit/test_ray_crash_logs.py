"""Which worker log a crashed task's one-line error names."""

import os
import time

from tasks.core.ray_runtime import _crash

SEGFAULT = "Fatal Python error: Segmentation fault\n\nCurrent thread ...\n"


def _log(folder, name, text, mtime):
    path = folder / name
    path.write_text(text, encoding="utf-8")
    os.utime(path, (mtime, mtime))
    return path


def test_a_crash_log_from_before_the_work_started_is_not_blamed(tmp_path):
    since = time.time()
    _log(tmp_path, "worker-a-01-100.err", SEGFAULT, since - 0.5)  # the previous work's crash
    _log(tmp_path, "worker-b-01-200.err", "", since + 0.2)  # SIGKILL leaves an empty log

    assert _crash(tmp_path, since) == (None, None)


def test_a_crash_log_stamped_a_clock_tick_early_is_found(tmp_path):
    since = time.time()
    log = _log(tmp_path, "worker-a-01-100.err", SEGFAULT, since - 0.004)

    assert _crash(tmp_path, since) == ("SIGSEGV", log)


def test_the_newest_fatal_log_wins(tmp_path):
    since = time.time()
    _log(tmp_path, "worker-a-01-100.err", "Fatal Python error: Aborted\n", since + 0.1)
    newest = _log(tmp_path, "worker-b-01-200.err", SEGFAULT, since + 0.3)

    assert _crash(tmp_path, since) == ("SIGSEGV", newest)
