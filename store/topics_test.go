package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

func TestTopics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t)
	acme, other := createTenant(t, db), createTenant(t, db)

	orders := &model.Topic{TenantID: acme.ID, Name: "orders", Description: "order events", Endpoints: []model.TopicEndpoint{
		{URL: "https://billing.example/hooks", Name: "billing"},
		{URL: "https://shipping.example/hooks"},
	}}
	created, err := db.PutTopic(ctx, orders, 10, nil)
	require.NoError(t, err)
	require.True(t, created)
	require.False(t, orders.CreatedAt.IsZero())
	require.Equal(t, orders.CreatedAt, orders.UpdatedAt)

	got, err := db.GetTopic(ctx, acme.ID, "orders")
	require.NoError(t, err)
	require.Equal(t, orders, got)
	_, err = db.GetTopic(ctx, other.ID, "orders")
	require.ErrorIs(t, err, model.ErrNotFound, "another tenant's topic")
	_, err = db.GetTopic(ctx, acme.ID, "Orders")
	require.ErrorIs(t, err, model.ErrNotFound, "names are case-sensitive")

	// The same name again replaces the endpoints and description whole.
	replaced := &model.Topic{TenantID: acme.ID, Name: "orders", Endpoints: []model.TopicEndpoint{{URL: "https://audit.example/hooks"}}}
	created, err = db.PutTopic(ctx, replaced, 10, nil)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, orders.CreatedAt, replaced.CreatedAt)
	require.True(t, replaced.UpdatedAt.After(orders.UpdatedAt))
	require.Empty(t, replaced.Description)
	got, err = db.GetTopic(ctx, acme.ID, "orders")
	require.NoError(t, err)
	require.Equal(t, replaced, got)

	// Another tenant's topic of the same name is its own.
	theirs := &model.Topic{TenantID: other.ID, Name: "orders"}
	created, err = db.PutTopic(ctx, theirs, 10, nil)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, []model.TopicEndpoint{}, theirs.Endpoints, "no endpoints is an empty list")

	// Listing is in byte order, whatever the database's collation, a page
	// at a time.
	for _, name := range []string{"a.b", "B", "a", "a-b", "Z9"} {
		_, err := db.PutTopic(ctx, &model.Topic{TenantID: acme.ID, Name: name}, 10, nil)
		require.NoError(t, err)
	}
	var names []string
	var after *string
	for {
		page, err := db.ListTopics(ctx, acme.ID, model.TopicFilter{After: after, Limit: 2})
		require.NoError(t, err)
		for _, tp := range page {
			names = append(names, tp.Name)
		}
		if len(page) < 2 {
			break
		}
		after = &page[len(page)-1].Name
	}
	require.Equal(t, []string{"B", "Z9", "a", "a-b", "a.b", "orders"}, names)

	byName, err := db.GetTopics(ctx, acme.ID, []string{"orders", "a", "missing"})
	require.NoError(t, err)
	require.Len(t, byName, 2)
	require.Equal(t, "https://audit.example/hooks", byName["orders"].Endpoints[0].URL)

	deleted, err := db.DeleteTopic(ctx, acme.ID, "orders", nil)
	require.NoError(t, err)
	require.Equal(t, replaced, deleted)
	_, err = db.GetTopic(ctx, acme.ID, "orders")
	require.ErrorIs(t, err, model.ErrNotFound)
	_, err = db.DeleteTopic(ctx, acme.ID, "orders", nil)
	require.ErrorIs(t, err, model.ErrNotFound)
	_, err = db.GetTopic(ctx, other.ID, "orders")
	require.NoError(t, err, "deleting a tenant's topic leaves another's of the same name")
}

func TestTopicQuota(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t)
	acme, other := createTenant(t, db), createTenant(t, db)

	for _, name := range []string{"one", "two"} {
		_, err := db.PutTopic(ctx, &model.Topic{TenantID: acme.ID, Name: name}, 2, nil)
		require.NoError(t, err)
	}
	_, err := db.PutTopic(ctx, &model.Topic{TenantID: acme.ID, Name: "three"}, 2, nil)
	require.ErrorIs(t, err, model.ErrTopicQuota)
	_, err = db.GetTopic(ctx, acme.ID, "three")
	require.ErrorIs(t, err, model.ErrNotFound, "a refused topic is not stored")

	// Replacing a topic the tenant has adds none: the quota does not stop it.
	created, err := db.PutTopic(ctx, &model.Topic{TenantID: acme.ID, Name: "two",
		Endpoints: []model.TopicEndpoint{{URL: "https://a.example/"}}}, 2, nil)
	require.NoError(t, err)
	require.False(t, created)
	// Another tenant's topics count for it alone.
	_, err = db.PutTopic(ctx, &model.Topic{TenantID: other.ID, Name: "three"}, 2, nil)
	require.NoError(t, err)
	// Once one is deleted there is room again.
	_, err = db.DeleteTopic(ctx, acme.ID, "one", nil)
	require.NoError(t, err)
	_, err = db.PutTopic(ctx, &model.Topic{TenantID: acme.ID, Name: "three"}, 2, nil)
	require.NoError(t, err)
}

// newPublish is a publish of a task like newTask's to one task per URL, as
// the task service makes it.
func newPublish(tenantID uuid.UUID, topic string, runAt time.Time, urls ...string) *model.Publish {
	p := &model.Publish{ID: uuid.Must(uuid.NewV7()), TenantID: tenantID, Topic: topic, TaskCount: len(urls)}
	for i, u := range urls {
		task := newTask(tenantID, runAt)
		task.URL, task.PublishID, task.Topic = u, &p.ID, &p.Topic
		if i%2 == 0 {
			task.EndpointName = ptr(fmt.Sprintf("endpoint-%d", i))
		}
		p.Tasks = append(p.Tasks, task)
	}
	return p
}

func TestInsertPublishes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	listener := listenDue(t, db, pool)
	now := dbNow(t, pool)

	soon := newPublish(tenant.ID, "orders", now.Add(time.Second),
		"https://a.example/hook", "https://b.example/hook", "https://c.example/hook")
	soon.IdempotencyKey, soon.RequestHash = ptr("order-42"), []byte{42}
	later := newPublish(tenant.ID, "invoices", now.Add(time.Hour), "https://d.example/hook")
	plain := newTask(tenant.ID, now.Add(2*time.Second))

	pubResults, taskResults, err := db.InsertPublishes(ctx, []*model.Publish{soon, later}, []*model.Task{plain}, now.Add(30*time.Second))
	require.NoError(t, err)
	require.Equal(t, []model.PublishResult{{Created: true}, {Created: true}}, pubResults)
	require.Equal(t, []model.InsertResult{{Created: true}}, taskResults)
	require.False(t, soon.CreatedAt.IsZero())
	for _, task := range append(append([]*model.Task{plain}, soon.Tasks...), later.Tasks...) {
		require.Equal(t, model.StatusScheduled, task.Status)
		require.False(t, task.CreatedAt.IsZero())
	}

	// The tasks due within the window are announced on commit, each once.
	want := map[uuid.UUID]time.Time{plain.ID: µs(plain.RunAt)}
	for _, task := range soon.Tasks {
		want[task.ID] = µs(task.RunAt)
	}
	require.Equal(t, want, listener.drain(t))

	// A publish reads back with its tasks, in endpoint order, each carrying
	// its publish, topic and endpoint.
	got, err := db.GetPublish(ctx, tenant.ID, soon.ID)
	require.NoError(t, err)
	require.Equal(t, "orders", got.Topic)
	require.Equal(t, ptr("order-42"), got.IdempotencyKey)
	require.Equal(t, []byte{42}, got.RequestHash)
	require.Equal(t, 3, got.TaskCount)
	require.Equal(t, taskIDs(soon.Tasks), taskIDs(got.Tasks))
	for i, task := range got.Tasks {
		require.Equal(t, soon.Tasks[i].URL, task.URL)
		require.Equal(t, &soon.ID, task.PublishID)
		require.Equal(t, ptr("orders"), task.Topic)
		require.Equal(t, soon.Tasks[i].EndpointName, task.EndpointName)
		require.Nil(t, task.IdempotencyKey, "a publish's tasks hold no key: the publish does")
		require.Equal(t, plain.Headers, task.Headers)
		require.Nil(t, task.Body, "a publish's tasks are read without their bodies")
	}
	require.Equal(t, map[model.TaskStatus]int{model.StatusScheduled: 3}, got.StatusCounts())
	_, err = db.GetPublish(ctx, createTenant(t, db).ID, soon.ID)
	require.ErrorIs(t, err, model.ErrNotFound, "another tenant's publish")

	// The list filters find a publish's tasks, and a topic's.
	list, err := db.ListTasks(ctx, tenant.ID, model.TaskFilter{PublishID: &soon.ID, Limit: 10})
	require.NoError(t, err)
	require.ElementsMatch(t, taskIDs(soon.Tasks), taskIDs(list))
	list, err = db.ListTasks(ctx, tenant.ID, model.TaskFilter{Topic: ptr("invoices"), Limit: 10})
	require.NoError(t, err)
	require.Equal(t, taskIDs(later.Tasks), taskIDs(list))
	list, err = db.ListTasks(ctx, tenant.ID, model.TaskFilter{Topic: ptr("invoices"), Status: ptr(model.StatusDead), Limit: 10})
	require.NoError(t, err)
	require.Empty(t, list)

	// The same key again stores nothing and gives back the publish holding
	// it, with its tasks as they are now; a later one with the same key in
	// the same call gets that too.
	exec(t, pool, `UPDATE tasks SET status = 'delivered', next_attempt_at = NULL WHERE id = $1`, soon.Tasks[0].ID)
	again := newPublish(tenant.ID, "orders", now, "https://a.example/hook", "https://e.example/hook")
	again.IdempotencyKey, again.RequestHash = ptr("order-42"), []byte{7}
	fresh := newPublish(tenant.ID, "orders", now.Add(time.Hour), "https://f.example/hook")
	fresh.IdempotencyKey = ptr("order-43")
	dup := newPublish(tenant.ID, "orders", now.Add(time.Hour), "https://g.example/hook")
	dup.IdempotencyKey = ptr("order-43")
	pubResults, taskResults, err = db.InsertPublishes(ctx, []*model.Publish{again, fresh, dup}, nil, now)
	require.NoError(t, err)
	require.Empty(t, taskResults)
	require.False(t, pubResults[0].Created)
	require.Equal(t, soon.ID, pubResults[0].Existing.ID)
	require.Equal(t, []byte{42}, pubResults[0].Existing.RequestHash)
	require.Equal(t, taskIDs(soon.Tasks), taskIDs(pubResults[0].Existing.Tasks))
	require.Equal(t, model.StatusDelivered, pubResults[0].Existing.Tasks[0].Status)
	require.True(t, pubResults[1].Created)
	require.False(t, pubResults[2].Created)
	require.Same(t, fresh, pubResults[2].Existing)
	require.Equal(t, 0, countRows(t, pool, `SELECT count(*) FROM tasks WHERE id = ANY($1)`,
		append(taskIDs(again.Tasks), taskIDs(dup.Tasks)...)), "a replayed publish's tasks are not stored")
	require.Equal(t, 3, countRows(t, pool, `SELECT count(*) FROM publishes`))
}

// TestInsertPublishesAllOrNothing: a publish's tasks are stored with it in
// one transaction, and with the other tasks of the call: one failing row
// stores nothing at all.
func TestInsertPublishesAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool)

	pub := newPublish(tenant.ID, "orders", now, "https://a.example/", "https://b.example/", "https://c.example/")
	// A task of a tenant that does not exist fails the insert's foreign key.
	orphan := newTask(uuid.Must(uuid.NewV7()), now)
	_, _, err := db.InsertPublishes(ctx, []*model.Publish{pub}, []*model.Task{newTask(tenant.ID, now), orphan}, now)
	require.Error(t, err)
	require.Equal(t, 0, countRows(t, pool, `SELECT count(*) FROM tasks`))
	require.Equal(t, 0, countRows(t, pool, `SELECT count(*) FROM publishes`))

	// A publish whose last task fails takes the publish and its other tasks
	// with it.
	pub = newPublish(tenant.ID, "orders", now, "https://a.example/", "https://b.example/")
	pub.Tasks[1].TenantID = orphan.TenantID
	_, _, err = db.InsertPublishes(ctx, []*model.Publish{pub}, nil, now)
	require.Error(t, err)
	require.Equal(t, 0, countRows(t, pool, `SELECT count(*) FROM tasks`))
	require.Equal(t, 0, countRows(t, pool, `SELECT count(*) FROM publishes`))
}

// TestConcurrentPublishesWithOneKey: of publishes racing with one key,
// exactly one is stored with its tasks; the others get it back.
func TestConcurrentPublishesWithOneKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool)

	const racers = 8
	results := make([]model.PublishResult, racers)
	pubs := make([]*model.Publish, racers)
	errs := make([]error, racers)
	start := make(chan struct{})
	done := make(chan int)
	for i := range racers {
		pubs[i] = newPublish(tenant.ID, "orders", now.Add(time.Hour), "https://a.example/", "https://b.example/")
		pubs[i].IdempotencyKey = ptr("same")
		go func() {
			<-start
			var res []model.PublishResult
			res, _, errs[i] = db.InsertPublishes(ctx, []*model.Publish{pubs[i]}, nil, now)
			if errs[i] == nil {
				results[i] = res[0]
			}
			done <- i
		}()
	}
	close(start)
	for range racers {
		<-done
	}
	var winner *model.Publish
	for i := range racers {
		require.NoError(t, errs[i])
		if results[i].Created {
			require.Nil(t, winner, "two publishes stored with one key")
			winner = pubs[i]
		}
	}
	require.NotNil(t, winner)
	for i := range racers {
		if !results[i].Created {
			require.Equal(t, winner.ID, results[i].Existing.ID)
			require.Equal(t, taskIDs(winner.Tasks), taskIDs(results[i].Existing.Tasks))
		}
	}
	require.Equal(t, 2, countRows(t, pool, `SELECT count(*) FROM tasks`))
	require.Equal(t, 1, countRows(t, pool, `SELECT count(*) FROM publishes`))
}

// TestPurgePublishes: a publish goes with the last of its tasks, in the
// pass that purges it, and not before.
func TestPurgePublishes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool)

	pub := newPublish(tenant.ID, "orders", now.Add(-3*time.Hour), "https://a.example/", "https://b.example/", "https://c.example/")
	_, _, err := db.InsertPublishes(ctx, []*model.Publish{pub}, nil, now)
	require.NoError(t, err)
	finish := func(task *model.Task, at time.Time) {
		exec(t, pool, `UPDATE tasks SET status = 'delivered', next_attempt_at = NULL, updated_at = $2 WHERE id = $1`, task.ID, at)
	}
	// Two tasks finished past retention, the third long after them.
	finish(pub.Tasks[0], now.Add(-3*time.Hour))
	finish(pub.Tasks[1], now.Add(-2*time.Hour))
	purge := func(limit int) model.PurgeResult {
		r, err := db.PurgeFinished(ctx, model.PurgeParams{Now: now, DefaultRetention: time.Hour, Limit: limit})
		require.NoError(t, err)
		return r
	}

	require.Equal(t, model.PurgeResult{Tasks: 1}, purge(1))
	require.Equal(t, model.PurgeResult{Tasks: 1}, purge(10))
	got, err := db.GetPublish(ctx, tenant.ID, pub.ID)
	require.NoError(t, err, "a publish with a task left stays")
	require.Equal(t, []uuid.UUID{pub.Tasks[2].ID}, taskIDs(got.Tasks))
	require.Equal(t, 3, got.TaskCount)

	finish(pub.Tasks[2], now.Add(-90*time.Minute))
	require.Equal(t, model.PurgeResult{Tasks: 1, Publishes: 1}, purge(10))
	_, err = db.GetPublish(ctx, tenant.ID, pub.ID)
	require.ErrorIs(t, err, model.ErrNotFound)
}

// TestPurgePublishesConcurrently: two purgers that each delete one of a
// publish's last two tasks at once still delete the publish, whichever
// commits last seeing that none is left.
func TestPurgePublishesConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool)

	for round := range 5 {
		pub := newPublish(tenant.ID, "orders", now.Add(-3*time.Hour), "https://a.example/", "https://b.example/")
		_, _, err := db.InsertPublishes(ctx, []*model.Publish{pub}, nil, now)
		require.NoError(t, err)
		exec(t, pool, `UPDATE tasks SET status = 'delivered', next_attempt_at = NULL, updated_at = $2 WHERE publish_id = $1`,
			pub.ID, now.Add(-2*time.Hour))

		purged := make(chan model.PurgeResult, 2)
		for range 2 {
			go func() {
				r, err := db.PurgeFinished(ctx, model.PurgeParams{Now: now, DefaultRetention: time.Hour, Limit: 1})
				if err != nil {
					t.Errorf("purge: %v", err)
				}
				purged <- r
			}()
		}
		var total model.PurgeResult
		for range 2 {
			r := <-purged
			total.Tasks += r.Tasks
			total.Publishes += r.Publishes
		}
		// Each takes one task (SKIP LOCKED), or one finds both gone.
		if total.Tasks < 2 {
			r, err := db.PurgeFinished(ctx, model.PurgeParams{Now: now, DefaultRetention: time.Hour, Limit: 10})
			require.NoError(t, err)
			total.Tasks += r.Tasks
			total.Publishes += r.Publishes
		}
		require.Equal(t, model.PurgeResult{Tasks: 2, Publishes: 1}, total, "round %d", round)
		require.Equal(t, 0, countPublishes(t, pool), "round %d", round)
	}
}

func countPublishes(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	return countRows(t, pool, `SELECT count(*) FROM publishes`)
}

// TestEveryInsertStoresEveryColumn: each way a task is inserted (one task,
// a batch, a publish's tasks) stores what every feature adds to a task (its
// labels, ordering key, callbacks, and publish, topic and endpoint), reads
// back whole, and a claim carries those the send needs (the callbacks, the
// publish and topic) and leaves out the rest.
func TestEveryInsertStoresEveryColumn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool)

	// full gives task every optional column, as a publish's task to
	// endpoint name of topic.
	full := func(task *model.Task, pub *model.Publish, name string) *model.Task {
		task.Labels = map[string]string{"team": "payments"}
		task.OrderingKey = ptr("order-" + task.ID.String())
		task.Callback, task.FailureCallback = ptr("https://receiver.example/done"), ptr("https://receiver.example/failed")
		task.PublishID, task.Topic, task.EndpointName = &pub.ID, &pub.Topic, ptr(name)
		return task
	}
	one := full(newTask(tenant.ID, now), &model.Publish{ID: uuid.Must(uuid.NewV7()), Topic: "one"}, "single")
	_, created, err := db.InsertTask(ctx, one, false)
	require.NoError(t, err)
	require.True(t, created)
	batched := full(newTask(tenant.ID, now), &model.Publish{ID: uuid.Must(uuid.NewV7()), Topic: "batch"}, "batched")
	_, err = db.InsertTasks(ctx, []*model.Task{batched}, now)
	require.NoError(t, err)
	pub := newPublish(tenant.ID, "orders", now, "https://a.example/hook")
	published := full(pub.Tasks[0], pub, "billing")
	_, _, err = db.InsertPublishes(ctx, []*model.Publish{pub}, nil, now)
	require.NoError(t, err)

	registerNode(t, pool, testNode, time.Hour)
	for _, want := range []*model.Task{one, batched, published} {
		got, err := db.GetTask(ctx, tenant.ID, want.ID)
		require.NoError(t, err)
		require.Equal(t, want.Labels, got.Labels)
		require.Equal(t, want.OrderingKey, got.OrderingKey)
		require.Equal(t, want.Callback, got.Callback)
		require.Equal(t, want.FailureCallback, got.FailureCallback)
		require.Equal(t, want.PublishID, got.PublishID)
		require.Equal(t, want.Topic, got.Topic)
		require.Equal(t, want.EndpointName, got.EndpointName)

		claims, err := db.ClaimTasks(ctx, testNode, allPartitions(), []uuid.UUID{want.ID}, dbNow(t, pool).Add(time.Second), 30*time.Second, nil)
		require.NoError(t, err)
		require.Len(t, claims, 1, "its own ordering key blocks nothing")
		c := claims[0]
		require.Equal(t, want.Callback, c.Callback)
		require.Equal(t, want.FailureCallback, c.FailureCallback)
		require.Equal(t, want.PublishID, c.PublishID, "sent as Hookwheel-Publish-Id")
		require.Equal(t, want.Topic, c.Topic, "sent as Hookwheel-Topic")
		require.Nil(t, c.Labels, "never sent")
		require.Nil(t, c.OrderingKey, "never sent")
		require.Nil(t, c.EndpointName, "never sent")
	}
}
