"""The requests the client sends and how it reads the answers, against a local stand-in for the API."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest

import hookwheel
from hookwheel import UNSET, Client, DeadEdit, RetryPolicy, TaskRequest
from support import FakeAPI, Reply, problem, task_json


def test_create_sends_the_task_with_a_random_idempotency_key(api: FakeAPI, client: Client) -> None:
    api.respond([Reply(201, task_json())])
    run_at = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.timezone.utc)
    task = client.tasks.create(
        url="https://example.com/hooks/order",
        body={"order": 42, "note": "café"},
        run_at=run_at,
        expires_in=dt.timedelta(minutes=10),
        retry=RetryPolicy(max_attempts=3, min_backoff="2s"),
        labels={"team": "payments"},
        flow_key="customer-1",
    )
    assert task.id == "019aa8f2-4c3e-7b21-9d5e-3f0c2a7b8e41"
    assert task.status == "scheduled"
    # Nanoseconds are cut to the microsecond datetime keeps.
    assert task.run_at == dt.datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=dt.timezone.utc)
    assert task.retry.max_attempts == 10
    assert task.last_status_code is None

    (req,) = api.requests
    assert (req.method, req.path) == ("POST", "/v1/tasks")
    assert req.headers["authorization"] == "Bearer hw_testkey_secret"
    assert req.headers["content-type"] == "application/json"
    assert req.headers["user-agent"].startswith("hookwheel-python/")
    uuid.UUID(req.headers["idempotency-key"])
    assert req.json() == {
        "url": "https://example.com/hooks/order",
        "headers": {"Content-Type": "application/json"},
        "body": '{"order":42,"note":"café"}',
        "run_at": "2026-11-22T10:00:00+00:00",
        "expires_in": "600s",
        "retry": {"max_attempts": 3, "min_backoff": "2s"},
        "labels": {"team": "payments"},
        "flow_key": "customer-1",
    }


def test_create_sends_the_callers_idempotency_key_and_repeats_it_on_a_retry(
    api: FakeAPI, client: Client, waits: list[float]
) -> None:
    unavailable = Reply(503, problem(503, "Service Unavailable", "draining"))
    api.respond([unavailable, Reply(200, task_json(), headers={"Idempotent-Replayed": "true"})])
    client.tasks.create("https://example.com/x", body="plain", delay=dt.timedelta(milliseconds=1500), idempotency_key="order-42")
    assert [r.headers["idempotency-key"] for r in api.requests] == ["order-42", "order-42"]
    assert api.requests[0].json() == {"url": "https://example.com/x", "body": "plain", "delay": "1500ms"}
    assert len(waits) == 1


def test_create_refuses_a_naive_datetime_before_sending(api: FakeAPI, client: Client) -> None:
    with pytest.raises(ValueError, match="time zone"):
        client.tasks.create("https://example.com/x", run_at=dt.datetime(2026, 1, 1))
    assert api.requests == []


def test_list_reads_every_page_with_the_filters(api: FakeAPI, client: Client) -> None:
    pages: dict[str | None, dict[str, Any]] = {
        None: {"data": [task_json("a"), task_json("b")], "next_cursor": "c1"},
        "c1": {"data": [task_json("c")], "next_cursor": "c2"},
        "c2": {"data": [], "next_cursor": None},
    }
    api.respond(lambda r: Reply(200, pages[r.query["cursor"][0] if "cursor" in r.query else None]))
    ids = [
        t.id
        for t in client.tasks.list(
            status="dead",
            url="https://example.com/",
            labels={"team": "payments", "env": "prod"},
            created_after=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
            include_body=True,
            page_size=2,
        )
    ]
    assert ids == ["a", "b", "c"]
    want: list[list[str] | None] = [None, ["c1"], ["c2"]]
    assert [r.query.get("cursor") for r in api.requests] == want
    first = api.requests[0].query
    assert first["status"] == ["dead"]
    assert first["url"] == ["https://example.com/"]
    assert first["label"] == ["env:prod", "team:payments"]
    assert first["created_after"] == ["2026-01-01T00:00:00+00:00"]
    assert first["include"] == ["body"]
    assert first["limit"] == ["2"]


def test_list_is_lazy(api: FakeAPI, client: Client) -> None:
    api.respond([Reply(200, {"data": [task_json("a")], "next_cursor": "more"})])
    tasks = client.tasks.list()
    assert api.requests == []
    assert next(tasks).id == "a"
    assert len(api.requests) == 1


def test_list_stops_on_a_cursor_that_answers_itself(api: FakeAPI, client: Client) -> None:
    api.respond([Reply(200, {"data": [task_json("a")], "next_cursor": "same"})])
    with pytest.raises(hookwheel.ServerError, match="with itself"):
        list(client.tasks.list())


def test_list_page_gives_one_page_and_its_cursor(api: FakeAPI, client: Client) -> None:
    api.respond([Reply(200, {"data": [task_json("a")], "next_cursor": "next"})])
    page = client.tasks.list_page(limit=1, cursor="prev")
    assert [t.id for t in page.data] == ["a"]
    assert page.next_cursor == "next"
    assert api.requests[0].query == {"limit": ["1"], "cursor": ["prev"]}


class TestRetries:
    def test_a_429_is_retried_whatever_the_call_after_the_wait_it_asks(
        self, api: FakeAPI, client: Client, waits: list[float]
    ) -> None:
        limited = Reply(429, problem(429, "Too Many Requests", "over api_rate"), headers={"Retry-After": "2"})
        api.respond([limited, Reply(200, task_json(status="canceled"))])
        assert client.tasks.cancel("t1").status == "canceled"
        assert len(api.requests) == 2
        assert waits == [2.0]

    def test_a_503_is_retried_for_a_read_but_not_for_a_cancel(self, api: FakeAPI, client: Client, waits: list[float]) -> None:
        api.respond([Reply(503, problem(503, "Service Unavailable", "draining")), Reply(200, task_json())])
        client.tasks.get("t1")
        assert len(api.requests) == 2
        api.requests.clear()
        api.respond([Reply(503, problem(503, "Service Unavailable", "draining"), headers={"Retry-After": "1"})])
        with pytest.raises(hookwheel.ServerError) as caught:
            client.tasks.cancel("t1")
        assert caught.value.status == 503
        assert caught.value.retry_after == 1.0
        assert len(api.requests) == 1

    def test_retries_are_bounded(self, api: FakeAPI, client: Client, waits: list[float]) -> None:
        api.respond([Reply(503, problem(503, "Service Unavailable", "down"))])
        with pytest.raises(hookwheel.ServerError):
            client.tasks.get("t1")
        assert len(api.requests) == 1 + hookwheel.DEFAULT_RETRIES
        # Exponential backoff with jitter from 250 ms: each wait within [ceiling/2, ceiling].
        for i, wait in enumerate(waits):
            ceiling = 0.25 * 2**i
            assert ceiling / 2 <= wait <= ceiling

    def test_retries_zero_sends_once(self, api: FakeAPI) -> None:
        c = Client(api.url, "hw_k_s", retries=0)
        api.respond([Reply(429, problem(429, "Too Many Requests", "slow down"), headers={"Retry-After": "1"})])
        with pytest.raises(hookwheel.RateLimitedError):
            c.me()
        assert len(api.requests) == 1

    def test_a_wait_longer_than_allowed_is_not_waited_for(self, api: FakeAPI, waits: list[float]) -> None:
        c = Client(api.url, "hw_k_s", max_retry_wait=5)
        c._t._sleep = waits.append
        api.respond([Reply(429, problem(429, "Too Many Requests", "quota", type="quota-exceeded"), headers={"Retry-After": "3600"})])
        with pytest.raises(hookwheel.RateLimitedError) as caught:
            c.tasks.get("t1")
        assert caught.value.retry_after == 3600
        assert caught.value.type == "quota-exceeded"
        assert len(api.requests) == 1
        assert waits == []

    def test_retry_after_as_an_http_date(self, api: FakeAPI, client: Client, waits: list[float]) -> None:
        at = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=10)
        date = at.strftime("%a, %d %b %Y %H:%M:%S GMT")
        api.respond([Reply(429, problem(429, "Too Many Requests", "x"), headers={"Retry-After": date}), Reply(200, task_json())])
        client.tasks.get("t1")
        # The date has whole seconds, and the answer takes a moment to come back.
        assert len(waits) == 1 and 5 <= waits[0] <= 10

    def test_retry_after_is_slept_for_real(self, api: FakeAPI) -> None:
        import time

        c = Client(api.url, "hw_k_s")
        api.respond([Reply(503, problem(503, "Service Unavailable", "x"), headers={"Retry-After": "1"}), Reply(200, task_json())])
        start = time.monotonic()
        c.tasks.get("t1")
        assert time.monotonic() - start >= 1.0
        assert len(api.requests) == 2

    def test_a_lost_answer_is_retried_only_when_repeatable(self, api: FakeAPI, client: Client, waits: list[float]) -> None:
        api.respond([Reply(drop=True), Reply(200, task_json())])
        client.tasks.create("https://example.com/x")
        assert len(api.requests) == 2
        assert api.requests[0].headers["idempotency-key"] == api.requests[1].headers["idempotency-key"]

        api.requests.clear()
        api.respond([Reply(drop=True), Reply(200, task_json())])
        with pytest.raises(hookwheel.HookwheelConnectionError, match="replay task t1"):
            client.tasks.replay("t1")
        assert len(api.requests) == 1

    def test_a_refused_connection_is_a_connection_error(self, waits: list[float]) -> None:
        c = Client("http://127.0.0.1:9", "hw_k_s", retries=2)
        c._t._sleep = waits.append
        with pytest.raises(hookwheel.HookwheelConnectionError):
            c.me()
        assert len(waits) == 2


class TestErrors:
    def test_a_validation_problem_carries_its_fields(self, api: FakeAPI, client: Client) -> None:
        api.respond(
            [
                Reply(
                    422,
                    problem(
                        422,
                        "Unprocessable Entity",
                        "the request has invalid fields",
                        type="validation-failed",
                        instance="/v1/tasks",
                        errors=[{"field": "retry.max_attempts", "message": "must be at least 1"}],
                    ),
                )
            ]
        )
        with pytest.raises(hookwheel.InvalidRequestError) as caught:
            client.tasks.create("https://example.com/x", retry={"max_attempts": 0})
        err = caught.value
        assert isinstance(err, hookwheel.HookwheelError)
        assert (err.status, err.type, err.title, err.detail, err.instance) == (
            422,
            "validation-failed",
            "Unprocessable Entity",
            "the request has invalid fields",
            "/v1/tasks",
        )
        assert [(e.field, e.message) for e in err.errors] == [("retry.max_attempts", "must be at least 1")]
        assert err.problem is not None and err.problem.status == 422
        assert str(err) == "create task: 422 Unprocessable Entity: retry.max_attempts: must be at least 1"

    @pytest.mark.parametrize(
        ("status", "cls"),
        [
            (400, hookwheel.InvalidRequestError),
            (401, hookwheel.UnauthorizedError),
            (403, hookwheel.ForbiddenError),
            (404, hookwheel.NotFoundError),
            (409, hookwheel.ConflictError),
            (413, hookwheel.InvalidRequestError),
            (429, hookwheel.RateLimitedError),
            (500, hookwheel.ServerError),
        ],
    )
    def test_each_status_has_its_class(self, api: FakeAPI, status: int, cls: type[hookwheel.HookwheelError]) -> None:
        c = Client(api.url, "hw_k_s", retries=0)
        api.respond([Reply(status, problem(status, "Title", "what went wrong"))])
        with pytest.raises(cls) as caught:
            c.tasks.get("t1")
        assert caught.value.status == status
        assert caught.value.detail == "what went wrong"
        assert "get task t1" in str(caught.value)

    def test_an_answer_that_is_not_problem_details(self, api: FakeAPI) -> None:
        c = Client(api.url, "hw_k_s", retries=0)
        api.respond([Reply(502, raw=b"<html><body>Bad Gateway</body></html>")])
        with pytest.raises(hookwheel.ServerError) as caught:
            c.tasks.get("t1")
        assert caught.value.status == 502
        assert caught.value.type == "about:blank"
        assert caught.value.problem is None
        assert "Bad Gateway" in caught.value.detail

    def test_an_answer_it_cannot_decode_is_a_server_error(self, api: FakeAPI, client: Client) -> None:
        api.respond([Reply(200, {"id": "t1"})])
        with pytest.raises(hookwheel.ServerError, match="unexpected answer"):
            client.tasks.get("t1")

    def test_unknown_fields_are_kept(self, api: FakeAPI, client: Client) -> None:
        api.respond([Reply(200, task_json(added_later={"x": 1}))])
        assert client.tasks.get("t1").extra == {"added_later": {"x": 1}}


class TestCalls:
    """Each call group's requests: method, path, body and what is retried."""

    def test_cancel_many_and_reschedule_and_replay(self, api: FakeAPI, client: Client) -> None:
        api.respond(lambda r: Reply(200, {"canceled": 3} if r.path == "/v1/tasks/cancel" else task_json()))
        assert client.tasks.cancel_many(status="scheduled", topic="orders") == 3
        client.tasks.reschedule("t1", delay=dt.timedelta(minutes=10))
        client.tasks.replay("t1", url="https://example.com/new", headers={"X-A": "1"}, body="{}")
        client.tasks.replay("t2")
        got = [(r.method, r.path, r.json() if r.body else None) for r in api.requests]
        assert got == [
            ("POST", "/v1/tasks/cancel", {"status": "scheduled", "topic": "orders"}),
            ("PATCH", "/v1/tasks/t1", {"delay": "600s"}),
            ("POST", "/v1/tasks/t1/replay", {"url": "https://example.com/new", "headers": {"X-A": "1"}, "body": "{}"}),
            ("POST", "/v1/tasks/t2/replay", {}),
        ]
        with pytest.raises(ValueError):
            client.tasks.reschedule("t1")
        with pytest.raises(ValueError):
            client.tasks.cancel_many()

    def test_replay_dead_with_an_edit_and_a_dry_run(self, api: FakeAPI, client: Client, waits: list[float]) -> None:
        unavailable = Reply(503, problem(503, "Service Unavailable", "x"))
        api.respond([unavailable, Reply(200, {"matched": 2, "replayed": 0, "changed": 2, "refused": 0})])
        result = client.tasks.replay_dead(
            url="https://old.example.com/",
            labels={"team": "payments"},
            dry_run=True,
            edit=DeadEdit(
                url_prefix_from="https://old.example.com/",
                url_prefix_to="https://new.example.com/",
                set_headers={"Authorization": "Bearer new"},
                remove_headers=["X-Old"],
            ),
        )
        assert (result.matched, result.changed) == (2, 2)
        assert len(api.requests) == 2, "a dry run is retried"
        assert api.requests[0].json() == {
            "url": "https://old.example.com/",
            "labels": {"team": "payments"},
            "dry_run": True,
            "edit": {
                "url_prefix": {"from": "https://old.example.com/", "to": "https://new.example.com/"},
                "headers": {"set": {"Authorization": "Bearer new"}, "remove": ["X-Old"]},
            },
        }
        api.requests.clear()
        api.respond([unavailable])
        with pytest.raises(hookwheel.ServerError):
            client.tasks.replay_dead()
        assert len(api.requests) == 1, "a real replay is not"
        with pytest.raises(ValueError):
            client.tasks.replay_dead(labels={})

    def test_batch_gives_every_item_a_key_and_reads_each_result(self, api: FakeAPI, client: Client) -> None:
        api.respond(
            [
                Reply(
                    200,
                    {
                        "data": [
                            {"task": task_json("a"), "replayed": True},
                            {"error": problem(422, "Unprocessable Entity", "bad", errors=[{"field": "url", "message": "bad"}])},
                        ]
                    },
                )
            ]
        )
        results = client.tasks.batch(
            [TaskRequest(url="https://example.com/a", idempotency_key="mine"), {"url": "not a url", "delay": "1h"}]
        )
        assert results[0].task is not None and results[0].task.id == "a" and results[0].replayed
        assert results[1].error is not None and results[1].error.errors[0].field == "url"
        items = api.requests[0].json()["tasks"]
        assert items[0] == {"url": "https://example.com/a", "idempotency_key": "mine"}
        uuid.UUID(items[1]["idempotency_key"])
        assert items[1]["delay"] == "1h"

    def test_attempts_reads_every_page(self, api: FakeAPI, client: Client) -> None:
        attempt = {"attempt": 1, "started_at": "2026-11-22T10:00:00Z", "duration_ms": 12, "outcome": "success", "status_code": 200}
        api.respond(
            lambda r: Reply(200, {"data": [attempt], "next_cursor": "p2"})
            if "cursor" not in r.query
            else Reply(200, {"data": [{**attempt, "attempt": 2}]})
        )
        assert [a.attempt for a in client.tasks.attempts("t1")] == [1, 2]
        assert api.requests[0].path == "/v1/tasks/t1/attempts"

    def test_schedules_update_is_a_merge_patch(self, api: FakeAPI, client: Client) -> None:
        schedule = {
            "id": "s1",
            "cron": "0 9 * * *",
            "timezone": "UTC",
            "paused": False,
            "next_run_at": None,
            "url": "https://example.com/s",
            "method": "POST",
            "timeout": "30s",
            "retry": {},
            "created_at": "2026-11-22T10:00:00Z",
            "updated_at": "2026-11-22T10:00:00Z",
            "skipped_occurrences": 0,
        }
        api.respond([Reply(200, schedule)])
        client.schedules.update(
            "s1", cron="30 8 * * 1-5", body=None, headers={"X-Version": "2", "X-Old": None}, timeout=dt.timedelta(seconds=10)
        )
        req = api.requests[0]
        assert (req.method, req.path, req.headers["content-type"]) == ("PATCH", "/v1/schedules/s1", "application/merge-patch+json")
        assert req.json() == {"cron": "30 8 * * 1-5", "body": None, "headers": {"X-Version": "2", "X-Old": None}, "timeout": "10s"}
        client.schedules.update("s1", flow_key=None, timezone=UNSET)
        assert api.requests[1].json() == {"flow_key": None}

    def test_flow_keys_and_topics_escape_their_names(self, api: FakeAPI, client: Client) -> None:
        limit = {"key": "k", "rate": 1, "period": "1s", "parallelism": 0, "created_at": "2026-11-22T10:00:00Z", "updated_at": "2026-11-22T10:00:00Z"}
        api.respond([Reply(200, limit)])
        client.flow_keys.put("cust:1@eu+1=", rate=10, period=dt.timedelta(minutes=1))
        client.flow_keys.get("*")
        raw_paths = [r.path for r in api.requests]
        assert raw_paths == ["/v1/flow-keys/cust%3A1%40eu%2B1%3D", "/v1/flow-keys/*"]
        assert api.requests[0].json() == {"rate": 10, "period": "60s"}

    def test_topics_put_and_publish(self, api: FakeAPI, client: Client) -> None:
        publish = {
            "id": "p1",
            "topic": "orders",
            "created_at": "2026-11-22T10:00:00Z",
            "idempotency_key": "k",
            "task_count": 1,
            "status_counts": {"scheduled": 1},
            "tasks": [task_json("t1", topic="orders", publish_id="p1")],
        }
        topic = {"name": "orders", "description": "", "endpoints": [{"url": "https://a.example/"}], "created_at": "2026-11-22T10:00:00Z", "updated_at": "2026-11-22T10:00:00Z"}
        api.respond(lambda r: Reply(200, topic if r.method == "PUT" else publish))
        client.topics.put("orders", ["https://a.example/", {"url": "https://b.example/", "name": "b"}], description="d")
        pub = client.topics.publish("orders", body="{}", idempotency_key="k")
        assert pub.tasks[0].publish_id == "p1"
        assert api.requests[0].json() == {
            "description": "d",
            "endpoints": [{"url": "https://a.example/"}, {"url": "https://b.example/", "name": "b"}],
        }
        assert api.requests[1].json() == {"topic": "orders", "body": "{}"}
        assert api.requests[1].headers["idempotency-key"] == "k"

    def test_the_callers_calls(self, api: FakeAPI, client: Client) -> None:
        usage = {
            "from": "2026-11-01",
            "to": "2026-11-02",
            "days": [],
            "totals": {"tasks_created": 1, "deliveries": 1, "attempts": 1, "failed_attempts": 0, "bytes_sent": 2, "bytes_received": 3},
            "plan": None,
            "limits": {"tasks_per_day": None, "deliveries_per_day": 5},
        }
        api.respond([Reply(200, usage)])
        got = client.usage(dt.date(2026, 11, 1), dt.datetime(2026, 11, 2, 23, 0, tzinfo=dt.timezone(dt.timedelta(hours=-5))))
        assert got.from_ == dt.date(2026, 11, 1)
        assert got.limits.deliveries_per_day == 5
        assert api.requests[0].query == {"from": ["2026-11-01"], "to": ["2026-11-03"]}

    def test_repr_never_shows_the_key(self, api: FakeAPI) -> None:
        assert "secret" not in repr(Client(api.url, "hw_k_secret"))

    def test_refuses_a_base_url_that_is_not_http(self) -> None:
        with pytest.raises(ValueError, match="http or https"):
            Client("localhost:8080", "hw_k_s")
        with pytest.raises(ValueError):
            Client("http://localhost:8080", "")

