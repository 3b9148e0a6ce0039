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
	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
	"github.com/hookwheel/hookwheel/tenants"
)

// signupSettings are HOOKWHEEL_SIGNUP and the limits of sign-ups.
type signupSettings struct {
	mode  tenants.SignupMode
	limit api.SignupLimit
}

// signupEnv reads HOOKWHEEL_SIGNUP (off, invite or open; default off),
// HOOKWHEEL_SIGNUP_PER_ADDRESS and HOOKWHEEL_SIGNUP_PER_HOUR (sign-ups an
// hour from one client address, and from all; default 5 and 100).
func signupEnv(getenv func(string) string) (signupSettings, error) {
	var s signupSettings
	var err error
	if s.mode, err = tenants.ParseSignupMode(getenv("HOOKWHEEL_SIGNUP")); err != nil {
		return s, fmt.Errorf("HOOKWHEEL_SIGNUP: %w", err)
	}
	if s.limit.PerAddress, err = intEnv(getenv, "HOOKWHEEL_SIGNUP_PER_ADDRESS"); err != nil {
		return s, err
	}
	if s.limit.Total, err = intEnv(getenv, "HOOKWHEEL_SIGNUP_PER_HOUR"); err != nil {
		return s, err
	}
	if s.limit.PerAddress > s.limit.Total && s.limit.Total > 0 {
		return s, fmt.Errorf("HOOKWHEEL_SIGNUP_PER_ADDRESS (%d) is more than HOOKWHEEL_SIGNUP_PER_HOUR (%d), the limit of all addresses together",
			s.limit.PerAddress, s.limit.Total)
	}
	return s, nil
}

const invitesUsage = `Usage:
  hookwheel invites create [--expires-in 168h] [--note TEXT]
  hookwheel invites list [--json]
  hookwheel invites revoke INVITE_ID`

// invitesCommand manages the invite codes of sign-up from the command line,
// as the operator, on the database as keysCommand does.
func invitesCommand(ctx context.Context, args []string, env environment, logger *slog.Logger, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{invitesUsage}
	}
	fs := flag.NewFlagSet("invites "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	expiresIn := fs.Duration("expires-in", 0, "how long the code may be used (default 168h)")
	note := fs.String("note", "", "whom the invite is for")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{fmt.Sprintf("invites %s: %v\n%s", args[0], err, invitesUsage)}
	}
	if args[0] != "create" && args[0] != "list" && args[0] != "revoke" {
		return usageError{fmt.Sprintf("unknown invites command %q\n%s", args[0], invitesUsage)}
	}
	var id uuid.UUID
	if args[0] == "revoke" {
		var err error
		if fs.NArg() != 1 {
			return usageError{"invites revoke: name the invite to revoke, e.g. hookwheel invites revoke INVITE_ID"}
		}
		if id, err = uuid.Parse(fs.Arg(0)); err != nil {
			return usageError{fmt.Sprintf("invites revoke: %q is not an invite id (a UUID)", fs.Arg(0))}
		}
	}
	db, err := openStore(ctx, env, logger)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := migrateStore(ctx, db); err != nil {
		return err
	}
	signup := tenants.NewSignup(tenants.SignupConfig{Mode: env.signup.mode, Store: db,
		Tenants: tenants.New(tenants.Config{Store: db, Keyring: env.keyring}), Logger: logger})
	now := time.Now()
	switch args[0] {
	case "create":
		created, err := signup.CreateInvite(ctx, *expiresIn, *note, model.ActorCLI)
		var fieldErr *tenants.FieldError
		if errors.As(err, &fieldErr) {
			return fmt.Errorf("invites create: %w", fieldErr)
		}
		if err != nil {
			return err
		}
		return printJSON(stdout, api.InviteCreatedJSON(created, now))
	case "list":
		var all []model.Invite
		var before *uuid.UUID
		for {
			page, err := signup.ListInvites(ctx, before, 500)
			if err != nil {
				return err
			}
			all = append(all, page...)
			if len(page) < 500 {
				break
			}
			before = &page[len(page)-1].ID
		}
		if *asJSON {
			out := make([]any, len(all))
			for i := range all {
				out[i] = api.InviteJSON(&all[i], now)
			}
			return printJSON(stdout, out)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "INVITE ID\tPREFIX\tSTATUS\tCREATED\tEXPIRES\tUSED BY\tNOTE")
		for _, inv := range all {
			usedBy := "-"
			if inv.UsedBy != nil {
				usedBy = inv.UsedBy.String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", inv.ID, inv.Prefix, inv.Status(now),
				inv.CreatedAt.UTC().Format(time.RFC3339), inv.ExpiresAt.UTC().Format(time.RFC3339), usedBy, orDash(inv.Note))
		}
		return tw.Flush()
	}
	inv, err := signup.RevokeInvite(ctx, id, model.ActorCLI)
	switch {
	case errors.Is(err, model.ErrNotFound):
		return fmt.Errorf("no invite %s", id)
	case errors.Is(err, model.ErrConflict):
		return fmt.Errorf("invite %s has signed up a tenant; a used invite is kept", id)
	case err != nil:
		return err
	}
	_, err = fmt.Fprintf(stdout, "revoked invite %s (%s…); its code signs no one up\n", inv.ID, inv.Prefix)
	return err
}

const signupUsage = `hookwheel signup --name NAME [--invite-code hwinv_...] [--json]
  Signs a tenant up on the server at HOOKWHEEL_URL, where it allows sign-ups (HOOKWHEEL_SIGNUP), and
  prints its API key and signing secret, shown only this once. Needs no HOOKWHEEL_API_KEY.`

// signupCommand signs a tenant up through the Go SDK, as any program would.
func signupCommand(ctx context.Context, args []string, con console) error {
	c := newCommand("signup", signupUsage)
	name := c.fs.String("name", "", "the tenant's name")
	code := c.fs.String("invite-code", "", "the invite code the operator gave (hwinv_...), where the server needs one")
	if err := c.parse(args, con); err != nil {
		return err
	}
	if *name == "" {
		return c.usageError("--name is required")
	}
	created, err := hookwheel.SignUp(ctx, serverURL(con), *name, *code, hookwheel.WithUserAgent("hookwheel-cli"))
	if err != nil {
		return err
	}
	if *c.asJSON {
		return printJSON(con.stdout, created)
	}
	_, err = fmt.Fprintf(con.stdout, "tenant %s (%s) signed up.\n\nAPI key:         %s\nSigning secret:  %s\n\n"+
		"Copy them now: they are shown only this once.\n", created.Tenant.ID, created.Tenant.Name, created.APIKey, created.SigningSecret)
	return err
}
