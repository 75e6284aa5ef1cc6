"""The embedded mode's broker: kombu's filesystem transport, with each message written whole
before a worker can see it.

kombu's own `_put` creates the message file under its final name and only then writes it, while
a consuming worker moves any file with that name out of the queue folder and reads it at once. A
worker that comes between the two reads an empty file, fails to decode it and stops ("Unrecoverable
error: JSONDecodeError"), which stops `make run` with it: seen after about ten idle minutes of
the beat's messages. Here a message is written under a name no worker takes (a leading dot) and
then renamed into place, which is atomic within a folder.
"""

from __future__ import annotations

import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    # kombu-stubs name the message `message` in AbstractChannel and `payload` in
    # filesystem.Channel; kombu passes it by position.
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """Put `payload` onto `queue`: written under a hidden name, then renamed to the name the
        consumer looks for (kombu's `<ms>_<uuid>.<queue>.msg`)."""
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = os.path.join(self.data_folder_out, f".{name}.partial")
        try:
            with open(partial, "wb") as file:
                file.write(dumps(payload).encode("utf-8"))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
