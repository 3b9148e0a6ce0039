package webhook_test

import (
	"io"
	"log"
	"net/http"
	"os"

	"github.com/hookwheel/hookwheel/sdk/go/webhook"
)

// A receiver checks each webhook before acting on it. During a rotation of
// the signing secret, it is given both secrets.
func ExampleVerify() {
	secrets := []string{os.Getenv("HOOKWHEEL_SIGNING_SECRET")}
	http.HandleFunc("/hooks/order-timeout", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "cannot read the body", http.StatusBadRequest)
			return
		}
		err = webhook.Verify(secrets, r.Header, body, webhook.WithURL("https://example.com/hooks/order-timeout"))
		if err != nil {
			// 4xx: hookwheel marks the task dead instead of retrying.
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		// ... act on body, once per webhook-id ...
		w.WriteHeader(http.StatusNoContent)
	})
	log.Fatal(http.ListenAndServe("127.0.0.1:9000", nil))
}

// A callback receiver verifies the callback as any webhook, then reads what
// became of the task it reports on.
func ExampleDecodeCallback() {
	secrets := []string{os.Getenv("HOOKWHEEL_SIGNING_SECRET")}
	http.HandleFunc("/hooks/charge-done", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "cannot read the body", http.StatusBadRequest)
			return
		}
		if err := webhook.Verify(secrets, r.Header, body); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		cb, err := webhook.DecodeCallback(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if cb.Status == webhook.CallbackDead {
			log.Printf("task %s died after attempt %d: %v", cb.TaskID, cb.Attempt, *cb.Error)
		} else {
			log.Printf("task %s delivered; the receiver answered %d: %s", cb.TaskID, *cb.Response.StatusCode, cb.Response.Body)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	log.Fatal(http.ListenAndServe("127.0.0.1:9000", nil))
}
