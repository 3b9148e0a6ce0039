package hookwheel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/hookwheel/hookwheel/sdk/go/internal/apiclient"
)

// Settings are the tenant's own settings. OperationsURL is where hookwheel
// sends its signed target.paused and target.recovered events, as one of the
// tenant's tasks; nil: nowhere.
type Settings = apiclient.TenantSettings

// SettingsUpdate is a change to the tenant's settings: a field left at its
// zero value keeps the tenant's.
type SettingsUpdate struct {
	// OperationsURL, when not nil, becomes the tenant's operations URL,
	// checked as a task's URL is.
	OperationsURL *string
	// ClearOperationsURL removes it: the events go nowhere. Setting it
	// together with OperationsURL is an error.
	ClearOperationsURL bool
}

// Settings returns the tenant's settings. Any valid key may call it.
func (c *Client) Settings(ctx context.Context) (*Settings, error) {
	const op = "get settings"
	resp, err := c.api.GetSettingsWithResponse(repeatable(ctx))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
}

// UpdateSettings changes the tenant's settings and returns them as they are
// now; it needs a key with the secrets:manage scope. A URL the server
// refuses gets an *Error listing the fields (ErrInvalid). Setting the same
// settings twice leaves them as once does, so the call is retried like a
// read.
func (c *Client) UpdateSettings(ctx context.Context, u SettingsUpdate) (*Settings, error) {
	const op = "update settings"
	patch := map[string]any{}
	switch {
	case u.OperationsURL != nil && u.ClearOperationsURL:
		return nil, fmt.Errorf("%s: both OperationsURL and ClearOperationsURL are set", op)
	case u.OperationsURL != nil:
		patch["operations_url"] = *u.OperationsURL
	case u.ClearOperationsURL:
		patch["operations_url"] = nil
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	resp, err := c.api.UpdateSettingsWithBodyWithResponse(repeatable(ctx), "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
}
