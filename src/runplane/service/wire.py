"""The HTTP API's fixed names, shared by the service and its clients."""

from __future__ import annotations

#: Where the API lives under the service's URL.
API = "/api/v1"
#: The header of a logs answer that says where the next read starts.
NEXT_OFFSET = "X-Runplane-Next-Offset"
