"""Topics: named sets of endpoint URLs, and publishing a webhook to every endpoint of one."""

from __future__ import annotations

import datetime as _dt
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ._transport import Transport, decode, decode_page, path_segment
from ._util import operation, text_id
from .models import HTTPMethod, Page, Publish, RetryPolicy, Topic, TopicEndpoint
from .taskrequest import Body, TaskRequest
from .tasks import create_task


class Topics:
    """The calls on topics, ``client.topics``."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    @operation("putTopic")
    def put(
        self,
        name: str,
        endpoints: Sequence[TopicEndpoint | Mapping[str, str] | str],
        *,
        description: str = "",
    ) -> Topic:
        """Creates the topic, or replaces its endpoints and description whole (``PUT /v1/topics/{name}``).

        An endpoint is a URL, or a TopicEndpoint (or dict) with a ``name`` its tasks carry as
        ``endpoint_name``. Safe to repeat, so it is retried like a read.
        """
        body = {"description": description, "endpoints": [_endpoint(e) for e in endpoints]}
        op = f"put topic {name!r}"
        answer = self._t.call("PUT", f"/v1/topics/{path_segment(name)}", operation=op, repeatable=True, body=body)
        return decode(Topic.from_dict, answer, op)

    @operation("getTopic")
    def get(self, name: str) -> Topic:
        """The topic and its endpoints."""
        op = f"get topic {name!r}"
        answer = self._t.call("GET", f"/v1/topics/{path_segment(name)}", operation=op, repeatable=True)
        return decode(Topic.from_dict, answer, op)

    @operation("listTopics")
    def list(self, *, page_size: int | None = None) -> Iterator[Topic]:
        """Every topic, in name order, page after page."""
        return self._t.pages(lambda cursor: self.list_page(limit=page_size, cursor=cursor))

    @operation("listTopics")
    def list_page(self, *, limit: int | None = None, cursor: str | None = None) -> Page[Topic]:
        """One page of ``GET /v1/topics``."""
        answer = self._t.call(
            "GET", "/v1/topics", operation="list topics", repeatable=True, query={"limit": limit, "cursor": cursor}
        )
        return decode(lambda b: decode_page(Topic.from_dict, b), answer, "list topics")

    @operation("deleteTopic")
    def delete(self, name: str) -> Topic:
        """Deletes the topic and returns it as it was; the tasks already published to it are left alone.

        Not retried after a 503 or a lost answer: had the first try deleted it, a repeat would answer 404.
        """
        op = f"delete topic {name!r}"
        answer = self._t.call("DELETE", f"/v1/topics/{path_segment(name)}", operation=op, repeatable=False)
        return decode(Topic.from_dict, answer, op)

    @operation("createTask")
    def publish(
        self,
        topic: str,
        *,
        body: Body | None = None,
        method: HTTPMethod | None = None,
        headers: Mapping[str, str] | None = None,
        delay: _dt.timedelta | str | None = None,
        run_at: _dt.datetime | str | None = None,
        expires_at: _dt.datetime | str | None = None,
        expires_in: _dt.timedelta | str | None = None,
        timeout: _dt.timedelta | str | None = None,
        retry: RetryPolicy | Mapping[str, Any] | None = None,
        labels: Mapping[str, str] | None = None,
        ordering_key: str | None = None,
        flow_key: str | None = None,
        callback: str | None = None,
        failure_callback: str | None = None,
        idempotency_key: str | None = None,
    ) -> Publish:
        """Publishes a webhook to every endpoint of ``topic`` (``POST /v1/tasks`` with ``topic``).

        One task per endpoint, stored together, each delivered, retried and dead-lettered on its own.
        Always sent with an Idempotency-Key, so it is retried safely; a repeat with the same key returns
        the same publish.
        """
        request = TaskRequest(
            topic=topic,
            body=body,
            method=method,
            headers=headers,
            delay=delay,
            run_at=run_at,
            expires_at=expires_at,
            expires_in=expires_in,
            timeout=timeout,
            retry=retry,
            labels=labels,
            ordering_key=ordering_key,
            flow_key=flow_key,
            callback=callback,
            failure_callback=failure_callback,
            idempotency_key=idempotency_key,
        )
        op = f"publish to topic {topic!r}"
        return decode(Publish.from_dict, create_task(self._t, request, op), op)

    @operation("getPublish")
    def get_publish(self, publish_id: str | uuid.UUID) -> Publish:
        """A publish with its tasks as they are now, counted by status."""
        op = f"get publish {publish_id}"
        answer = self._t.call("GET", f"/v1/publishes/{text_id(publish_id)}", operation=op, repeatable=True)
        return decode(Publish.from_dict, answer, op)


def _endpoint(endpoint: TopicEndpoint | Mapping[str, str] | str) -> dict[str, str]:
    if isinstance(endpoint, str):
        return {"url": endpoint}
    if isinstance(endpoint, TopicEndpoint):
        return {"url": endpoint.url, **({"name": endpoint.name} if endpoint.name else {})}
    return dict(endpoint)
