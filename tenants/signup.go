package tenants

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
)

// Sign-up: a tenant made by whoever asks (POST /v1/signup) rather than by the
// operator, when the installation allows it (HOOKWHEEL_SIGNUP): to anyone
// (open), or to whoever holds a one-time invite code the operator made
// (invite). The rules of both live here; limiting sign-ups per client
// address is the API's.

// SignupMode is whether and how tenants may sign up.
type SignupMode string

// The sign-up modes.
const (
	SignupOff    SignupMode = "off"
	SignupInvite SignupMode = "invite"
	SignupOpen   SignupMode = "open"
)

// ParseSignupMode reads HOOKWHEEL_SIGNUP: off, invite or open; empty is off.
func ParseSignupMode(v string) (SignupMode, error) {
	switch m := SignupMode(strings.ToLower(strings.TrimSpace(v))); m {
	case "":
		return SignupOff, nil
	case SignupOff, SignupInvite, SignupOpen:
		return m, nil
	}
	return "", fmt.Errorf("want off, invite or open, got %q", v)
}

// Bounds of invites and of what a sign-up may ask for.
const (
	// DefaultInviteTTL is how long an invite is good for when its creator
	// gives no time.
	DefaultInviteTTL = 7 * 24 * time.Hour
	// MinInviteTTL and MaxInviteTTL bound the time an invite may be given:
	// a code that lives for months is a code that leaks.
	MinInviteTTL = time.Minute
	MaxInviteTTL = 90 * 24 * time.Hour
	// MaxInviteNote bounds an invite's note, in characters.
	MaxInviteNote = 500
	// MaxSignupName bounds a signed-up tenant's name, in characters.
	MaxSignupName = 100
)

// Why a sign-up is refused, besides a *FieldError and the invite errors of
// model (ErrInviteUnknown, ErrInviteUsed, ErrInviteExpired).
var (
	ErrSignupOff      = errors.New("sign-up is not enabled on this installation")
	ErrInviteRequired = errors.New("sign-up needs an invite code on this installation")
)

// InviteStore is where invites live: the store methods Signup calls.
// *store.DB is one.
type InviteStore interface {
	CreateInvite(ctx context.Context, inv *model.Invite, audit model.AuditEntry) error
	ListInvites(ctx context.Context, before *uuid.UUID, limit int) ([]model.Invite, error)
	RevokeInvite(ctx context.Context, id uuid.UUID, audit func(*model.Invite) *model.AuditEntry) (*model.Invite, error)
	RedeemInvite(ctx context.Context, codeHash []byte) (*model.Invite, error)
	CompleteInvite(ctx context.Context, id, tenantID uuid.UUID, audit model.AuditEntry) error
	ReleaseInvite(ctx context.Context, id uuid.UUID) error
	RecordAudit(ctx context.Context, entry model.AuditEntry) error
}

// SignupConfig configures a Signup.
type SignupConfig struct {
	// Mode is HOOKWHEEL_SIGNUP. Default SignupOff: every sign-up refused.
	// Invites may be made and listed whatever the mode, so that an operator
	// can prepare them before opening.
	Mode SignupMode
	// Store keeps the invites. Required.
	Store InviteStore
	// Tenants makes the tenants, on the node's default plan. Required.
	Tenants *Service
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Signup signs tenants up and manages invites.
type Signup struct {
	cfg SignupConfig
}

// NewSignup returns a Signup.
func NewSignup(cfg SignupConfig) *Signup {
	if cfg.Mode == "" {
		cfg.Mode = SignupOff
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Signup{cfg: cfg}
}

// Mode is how tenants may sign up.
func (s *Signup) Mode() SignupMode { return s.cfg.Mode }

// inviteCodePrefix starts every invite code, so that one pasted where an API
// key belongs (or the reverse) is told apart at a glance.
const inviteCodePrefix = "hwinv_"

// invitePrefixLength is how much of a code an invite list shows: the marker
// and 30 of its 160 random bits, enough to tell codes apart.
const invitePrefixLength = len(inviteCodePrefix) + 6

// NewInvite is a created invite with its code, shown once.
type NewInvite struct {
	Invite model.Invite
	// Code is "hwinv_<secret>"; only its hash is stored.
	Code string
}

// CreateInvite makes a one-time invite code good for ttl (0:
// DefaultInviteTTL), with a note for the operator.
func (s *Signup) CreateInvite(ctx context.Context, ttl time.Duration, note, actor string) (*NewInvite, error) {
	if ttl == 0 {
		ttl = DefaultInviteTTL
	}
	if ttl < MinInviteTTL || ttl > MaxInviteTTL {
		return nil, &FieldError{Field: "expires_in", Message: fmt.Sprintf("must be from %s to %s", MinInviteTTL, MaxInviteTTL)}
	}
	if n := utf8.RuneCountInString(note); n > MaxInviteNote || !utf8.ValidString(note) || strings.ContainsRune(note, 0) {
		return nil, &FieldError{Field: "note", Message: fmt.Sprintf("must be at most %d characters of text", MaxInviteNote)}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("create invite id: %w", err)
	}
	raw := make([]byte, keySecretBytes)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("generate invite code: %w", err)
	}
	code := inviteCodePrefix + keyEncoding.EncodeToString(raw)
	inv := model.Invite{ID: id, CodeHash: hashSecret(code), Prefix: code[:invitePrefixLength], Note: note, CreatedBy: actor,
		ExpiresAt: s.cfg.Clock.Now().Add(ttl).UTC().Truncate(time.Microsecond)}
	audit := model.AuditEntry{Actor: actor, Action: "invite.created", Detail: map[string]any{"invite_id": id.String(),
		"prefix": inv.Prefix, "expires_at": inv.ExpiresAt, "note": note}}
	if err := s.cfg.Store.CreateInvite(ctx, &inv, audit); err != nil {
		return nil, err
	}
	return &NewInvite{Invite: inv, Code: code}, nil
}

// ListInvites reads up to limit invites, newest first, older than the
// invite before when it is given. Codes are never shown again.
func (s *Signup) ListInvites(ctx context.Context, before *uuid.UUID, limit int) ([]model.Invite, error) {
	return s.cfg.Store.ListInvites(ctx, before, limit)
}

// RevokeInvite deletes an unused invite: its code signs no one up from then
// on. model.ErrNotFound, or model.ErrConflict when it is used.
func (s *Signup) RevokeInvite(ctx context.Context, id uuid.UUID, actor string) (*model.Invite, error) {
	return s.cfg.Store.RevokeInvite(ctx, id, func(inv *model.Invite) *model.AuditEntry {
		return &model.AuditEntry{Actor: actor, Action: "invite.revoked",
			Detail: map[string]any{"invite_id": inv.ID.String(), "prefix": inv.Prefix, "note": inv.Note}}
	})
}

// SignupRequest is a sign-up as asked.
type SignupRequest struct {
	// Name is the tenant's name.
	Name string
	// InviteCode is needed in SignupInvite mode, ignored in SignupOpen.
	InviteCode string
	// Client is the address the request came from, for the audit log.
	Client string
}

// Check refuses a sign-up that cannot succeed, whatever the database holds:
// sign-up off, a bad name (*FieldError), no invite code where one is
// needed, or a code that is not one (model.ErrInviteUnknown). The API checks
// this before it counts the sign-up against the client's limit.
func (s *Signup) Check(req SignupRequest) error {
	if s.cfg.Mode != SignupInvite && s.cfg.Mode != SignupOpen {
		return ErrSignupOff
	}
	if err := CheckSignupName(req.Name); err != nil {
		return err
	}
	if s.cfg.Mode == SignupInvite {
		if req.InviteCode == "" {
			return ErrInviteRequired
		}
		if !wellFormedInviteCode(req.InviteCode) {
			return model.ErrInviteUnknown
		}
	}
	return nil
}

// wellFormedInviteCode reports whether code could be one CreateInvite
// makes: anything else is refused without a query.
func wellFormedInviteCode(code string) bool {
	secret, ok := strings.CutPrefix(code, inviteCodePrefix)
	return ok && len(secret) == keyEncoding.EncodedLen(keySecretBytes) && inKeyAlphabet(secret)
}

// CheckSignupName checks the name a tenant signs up with: 1 to
// MaxSignupName characters of printable text, without spaces at either
// end. Stricter than the operator's, since anyone may choose it and it
// shows in the operator's lists: no control or formatting characters
// (which could reorder the text around it).
func CheckSignupName(name string) error {
	bad := func(msg string) error { return &FieldError{Field: "name", Message: msg} }
	n := utf8.RuneCountInString(name)
	switch {
	case !utf8.ValidString(name):
		return bad("must be valid UTF-8 text")
	case n < 1 || n > MaxSignupName:
		return bad(fmt.Sprintf("must be 1 to %d characters", MaxSignupName))
	case strings.TrimSpace(name) != name:
		return bad("must not start or end with a space")
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Co, r) || r == utf8.RuneError {
			return bad(fmt.Sprintf("must not contain control or formatting characters (found %U)", r))
		}
	}
	return nil
}

// SignUp makes a tenant, on the node's default plan, with a full-access API
// key and a signing secret shown once (as Service.Create). In invite mode
// the code is redeemed first, once whatever races for it, and given back if
// the tenant cannot be made.
func (s *Signup) SignUp(ctx context.Context, req SignupRequest) (*Created, error) {
	if err := s.Check(req); err != nil {
		return nil, err
	}
	detail := map[string]any{"name": req.Name, "client": req.Client, "mode": string(s.cfg.Mode)}
	if s.cfg.Mode == SignupOpen {
		created, err := s.cfg.Tenants.Create(ctx, req.Name, model.ActorSignup)
		if err != nil {
			return nil, err
		}
		s.recorded(created, s.cfg.Store.RecordAudit(ctx, s.signedUp(created, detail)))
		return created, nil
	}
	inv, err := s.cfg.Store.RedeemInvite(ctx, hashSecret(req.InviteCode))
	if err != nil {
		return nil, err
	}
	created, err := s.cfg.Tenants.Create(ctx, req.Name, model.ActorSignup)
	if err != nil {
		if rerr := s.cfg.Store.ReleaseInvite(context.WithoutCancel(ctx), inv.ID); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return nil, err
	}
	detail["invite_id"], detail["invite_prefix"] = inv.ID.String(), inv.Prefix
	s.recorded(created, s.cfg.Store.CompleteInvite(context.WithoutCancel(ctx), inv.ID, created.Tenant.ID, s.signedUp(created, detail)))
	return created, nil
}

func (s *Signup) signedUp(created *Created, detail map[string]any) model.AuditEntry {
	return model.AuditEntry{TenantID: &created.Tenant.ID, Actor: model.ActorSignup, Action: "tenant.signed_up", Detail: detail}
}

// recorded logs a failure to record a sign-up that made its tenant: the
// tenant exists (its own tenant.created entry says so) and its credentials
// must still reach the one who signed up, since they cannot be shown again.
func (s *Signup) recorded(created *Created, err error) {
	if err != nil {
		s.cfg.Logger.Error("sign-up made its tenant but could not record how", "tenant", created.Tenant.ID, "err", err)
	}
}
