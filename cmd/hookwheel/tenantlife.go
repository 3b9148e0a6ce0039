package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/tenants"
)

const tenantUsage = `Usage:
  hookwheel tenants create --name NAME
  hookwheel tenants suspend ID
  hookwheel tenants resume ID
  hookwheel tenants delete ID`

// tenantChange is the change of a tenant's status a command names.
func tenantChange(command string) (func(*tenants.Service, context.Context, uuid.UUID, string) (*model.Tenant, error), bool) {
	switch command {
	case "suspend":
		return (*tenants.Service).Suspend, true
	case "resume":
		return (*tenants.Service).Resume, true
	case "delete":
		return (*tenants.Service).Delete, true
	}
	return nil, false
}

// tenantCommand runs the operator's tenant commands, on the database as
// the keys commands do: the operator's way to create, suspend, resume and
// delete tenants without the admin API. A change made here reaches every
// running node at once, announced in its transaction.
func tenantCommand(ctx context.Context, args []string, env environment, logger *slog.Logger, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{tenantUsage}
	}
	if args[0] == "create" {
		return createTenant(ctx, args[1:], env, logger, stdout)
	}
	change, ok := tenantChange(args[0])
	if !ok {
		return usageError{tenantUsage}
	}
	if len(args) != 2 {
		return usageError{fmt.Sprintf("hookwheel tenants %s takes one tenant id", args[0])}
	}
	id, err := uuid.Parse(args[1])
	if err != nil {
		return usageError{fmt.Sprintf("%q is not a tenant id", args[1])}
	}
	svc, closeDB, err := openTenants(ctx, env, logger)
	if err != nil {
		return err
	}
	defer closeDB()
	t, err := change(svc, ctx, id, model.ActorCLI)
	switch {
	case errors.Is(err, model.ErrNotFound):
		return fmt.Errorf("tenant %s not found", id)
	case errors.Is(err, model.ErrConflict):
		return fmt.Errorf("tenant %s is being deleted: it can no longer be suspended or resumed", id)
	case err != nil:
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(api.TenantJSON(t))
}
