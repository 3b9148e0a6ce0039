package hookwheel_test

// These examples show the calls; they are compiled, not run (they would need
// a server). live_test.go runs the same calls against a live server when
// HOOKWHEEL_URL and HOOKWHEEL_API_KEY are set.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/google/uuid"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

func ExampleNew() {
	client, err := hookwheel.New(os.Getenv("HOOKWHEEL_URL"), os.Getenv("HOOKWHEEL_API_KEY"),
		hookwheel.WithRetries(5), hookwheel.WithMaxRetryWait(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	me, err := client.Me(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("calling as tenant", me.Tenant.Name)
}

func ExampleClient_CreateTask() {
	client, err := hookwheel.New("http://localhost:8080", os.Getenv("HOOKWHEEL_API_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	task, err := client.CreateTask(context.Background(), hookwheel.TaskRequest{
		URL:     "https://example.com/hooks/order-timeout",
		Body:    `{"order": 42}`,
		Headers: map[string]string{"Content-Type": "application/json"},
		Delay:   30 * time.Minute,
		// The key makes the create safe to repeat, from this program or
		// another: the server stores one task per key.
		IdempotencyKey: "order-42-timeout",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("scheduled", task.ID, "for", task.RunAt)
}

func ExampleClient_ListTasks() {
	client, err := hookwheel.New("http://localhost:8080", os.Getenv("HOOKWHEEL_API_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	// Every dead letter, page after page.
	for task, err := range client.ListTasks(context.Background(), hookwheel.TaskFilter{Status: hookwheel.StatusDead}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(task.ID, task.URL, task.Attempts, "attempts")
	}
}

func ExampleClient_CancelTask() {
	client, err := hookwheel.New("http://localhost:8080", os.Getenv("HOOKWHEEL_API_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	id := uuid.MustParse("0190f3a2-7b1c-7d2e-9f00-0123456789ab")
	_, err = client.CancelTask(context.Background(), id)
	switch {
	case errors.Is(err, hookwheel.ErrConflict):
		fmt.Println("too late: the webhook is being sent or was sent")
	case errors.Is(err, hookwheel.ErrNotFound):
		fmt.Println("no such task")
	case err != nil:
		log.Fatal(err)
	}
}

func ExampleClient_ReplayTask() {
	client, err := hookwheel.New("http://localhost:8080", os.Getenv("HOOKWHEEL_API_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	id := uuid.MustParse("0190f3a2-7b1c-7d2e-9f00-0123456789ab")
	// The receiver moved: send the dead task to its new address.
	task, err := client.ReplayTask(context.Background(), id, &hookwheel.ReplayEdit{URL: "https://new.example.com/hooks"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(task.Status, task.NextAttemptAt)
}

func ExampleClient_CreateTasks() {
	client, err := hookwheel.New("http://localhost:8080", os.Getenv("HOOKWHEEL_API_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	reqs := []hookwheel.TaskRequest{
		{URL: "https://example.com/hooks/a", Delay: time.Minute},
		{URL: "https://example.com/hooks/b", Delay: 2 * time.Minute},
	}
	results, err := client.CreateTasks(context.Background(), reqs)
	if err != nil {
		log.Fatal(err) // nothing was stored
	}
	for i, r := range results {
		if r.Err != nil {
			fmt.Println(i, "refused:", r.Err)
			continue
		}
		fmt.Println(i, "scheduled", r.Task.ID)
	}
}

func ExampleClient_ReplayDead() {
	client, err := hookwheel.New("http://localhost:8080", os.Getenv("HOOKWHEEL_API_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	filter := hookwheel.DeadFilter{URLPrefix: "https://example.com/hooks/", DryRun: true}
	count, err := client.ReplayDead(context.Background(), filter)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(count.Matched, "dead tasks would be replayed")
}

func ExampleClient_CreateSchedule() {
	client, err := hookwheel.New("http://localhost:8080", os.Getenv("HOOKWHEEL_API_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	s, err := client.CreateSchedule(ctx, hookwheel.ScheduleRequest{
		Cron:     "0 9 * * 1-5",
		Timezone: "Europe/Paris",
		URL:      "https://example.com/hooks/daily-report",
	})
	if err != nil {
		log.Fatal(err)
	}
	next, err := client.NextScheduleTimes(ctx, s.ID, 3)
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range next {
		fmt.Println(t.Local)
	}
}
