"""hookwheel: the Python client of hookwheel's HTTP API, and the verification of the webhooks it sends.

    import hookwheel

    hw = hookwheel.Client("http://localhost:8080", "hw_...")
    task = hw.tasks.create(url="https://example.com/hook", body={"order": 42}, delay="10m")
    for dead in hw.tasks.list(status="dead"):
        hw.tasks.replay(dead.id)

    # In the receiver:
    payload = hookwheel.verify_webhook("whsec_...", request.headers, request.get_data())

Standard library only; Python 3.11 or later.
"""

from ._transport import HookwheelConnectionError, __version__
from ._util import UNSET
from .client import DEFAULT_MAX_RETRY_WAIT, DEFAULT_RETRIES, DEFAULT_TIMEOUT, Client
from .errors import (
    ConflictError,
    ForbiddenError,
    HookwheelError,
    InvalidRequestError,
    NotFoundError,
    RateLimitedError,
    ServerError,
    UnauthorizedError,
    parse_retry_after,
)
from .flow_keys import DEFAULT_FLOW_KEY
from .models import (
    APIKey,
    APIKeyCreated,
    Attempt,
    AuditEntry,
    BatchResult,
    CallbackPayload,
    CallbackResponse,
    Caller,
    FieldError,
    FireTime,
    FlowLimit,
    Limits,
    LimitsView,
    Page,
    Plan,
    PortalLink,
    PortalLinkCreated,
    Problem,
    Publish,
    ReplayResult,
    RetryPolicy,
    Schedule,
    SigningSecret,
    SigningSecretCreated,
    SignupCreated,
    Target,
    TargetList,
    TargetPause,
    Task,
    TaskStats,
    TaskStatus,
    TenantSettings,
    Topic,
    TopicEndpoint,
    Usage,
)
from .signup import sign_up, signup_mode
from .taskrequest import DeadEdit, TaskRequest
from .tasks import MAX_BATCH
from .webhook import (
    DEFAULT_TOLERANCE,
    VerifiedWebhook,
    WebhookFailure,
    WebhookVerificationError,
    callback_response_body,
    verify_callback,
    verify_webhook,
    verify_webhook_signature,
)

__all__ = [
    "APIKey",
    "APIKeyCreated",
    "Attempt",
    "AuditEntry",
    "BatchResult",
    "CallbackPayload",
    "CallbackResponse",
    "Caller",
    "Client",
    "ConflictError",
    "DEFAULT_FLOW_KEY",
    "DEFAULT_MAX_RETRY_WAIT",
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT",
    "DEFAULT_TOLERANCE",
    "DeadEdit",
    "FieldError",
    "FireTime",
    "FlowLimit",
    "ForbiddenError",
    "HookwheelConnectionError",
    "HookwheelError",
    "InvalidRequestError",
    "Limits",
    "LimitsView",
    "MAX_BATCH",
    "NotFoundError",
    "Page",
    "Plan",
    "PortalLink",
    "PortalLinkCreated",
    "Problem",
    "Publish",
    "RateLimitedError",
    "ReplayResult",
    "RetryPolicy",
    "Schedule",
    "ServerError",
    "SigningSecret",
    "SigningSecretCreated",
    "SignupCreated",
    "Target",
    "TargetList",
    "TargetPause",
    "Task",
    "TaskRequest",
    "TaskStats",
    "TaskStatus",
    "TenantSettings",
    "Topic",
    "TopicEndpoint",
    "UNSET",
    "UnauthorizedError",
    "Usage",
    "VerifiedWebhook",
    "WebhookFailure",
    "WebhookVerificationError",
    "__version__",
    "callback_response_body",
    "parse_retry_after",
    "sign_up",
    "signup_mode",
    "verify_callback",
    "verify_webhook",
    "verify_webhook_signature",
]
