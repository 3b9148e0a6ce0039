package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/signing"
	"github.com/hookwheel/hookwheel/tenants"
)

const secretsUsage = `Usage:
  hookwheel secrets rotate --tenant ID [--algorithm hmac-sha256|ed25519] [--grace 24h] [--json]
  hookwheel secrets list --tenant ID [--json]
  hookwheel secrets rekey

rotate makes a new current signing secret: an HMAC secret (whsec_..., printed only this once)
or an Ed25519 key pair, whose public key (whpk_...) receivers verify v1a signatures with and whose
private key never leaves the server. --algorithm defaults to the current secret's. The previous
secrets keep signing for --grace (default 24h, at most 168h; 0s stops them at once).
list shows the secrets that sign now, current first, with their public keys.
rekey seals every stored signing secret under the first key of HOOKWHEEL_ENCRYPTION_KEY.`

// secretsCommand manages tenants' signing secrets from the command line, as
// the operator: the same rotation the API offers a tenant, and the rekey.
func secretsCommand(ctx context.Context, args []string, env environment, logger *slog.Logger, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{secretsUsage}
	}
	switch args[0] {
	case "rekey":
		return rekeySecrets(ctx, args[1:], env, logger, stdout)
	case "rotate", "list":
	default:
		return usageError{fmt.Sprintf("unknown secrets command %q\n%s", args[0], secretsUsage)}
	}
	fs := flag.NewFlagSet("secrets "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	tenantFlag := fs.String("tenant", "", "the tenant's id")
	asJSON := fs.Bool("json", false, "print JSON")
	var algorithm *string
	var grace *time.Duration
	if args[0] == "rotate" {
		algorithm = fs.String("algorithm", "", "hmac-sha256 or ed25519 (default: the current secret's)")
		grace = fs.Duration("grace", tenants.DefaultGrace, "how long the previous secrets keep signing")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{fmt.Sprintf("secrets %s: %v\n%s", args[0], err, secretsUsage)}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("secrets %s takes no arguments, only flags\n%s", args[0], secretsUsage)}
	}
	tenantID, err := uuid.Parse(*tenantFlag)
	if err != nil {
		return usageError{"--tenant must be a tenant id (a UUID)\n" + secretsUsage}
	}
	if algorithm != nil && *algorithm != "" && !signing.Algorithm(*algorithm).Valid() {
		return usageError{fmt.Sprintf("--algorithm must be %s or %s\n%s", signing.HMACSHA256, signing.Ed25519, secretsUsage)}
	}
	svc, closeDB, err := openTenants(ctx, env, logger)
	if err != nil {
		return err
	}
	defer closeDB()

	if args[0] == "list" {
		secrets, err := svc.SigningSecrets(ctx, tenantID)
		if errors.Is(err, model.ErrNotFound) {
			return fmt.Errorf("no tenant %s", tenantID)
		}
		if err != nil {
			return err
		}
		if *asJSON {
			out := make([]any, len(secrets))
			for i, s := range secrets {
				out[i] = api.SigningSecretJSON(s, i == 0)
			}
			return printJSON(stdout, out)
		}
		return printSigningSecrets(stdout, secrets)
	}

	rotated, err := svc.RotateSigningSecret(ctx, tenantID, *grace, signing.Algorithm(*algorithm), model.ActorCLI)
	var fieldErr *tenants.FieldError
	switch {
	case errors.As(err, &fieldErr):
		return usageError{fmt.Sprintf("secrets rotate: --%s %s\n%s", fieldErr.Field, fieldErr.Message, secretsUsage)}
	case errors.Is(err, model.ErrNotFound):
		return fmt.Errorf("no tenant %s", tenantID)
	case err != nil:
		return err
	}
	if *asJSON {
		return printJSON(stdout, api.SigningSecretCreatedJSON(rotated))
	}
	if _, err := fmt.Fprintf(stdout, "signing secret %s (%s) signs tenant %s's webhooks now; the previous ones sign too until %s.\n\n",
		rotated.ID, rotated.Algorithm, tenantID, rotated.GraceEndsAt.Format(time.RFC3339)); err != nil {
		return err
	}
	if rotated.PublicKey != "" {
		_, err = fmt.Fprintf(stdout, "Public key:      %s\n\nReceivers verify its v1a signatures with it; the private key stays on the server.\n", rotated.PublicKey)
	} else {
		_, err = fmt.Fprintf(stdout, "Signing secret:  %s\n\nCopy it now: it is shown only this once.\n", rotated.Plaintext)
	}
	return err
}

func printSigningSecrets(w io.Writer, secrets []model.SigningSecret) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SECRET ID\tALGORITHM\tSTATE\tCREATED\tSIGNS UNTIL\tPUBLIC KEY")
	for i, s := range secrets {
		state := "in grace"
		if i == 0 {
			state = "current"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Algorithm, state, s.CreatedAt.UTC().Format(time.RFC3339),
			timeOrDash(s.ExpiresAt), orDash(s.PublicKey))
	}
	return tw.Flush()
}
