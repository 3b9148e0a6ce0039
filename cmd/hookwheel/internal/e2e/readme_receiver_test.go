package e2e_test

// README.md shows this file from its imports on, verbatim: the receiver in
// "Receiving webhooks". TestREADMEReceiver runs it against real webhooks and
// checks that README.md still holds it.

import (
	"io"
	"net/http"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// receiveWebhooks answers hookwheel's webhooks: it verifies each one with the
// tenant's signing secret ("whsec_...") and hands it to handle. A webhook can
// arrive more than once (same webhook-id): handle should do nothing for an id
// it has already handled.
func receiveWebhooks(secret string, handle func(webhookID string, body []byte) error) (http.Handler, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "cannot read the body", http.StatusBadRequest)
			return
		}
		// The HMAC of webhook-id, webhook-timestamp and the body, and a
		// timestamp within 5 minutes of now, so an old request cannot be
		// sent again.
		if err := wh.Verify(body, r.Header); err != nil {
			http.Error(w, "invalid signature", http.StatusUnauthorized)
			return
		}
		if err := handle(r.Header.Get("webhook-id"), body); err != nil {
			// 5xx (and 408, 425, 429) is retried later; other statuses are final.
			http.Error(w, "try again later", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent) // any 2xx: delivered
	}), nil
}
