"""gunicorn settings for the multiprocess metrics test, as an application would write them."""

import os

from telemetry.runtime import clear_multiprocess_dir as clear
from telemetry.runtime import multiprocess_child_exit as _mark_dead

workers = 3
bind = os.environ["MP_TEST_BIND"]
timeout = 30
graceful_timeout = 5


def on_starting(server):  # a fresh run must not add the previous run's counts
    clear(os.environ["PROMETHEUS_MULTIPROC_DIR"])


def child_exit(server, worker):
    _mark_dead(server, worker)
