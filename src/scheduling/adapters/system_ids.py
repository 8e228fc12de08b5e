"""The one identifier adapter that draws random UUIDs (lint forbids uuid4 elsewhere)."""

from __future__ import annotations

import uuid


class RandomIds:
    """Random version-4 UUIDs for production."""

    def new_uuid(self) -> uuid.UUID:
        return uuid.uuid4()
