package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/tenants"
)

// openTenants connects to the database (migrating it, as serve does) for a
// command that manages tenants directly, as the operator.
func openTenants(ctx context.Context, env environment, logger *slog.Logger) (*tenants.Service, func(), error) {
	db, err := openStore(ctx, env, logger)
	if err != nil {
		return nil, nil, err
	}
	if err := migrateStore(ctx, db); err != nil {
		db.Close()
		return nil, nil, err
	}
	return tenants.New(tenants.Config{Store: db, Keyring: env.keyring}), db.Close, nil
}

const keysUsage = `Usage:
  hookwheel keys create --tenant ID [--name NAME] [--scopes tasks:read,tasks:write] [--expires-in 720h | --expires-at 2027-01-01T00:00:00Z]
  hookwheel keys list --tenant ID [--json]
  hookwheel keys revoke --tenant ID KEY_ID`

// keysCommand manages a tenant's API keys from the command line: the
// operator's way to mint a recovery key or kill a leaked one without the
// admin API.
func keysCommand(ctx context.Context, args []string, env environment, logger *slog.Logger, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{keysUsage}
	}
	fs := flag.NewFlagSet("keys "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	tenantFlag := fs.String("tenant", "", "the tenant's id")
	name := fs.String("name", "", "a label for the key")
	scopes := fs.String("scopes", "", "comma-separated scopes (default: every scope, *)")
	expiresIn := fs.Duration("expires-in", 0, "the key stops working after this long")
	expiresAt := fs.String("expires-at", "", "the key stops working at this time (RFC 3339)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{fmt.Sprintf("keys %s: %v\n%s", args[0], err, keysUsage)}
	}
	tenantID, err := uuid.Parse(*tenantFlag)
	if err != nil {
		return usageError{"--tenant must be a tenant id (a UUID)\n" + keysUsage}
	}
	svc, closeDB, err := openTenants(ctx, env, logger)
	if err != nil {
		return err
	}
	defer closeDB()
	if _, err := svc.Get(ctx, tenantID); errors.Is(err, model.ErrNotFound) {
		return fmt.Errorf("no tenant %s", tenantID)
	} else if err != nil {
		return err
	}

	switch args[0] {
	case "create":
		spec := tenants.KeySpec{Name: *name}
		for _, s := range strings.Split(*scopes, ",") {
			if s = strings.TrimSpace(s); s != "" {
				spec.Scopes = append(spec.Scopes, model.Scope(s))
			}
		}
		switch {
		case *expiresIn != 0 && *expiresAt != "":
			return usageError{"--expires-in and --expires-at are exclusive"}
		case *expiresIn != 0:
			at := time.Now().Add(*expiresIn)
			spec.ExpiresAt = &at
		case *expiresAt != "":
			at, err := time.Parse(time.RFC3339, *expiresAt)
			if err != nil {
				return usageError{"--expires-at must be an RFC 3339 time such as 2027-01-01T00:00:00Z"}
			}
			spec.ExpiresAt = &at
		}
		created, err := svc.CreateKey(ctx, tenantID, spec, nil, model.ActorCLI)
		var fieldErr *tenants.FieldError
		if errors.As(err, &fieldErr) {
			return fmt.Errorf("keys create: %w", fieldErr)
		}
		if err != nil {
			return err
		}
		return printJSON(stdout, api.APIKeyCreatedJSON(created))
	case "list":
		keys, err := svc.ListKeys(ctx, tenantID)
		if err != nil {
			return err
		}
		if *asJSON {
			out := make([]any, len(keys))
			for i := range keys {
				out[i] = api.APIKeyJSON(&keys[i])
			}
			return printJSON(stdout, out)
		}
		return printKeys(stdout, keys, time.Now())
	case "revoke":
		if fs.NArg() != 1 {
			return usageError{"keys revoke: name the key to revoke, e.g. hookwheel keys revoke --tenant ID KEY_ID"}
		}
		key, err := svc.RevokeKey(ctx, tenantID, fs.Arg(0), nil, model.ActorCLI)
		if errors.Is(err, model.ErrNotFound) {
			return fmt.Errorf("tenant %s has no key %q", tenantID, fs.Arg(0))
		}
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "revoked key %s (%s) at %s; every node refuses it within 5 seconds\n",
			key.ID, orDash(key.Name), key.RevokedAt.UTC().Format(time.RFC3339))
		return err
	}
	return usageError{fmt.Sprintf("unknown keys command %q\n%s", args[0], keysUsage)}
}

func printKeys(w io.Writer, keys []model.APIKey, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY ID\tNAME\tSCOPES\tSTATE\tCREATED\tEXPIRES\tLAST USED")
	for _, k := range keys {
		state := "active"
		switch {
		case k.RevokedAt != nil:
			state = "revoked"
		case !k.Usable(now):
			state = "expired"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, orDash(k.Name), model.JoinScopes(k.Scopes, ","), state,
			k.CreatedAt.UTC().Format(time.RFC3339), timeOrDash(k.ExpiresAt), timeOrDash(k.LastUsedAt))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// rekeySecrets seals every stored signing secret under the first key of
// HOOKWHEEL_ENCRYPTION_KEY, while nodes keep serving.
func rekeySecrets(ctx context.Context, args []string, env environment, logger *slog.Logger, stdout io.Writer) error {
	if len(args) > 0 {
		return usageError{"secrets rekey takes no arguments; it reads HOOKWHEEL_ENCRYPTION_KEY"}
	}
	if !env.keyring.Enabled() {
		return errors.New("secrets rekey: set HOOKWHEEL_ENCRYPTION_KEY first (openssl rand -base64 32 makes a key)")
	}
	svc, closeDB, err := openTenants(ctx, env, logger)
	if err != nil {
		return err
	}
	defer closeDB()
	res, err := svc.Rekey(ctx, model.ActorCLI)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "checked %d tenant(s): re-sealed %d signing secret(s) of %d tenant(s), and %d shared secret(s), under key %s\n",
		res.Scanned, res.Secrets, res.Tenants, res.Shared, env.keyring.SealingKeyID())
	return err
}
