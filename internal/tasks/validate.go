package tasks

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/internal/retry"
)

// The rules a task must keep to be stored live here, below every caller
// that creates tasks (the HTTP API, and programs inserting tasks in their
// own transaction), so that a task one of them accepts the other accepts
// too. Each check reports what is wrong under the field's name in the HTTP
// API's JSON ("url", "retry.max_attempts", "headers.X-Token"), to a
// Reporter of the caller's.

// Reporter receives what is wrong with a request, field by field, in the
// order found: the API's list of problems, or a *FieldErrors.
type Reporter interface {
	Add(field, format string, args ...any)
}

// FieldError is one thing wrong with a request: the field, named as in the
// HTTP API's JSON, and why.
type FieldError struct {
	Field   string
	Message string
}

// FieldErrors gathers what is wrong with a request; it is a Reporter.
type FieldErrors []FieldError

// Add reports that field is wrong, for the reason format and args spell.
func (fe *FieldErrors) Add(field, format string, args ...any) {
	*fe = append(*fe, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Bounds of a task beyond the configurable Rules.
const (
	MinTimeout     = time.Second
	MaxURLLength   = 4096
	MaxHeaders     = 64
	MaxHeaderBytes = 16 << 10
	// MaxIdempotencyKey is the longest idempotency key, in characters.
	MaxIdempotencyKey = 255
)

// The defaults of Rules: a node's when HOOKWHEEL_MAX_BODY_BYTES,
// HOOKWHEEL_MAX_SCHEDULE_AHEAD and HOOKWHEEL_MAX_TIMEOUT are not set.
const (
	DefaultMaxBody          = 1 << 20
	DefaultMaxScheduleAhead = 365 * 24 * time.Hour
	DefaultTimeout          = 30 * time.Second
	DefaultMaxTimeout       = 5 * time.Minute
)

// Rules are a node's bounds on the tasks it accepts. Every field is
// required but Guard; the defaults above are a node's defaults.
type Rules struct {
	// MaxBody is the largest webhook body, in bytes.
	MaxBody int
	// MaxScheduleAhead is how far ahead a task may be due.
	MaxScheduleAhead time.Duration
	// DefaultTimeout is a task's per-attempt timeout when it gives none,
	// MaxTimeout the longest it may give; a tenant's max_timeout lowers
	// both.
	DefaultTimeout, MaxTimeout time.Duration
	// Guard refuses URLs whose host is a literal address webhooks may not
	// reach. Optional: without it URLs are not checked at creation (the
	// dispatcher still checks every address it dials).
	Guard *netguard.Guard
}

// Request is a task as asked for, in Go's types: the fields of
// POST /v1/tasks one for one, whether they came as the API's JSON or from a
// Go program (package txenqueue). A nil field was not given and takes its
// default.
type Request struct {
	// URL is where the webhook goes; Topic, instead, publishes it to each
	// endpoint of the tenant's topic of that name (Service.Publish). One of
	// the two, not both.
	URL     *string
	Topic   *string
	Method  *string
	Headers map[string]string
	Body    []byte
	// RunAt and Delay are exclusive; neither means now.
	RunAt *time.Time
	Delay *time.Duration
	// ExpiresAt and ExpiresIn (from now) are exclusive: the instant from
	// which no attempt may start (Rules.Expiry); neither: never.
	ExpiresAt *time.Time
	ExpiresIn *time.Duration
	// Timeout, and Retry's fields: the tenant's defaults, then hookwheel's,
	// for those not given.
	Timeout *time.Duration
	Retry   *RetryRequest
	Labels  map[string]string
	// OrderingKey, FlowKey, Callback and FailureCallback: nil for none.
	OrderingKey               *string
	FlowKey                   *string
	Callback, FailureCallback *string
	// IdempotencyKey, when set, makes the create idempotent.
	IdempotencyKey *string
	// IdempotencyKeyField names where the key was given, for its errors
	// (the API's Idempotency-Key header); "idempotency_key" when empty.
	IdempotencyKeyField string
	// Unreadable are the fields given in a form the caller could not read
	// into the types above (a run_at that is not an RFC 3339 time), each
	// with why, under its name in the API's JSON: the caller reads, the
	// checks stay here. Check reports each in its field's place and takes
	// the field as given but holding nothing. The fields that may be
	// unreadable are body, run_at, delay, expires_at, expires_in, timeout,
	// retry.min_backoff and retry.max_backoff.
	Unreadable FieldErrors
}

// RetryRequest is the retry policy a task asks for; a nil field takes the
// tenant's default, then hookwheel's.
type RetryRequest struct {
	MaxAttempts            *int
	MinBackoff, MaxBackoff *time.Duration
}

// Check turns a request of tenant, made at now, into the task to store
// (without id, tenant or request hash), or reports what is wrong with it
// to rep and returns nil. It is the one place a task is made from what a
// caller asks, for every caller that creates tasks.
func (r Rules) Check(rep Reporter, req *Request, tenant *model.Tenant, now time.Time) *model.Task {
	var fe FieldErrors
	keyField := req.IdempotencyKeyField
	if keyField == "" {
		keyField = "idempotency_key"
	}
	CheckIdempotencyKey(&fe, keyField, req.IdempotencyKey)
	t := &model.Task{IdempotencyKey: req.IdempotencyKey}
	t.URL, t.Topic = r.CheckTarget(&fe, req.URL, req.Topic, tenant)
	t.Method = http.MethodPost
	if req.Method != nil {
		t.Method = CheckMethod(&fe, *req.Method)
	}
	t.Headers = CheckHeaders(&fe, req.Headers)
	if !reportUnreadable(&fe, req.Unreadable, "body") {
		t.Body = r.CheckBody(&fe, req.Body)
	}
	t.RunAt = r.Due(&fe, req, now)
	t.ExpiresAt = r.Expiry(&fe, req, t.RunAt, now)

	reportUnreadable(&fe, req.Unreadable, "timeout")
	t.Timeout = r.CheckTimeout(&fe, req.Timeout, tenant)

	policy := TenantPolicy(tenant.Retry)
	if retry := req.Retry; retry != nil {
		if retry.MaxAttempts != nil {
			policy.MaxAttempts = *retry.MaxAttempts
		}
		if retry.MinBackoff != nil {
			policy.MinBackoff = *retry.MinBackoff
		}
		if retry.MaxBackoff != nil {
			policy.MaxBackoff = *retry.MaxBackoff
		}
		// A policy with a backoff missing is not judged as a whole.
		if !reportUnreadable(&fe, req.Unreadable, "retry.min_backoff", "retry.max_backoff") {
			AddPolicyErrors(&fe, policy)
		}
	}
	t.MaxAttempts, t.MinBackoff, t.MaxBackoff = policy.MaxAttempts, policy.MinBackoff, policy.MaxBackoff

	for _, e := range CheckLabels("labels", req.Labels) {
		fe.Add(e.Field, "%s", e.Message)
	}
	if len(req.Labels) > 0 {
		t.Labels = req.Labels
	}
	t.OrderingKey = CheckOrderingKey(&fe, req.OrderingKey)
	t.FlowKey = CheckFlowKey(&fe, req.FlowKey)
	t.Callback = r.CheckCallback(&fe, "callback", req.Callback, tenant)
	t.FailureCallback = r.CheckCallback(&fe, "failure_callback", req.FailureCallback, tenant)

	for _, e := range fe {
		rep.Add(e.Field, "%s", e.Message)
	}
	if len(fe) > 0 {
		return nil
	}
	return t
}

// Due resolves a request's run_at or delay to the instant the task falls
// due, as DueTime does, for creation and rescheduling alike; of the two,
// only RunAt, Delay and Unreadable are read. Both given are refused as a
// pair, whatever they hold; else the one that could not be read is
// reported, and the task is due now.
func (r Rules) Due(rep Reporter, req *Request, now time.Time) time.Time {
	runAt, delay := req.RunAt, req.Delay
	runAtGiven := runAt != nil || slices.ContainsFunc(req.Unreadable, func(e FieldError) bool { return e.Field == "run_at" })
	delayGiven := delay != nil || slices.ContainsFunc(req.Unreadable, func(e FieldError) bool { return e.Field == "delay" })
	if runAtGiven && delayGiven {
		runAt, delay = &now, new(time.Duration)
	} else {
		reportUnreadable(rep, req.Unreadable, "run_at", "delay")
	}
	return r.DueTime(rep, runAt, delay, now)
}

// reportUnreadable reports to rep what unreadable says of fields, in the
// order of fields, and whether it said anything.
func reportUnreadable(rep Reporter, unreadable FieldErrors, fields ...string) bool {
	found := false
	for _, field := range fields {
		for _, e := range unreadable {
			if e.Field == field {
				rep.Add(e.Field, "%s", e.Message)
				found = true
			}
		}
	}
	return found
}

var allowedMethods = map[string]bool{
	http.MethodGet: true, http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true, http.MethodDelete: true,
}

// hopByHop are the headers that describe one connection, not the message
// (RFC 9110 §7.6.1); the transport manages them.
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// reservedHeader says why a task may not set a header, or "" when it may.
// An underscore counts as a hyphen: CGI, WSGI, Rack and the servers built
// on them hand a receiver "webhook_id" and "webhook-id" under one name
// (HTTP_WEBHOOK_ID), so the first could stand in for the second.
func reservedHeader(name string) string {
	name = strings.ReplaceAll(name, "_", "-")
	canonical := http.CanonicalHeaderKey(name)
	lower := strings.ToLower(name)
	switch {
	case canonical == "Host" || canonical == "Content-Length":
		return "is set by hookwheel from the URL and body"
	case hopByHop[canonical]:
		return "is a hop-by-hop header, managed by the connection"
	case strings.HasPrefix(lower, "webhook-"):
		return "is reserved for the Standard Webhooks signature headers"
	case strings.HasPrefix(lower, "hookwheel-"):
		return "is reserved for hookwheel's own headers"
	case canonical == "Idempotency-Key":
		return "is set by hookwheel: pass it as the Idempotency-Key header of this request instead"
	}
	return ""
}

// CheckURL checks a URL a webhook is sent to as given (not empty), a task's
// url or one of its callbacks, reporting what is wrong with it under field.
// It returns the URL, or "" when it is refused.
func (r Rules) CheckURL(rep Reporter, field, raw string, tenant *model.Tenant) string {
	if len(raw) > MaxURLLength {
		rep.Add(field, "must be at most %d characters", MaxURLLength)
		return ""
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		rep.Add(field, "is not a valid URL: %v", errors.Unwrap(err))
	case u.Scheme != "http" && u.Scheme != "https":
		rep.Add(field, "must be an absolute http or https URL")
	case u.Host == "" || u.Hostname() == "":
		rep.Add(field, "must name a host")
	case !validPort(u.Port()):
		rep.Add(field, "must have a port from 1 to 65535, or none")
	case !validHost(u.Host):
		rep.Add(field, "has a host that cannot be sent as an HTTP Host header")
	case u.User != nil:
		rep.Add(field, "must not carry credentials; send an Authorization header instead")
	case u.Fragment != "":
		rep.Add(field, "must not have a #fragment, which is never sent")
	case r.Guard != nil && r.Guard.Allowing(tenant.TargetAllowCIDRs).CheckURL(u) != nil:
		rep.Add(field, "%v", r.Guard.Allowing(tenant.TargetAllowCIDRs).CheckURL(u))
	default:
		return raw
	}
	return ""
}

// CheckTarget checks where a task goes as given (nil: not given): rawURL,
// for one webhook to it, or topic, for one to each endpoint of the topic;
// exactly one of the two. It returns the URL, "" for a publish or when
// refused, and the topic, nil for a webhook to a URL.
func (r Rules) CheckTarget(rep Reporter, rawURL, topic *string, tenant *model.Tenant) (string, *string) {
	switch {
	case rawURL != nil && topic != nil:
		rep.Add("url", "and topic are exclusive: give a url for one task, or a topic to publish to its endpoints")
	case topic != nil:
		CheckTopicName(rep, "topic", *topic)
		return "", topic
	case rawURL == nil || *rawURL == "":
		rep.Add("url", "is required (or a topic to publish to)")
	default:
		return r.CheckURL(rep, "url", *rawURL, tenant), nil
	}
	return "", nil
}

// CheckTopicName checks the name of a topic (or of a topic's endpoint) as
// given, under field.
func CheckTopicName(rep Reporter, field, name string) {
	if msg := TopicNameProblem(name); msg != "" {
		rep.Add(field, "%s", msg)
	}
}

// CheckCallback checks a task's callback or failure_callback as given at
// creation (nil: none), by the rules of its url: the callback is a webhook
// of its own, sent to the same kind of target.
func (r Rules) CheckCallback(rep Reporter, field string, raw *string, tenant *model.Tenant) *string {
	if raw == nil {
		return nil
	}
	if *raw == "" {
		rep.Add(field, "must not be empty; leave it out for none")
		return nil
	}
	if u := r.CheckURL(rep, field, *raw, tenant); u != "" {
		return &u
	}
	return nil
}

// CheckOrderingKey checks a task's ordering key as given (nil: none), under
// "ordering_key", and returns it.
func CheckOrderingKey(rep Reporter, key *string) *string {
	return checkKey(rep, "ordering_key", key, OrderingKeyProblem)
}

// checkKey checks a key as given (nil: none) by problem, under field, and
// returns it.
func checkKey(rep Reporter, field string, key *string, problem func(string) string) *string {
	if key != nil {
		if msg := problem(*key); msg != "" {
			rep.Add(field, "%s", msg)
		}
	}
	return key
}

// CheckIdempotencyKey checks an idempotency key as given (nil: none),
// under field.
func CheckIdempotencyKey(rep Reporter, field string, key *string) {
	CheckText(rep, field, key, MaxIdempotencyKey)
}

// CheckText checks a text field as given (nil: none): 1 to most characters
// of valid UTF-8, without NUL, which Postgres text cannot hold.
func CheckText(rep Reporter, field string, v *string, most int) {
	switch {
	case v == nil:
	case len(*v) == 0 || utf8.RuneCountInString(*v) > most:
		rep.Add(field, "must be 1 to %d characters", most)
	case !utf8.ValidString(*v):
		rep.Add(field, "must be valid UTF-8")
	case strings.ContainsRune(*v, 0):
		rep.Add(field, "must not contain NUL characters")
	}
}

// CheckMethod checks a task's method as given, under "method".
func CheckMethod(rep Reporter, method string) string {
	if !allowedMethods[method] {
		rep.Add("method", "must be one of GET, POST, PUT, PATCH, DELETE")
	}
	return method
}

// CheckHeaders checks a task's headers as given, each under
// "headers.<name>", and returns them by canonical name.
func CheckHeaders(rep Reporter, headers map[string]string) map[string]string {
	out := make(map[string]string, len(headers))
	if len(headers) > MaxHeaders {
		rep.Add("headers", "must hold at most %d headers", MaxHeaders)
	}
	headerBytes := 0
	// The headers given so far, by a name with '_' read as '-': CGI, WSGI
	// and Rack receivers read X_A and X-A as one header, as they do for the
	// reserved names (reservedHeader).
	seen := make(map[string]string, len(headers))
	// In order, so that of two names differing only in letter case the
	// same one is refused every time.
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		value := headers[name]
		field := "headers." + name
		canonical := http.CanonicalHeaderKey(name)
		same := http.CanonicalHeaderKey(strings.ReplaceAll(name, "_", "-"))
		first, repeated := seen[same]
		switch {
		case !httpguts.ValidHeaderFieldName(name):
			rep.Add(field, "is not a valid header name")
		case !httpguts.ValidHeaderFieldValue(value):
			rep.Add(field, "has an invalid value (control characters are not allowed)")
		case reservedHeader(name) != "":
			rep.Add(field, "%s", reservedHeader(name))
		case repeated:
			// Header names are case-insensitive: both would be one
			// header, with one of the two values.
			rep.Add(field, "is %s again, in other letters; give each header once", first)
		default:
			seen[same] = canonical
			out[canonical] = value
		}
		headerBytes += len(name) + len(value)
	}
	if headerBytes > MaxHeaderBytes {
		rep.Add("headers", "must total at most %d bytes", MaxHeaderBytes)
	}
	return out
}

// CheckBody checks a task's body, under "body", and returns it (empty, not
// nil, for none). It must be text: the API shows and takes bodies as JSON
// strings, which cannot carry other bytes.
func (r Rules) CheckBody(rep Reporter, body []byte) []byte {
	switch {
	case !utf8.Valid(body):
		rep.Add("body", "is not valid UTF-8, so it cannot be shown or edited as it is sent; send text, or encode binary data (base64) yourself")
	case len(body) > r.MaxBody:
		rep.Add("body", "must be at most %d bytes", r.MaxBody)
	}
	if body == nil {
		return []byte{}
	}
	return body
}

// DueTime resolves runAt or delay (at most one given) to the instant a
// task falls due, for creation and rescheduling alike: neither, or a time
// already past, means now; nothing beyond MaxScheduleAhead. Given both,
// the pair is refused whatever they hold.
func (r Rules) DueTime(rep Reporter, runAt *time.Time, delay *time.Duration, now time.Time) time.Time {
	at := now
	switch {
	case runAt != nil && delay != nil:
		rep.Add("run_at", "and delay are exclusive: give only one")
	case runAt != nil:
		switch t := *runAt; {
		// The horizon rounded as due times are: a task due at it (run_at
		// or delay at the limit) answers with a run_at that is accepted
		// back.
		case t.After(model.RoundUpToMicro(now.Add(r.MaxScheduleAhead))):
			rep.Add("run_at", "must be at most %s ahead", r.MaxScheduleAhead)
		case t.After(now):
			at = t
		}
	case delay != nil:
		switch d := *delay; {
		case d < 0:
			rep.Add("delay", "must not be negative")
		case d > r.MaxScheduleAhead:
			rep.Add("delay", "must be at most %s", r.MaxScheduleAhead)
		default:
			at = now.Add(d)
		}
	}
	// Postgres keeps microseconds; rounding up keeps "never before" true.
	return model.RoundUpToMicro(at)
}

// CheckTimeout checks a task's per-attempt timeout as given (nil: none),
// under "timeout", against the node's bound and the tenant's max_timeout,
// and returns it, or the default (cut to those bounds) when none is given.
func (r Rules) CheckTimeout(rep Reporter, timeout *time.Duration, tenant *model.Tenant) time.Duration {
	maxTimeout := r.MaxTimeout
	if m := tenant.Limits.MaxTimeout; m > 0 {
		maxTimeout = min(maxTimeout, m)
	}
	switch {
	case timeout == nil:
	case *timeout < MinTimeout || *timeout > maxTimeout:
		rep.Add("timeout", "must be between %s and %s", MinTimeout, maxTimeout)
	default:
		return *timeout
	}
	return min(r.DefaultTimeout, maxTimeout)
}

// validPort reports whether a URL's port (empty for the scheme's) is one a
// connection can be made to.
func validPort(port string) bool {
	if port == "" {
		return true
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535
}

// validHost reports whether net/http sends a URL's host (and port) as the
// Host header: url.Parse lets through characters such as < > " that
// Request.Write would answer with an empty Host instead.
func validHost(hostport string) bool {
	ascii, err := httpguts.PunycodeHostPort(hostport)
	return err == nil && httpguts.ValidHostHeader(ascii)
}

// TenantPolicy is the retry policy a tenant's task gets when it gives none:
// the tenant's defaults over hookwheel's.
func TenantPolicy(d model.RetryDefaults) retry.Policy {
	p := retry.DefaultPolicy()
	if d.MaxAttempts != nil {
		p.MaxAttempts = *d.MaxAttempts
	}
	if d.MinBackoff != nil {
		p.MinBackoff = *d.MinBackoff
	}
	if d.MaxBackoff != nil {
		p.MaxBackoff = *d.MaxBackoff
	}
	return p
}

// AddPolicyErrors reports each invalid field of a retry policy under
// "retry.<field>".
func AddPolicyErrors(rep Reporter, p retry.Policy) {
	err := p.Validate()
	if err == nil {
		return
	}
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	for _, e := range errs {
		var f *retry.FieldError
		if errors.As(e, &f) {
			rep.Add("retry."+f.Field, "%s", f.Message)
		}
	}
}
