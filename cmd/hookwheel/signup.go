package main

import (
	"fmt"

	"github.com/hookwheel/hookwheel/api"
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
