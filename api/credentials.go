package api

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/signing"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/tenants"
)

// Credentials: a tenant's API keys and signing secrets, managed by the
// tenant itself (with a key holding keys:manage or secrets:manage) or by the
// operator, and the audit log that records every change to them.

// ListKeys lists the calling tenant's keys.
func (s *Server) ListKeys(c echo.Context) error {
	caller, err := callerOf(c)
	if err != nil {
		return err
	}
	return s.listKeys(c, caller.Tenant.ID)
}

// CreateKey creates a key for the calling tenant, with at most the calling
// key's scopes.
func (s *Server) CreateKey(c echo.Context) error {
	caller, err := callerOf(c)
	if err != nil {
		return err
	}
	return s.createKey(c, caller.Tenant.ID, caller.Key, caller.Actor())
}

// RevokeKey revokes one of the calling tenant's keys.
func (s *Server) RevokeKey(c echo.Context, keyID openapi.KeyID) error {
	caller, err := callerOf(c)
	if err != nil {
		return err
	}
	return s.revokeKey(c, caller.Tenant.ID, keyID, caller.Key, caller.Actor())
}

// ListTenantKeys lists a tenant's keys for the operator.
func (s *Server) ListTenantKeys(c echo.Context, id openapi.TenantID) error {
	if err := s.tenantExists(c, id); err != nil {
		return err
	}
	return s.listKeys(c, id)
}

// CreateTenantKey mints a key for a tenant: the operator's way back in for a
// tenant without a usable key. Any scope may be granted.
func (s *Server) CreateTenantKey(c echo.Context, id openapi.TenantID) error {
	return s.createKey(c, id, nil, model.ActorOperator)
}

// RevokeTenantKey revokes a tenant's key for the operator.
func (s *Server) RevokeTenantKey(c echo.Context, id openapi.TenantID, keyID openapi.KeyID) error {
	return s.revokeKey(c, id, keyID, nil, model.ActorOperator)
}

func (s *Server) tenantExists(c echo.Context, id uuid.UUID) error {
	_, err := s.tenants.Get(c.Request().Context(), id)
	if errors.Is(err, model.ErrNotFound) {
		return notFound("tenant " + id.String())
	}
	return err
}

func (s *Server) listKeys(c echo.Context, tenantID uuid.UUID) error {
	keys, err := s.tenants.ListKeys(c.Request().Context(), tenantID)
	if err != nil {
		return err
	}
	out := openapi.APIKeyList{Data: make([]openapi.APIKey, len(keys))}
	for i := range keys {
		out.Data[i] = APIKeyJSON(&keys[i])
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) createKey(c echo.Context, tenantID uuid.UUID, grantor *model.APIKey, actor string) error {
	// openapi.APIKeyRequest with expires_at as text: a time.Time field
	// would turn a malformed time into a 400 naming no field.
	var req struct {
		Name      string   `json:"name"`
		Scopes    []string `json:"scopes"`
		ExpiresAt *string  `json:"expires_at"`
	}
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var fe fieldErrors
	spec := tenants.KeySpec{Name: req.Name, ExpiresAt: parseTimeField(&fe, "expires_at", req.ExpiresAt)}
	if err := fe.problem(); err != nil {
		return err
	}
	for _, scope := range req.Scopes {
		spec.Scopes = append(spec.Scopes, model.Scope(scope))
	}
	created, err := s.tenants.CreateKey(c.Request().Context(), tenantID, spec, grantor, actor)
	if errors.Is(err, tenants.ErrTooManyKeys) {
		s.apiLimits.refused.WithLabelValues("keys").Inc()
		c.Response().Header().Set("Retry-After", strconv.Itoa(ceilSeconds(keyQuotaRetryAfter)))
		return newProblem(http.StatusTooManyRequests, "key-quota-exceeded", "Key quota exceeded",
			err.Error()+"; revoke one to make room")
	}
	if err != nil {
		return credentialError(err, tenantID)
	}
	return c.JSON(http.StatusCreated, APIKeyCreatedJSON(created))
}

// APIKeyCreatedJSON is the response body of a created key, shared with the
// CLI's "keys create".
func APIKeyCreatedJSON(created *tenants.NewKey) openapi.APIKeyCreated {
	k := APIKeyJSON(&created.Key)
	return openapi.APIKeyCreated{
		APIKey: created.APIKey, ID: k.ID, Name: k.Name, Scopes: k.Scopes, CreatedAt: k.CreatedAt,
		CreatedBy: k.CreatedBy, ExpiresAt: k.ExpiresAt,
	}
}

func (s *Server) revokeKey(c echo.Context, tenantID uuid.UUID, keyID string, revoker *model.APIKey, actor string) error {
	key, err := s.tenants.RevokeKey(c.Request().Context(), tenantID, keyID, revoker, actor)
	if errors.Is(err, model.ErrNotFound) {
		return notFound("API key " + keyID)
	}
	if err != nil {
		return credentialError(err, tenantID)
	}
	return c.JSON(http.StatusOK, APIKeyJSON(key))
}

// keyQuotaRetryAfter is the Retry-After of a key over the quota: room is
// made by revoking a key, not by waiting, so clients should not hurry back.
const keyQuotaRetryAfter = time.Minute

// credentialError renders the tenants package's refusals.
func credentialError(err error, tenantID uuid.UUID) error {
	var fieldErr *tenants.FieldError
	switch {
	case errors.As(err, &fieldErr):
		var fe fieldErrors
		fe.add(fieldErr.Field, "%s", fieldErr.Message)
		return fe.problem()
	case errors.Is(err, tenants.ErrScopeNotHeld):
		return newProblem(http.StatusForbidden, "insufficient-scope", "Insufficient scope", err.Error())
	case errors.Is(err, tenants.ErrUnauthenticated):
		// The calling key was revoked or expired on another node since
		// this one last checked it.
		return echo.NewHTTPError(http.StatusUnauthorized, "the API key is malformed, unknown, revoked or expired")
	case errors.Is(err, model.ErrNotFound):
		return notFound("tenant " + tenantID.String())
	}
	return err
}

// APIKeyJSON is a key as the API shows it, shared with the CLI.
func APIKeyJSON(k *model.APIKey) openapi.APIKey {
	scopes := make([]openapi.Scope, len(k.Scopes))
	for i, s := range k.Scopes {
		scopes[i] = openapi.Scope(s)
	}
	return openapi.APIKey{
		ID: k.ID, Name: k.Name, Scopes: scopes, CreatedAt: k.CreatedAt, CreatedBy: k.CreatedBy,
		ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt, LastUsedAt: k.LastUsedAt,
	}
}

// ListSigningSecrets lists the calling tenant's active signing secrets,
// without their values: an Ed25519 key shows its public key.
func (s *Server) ListSigningSecrets(c echo.Context) error {
	caller, err := callerOf(c)
	if err != nil {
		return err
	}
	secrets, err := s.tenants.SigningSecrets(c.Request().Context(), caller.Tenant.ID)
	if err != nil {
		return err
	}
	out := openapi.SigningSecretList{Data: make([]openapi.SigningSecret, len(secrets))}
	for i, secret := range secrets {
		out.Data[i] = SigningSecretJSON(secret, i == 0)
	}
	return c.JSON(http.StatusOK, out)
}

// SigningSecretJSON is a listed signing secret as the API shows it, shared
// with the CLI's "secrets list".
func SigningSecretJSON(secret model.SigningSecret, current bool) openapi.SigningSecret {
	return openapi.SigningSecret{
		ID: secret.ID, Algorithm: openapi.SigningAlgorithm(secret.Algorithm), PublicKey: secret.PublicKey,
		CreatedAt: secret.CreatedAt, ExpiresAt: secret.ExpiresAt, Current: current,
	}
}

// SigningSecretCreatedJSON is a rotation's new secret as the API shows it,
// shared with the CLI's "secrets rotate".
func SigningSecretCreatedJSON(rotated *tenants.RotatedSecret) openapi.SigningSecretCreated {
	return openapi.SigningSecretCreated{
		ID: rotated.ID, Algorithm: openapi.SigningAlgorithm(rotated.Algorithm), SigningSecret: rotated.Plaintext,
		PublicKey: rotated.PublicKey, CreatedAt: rotated.CreatedAt, GraceEndsAt: rotated.GraceEndsAt,
	}
}

// RotateSigningSecret makes a new signing secret for the calling tenant.
func (s *Server) RotateSigningSecret(c echo.Context) error {
	caller, err := callerOf(c)
	if err != nil {
		return err
	}
	var req openapi.SigningSecretRotateRequest
	// The body is optional: none (or only blanks, chunked or not) rotates
	// with the default grace, to the current secret's algorithm.
	raw, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err // the body limit
	}
	if len(bytes.TrimSpace(raw)) > 0 {
		c.Request().Body = io.NopCloser(bytes.NewReader(raw))
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
	}
	grace := tenants.DefaultGrace
	if req.Grace != nil {
		var fe fieldErrors
		d, ok := parseGrace(&fe, *req.Grace)
		if err := fe.problem(); err != nil || !ok {
			return err
		}
		grace = d
	}
	// An unknown algorithm is the tenants package's refusal, a 422 on
	// "algorithm"; none (or null) keeps the current one.
	var algorithm signing.Algorithm
	if req.Algorithm != nil {
		algorithm = signing.Algorithm(*req.Algorithm)
		if algorithm == "" {
			var fe fieldErrors
			fe.add("algorithm", "must be %s or %s, or left out to keep the current one", signing.HMACSHA256, signing.Ed25519)
			return fe.problem()
		}
	}
	rotated, err := s.tenants.RotateSigningSecret(c.Request().Context(), caller.Tenant.ID, grace, algorithm, caller.Actor())
	if err != nil {
		return credentialError(err, caller.Tenant.ID)
	}
	return c.JSON(http.StatusCreated, SigningSecretCreatedJSON(rotated))
}

// parseGrace reads a rotation's grace period; "0s" (or "0") is allowed.
func parseGrace(fe *fieldErrors, text string) (time.Duration, bool) {
	d, ok := parseDuration(fe, "grace", text)
	if !ok {
		return 0, false
	}
	if d < 0 || d > tenants.MaxGrace {
		fe.add("grace", "must be between 0s and 168h")
		return 0, false
	}
	return d, true
}

// ListTenantAudit lists the calling tenant's audit entries.
func (s *Server) ListTenantAudit(c echo.Context, params openapi.ListTenantAuditParams) error {
	caller, err := callerOf(c)
	if err != nil {
		return err
	}
	return s.listAudit(c, &caller.Tenant.ID, params.Limit, params.Cursor)
}

// ListAudit lists every audit entry, or one tenant's, for the operator.
func (s *Server) ListAudit(c echo.Context, params openapi.ListAuditParams) error {
	return s.listAudit(c, params.TenantID, params.Limit, params.Cursor)
}

func (s *Server) listAudit(c echo.Context, tenantID *uuid.UUID, limit *int, cursor *string) error {
	var fe fieldErrors
	f := model.AuditFilter{TenantID: tenantID}
	f.Limit, f.Before = pageRequest(&fe, limit, cursor)
	if err := fe.problem(); err != nil {
		return err
	}
	page := f.Limit
	f.Limit++
	entries, err := s.tenants.ListAudit(c.Request().Context(), f)
	if err != nil {
		return err
	}
	data, next := paginate(entries, page, func(e model.AuditEntry) string { return encodeCursor(e.ID) }, auditJSON)
	return c.JSON(http.StatusOK, openapi.AuditList{Data: data, NextCursor: next})
}

func auditJSON(e model.AuditEntry) openapi.AuditEntry {
	detail := e.Detail
	if detail == nil {
		detail = map[string]any{}
	}
	return openapi.AuditEntry{ID: e.ID, TenantID: e.TenantID, Actor: e.Actor, Action: e.Action, Detail: detail, At: e.At}
}

// GetCaller shows the calling tenant and the key the call was made with.
func (s *Server) GetCaller(c echo.Context) error {
	caller, err := callerOf(c)
	if err != nil {
		return err
	}
	out := openapi.Caller{Key: APIKeyJSON(caller.Key)}
	out.Tenant.ID, out.Tenant.Name = caller.Tenant.ID, caller.Tenant.Name
	return c.JSON(http.StatusOK, out)
}
