"""The embedded mode's broker options: kombu's filesystem transport (config.broker) in a
folder, with no server to run. Settings import this; it imports nothing of Django or kombu."""

from pathlib import Path


def filesystem_broker_options(broker_dir: Path) -> dict:
    """Transport options for messages as files under `broker_dir` (created if missing)."""
    for sub in ("queue", "processed"):
        (broker_dir / sub).mkdir(parents=True, exist_ok=True)
    return {
        "data_folder_in": str(broker_dir / "queue"),
        "data_folder_out": str(broker_dir / "queue"),
        "processed_folder": str(broker_dir / "processed"),
        "control_folder": str(broker_dir / "control"),
        "store_processed": False,
        # The default polls once a second; a tenth keeps "202 to visible" well under a second.
        "polling_interval": 0.1,
    }
