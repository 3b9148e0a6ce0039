package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hookwheel/hookwheel/internal/signing"
	"github.com/hookwheel/hookwheel/sdk/go/webhook"
)

// receive runs a development receiver: it prints every webhook it gets,
// checks its signatures when given the tenant's signing secret or public
// key, and shows how late it arrived. It is what `make run` points the demo at.
func receive(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("receive", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:9000", "listen address")
	secret := fs.String("secret", "", "the tenant's signing secret (whsec_...) or public key (whpk_...), to verify signatures")
	status := fs.Int("status", http.StatusOK, "status code to answer with (try 500 to watch retries)")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	var keys []string
	if *secret != "" {
		if err := checkVerifyingKey(*secret); err != nil {
			return fmt.Errorf("--secret: %w", err)
		}
		keys = []string{*secret}
	}
	var mu sync.Mutex // one webhook printed at a time
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived := time.Now()
		body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		if err != nil {
			http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
			return
		}
		verdict := "not checked (no --secret)"
		if keys != nil {
			if err := webhook.Verify(keys, r.Header, body); err != nil {
				verdict = "INVALID: " + err.Error()
			} else {
				verdict = "valid"
			}
		}
		lateness := "unknown"
		if at, err := time.Parse(time.RFC3339Nano, r.Header.Get("Hookwheel-Scheduled-At")); err == nil {
			lateness = arrived.Sub(at).Round(10 * time.Microsecond).String()
		}
		mu.Lock()
		fmt.Fprintf(stdout, "\n<- webhook %s %s at %s\n   webhook-id %s, attempt %s, %s after its run_at\n   signature %s\n   body %s\n",
			r.Method, r.URL.RequestURI(), arrived.Format(time.RFC3339Nano), r.Header.Get("webhook-id"),
			r.Header.Get("Hookwheel-Attempt"), lateness, verdict, truncate(body, 512))
		mu.Unlock()
		w.WriteHeader(*status)
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *addr, err)
	}
	fmt.Fprintf(stdout, "receiving webhooks on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + fmt.Sprintf("... (%d bytes)", len(b))
}

// checkVerifyingKey refuses a --secret that is neither a signing secret nor
// an Ed25519 public key, at start rather than as every webhook's verdict.
func checkVerifyingKey(s string) error {
	if strings.HasPrefix(s, signing.PublicKeyPrefix) {
		_, err := signing.ParsePublicKey(s)
		return err
	}
	_, err := signing.ParseSigningSecret(s)
	return err
}
