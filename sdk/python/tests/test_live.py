"""The client and verify_webhook against a running hookwheel server.

They run when HOOKWHEEL_URL and HOOKWHEEL_API_KEY are set, and skip otherwise; those that need
webhooks delivered also need a receiver the server can reach:

  HOOKWHEEL_URL       the API, such as http://localhost:8080
  HOOKWHEEL_API_KEY   a tenant's API key (every scope)
  RECEIVER_URL        a receiver recording every request; paths containing /fail answer 400, others 200
  RECEIVED_URL        GET: {"data": [{"method", "path", "headers": {name: [values]}, "body_base64"}]},
                      what RECEIVER_URL got, oldest first
  SIGNING_SECRET      the tenant's signing secret

`go test -run TestPythonSDK ./cmd/hookwheel/internal/e2e/` starts a server and a receiver and runs
these with HOOKWHEEL_LIVE_REQUIRED=1, under which a missing variable fails instead of skipping.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import time
import urllib.parse
import urllib.request
import uuid
from typing import Any

import pytest

import hookwheel
from hookwheel import WebhookFailure, WebhookVerificationError, verify_webhook

API_VARS = ["HOOKWHEEL_URL", "HOOKWHEEL_API_KEY"]
RECEIVER_VARS = ["RECEIVER_URL", "RECEIVED_URL", "SIGNING_SECRET"]
REQUIRED = os.environ.get("HOOKWHEEL_LIVE_REQUIRED") == "1"


def missing(names: list[str]) -> list[str]:
    return [n for n in names if not os.environ.get(n)]


pytestmark = pytest.mark.live
needs_api = pytest.mark.skipif(bool(missing(API_VARS)) and not REQUIRED, reason=f"set {' and '.join(API_VARS)} to run")
needs_receiver = pytest.mark.skipif(
    bool(missing(API_VARS + RECEIVER_VARS)) and not REQUIRED, reason=f"set {', '.join(RECEIVER_VARS)} to run"
)

# Every URL of this run starts with it, so that tasks of earlier runs on the same tenant are never counted.
RUN = str(uuid.uuid4())


def at(path: str) -> str:
    return f"{os.environ.get('RECEIVER_URL', 'http://127.0.0.1:9')}/{RUN}/{path}"


@pytest.fixture(scope="module")
def hw() -> hookwheel.Client:
    absent = missing(API_VARS)
    if absent:
        pytest.fail(f"HOOKWHEEL_LIVE_REQUIRED=1 but {absent} unset")
    return hookwheel.Client(os.environ["HOOKWHEEL_URL"], os.environ["HOOKWHEEL_API_KEY"])


def test_has_every_variable_the_live_tests_need() -> None:
    if not REQUIRED:
        pytest.skip("HOOKWHEEL_LIVE_REQUIRED is not 1")
    assert missing(API_VARS + RECEIVER_VARS) == []


def wait_status(hw: hookwheel.Client, task_id: str, status: str, within: float = 20.0) -> hookwheel.Task:
    deadline = time.monotonic() + within
    while True:
        task = hw.tasks.get(task_id)
        if task.status == status:
            return task
        if time.monotonic() > deadline:
            pytest.fail(f"task {task_id} is {task.status} after {within}s, want {status}")
        time.sleep(0.05)


def received(webhook_id: str) -> list[dict[str, Any]]:
    """The requests the receiver got for one webhook-id, oldest first, headers as {name: [values]}."""
    with urllib.request.urlopen(os.environ["RECEIVED_URL"], timeout=10) as reply:
        data = json.load(reply)["data"]
    out = []
    for r in data:
        headers = {k.lower(): vs for k, vs in r["headers"].items()}
        if headers.get("webhook-id") == [webhook_id]:
            out.append({**r, "headers": headers, "body": base64.b64decode(r["body_base64"])})
    return out


@needs_api
class TestTasks:
    def test_says_who_is_calling(self, hw: hookwheel.Client) -> None:
        me = hw.me()
        assert me.tenant.id and me.key.id

    def test_creates_a_task_gets_it_and_creates_nothing_more_for_the_same_key(self, hw: hookwheel.Client) -> None:
        key = f"sdk-py-{RUN}"
        created = hw.tasks.create(url=at("later"), body='{"n":1}', delay=dt.timedelta(hours=1), idempotency_key=key)
        assert created.status == "scheduled"
        assert created.idempotency_key == key
        got = hw.tasks.get(created.id)
        assert got.id == created.id
        assert got.body == '{"n":1}'
        again = hw.tasks.create(url=at("later"), body='{"n":1}', delay=dt.timedelta(hours=1), idempotency_key=key)
        assert again.id == created.id
        hw.tasks.cancel(created.id)

    def test_lists_every_task_across_small_pages_then_cancels_them(self, hw: hookwheel.Client) -> None:
        created = [hw.tasks.create(url=at(f"list/{i}"), delay="1h") for i in range(5)]
        prefix = at("list/")
        first = hw.tasks.list_page(url=prefix, limit=2)
        assert len(first.data) == 2
        assert first.next_cursor, "a first page of 2 out of 5 has a next_cursor"
        listed = [t.id for t in hw.tasks.list(url=prefix, page_size=2)]
        # Newest first.
        assert listed == [t.id for t in reversed(created)]

        for t in created:
            hw.tasks.cancel(t.id)
        assert all(hw.tasks.get(t.id).status == "canceled" for t in created)
        assert len(list(hw.tasks.list(url=prefix, status="canceled"))) == 5
        with pytest.raises(hookwheel.ConflictError) as caught:
            hw.tasks.cancel(created[0].id)
        assert caught.value.status == 409

    def test_reschedules_a_task(self, hw: hookwheel.Client) -> None:
        task = hw.tasks.create(url=at("reschedule"), delay="1h")
        run_at = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=2)).replace(microsecond=0)
        moved = hw.tasks.reschedule(task.id, run_at=run_at)
        assert moved.run_at == run_at
        hw.tasks.cancel(task.id)

    def test_creates_a_batch_item_by_item(self, hw: hookwheel.Client) -> None:
        results = hw.tasks.batch(
            [
                hookwheel.TaskRequest(url=at("batch/0"), delay="1h", idempotency_key=f"{RUN}-b0"),
                hookwheel.TaskRequest(url=at("batch/1"), delay="1h", idempotency_key=f"{RUN}-b1"),
                hookwheel.TaskRequest(url="not a url", idempotency_key=f"{RUN}-b2"),
            ]
        )
        assert len(results) == 3
        assert results[0].task is not None and results[0].task.url == at("batch/0")
        assert results[1].task is not None and results[1].task.url == at("batch/1")
        assert results[2].error is not None and results[2].error.status == 422
        assert any(e.field == "url" for e in results[2].error.errors), results[2].error

        again = hw.tasks.batch([hookwheel.TaskRequest(url=at("batch/0"), delay="1h", idempotency_key=f"{RUN}-b0")])
        assert again[0].task is not None and again[0].task.id == results[0].task.id
        assert again[0].replayed
        hw.tasks.cancel(results[0].task.id)
        hw.tasks.cancel(results[1].task.id)

    def test_answers_an_unknown_task_with_problem_details(self, hw: hookwheel.Client) -> None:
        with pytest.raises(hookwheel.NotFoundError) as caught:
            hw.tasks.get(uuid.uuid4())
        assert caught.value.status == 404
        assert caught.value.title and caught.value.type and caught.value.detail

    def test_refuses_an_invalid_task_naming_the_field(self, hw: hookwheel.Client) -> None:
        with pytest.raises(hookwheel.InvalidRequestError) as caught:
            hw.tasks.create(url=at("x"), retry={"max_attempts": 0})
        assert caught.value.status == 422
        assert any(e.field == "retry.max_attempts" for e in caught.value.errors), caught.value.errors

    def test_gives_statistics_and_limits(self, hw: hookwheel.Client) -> None:
        stats = hw.stats("5m")
        assert len(stats.minutes) == 5
        assert isinstance(stats.tasks_by_status.canceled, int)
        limits = hw.limits()
        assert limits.pending_tasks >= 0
        usage = hw.usage()
        assert usage.totals.tasks_created >= 0


@needs_api
def test_topics(hw: hookwheel.Client) -> None:
    name = f"sdk-py-{RUN}"
    topic = hw.topics.put(name, [hookwheel.TopicEndpoint(url=at("topic/a"), name="a"), at("topic/b")], description="from the Python SDK")
    assert len(topic.endpoints) == 2
    assert hw.topics.get(name).endpoints[0].name == "a"
    assert any(t.name == name for t in hw.topics.list(page_size=1)), "the topic is listed"

    key = f"sdk-py-publish-{RUN}"
    pub = hw.topics.publish(name, body='{"n":1}', delay="1h", idempotency_key=key)
    assert [t.url for t in pub.tasks] == [at("topic/a"), at("topic/b")]
    assert pub.status_counts.scheduled == 2
    assert hw.topics.publish(name, body='{"n":1}', delay="1h", idempotency_key=key).id == pub.id
    assert [t.id for t in hw.topics.get_publish(pub.id).tasks] == [t.id for t in pub.tasks]
    assert len(list(hw.tasks.list(publish_id=pub.id))) == 2

    with pytest.raises(hookwheel.InvalidRequestError) as caught:
        hw.topics.publish(f"{name}-missing")
    assert any(e.field == "topic" for e in caught.value.errors), caught.value.errors

    for t in pub.tasks:
        hw.tasks.cancel(t.id)
    assert hw.topics.delete(name).name == name
    with pytest.raises(hookwheel.NotFoundError):
        hw.topics.get(name)


@needs_api
def test_flow_keys(hw: hookwheel.Client) -> None:
    # Every character a key may hold, so that the path carries them all.
    prefix = f"sdk-py:{RUN}@eu+1="
    keys = [f"{prefix}a", f"{prefix}b"]
    created = hw.flow_keys.put(keys[0], rate=100, period="1m", parallelism=5)
    assert (created.key, created.rate, created.parallelism) == (keys[0], 100, 5)
    replaced = hw.flow_keys.put(keys[0], parallelism=2)
    assert (replaced.rate, replaced.period, replaced.parallelism) == (0, "1s", 2), "replaced whole"
    assert hw.flow_keys.get(keys[0]) == replaced
    hw.flow_keys.put(keys[1], rate=10)
    assert [limit.key for limit in hw.flow_keys.list(page_size=1) if limit.key.startswith(prefix)] == keys

    with pytest.raises(hookwheel.InvalidRequestError):
        hw.flow_keys.put(keys[1])

    default = hw.flow_keys.put(hookwheel.DEFAULT_FLOW_KEY, parallelism=1000)
    assert default.key == "*"
    assert hw.flow_keys.get("*").parallelism == 1000
    hw.flow_keys.delete("*")

    task = hw.tasks.create(url=at("flow"), delay="1h", flow_key=keys[0])
    assert hw.tasks.get(task.id).flow_key == keys[0]
    hw.tasks.cancel(task.id)
    schedule = hw.schedules.create("@daily", at("flow-daily"), paused=True, flow_key=keys[0])
    assert schedule.flow_key == keys[0]
    assert hw.schedules.update(schedule.id, flow_key=keys[1]).flow_key == keys[1]
    assert hw.schedules.update(schedule.id, flow_key=None).flow_key is None, "None removes it"
    hw.schedules.delete(schedule.id)

    assert hw.flow_keys.delete(keys[0]) == replaced
    hw.flow_keys.delete(keys[1])
    with pytest.raises(hookwheel.NotFoundError):
        hw.flow_keys.get(keys[0])
    with pytest.raises(hookwheel.NotFoundError):
        hw.flow_keys.delete(keys[0])


@needs_api
def test_schedules(hw: hookwheel.Client) -> None:
    created = hw.schedules.create("0 9 * * *", at("schedule"), timezone="Europe/Paris", body="{}")
    assert not created.paused
    assert created.next_run_at is not None
    assert any(s.id == created.id for s in hw.schedules.list(page_size=1)), "the new schedule is listed"

    upcoming = hw.schedules.next(created.id, 3)
    assert len(upcoming) == 3
    assert upcoming[0].utc < upcoming[1].utc
    assert upcoming[0].local.hour == 9 and upcoming[0].local.utcoffset() in (dt.timedelta(hours=1), dt.timedelta(hours=2))

    # A merge patch: what is given changes, None resets, the rest is kept.
    updated = hw.schedules.update(
        created.id, cron="30 8 * * 1-5", timezone="America/New_York", body=None, headers={"X-Version": "2"}
    )
    assert (updated.cron, updated.timezone, updated.body, updated.headers) == (
        "30 8 * * 1-5",
        "America/New_York",
        "",
        {"X-Version": "2"},
    )
    assert updated.url == created.url
    assert hw.schedules.next(created.id, 1)[0].local.hour == 8
    with pytest.raises(hookwheel.InvalidRequestError) as caught:
        hw.schedules.update(created.id, cron=None)  # type: ignore[arg-type]
    assert any(e.field == "cron" for e in caught.value.errors), caught.value.errors

    paused = hw.schedules.pause(created.id)
    assert paused.paused and paused.next_run_at is None
    assert not hw.schedules.resume(created.id).paused
    assert not hw.schedules.get(created.id).paused
    assert hw.schedules.delete(created.id).id == created.id
    with pytest.raises(hookwheel.NotFoundError):
        hw.schedules.get(created.id)


@needs_api
def test_keys_settings_and_audit(hw: hookwheel.Client) -> None:
    key = hw.keys.create(name=f"sdk-py-{RUN}", scopes=["tasks:read"])
    assert key.api_key.startswith(f"hw_{key.id}_")
    reader = hookwheel.Client(os.environ["HOOKWHEEL_URL"], key.api_key)
    assert reader.me().key.id == key.id
    with pytest.raises(hookwheel.ForbiddenError):
        reader.tasks.create(url=at("forbidden"))
    assert any(k.id == key.id for k in hw.keys.list())
    assert hw.keys.revoke(key.id).revoked_at is not None
    with pytest.raises(hookwheel.UnauthorizedError):
        reader.me()
    assert any(e.action == "key.created" for e in hw.audit.list(page_size=5))
    assert hw.signing_secrets.list()[0].current

    settings = hw.settings.update(operations_url=at("ops"))
    assert settings.operations_url == at("ops")
    assert hw.settings.update(operations_url=None).operations_url is None


@needs_api
def test_targets_pause_and_resume(hw: hookwheel.Client) -> None:
    target = urllib.parse.urlsplit(at("x"))
    origin = f"{target.scheme}://{target.hostname}:{target.port or 80}"
    pause = hw.targets.pause(origin, reason="sdk-py")
    assert pause.paused_by == "tenant"
    assert any(p.target == pause.target for p in hw.targets.list_paused())
    assert hw.targets.resume(origin).target == pause.target
    with pytest.raises(hookwheel.NotFoundError):
        hw.targets.resume(origin)
    hw.targets.list()


@needs_receiver
class TestDeliveredWebhooks:
    BODY = json.dumps({"order": 42, "note": "café ☕"}, ensure_ascii=False)

    @pytest.fixture(scope="class")
    def delivered(self, hw: hookwheel.Client) -> hookwheel.Task:
        task = hw.tasks.create(url=at("deliver?kind=order"), body=self.BODY, headers={"Content-Type": "application/json"})
        return wait_status(hw, task.id, "delivered")

    def test_verifies_the_webhook_the_server_sent(self, hw: hookwheel.Client, delivered: hookwheel.Task) -> None:
        secret = os.environ["SIGNING_SECRET"]
        (req,) = received(delivered.id)
        assert req["method"] == "POST"
        assert verify_webhook(secret, req["headers"], req["body"], url=delivered.url) == {"order": 42, "note": "café ☕"}
        # The same, with the body as text and the headers one value each.
        single = {k: vs[0] for k, vs in req["headers"].items()}
        assert verify_webhook([secret], single, req["body"].decode()) == {"order": 42, "note": "café ☕"}

        tampered = bytearray(req["body"])
        tampered[-2] ^= 1
        with pytest.raises(WebhookVerificationError) as caught:
            verify_webhook(secret, req["headers"], bytes(tampered))
        assert caught.value.reason == WebhookFailure.NO_MATCHING_SIGNATURE
        with pytest.raises(WebhookVerificationError) as caught:
            verify_webhook(secret, req["headers"], req["body"], url=at("elsewhere"))
        assert caught.value.reason == WebhookFailure.JWT_SUBJECT
        other = "whsec_" + base64.b64encode(os.urandom(32)).decode()
        with pytest.raises(WebhookVerificationError) as caught:
            verify_webhook(other, req["headers"], req["body"])
        assert caught.value.reason == WebhookFailure.NO_MATCHING_SIGNATURE

        attempts = hw.tasks.attempts(delivered.id)
        assert [(a.attempt, a.outcome, a.status_code) for a in attempts] == [(1, "success", 200)]

    def test_replays_it_then_replays_it_edited(self, hw: hookwheel.Client, delivered: hookwheel.Task) -> None:
        secret = os.environ["SIGNING_SECRET"]
        assert hw.tasks.replay(delivered.id).status == "scheduled"
        wait_status(hw, delivered.id, "delivered")
        assert len(received(delivered.id)) == 2

        url = at("edited")
        edited = hw.tasks.replay(delivered.id, url=url, method="PUT", headers={"X-Edited": "yes"}, body='{"edited":true}')
        assert edited.url == url
        wait_status(hw, delivered.id, "delivered")
        reqs = received(delivered.id)
        assert len(reqs) == 3
        last = reqs[2]
        assert last["method"] == "PUT"
        assert last["path"] == urllib.parse.urlsplit(url).path
        assert last["headers"]["x-edited"] == ["yes"]
        assert last["headers"]["hookwheel-attempt"] == ["3"]
        assert verify_webhook(secret, last["headers"], last["body"], url=url) == {"edited": True}
        assert [a.attempt for a in hw.tasks.attempts(delivered.id)] == [1, 2, 3]

    def test_counts_dead_tasks_for_a_bulk_replay_then_replays_them(self, hw: hookwheel.Client) -> None:
        dead = hw.tasks.create(url=at("fail/1"), retry={"max_attempts": 1})
        wait_status(hw, dead.id, "dead")
        result = hw.tasks.replay_dead(url=at("fail/"), dry_run=True)
        assert (result.matched, result.replayed) == (1, 0)
        assert hw.tasks.get(dead.id).status == "dead"
        assert [t.id for t in hw.tasks.list(status="dead", url=at("fail/"))] == [dead.id]

        result = hw.tasks.replay_dead(url=at("fail/"))
        assert (result.matched, result.replayed) == (1, 1)
        # The receiver refuses it again: dead once more, after a second attempt.
        task = wait_status(hw, dead.id, "dead")
        assert task.attempts == 2
        assert len(received(dead.id)) == 2
