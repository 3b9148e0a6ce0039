package tenants

import (
	"context"
	"errors"
	"fmt"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Shared secrets are an installation's own credentials, the same on every
// node and configured by nobody: the first node that needs one makes it,
// the others read it. They are sealed with the keyring as signing secrets
// are, and Rekey re-seals them with those.

func sharedSealContext(name string) string { return "shared-secret/" + name }

// SharedSecret returns the installation's secret name, which makeValue makes
// when no node has yet. A value sealed by a key other than the keyring's
// first is sealed again under it on the way, so that a key retired after
// its nodes restarted leaves nothing it alone opens.
func (s *Service) SharedSecret(ctx context.Context, name string, makeValue func() (string, error)) (string, error) {
	made, err := makeValue()
	if err != nil {
		return "", fmt.Errorf("make shared secret %s: %w", name, err)
	}
	candidate, err := s.keyring.Seal(made, sharedSealContext(name))
	if err != nil {
		return "", fmt.Errorf("seal shared secret %s: %w", name, err)
	}
	stored, err := s.store.SharedSecret(ctx, name, candidate)
	if err != nil {
		return "", err
	}
	plain, _, err := s.resealShared(ctx, name, stored)
	return plain, err
}

// resealShared opens a stored shared secret and, when it is not sealed by
// the keyring's first key, stores it sealed by that key. A node that lost
// the race to another re-sealing it has nothing left to do.
func (s *Service) resealShared(ctx context.Context, name, stored string) (plain string, resealed bool, err error) {
	plain, err = s.keyring.Open(stored, sharedSealContext(name))
	if err != nil {
		return "", false, fmt.Errorf("open shared secret %s: %w", name, err)
	}
	if !s.keyring.NeedsRekey(stored) {
		return plain, false, nil
	}
	sealed, err := s.keyring.Seal(plain, sharedSealContext(name))
	if err != nil {
		return "", false, fmt.Errorf("seal shared secret %s: %w", name, err)
	}
	err = s.store.ReplaceSharedSecret(ctx, name, stored, sealed)
	if errors.Is(err, model.ErrConflict) {
		return plain, false, nil
	}
	return plain, err == nil, err
}

// rekeyShared re-seals every shared secret under the keyring's first key,
// and says how many it changed.
func (s *Service) rekeyShared(ctx context.Context) (int, error) {
	all, err := s.store.ListSharedSecrets(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for name, stored := range all {
		_, resealed, err := s.resealShared(ctx, name, stored)
		if err != nil {
			return n, err
		}
		if resealed {
			n++
		}
	}
	return n, nil
}
