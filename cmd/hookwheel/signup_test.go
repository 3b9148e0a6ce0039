package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/tenants"
)

// TestSignupEnv: HOOKWHEEL_SIGNUP is off unless set to invite or open, and
// anything else stops the node with the variable named.
func TestSignupEnv(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		env     map[string]string
		want    tenants.SignupMode
		perAddr int
		bad     string
	}{
		{env: nil, want: tenants.SignupOff},
		{env: map[string]string{"HOOKWHEEL_SIGNUP": "off"}, want: tenants.SignupOff},
		{env: map[string]string{"HOOKWHEEL_SIGNUP": "invite"}, want: tenants.SignupInvite},
		{env: map[string]string{"HOOKWHEEL_SIGNUP": "Open", "HOOKWHEEL_SIGNUP_PER_ADDRESS": "2"}, want: tenants.SignupOpen, perAddr: 2},
		{env: map[string]string{"HOOKWHEEL_SIGNUP": "yes"}, bad: "HOOKWHEEL_SIGNUP: want off, invite or open"},
		{env: map[string]string{"HOOKWHEEL_SIGNUP_PER_ADDRESS": "five"}, bad: "HOOKWHEEL_SIGNUP_PER_ADDRESS"},
		{env: map[string]string{"HOOKWHEEL_SIGNUP_PER_ADDRESS": "20", "HOOKWHEEL_SIGNUP_PER_HOUR": "10"}, bad: "HOOKWHEEL_SIGNUP_PER_HOUR"},
	} {
		e, err := loadEnv(func(k string) string { return tt.env[k] })
		if tt.bad != "" {
			require.ErrorContains(t, err, tt.bad, "%v", tt.env)
			continue
		}
		require.NoError(t, err, "%v", tt.env)
		require.Equal(t, tt.want, e.signup.mode, "%v", tt.env)
		require.Equal(t, tt.perAddr, e.signup.limit.PerAddress, "%v", tt.env)
	}
}
