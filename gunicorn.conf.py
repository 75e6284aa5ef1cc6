"""gunicorn reads this file from the working directory. Its own limits on the request head sit
above the ones both ingestion doors answer alike (ingestion/acceptance/http.py), so a client sees
the same 414 or 431, with the service's JSON error body, whichever door it reaches."""

limit_request_line = 8190  # the most gunicorn allows; the doors answer 414 above 4,094 bytes
limit_request_field_size = 65536  # the doors answer 431 above 8,190 bytes
limit_request_fields = 200  # the doors answer 431 above 100 fields


# Metrics (config/metrics.py): every worker writes its counters to files in
# PROMETHEUS_MULTIPROC_DIR; the settings module resolves that directory and exports it, so the
# master reads it once before forking. At start, a previous run's dead processes' files go;
# when a worker exits, its files are marked dead (their counts still add up in /metrics).


def on_starting(server) -> None:
    import config.settings as project_settings
    from config.metrics_files import multiprocess_dir_prepare

    multiprocess_dir_prepare(project_settings.PROMETHEUS_MULTIPROC_DIR)


def child_exit(server, worker) -> None:
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
