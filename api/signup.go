package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/tenants"
)

// Sign-up (POST /v1/signup) and the operator's invites. The rules of both
// are tenants.Signup's; what is the API's is reading the request, and the
// limit on sign-ups per client address and in all.

// SignupLimiter decides the sign-up limits in Redis, so that they hold
// across nodes. *store.Redis is one.
type SignupLimiter interface {
	AllowSignup(ctx context.Context, client string, count int, period time.Duration) (model.RateDecision, error)
}

// SignupLimit bounds sign-ups. Zero fields take the defaults.
type SignupLimit struct {
	// PerAddress is how many sign-ups one client address (an IPv6 one by
	// its /64) may make per Period: all at once, then one every
	// Period/PerAddress. Default 5.
	PerAddress int
	// Total is how many sign-ups every address together may make per
	// Period, against many addresses each staying under PerAddress.
	// Default 100.
	Total int
	// Period, default an hour.
	Period time.Duration
}

func (l *SignupLimit) setDefaults() {
	if l.PerAddress <= 0 {
		l.PerAddress = 5
	}
	if l.Total <= 0 {
		l.Total = 100
	}
	if l.Period <= 0 {
		l.Period = time.Hour
	}
}

// signupLimitTimeout bounds the limit's decision, as apiLimitTimeout does.
const signupLimitTimeout = 250 * time.Millisecond

// signupLimits applies SignupLimit through the limiter.
type signupLimits struct {
	limit   SignupLimit
	limiter SignupLimiter
	logger  *slog.Logger
	refused *prometheus.CounterVec
}

func newSignupLimits(cfg Config) (*signupLimits, error) {
	l := &signupLimits{limit: cfg.SignupLimit, limiter: cfg.SignupLimiter, logger: cfg.Logger,
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookwheel_signup_refusals_total",
			Help: "Sign-ups refused before any tenant was made, by limit: address (the client address's), total (every address's), unavailable (the limits could not be decided).",
		}, []string{"limit"})}
	l.limit.setDefaults()
	if err := cfg.Registerer.Register(l.refused); err != nil {
		return nil, fmt.Errorf("register sign-up metrics: %w", err)
	}
	for _, limit := range []string{"address", "total", "unavailable"} {
		l.refused.WithLabelValues(limit)
	}
	return l, nil
}

// allow counts one sign-up of client against its address's limit, then
// against the limit of all: a problem when either refuses. Unlike the API
// rate, this limit fails closed: without it anyone could make tenants
// without bound, while refusing sign-ups for a while costs little.
func (l *signupLimits) allow(ctx context.Context, c echo.Context, client string) error {
	if l.limiter == nil {
		l.refused.WithLabelValues("unavailable").Inc()
		return l.unavailable(c, errors.New("no limiter configured"))
	}
	ctx, cancel := context.WithTimeout(ctx, signupLimitTimeout)
	defer cancel()
	for _, scope := range []struct {
		client, name, what string
		count              int
	}{
		{client, "address", "one address", l.limit.PerAddress},
		{"", "total", "all addresses together", l.limit.Total},
	} {
		d, err := l.limiter.AllowSignup(ctx, scope.client, scope.count, l.limit.Period)
		if err != nil {
			l.refused.WithLabelValues("unavailable").Inc()
			return l.unavailable(c, err)
		}
		if !d.Allowed {
			l.refused.WithLabelValues(scope.name).Inc()
			retryAfter := max(1, ceilSeconds(d.RetryAfter))
			c.Response().Header().Set("Retry-After", strconv.Itoa(retryAfter))
			return newProblem(http.StatusTooManyRequests, "signup-limited", "Too many sign-ups",
				fmt.Sprintf("at most %d sign-ups %s may come from %s; retry in %d s", scope.count, perPeriod(l.limit.Period),
					scope.what, retryAfter))
		}
	}
	return nil
}

// perPeriod says "an hour", or "per <period>" for another period.
func perPeriod(d time.Duration) string {
	if d == time.Hour {
		return "an hour"
	}
	return "per " + formatDuration(d)
}

func (l *signupLimits) unavailable(c echo.Context, err error) error {
	l.logger.Warn("sign-up limits could not be decided; refusing sign-ups", "err", err)
	c.Response().Header().Set("Retry-After", strconv.Itoa(ceilSeconds(apiLimitSkip)))
	return newProblem(http.StatusServiceUnavailable, "signup-unavailable", "Sign-up unavailable",
		"sign-ups cannot be counted right now, and are not taken uncounted; retry in a few seconds")
}

// signupMode is the mode sign-ups are in: off without a Signup.
func (s *Server) signupMode() tenants.SignupMode {
	if s.cfg.Signup == nil {
		return tenants.SignupOff
	}
	return s.cfg.Signup.Mode()
}

// GetSignup tells whether and how tenants may sign up.
func (s *Server) GetSignup(c echo.Context) error {
	return c.JSON(http.StatusOK, openapi.SignupInfo{Mode: openapi.SignupMode(s.signupMode())})
}

// maxInviteCodeLength bounds the invite code a sign-up may send: a real one
// is 38 characters.
const maxInviteCodeLength = 100

// SignUp makes a tenant for whoever asks, when sign-up is on.
func (s *Server) SignUp(c echo.Context) error {
	if s.signupMode() == tenants.SignupOff {
		return signupError(tenants.ErrSignupOff)
	}
	// A JSON body only, as for signing in: a form of another site could
	// otherwise post sign-ups from its visitors' browsers, each counted
	// against the visitor's address.
	if mt, _, _ := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType)); mt != echo.MIMEApplicationJSON {
		return newProblem(http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported media type",
			"sign up with a JSON body, Content-Type application/json")
	}
	var body openapi.SignupRequest
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	req := tenants.SignupRequest{Name: body.Name, Client: c.RealIP()}
	if body.InviteCode != nil {
		if len(*body.InviteCode) > maxInviteCodeLength {
			var fe fieldErrors
			fe.add("invite_code", "must be at most %d characters", maxInviteCodeLength)
			return fe.problem()
		}
		req.InviteCode = *body.InviteCode
	}
	// What cannot succeed is refused before it counts against the
	// address: a typo in the name must not cost one of its few sign-ups.
	if err := s.cfg.Signup.Check(req); err != nil {
		return signupError(err)
	}
	ctx := c.Request().Context()
	if err := s.signups.allow(ctx, c, clientOf(req.Client)); err != nil {
		return err
	}
	created, err := s.cfg.Signup.SignUp(ctx, req)
	if err != nil {
		return signupError(err)
	}
	return c.JSON(http.StatusCreated, openapi.SignupCreated{Tenant: TenantJSON(&created.Tenant), APIKey: created.APIKey,
		SigningSecret: created.SigningSecret})
}

// signupError renders the refusals of tenants.Signup.
func signupError(err error) error {
	var fieldErr *tenants.FieldError
	switch {
	case errors.As(err, &fieldErr):
		var fe fieldErrors
		fe.add(fieldErr.Field, "%s", fieldErr.Message)
		return fe.problem()
	case errors.Is(err, tenants.ErrSignupOff):
		return newProblem(http.StatusNotFound, "signup-disabled", "Sign-up not enabled",
			"this installation does not let tenants sign up (HOOKWHEEL_SIGNUP=off); ask its operator for an account")
	case errors.Is(err, tenants.ErrInviteRequired):
		return newProblem(http.StatusForbidden, "invite-required", "Invite code required",
			"signing up here needs an invite code (invite_code) from the operator")
	case errors.Is(err, model.ErrInviteUnknown):
		return newProblem(http.StatusForbidden, "invite-invalid", "Invalid invite code",
			"this invite code is not one the operator made, or it was revoked; check it, or ask for another")
	case errors.Is(err, model.ErrInviteUsed):
		return newProblem(http.StatusForbidden, "invite-used", "Invite code already used",
			"this invite code has signed up a tenant already; ask the operator for another")
	case errors.Is(err, model.ErrInviteExpired):
		return newProblem(http.StatusForbidden, "invite-expired", "Invite code expired",
			"this invite code has expired; ask the operator for another")
	}
	return err
}

// invites is the Signup behind the invite calls, or a 404 without one.
func (s *Server) invites() (*tenants.Signup, error) {
	if s.cfg.Signup == nil {
		return nil, notFound("invites (sign-up is not configured on this server)")
	}
	return s.cfg.Signup, nil
}

// CreateInvite makes a one-time invite code and shows it, once.
func (s *Server) CreateInvite(c echo.Context) error {
	signup, err := s.invites()
	if err != nil {
		return err
	}
	var req openapi.InviteCreateRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var fe fieldErrors
	var ttl time.Duration
	if req.ExpiresIn != nil {
		ttl, _ = parseDuration(&fe, "expires_in", *req.ExpiresIn)
		if len(fe) == 0 && ttl <= 0 {
			fe.add("expires_in", "must be from %s to %s", tenants.MinInviteTTL, formatDuration(tenants.MaxInviteTTL))
		}
	}
	if err := fe.problem(); err != nil {
		return err
	}
	note := ""
	if req.Note != nil {
		note = *req.Note
	}
	created, err := signup.CreateInvite(c.Request().Context(), ttl, note, model.ActorOperator)
	if err != nil {
		return signupError(err)
	}
	return c.JSON(http.StatusCreated, InviteCreatedJSON(created, s.clock.Now()))
}

// InviteCreatedJSON is the answer of a created invite.
func InviteCreatedJSON(created *tenants.NewInvite, now time.Time) openapi.InviteCreated {
	j := InviteJSON(&created.Invite, now)
	return openapi.InviteCreated{ID: j.ID, InviteCode: created.Code, Prefix: j.Prefix, Note: j.Note, Status: j.Status,
		CreatedAt: j.CreatedAt, ExpiresAt: j.ExpiresAt, UsedAt: j.UsedAt, UsedBy: j.UsedBy}
}

// InviteJSON is an invite as the API shows it, shared with the CLI.
func InviteJSON(inv *model.Invite, now time.Time) openapi.Invite {
	return openapi.Invite{ID: inv.ID, Prefix: inv.Prefix, Note: inv.Note, Status: openapi.InviteStatus(inv.Status(now)),
		CreatedAt: inv.CreatedAt, ExpiresAt: inv.ExpiresAt, UsedAt: inv.UsedAt, UsedBy: inv.UsedBy}
}

// ListInvites pages through the invites, newest first, without their codes.
func (s *Server) ListInvites(c echo.Context, params openapi.ListInvitesParams) error {
	signup, err := s.invites()
	if err != nil {
		return err
	}
	var fe fieldErrors
	page, before := pageRequest(&fe, params.Limit, params.Cursor)
	if err := fe.problem(); err != nil {
		return err
	}
	list, err := signup.ListInvites(c.Request().Context(), before, page+1)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	data, next := paginate(list, page, func(i model.Invite) string { return encodeCursor(i.ID) },
		func(i model.Invite) openapi.Invite { return InviteJSON(&i, now) })
	return c.JSON(http.StatusOK, openapi.InviteList{Data: data, NextCursor: next})
}

// RevokeInvite deletes an unused invite.
func (s *Server) RevokeInvite(c echo.Context, id openapi.InviteID) error {
	signup, err := s.invites()
	if err != nil {
		return err
	}
	_, err = signup.RevokeInvite(c.Request().Context(), id, model.ActorOperator)
	switch {
	case errors.Is(err, model.ErrNotFound):
		return notFound("invite " + id.String())
	case errors.Is(err, model.ErrConflict):
		return newProblem(http.StatusConflict, "invite-used", "Invite already used",
			fmt.Sprintf("invite %s has signed up a tenant; a used invite is kept", id))
	case err != nil:
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
