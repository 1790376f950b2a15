"""The HTTP API's fixed names, shared by the service and its clients."""

from __future__ import annotations

#: Where the API lives under the service's URL.
API = "/api/v1"
#: The header of a logs answer that says where the next read starts.
NEXT_OFFSET = "X-Runplane-Next-Offset"
#: On a run's logs once retention removed them: when (seconds since the epoch).
LOGS_REMOVED = "X-Runplane-Logs-Removed"
#: The header of a list of runs that holds the cursor of the next page (none after the last).
NEXT_CURSOR = "X-Runplane-Next-Cursor"
#: The header of an invoke answer that carries the deployed function's own HTTP status.
FUNCTION_STATUS = "X-Runplane-Function-Status"
#: The header of an invoke request with the caller's timeout, in seconds.
INVOKE_TIMEOUT = "X-Runplane-Timeout"
