package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"mime"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	openapi_types "github.com/oapi-codegen/runtime/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwheel/hookwheel/internal/session"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/tenants"
)

// The dashboard's sessions: a person signs in once with a credential, and
// the session cookie then stands for it on every call, with the session's
// CSRF token in a header (package session says why both).

const sessionContextKey = "hookwheel.session"

func hasSessionCookie(c echo.Context) bool {
	_, err := c.Request().Cookie(session.CookieName)
	return err == nil
}

// checkSession reads the session cookie: the session, or a 401 problem.
func checkSession(c echo.Context, sessions *session.Manager) (*session.Session, error) {
	cookie, err := c.Request().Cookie(session.CookieName)
	if err != nil {
		return nil, unauthorized(c, "not signed in: no session cookie")
	}
	s, err := sessions.Check(cookie.Value)
	if err != nil {
		return nil, unauthorized(c, "the dashboard session is invalid or has expired; sign in again")
	}
	return s, nil
}

// checkCSRF refuses a cookie-authenticated call that does not echo the
// session's CSRF token.
func checkCSRF(c echo.Context, s *session.Session) error {
	if !s.CheckCSRF(c.Request().Header.Get(session.CSRFHeader)) {
		return newProblem(http.StatusForbidden, "csrf-token-mismatch", "CSRF token missing or wrong",
			"a call made with the session cookie must carry the session's csrf_token in the X-CSRF-Token header")
	}
	return nil
}

// sessionTenantCall admits a tenant call made with the session cookie: the
// session must be a tenant's, the call must carry its CSRF token, and the
// key it signed in with must still be usable. A session whose key is no
// longer usable fails as a wrong key does, in the same throttle: a revoked
// key is not cached, so each such call costs a query.
func sessionTenantCall(c echo.Context, sessions *session.Manager, auth *tenants.Service, throttle *authThrottle, failures *prometheus.CounterVec, next echo.HandlerFunc) error {
	ip := c.RealIP()
	if wait, refused := throttle.throttled(ip); refused {
		failures.WithLabelValues("throttled").Inc()
		return tooManyAuthFailures(c, wait)
	}
	s, err := checkSession(c, sessions)
	if err != nil {
		return err
	}
	if err := checkCSRF(c, s); err != nil {
		return err
	}
	if s.Role != session.RoleTenant {
		return newProblem(http.StatusForbidden, "operator-session", "Operator session",
			"the operator's session reaches the operator API only; sign in with a tenant's API key for this call")
	}
	caller, err := auth.AuthenticateSession(c.Request().Context(), s.TenantID, s.KeyID)
	if errors.Is(err, tenants.ErrUnauthenticated) {
		failures.WithLabelValues("invalid").Inc()
		throttle.failed(ip)
		return unauthorized(c, "the API key this session signed in with is revoked or expired; sign in again")
	}
	if errors.Is(err, tenants.ErrTenantSuspended) {
		failures.WithLabelValues("suspended").Inc()
		return tenantSuspended()
	}
	if err != nil {
		return err
	}
	c.Set(callerContextKey, caller)
	return next(c)
}

// sessionOperatorCall admits an operator call made with the session cookie:
// an operator's session, opened with the current admin token, and its CSRF
// token.
func sessionOperatorCall(c echo.Context, sessions *session.Manager, token string, next echo.HandlerFunc) error {
	s, err := checkSession(c, sessions)
	if err != nil {
		return err
	}
	if err := checkCSRF(c, s); err != nil {
		return err
	}
	if s.Role != session.RoleOperator || !operatorSessionCurrent(sessions, s, token) {
		return unauthorized(c, "this call needs the operator's session; sign in with the admin token")
	}
	return next(c)
}

// operatorSessionCurrent reports whether an operator session was opened
// with token, the admin token now in force.
func operatorSessionCurrent(sessions *session.Manager, s *session.Session, token string) bool {
	return token != "" && subtle.ConstantTimeCompare([]byte(s.AdminDigest), []byte(sessions.AdminDigest(token))) == 1
}

// sessionAuth admits calls that only read the session itself (GET
// /v1/session): a valid cookie, no CSRF token, which is what such a call
// learns.
func sessionAuth(sessions *session.Manager) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if sessions == nil {
				return notFound("dashboard sessions")
			}
			s, err := checkSession(c, sessions)
			if err != nil {
				return err
			}
			c.Set(sessionContextKey, s)
			return next(c)
		}
	}
}

// SignIn exchanges an API key or the admin token for a session cookie.
func (s *Server) SignIn(c echo.Context) error {
	if s.cfg.Sessions == nil {
		return notFound("dashboard sessions")
	}
	// A JSON body only: a form of another site can post text/plain that
	// reads as JSON, and would sign a person in as the attacker.
	if mt, _, _ := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType)); mt != echo.MIMEApplicationJSON {
		return newProblem(http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported media type",
			"sign in with a JSON body, Content-Type: application/json")
	}
	var req openapi.SignInRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if (req.APIKey == nil) == (req.AdminToken == nil) {
		var fe fieldErrors
		fe.add("api_key", "give exactly one of api_key and admin_token")
		return fe.problem()
	}
	ip := c.RealIP()
	if wait, refused := s.throttle.throttled(ip); refused {
		return tooManyAuthFailures(c, wait)
	}
	var opening session.Session
	var caller *tenants.Caller
	if req.APIKey != nil {
		var err error
		caller, err = s.tenants.SignIn(c.Request().Context(), *req.APIKey, ip)
		if errors.Is(err, tenants.ErrUnauthenticated) {
			s.throttle.failed(ip)
			return unauthorized(c, "the API key is malformed, unknown, revoked or expired")
		}
		if errors.Is(err, tenants.ErrTenantSuspended) {
			return tenantSuspended()
		}
		if err != nil {
			return err
		}
		opening = session.Session{Role: session.RoleTenant, TenantID: caller.Tenant.ID, KeyID: caller.Key.ID}
	} else {
		if s.cfg.AdminToken == "" {
			return newProblem(http.StatusForbidden, "admin-disabled", "Admin API disabled",
				"the operator cannot sign in: set HOOKWHEEL_ADMIN_TOKEN to enable the admin API")
		}
		got, want := sha256.Sum256([]byte(*req.AdminToken)), sha256.Sum256([]byte(s.cfg.AdminToken))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			s.throttle.failed(ip)
			return unauthorized(c, "wrong admin token")
		}
		if err := s.tenants.OperatorSignedIn(c.Request().Context(), ip); err != nil {
			return err
		}
		opening = session.Session{Role: session.RoleOperator, AdminDigest: s.cfg.Sessions.AdminDigest(s.cfg.AdminToken)}
	}
	token, opened, err := s.cfg.Sessions.Open(opening)
	if err != nil {
		return err
	}
	c.SetCookie(s.cfg.Sessions.Cookie(token, opened, s.proxies.secure(c.Request())))
	return c.JSON(http.StatusOK, sessionJSON(&opened, caller))
}

// GetSession answers who the cookie signed in, renewing it.
func (s *Server) GetSession(c echo.Context) error {
	current, ok := c.Get(sessionContextKey).(*session.Session)
	if !ok {
		return echo.NewHTTPError(http.StatusUnauthorized, "not signed in")
	}
	var caller *tenants.Caller
	switch current.Role {
	case session.RoleTenant:
		var err error
		caller, err = s.tenants.AuthenticateSession(c.Request().Context(), current.TenantID, current.KeyID)
		if errors.Is(err, tenants.ErrUnauthenticated) {
			return unauthorized(c, "the API key this session signed in with is revoked or expired; sign in again")
		}
		if errors.Is(err, tenants.ErrTenantSuspended) {
			return tenantSuspended()
		}
		if err != nil {
			return err
		}
	case session.RoleOperator:
		if !operatorSessionCurrent(s.cfg.Sessions, current, s.cfg.AdminToken) {
			return unauthorized(c, "the admin token changed since this session signed in; sign in again")
		}
	}
	token, renewed, err := s.cfg.Sessions.Renew(*current)
	if err != nil {
		return err
	}
	c.SetCookie(s.cfg.Sessions.Cookie(token, renewed, s.proxies.secure(c.Request())))
	return c.JSON(http.StatusOK, sessionJSON(&renewed, caller))
}

// SignOut deletes the session cookie; a valid session must prove the call
// is its own with the CSRF token, and its end is audited. The cookie goes
// even if the record fails: a person who signs out must be signed out.
func (s *Server) SignOut(c echo.Context) error {
	if s.cfg.Sessions != nil && hasSessionCookie(c) {
		if current, err := checkSession(c, s.cfg.Sessions); err == nil {
			if err := checkCSRF(c, current); err != nil {
				return err
			}
			var tenantID *uuid.UUID
			if current.Role == session.RoleTenant {
				tenantID = &current.TenantID
			}
			if err := s.tenants.SignedOut(c.Request().Context(), tenantID, current.KeyID, c.RealIP()); err != nil {
				s.logger.Error("recording a sign-out failed", "err", err)
			}
		}
	}
	c.SetCookie(session.ClearCookie(s.proxies.secure(c.Request())))
	return c.NoContent(http.StatusNoContent)
}

func sessionJSON(s *session.Session, caller *tenants.Caller) openapi.Session {
	out := openapi.Session{Role: openapi.SessionRole(s.Role), CsrfToken: s.CSRF, ExpiresAt: s.ExpiresAt}
	if caller != nil {
		key := APIKeyJSON(caller.Key)
		out.Key = &key
		out.Tenant = &struct {
			ID   openapi_types.UUID `json:"id"`
			Name string             `json:"name"`
		}{ID: caller.Tenant.ID, Name: caller.Tenant.Name}
	}
	return out
}
