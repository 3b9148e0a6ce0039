package tenants

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Portal links hand a tenant's own customer a read-only view of the tasks
// of one label. The token is "hwpl_<link id>_<secret>": the link id is the
// row's UUID in keyEncoding, the secret 160 random bits of which only the
// SHA-256 is stored, as an API key's. Unlike keys, links are not cached:
// each portal call reads its link (one statement, with its tenant), so a
// revocation holds on every node as it commits, and portal calls are few.

const (
	portalLinkPrefix = "hwpl_"
	// DefaultPortalLinkExpiry is how long a link lasts when its request
	// says nothing: long enough for a person to look, short enough that a
	// forwarded URL soon opens nothing.
	DefaultPortalLinkExpiry = time.Hour
	// MaxPortalLinkExpiry bounds a link's life: a link is a bearer
	// credential in a URL, which ends up in chats, tickets and histories.
	MaxPortalLinkExpiry = 30 * 24 * time.Hour
	// MaxPortalLinkDescription bounds a link's description, in characters.
	MaxPortalLinkDescription = 500
	// MaxLivePortalLinks bounds the links a tenant holds unexpired and
	// unrevoked at once: an application minting a link per page view stays
	// well within it, and a tenant cannot fill the table.
	MaxLivePortalLinks = 10_000
)

// ErrTooManyPortalLinks refuses a link that would take its tenant over
// MaxLivePortalLinks.
var ErrTooManyPortalLinks = fmt.Errorf("a tenant may hold at most %d live portal links", MaxLivePortalLinks)

// AuditPortalLinkCreated and AuditPortalLinkRevoked are the audit actions
// of portal links.
const (
	AuditPortalLinkCreated = "portal_link.created"
	AuditPortalLinkRevoked = "portal_link.revoked"
)

// PortalLinkSpec is what a new portal link is to be. The label is checked
// by the caller, by the rules of a label filter.
type PortalLinkSpec struct {
	LabelKey, LabelValue string
	Name, Description    string
	// ExpiresIn is the link's life from now: zero is
	// DefaultPortalLinkExpiry, at most MaxPortalLinkExpiry.
	ExpiresIn time.Duration
}

// NewPortalLink is a created link with its token, shown once.
type NewPortalLink struct {
	Link  model.PortalLink
	Token string
}

// PortalCaller is who a portal token authenticates: the link and its tenant.
type PortalCaller struct {
	Tenant *model.Tenant
	Link   *model.PortalLink
}

// CreatePortalLink adds a portal link to a tenant. grantor is the creating
// key (nil for none): the link ends no later than that key does, and is not
// created once the key is revoked. An invalid spec is a *FieldError; a
// tenant at its live links' bound ErrTooManyPortalLinks.
func (s *Service) CreatePortalLink(ctx context.Context, tenantID uuid.UUID, spec PortalLinkSpec, grantor *model.APIKey, actor string) (*NewPortalLink, error) {
	if err := checkPortalText("name", spec.Name, MaxKeyNameLength); err != nil {
		return nil, err
	}
	if err := checkPortalText("description", spec.Description, MaxPortalLinkDescription); err != nil {
		return nil, err
	}
	switch {
	case spec.ExpiresIn == 0:
		spec.ExpiresIn = DefaultPortalLinkExpiry
	case spec.ExpiresIn < time.Second || spec.ExpiresIn > MaxPortalLinkExpiry:
		return nil, &FieldError{"expires_in", fmt.Sprintf("must be from 1s to %s", formatHours(MaxPortalLinkExpiry))}
	}
	expires := s.clock.Now().Add(spec.ExpiresIn).UTC().Truncate(time.Microsecond)
	grantorID := ""
	if grantor != nil {
		grantorID = grantor.ID
		if g := grantor.ExpiresAt; g != nil && expires.After(*g) {
			return nil, &FieldError{"expires_in", "must end no later than the creating key's own expiry, " + g.UTC().Format(time.RFC3339)}
		}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("portal link id: %w", err)
	}
	secret := make([]byte, keySecretBytes)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("generate portal link: %w", err)
	}
	secretText := keyEncoding.EncodeToString(secret)
	link := &model.PortalLink{
		ID: id, TenantID: tenantID, SecretHash: hashSecret(secretText), LabelKey: spec.LabelKey, LabelValue: spec.LabelValue,
		Name: spec.Name, Description: spec.Description, CreatedBy: actor, ExpiresAt: expires,
	}
	detail := map[string]any{"portal_link_id": id.String(), "label": link.Label(), "name": link.Name,
		"expires_at": expires.Format(time.RFC3339)}
	err = s.store.CreatePortalLink(ctx, link, grantorID, MaxLivePortalLinks, s.audit(tenantID, actor, AuditPortalLinkCreated, detail))
	switch {
	case errors.Is(err, model.ErrGrantorUnusable):
		return nil, ErrUnauthenticated
	case errors.Is(err, model.ErrPortalLinkQuota):
		return nil, ErrTooManyPortalLinks
	case err != nil:
		return nil, err
	}
	token := portalLinkPrefix + keyEncoding.EncodeToString(id[:]) + "_" + secretText
	s.unknown.forget(portalUnknownID(token))
	return &NewPortalLink{Link: *link, Token: token}, nil
}

func checkPortalText(field, v string, most int) error {
	if utf8.RuneCountInString(v) > most || !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
		return &FieldError{field, fmt.Sprintf("must be at most %d characters of valid UTF-8, without NUL", most)}
	}
	return nil
}

// ListPortalLinks returns up to limit of a tenant's live links, newest
// first, after the link before when it is given. Tokens are never shown.
func (s *Service) ListPortalLinks(ctx context.Context, tenantID uuid.UUID, before *uuid.UUID, limit int) ([]model.PortalLink, error) {
	return s.store.ListPortalLinks(ctx, tenantID, before, limit)
}

// RevokePortalLink ends one of a tenant's links, on every node as it
// commits. Revoking a revoked link is not an error; another tenant's link
// is model.ErrNotFound.
func (s *Service) RevokePortalLink(ctx context.Context, tenantID, id uuid.UUID, actor string) (*model.PortalLink, error) {
	return s.store.RevokePortalLink(ctx, tenantID, id,
		s.audit(tenantID, actor, AuditPortalLinkRevoked, map[string]any{"portal_link_id": id.String()}))
}

// parsePortalToken splits "hwpl_<link id>_<secret>", refusing without a
// query anything that cannot be a token.
func parsePortalToken(token string) (id uuid.UUID, secret string, ok bool) {
	rest, ok := strings.CutPrefix(token, portalLinkPrefix)
	if !ok {
		return uuid.Nil, "", false
	}
	idText, secret, ok := strings.Cut(rest, "_")
	if !ok || len(idText) != keyEncoding.EncodedLen(16) || secret == "" || len(secret) > 128 ||
		!inKeyAlphabet(idText) || !inKeyAlphabet(secret) {
		return uuid.Nil, "", false
	}
	raw, err := keyEncoding.DecodeString(idText)
	if err != nil || len(raw) != 16 {
		return uuid.Nil, "", false
	}
	return uuid.UUID(raw), secret, true
}

// portalUnknownID is the name under which the memory of unknown key ids
// holds a token's link id: the prefix keeps it apart from any key id.
func portalUnknownID(token string) string {
	rest, _ := strings.CutPrefix(token, portalLinkPrefix)
	id, _, _ := strings.Cut(rest, "_")
	return portalLinkPrefix + id
}

// IsPortalToken reports whether a credential is shaped like a portal token,
// so that an endpoint that does not take one can say so.
func IsPortalToken(token string) bool { return strings.HasPrefix(token, portalLinkPrefix) }

// AuthenticatePortal returns the link a portal token opens, with its
// tenant, or ErrUnauthenticated: malformed, unknown, a wrong secret,
// revoked, expired, or of a tenant that is suspended or being deleted (its
// customer is told no more than that the link does not open).
func (s *Service) AuthenticatePortal(ctx context.Context, token string) (*PortalCaller, error) {
	id, secret, ok := parsePortalToken(token)
	if !ok || s.unknown.known(portalUnknownID(token)) {
		return nil, ErrUnauthenticated
	}
	link, tenant, err := s.store.GetPortalLink(ctx, id)
	if errors.Is(err, model.ErrNotFound) {
		s.unknown.remember(portalUnknownID(token))
		return nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, fmt.Errorf("authenticate portal link %s: %w", id, err)
	}
	if subtle.ConstantTimeCompare(link.SecretHash, hashSecret(secret)) != 1 || !link.Usable(s.clock.Now()) ||
		tenantAdmits(tenant) != nil {
		return nil, ErrUnauthenticated
	}
	return &PortalCaller{Tenant: s.resolve(tenant), Link: link}, nil
}
