package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// decodeHeaders is a response_headers value as a map, failing the test
// unless it is one JSON object of strings with no key twice.
func decodeHeaders(t *testing.T, encoded string) map[string]string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(encoded))
	tok, err := dec.Token()
	require.NoError(t, err, "%s", encoded)
	require.Equal(t, json.Delim('{'), tok, "%s", encoded)
	m := map[string]string{}
	for dec.More() {
		key, err := dec.Token()
		require.NoError(t, err, "%s", encoded)
		var value string
		require.NoError(t, dec.Decode(&value), "%s", encoded)
		require.NotContains(t, m, key, "a key twice in %s", encoded)
		m[key.(string)] = value
	}
	tok, err = dec.Token()
	require.NoError(t, err, "%s", encoded)
	require.Equal(t, json.Delim('}'), tok, "%s", encoded)
	return m
}

func TestEncodeResponseHeaders(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		header http.Header
		want   map[string]string
	}{
		{"none", http.Header{}, map[string]string{}},
		{"nil", nil, map[string]string{}},
		{
			"canonical names, repeated values joined",
			http.Header{"content-type": {"text/plain"}, "Vary": {"Accept", "Origin"}, "X-Request-Id": {"r-1"}},
			map[string]string{"Content-Type": "text/plain", "Vary": "Accept, Origin", "X-Request-Id": "r-1"},
		},
		{
			"the canonical spelling wins over another",
			http.Header{"x-id": {"lower"}, "X-Id": {"canonical"}},
			map[string]string{"X-Id": "canonical"},
		},
		{"a header without values is left out", http.Header{"Empty": {}, "Server": {"s"}}, map[string]string{"Server": "s"}},
		{"an empty value is kept", http.Header{"X-Empty": {""}}, map[string]string{"X-Empty": ""}},
		{
			"credentials are never kept",
			http.Header{
				"Set-Cookie": {"session=abc"}, "Set-Cookie2": {"old=1"}, "Cookie": {"c=1"},
				"Authorization": {"Bearer x"}, "Proxy-Authorization": {"Basic y"},
				"X-Auth-Token": {"t"}, "X-Csrf-Token": {"t"}, "X-Authtoken": {"t"}, "X-Client-Secret": {"s"},
				"X-Password": {"p"}, "X-Api-Key": {"k"}, "X-Apikey": {"k"},
				"Www-Authenticate": {`Bearer realm="hooks"`}, "Content-Type": {"application/json"},
			},
			map[string]string{"Www-Authenticate": `Bearer realm="hooks"`, "Content-Type": "application/json"},
		},
		{
			"a name containing a credential word is never kept, in any case",
			http.Header{
				"X-Authorization": {"Bearer abc"}, "X-Auth": {"a"}, "X-Access-Key": {"k"}, "X-Session-Id": {"s"},
				"X-Amz-Credential": {"AKIA/20261122/us-east-1/s3/aws4_request"}, "X-Amz-Signature": {"f00"},
				"X-Amz-Security-Token": {"t"}, "Webhook-Signature": {"v1,abc"}, "X-Passwd": {"p"},
				"Sessionid": {"s"}, "x-oauth-scopes": {"repo"}, "X-My-Cookie": {"c"}, "Idempotency-Key": {"k"},
				"Server": {"receiver"},
			},
			map[string]string{"Server": "receiver"},
		},
		{
			"what hookwheel reads, the challenges and common headers are kept",
			http.Header{
				"Retry-After": {"30"}, "Hookwheel-Retry": {"stop"},
				"Www-Authenticate": {`Bearer realm="hooks", error="invalid_token"`}, "Proxy-Authenticate": {`Basic realm="proxy"`},
				"Content-Type": {"application/json"}, "Content-Length": {"11"}, "Date": {"Sun, 22 Nov 2026 10:00:00 GMT"},
				"Server": {"receiver"}, "X-Request-Id": {"r-1"}, "Cache-Control": {"no-store"}, "Vary": {"Accept"},
				"Via": {"1.1 proxy"}, "Keep-Alive": {"timeout=5"}, "Content-Encoding": {"gzip"},
			},
			map[string]string{
				"Retry-After": "30", "Hookwheel-Retry": "stop",
				"Www-Authenticate": `Bearer realm="hooks", error="invalid_token"`, "Proxy-Authenticate": `Basic realm="proxy"`,
				"Content-Type": "application/json", "Content-Length": "11", "Date": "Sun, 22 Nov 2026 10:00:00 GMT",
				"Server": "receiver", "X-Request-Id": "r-1", "Cache-Control": "no-store", "Vary": "Accept",
				"Via": "1.1 proxy", "Keep-Alive": "timeout=5", "Content-Encoding": "gzip",
			},
		},
		{
			"Location and Content-Location keep scheme, host and path",
			http.Header{
				"Location":         {"https://x/cb?code=abc&access_token=zzz"},
				"Content-Location": {"https://user:pass@files.example:8443/a/b.json?X-Amz-Signature=s#frag"},
			},
			map[string]string{"Location": "https://x/cb", "Content-Location": "https://files.example:8443/a/b.json"},
		},
		{
			"a relative Location loses its query and fragment",
			http.Header{"location": {"/cb#access_token=zzz"}, "Content-Location": {"//u@cdn.example/f?sig=1", "p?q"}},
			map[string]string{"Location": "/cb", "Content-Location": "//cdn.example/f, p"},
		},
		{
			"a Location without query, fragment or userinfo is kept as it is",
			http.Header{"Location": {"https://x/a/b@c"}, "Content-Location": {"mailto:a@b"}},
			map[string]string{"Location": "https://x/a/b@c", "Content-Location": "mailto:a@b"},
		},
		{
			"escaped for JSON; invalid UTF-8 and NUL replaced",
			http.Header{"X-Quote": {`a "b" \c`}, "X-Bad": {"ok\xffok\x00end\x01"}, "X-Tab": {"a\tb"}, "X-Utf8": {"café ✓"}},
			map[string]string{"X-Quote": `a "b" \c`, "X-Bad": "ok\uFFFDok\uFFFDend\x01", "X-Tab": "a\tb", "X-Utf8": "café ✓"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, decodeHeaders(t, store.EncodeResponseHeaders(tt.header)))
		})
	}

	t.Run("a value is cut at a character boundary", func(t *testing.T) {
		t.Parallel()
		long := strings.Repeat("a", store.MaxResponseHeaderValue-1) + "é" + "tail"
		got := decodeHeaders(t, store.EncodeResponseHeaders(http.Header{"Link": {long}}))
		require.Equal(t, strings.Repeat("a", store.MaxResponseHeaderValue-1), got["Link"],
			"the two-byte é would pass the bound: cut before it")

		values := []string{strings.Repeat("x", 300), strings.Repeat("y", 300)}
		got = decodeHeaders(t, store.EncodeResponseHeaders(http.Header{"Vary": values}))
		require.Len(t, got["Vary"], store.MaxResponseHeaderValue, "joined, then cut")
		require.True(t, strings.HasPrefix(got["Vary"], values[0]+", yyy"))
	})

	t.Run("at most MaxResponseHeaders, the largest dropped first", func(t *testing.T) {
		t.Parallel()
		h := http.Header{}
		for i := range 40 {
			// X-H-00 is the largest, X-H-39 the smallest.
			h.Set(fmt.Sprintf("X-H-%02d", i), strings.Repeat("v", 40-i))
		}
		h.Set("Retry-After", strings.Repeat("9", 60))
		h.Set("Hookwheel-Retry", "stop")
		got := decodeHeaders(t, store.EncodeResponseHeaders(h))
		require.Len(t, got, store.MaxResponseHeaders)
		require.Contains(t, got, "Retry-After", "what hookwheel acts on is kept first, however large")
		require.Equal(t, "stop", got["Hookwheel-Retry"])
		for i := range 40 {
			_, ok := got[fmt.Sprintf("X-H-%02d", i)]
			require.Equal(t, i >= 10, ok, "X-H-%02d: the 30 smallest fill the rest", i)
		}
	})

	t.Run("at most MaxResponseHeaderBytes, the largest dropped first", func(t *testing.T) {
		t.Parallel()
		h := http.Header{"Content-Type": {"application/json"}, "Hookwheel-Retry": {"stop"}}
		for i := range 12 {
			h.Set(fmt.Sprintf("Csp-%02d", i), strings.Repeat("p", 400+i))
		}
		h.Set("Huge", strings.Repeat("h", 100_000))
		encoded := store.EncodeResponseHeaders(h)
		got := decodeHeaders(t, encoded)
		total := 0
		for name, value := range got {
			total += len(name) + len(value)
		}
		require.LessOrEqual(t, total, store.MaxResponseHeaderBytes)
		require.Less(t, len(encoded), store.MaxResponseHeaderBytes+32*8, "names, values and the JSON around them")
		require.Equal(t, "application/json", got["Content-Type"])
		require.Equal(t, "stop", got["Hookwheel-Retry"])
		for i := range 12 {
			_, ok := got[fmt.Sprintf("Csp-%02d", i)]
			require.Equal(t, i < 9, ok, "Csp-%02d: the smallest fill what is left", i)
		}
		require.NotContains(t, got, "Huge", "even cut to MaxResponseHeaderValue, the largest goes first")
	})
}

// BenchmarkEncodeResponseHeaders: encoding runs once per attempt, on the
// sender, and should allocate its result alone (sync.Pool holds the
// buffer; the race detector drops pooled items on purpose, so measure
// without it).
func BenchmarkEncodeResponseHeaders(b *testing.B) {
	h := http.Header{
		"Content-Type": {"application/json"}, "Date": {"Sun, 22 Nov 2026 10:00:00 GMT"}, "Content-Length": {"11"},
		"Server": {"receiver"}, "X-Request-Id": {"8c1b2f0e"}, "Vary": {"Accept", "Origin"}, "Set-Cookie": {"s=1"},
	}
	b.ReportAllocs()
	for b.Loop() {
		store.EncodeResponseHeaders(h)
	}
}

// TestRecordAttemptResponseHeaders: the response_headers column takes what
// EncodeResponseHeaders makes, in the batched statement, and gives it back;
// an attempt with no response has none.
func TestRecordAttemptResponseHeaders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)

	big := http.Header{"Content-Type": {"text/plain"}, "X-Odd": {"\x00\xff\"\\"}}
	for i := range 60 {
		big.Set(fmt.Sprintf("X-Filler-%02d", i), strings.Repeat("f", 200+i))
	}
	tests := []struct {
		name    string
		headers *string
		code    *int
		errText *string
	}{
		{"round trip", ptr(store.EncodeResponseHeaders(http.Header{"Content-Type": {"application/json"}, "Retry-After": {"30"}})), ptr(503), nil},
		{"empty object", ptr(store.EncodeResponseHeaders(http.Header{})), ptr(200), nil},
		{"at the bound, with bytes jsonb must be given escaped", ptr(store.EncodeResponseHeaders(big)), ptr(200), nil},
		{"no response: NULL", nil, nil, ptr("dial tcp: connection refused")},
	}
	results := make([]model.AttemptResult, len(tests))
	for i, tt := range tests {
		c := claimOne(t, db, pool, insertDueTask(t, db, pool, tenant.ID).ID)
		results[i] = recordFor(c, "success", tt.code, tt.errText, model.StatusDelivered, nil)
		results[i].ResponseHeaders = tt.headers
	}
	errs, err := db.RecordAttempts(ctx, results)
	require.NoError(t, err, "one statement for the batch")
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, errs[i])
			attempts, err := db.ListAttempts(ctx, tenant.ID, results[i].TaskID, 0, 1000)
			require.NoError(t, err)
			require.Len(t, attempts, 1)
			got := attempts[0].ResponseHeaders
			if tt.headers == nil {
				require.Nil(t, got)
				require.Equal(t, 1, countRows(t, pool,
					`SELECT count(*) FROM attempts WHERE task_id = $1 AND response_headers IS NULL`, results[i].TaskID))
				return
			}
			require.NotNil(t, got)
			require.Equal(t, decodeHeaders(t, *tt.headers), decodeHeaders(t, *got))
			require.LessOrEqual(t, len(*got), 2*store.MaxResponseHeaderBytes, "stored within its bound")
		})
	}
}
